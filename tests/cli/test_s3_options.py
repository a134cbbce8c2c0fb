"""DLIO's S3 keys against the real gateway: storage_options.s3_force_path_style (the addressing style)
and checkpoint.recovery_rank_shift on S3 checkpoints (under `mpiexec -n 2`)."""

import importlib.util
import json
import shutil

import pytest
from conftest import one_line, s3_keys

pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")

import test_s3_workloads as wl  # noqa: E402


def _options(s3env, style):
    env = s3env.aws_env()
    return {
        "endpoint_url": env["AWS_ENDPOINT_URL"],
        "access_key_id": env["AWS_ACCESS_KEY_ID"],
        "secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
        "s3_force_path_style": style,
    }


def test_force_path_style_is_read_and_said(run_cli, s3env, bucket, tmp_path):
    # s3dlio addresses every bucket path-style: false (as DLIO's own *_s3.yaml say) runs, with a word
    for k, (style, note) in enumerate([(False, True), ("False", True), ("true", False), (True, False)]):
        cfg = wl.config(tmp_path, "npz", bucket, folder="style", storage__storage_options=_options(s3env, style))
        code, out, err = run_cli("run", "--config", cfg, "--output", tmp_path / f"o{k}")
        assert code == 0, err
        said = [ln for ln in err.splitlines() if "s3_force_path_style" in ln]
        if note:
            assert len(said) == 1 and said[0].startswith("warning: ") and "requests go path-style" in said[0], err
        else:
            assert said == [], style


def test_force_path_style_bad_value(run_cli, s3env, bucket, tmp_path):
    cfg = wl.config(tmp_path, "npz", bucket, folder="style", storage__storage_options=_options(s3env, "maybe"))
    code, out, err = run_cli("run", "--config", cfg, "--output", tmp_path / "o")
    assert code == 2
    assert one_line(err) == "dlio-fast: error: storage_options.s3_force_path_style 'maybe': expected true or false"


def test_worker_env_says_path_style(s3env):
    from dlio.storage.s3 import settings

    assert settings.resolve().child_env()["AWS_S3_ADDRESSING_STYLE"] == "path"


# two ranks: each saves its own files (tensor parallel 2: different names per rank), then loads with
# the recovery shift as if each rank were alone on its node (ranks per node 1): rank r reads r+1's
SHIFT = """
import json, sys
from dlio.config import load_config
from dlio.system.mpi import world
from dlio.checkpoint.load import load
from dlio.checkpoint.save import save
from dlio.checkpoint.transfers import TransferOptions
bucket, out = sys.argv[1], sys.argv[2]
comm = world()
cfg = load_config(sets=["framework=pytorch", "model.type=transformer", "model.num_layers=2",
                        "model.transformer.hidden_size=256", "model.transformer.ffn_hidden_size=768",
                        "model.transformer.vocab_size=1000", "model.transformer.num_attention_heads=8",
                        "model.transformer.num_kv_heads=8", "model.parallelism.tensor=2",
                        "model.parallelism.zero_stage=0", "workflow.checkpoint=true", "workflow.train=false",
                        "storage.storage_type=s3", "storage.storage_root=" + bucket,
                        "checkpoint.checkpoint_folder=shift", "checkpoint.recovery_rank_shift=true"])
saved = save(cfg, comm, 1, 1, TransferOptions(barrier=True))
loaded = load(cfg, comm, 1, 1, TransferOptions(barrier=True), ranks_per_node_=1)
with open(f"{out}/rank{comm.rank}.json", "w") as f:
    json.dump({"save": saved, "load": loaded}, f)
"""


@pytest.mark.skipif(
    shutil.which("mpiexec") is None or importlib.util.find_spec("mpi4py") is None,
    reason="needs mpiexec and mpi4py (pip install mpich mpi4py)",
)
def test_recovery_rank_shift_on_s3(s3env, bucket, tmp_path):
    wl.two_ranks(SHIFT, bucket, tmp_path)
    recs = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    objects = s3_keys(s3env, bucket, "shift/")
    saved = [{f["name"] for f in r["save"]["files"]} for r in recs]
    assert saved[0] and saved[0].isdisjoint(saved[1])  # each rank wrote files of its own
    assert {k.rsplit("/", 1)[1] for k in objects} == saved[0] | saved[1]
    for r in (0, 1):
        load = recs[r]["load"]
        src = (r + 1) % 2
        assert load["source_rank"] == src
        # the other rank's objects, whole: their names and their bytes as listed by boto3
        assert {f["name"] for f in load["files"]} == saved[src]
        assert load["bytes"] == sum(n for k, n in objects.items() if k.rsplit("/", 1)[1] in saved[src])


def test_workers_start_ahead_of_their_tasks(run_cli, s3env, bucket, tmp_path):
    # each task's worker is the spare started after the task before it (its Python and s3dlio start
    # paid outside any measured window)
    from dlio.storage.s3 import client

    client.STARTS.update(cold=0, spare=0)
    client._stop_spares()
    cfg = wl.config(tmp_path, "npz", bucket, folder="spares", train__epochs=3)
    code, out, err = run_cli("-q", "run", "--config", cfg, "--output", tmp_path / "o")
    assert code == 0, err
    # 3 epochs x (train + eval) blocks, each a worker, plus the checks, fetches and listings
    assert client.STARTS["cold"] == 1 and client.STARTS["spare"] >= 6, client.STARTS
    assert len(client._SPARES) == 1 and all(p.poll() is None for p in client._SPARES.values())
