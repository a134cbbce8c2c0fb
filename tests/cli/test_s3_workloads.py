"""Workloads on S3 (storage.storage_type: s3) against a real Ceph RADOS Gateway: every format
generated and trained, the objects byte-identical to the file generator's files, range GETs where a
sample is part of an object, listing over 1,000 keys, and the errors (wrong keys, missing bucket,
--cache drop, a server killed mid-run)."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from conftest import REPO, on_s3, one_line, s3_keys, s3_workload, set_args
from conftest import s3_boto as boto

pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")

FORMATS = ("npz", "npy", "hdf5", "jpeg", "png", "csv", "tfrecord", "indexed_binary", "mmap_indexed_binary")
RANGED = ("hdf5", "tfrecord", "indexed_binary", "mmap_indexed_binary")  # a sample is part of its object


def config(tmp_path, fmt, bucket, folder=None, **over):
    """A tiny workload of format `fmt` on S3, evaluated; `over` replaces sections' keys (section__key=value)."""
    reader = "tensorflow" if fmt == "tfrecord" else "pytorch"
    sections = {
        "model": {"name": f"s3-{fmt}"},
        "framework": reader,
        "workflow": {"evaluation": True},
        "dataset": {
            "data_folder": folder if folder is not None else f"data/{fmt}",
            "format": fmt,
            "num_files_train": 4,
            "num_files_eval": 2,
            "num_samples_per_file": 2,
            "record_length_bytes": 3000,
        },
        "reader": {"data_loader": reader, "batch_size": 2, "batch_size_eval": 2, "read_threads": 2},
        "train": {"computation_time": 0.002},
        "dlio_fast": {"qd": 4},
        "evaluation": {"eval_time": 0.001},
    }
    return s3_workload(tmp_path / f"{fmt}.yaml", bucket, sections, **over)


def result(folder):
    with open(os.path.join(folder, "dlio-fast.json")) as f:
        return json.load(f)


def two_ranks(script, *args, **env):
    """`mpiexec -n 2 python -c script args...` from the repository, env added; fails the test with the
    ranks' stderr when the job fails."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    cmd = ["mpiexec", "-n", "2", sys.executable, "-c", script, *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240, cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]


def generated_locally(run_cli, cfg, local):
    """The same config generated to the local folder `local`: its data files, relative, sorted (what
    the objects of a generation to S3 must be, byte for byte)."""
    code, _, err = run_cli(
        "-q",
        "generate",
        "--config",
        cfg,
        *set_args("storage.storage_type=local_fs", f"dataset.data_folder={local}"),
    )
    assert code == 0, err
    return sorted(
        os.path.relpath(os.path.join(r, n), local) for r, _, ns in os.walk(local) for n in ns if ".dlio-fast" not in r
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_generated_and_trained_on_s3(run_cli, s3env, bucket, tmp_path, fmt):
    cfg = config(tmp_path, fmt, bucket)
    out = tmp_path / "out"
    code, stdout, err = run_cli("-q", "run", "--config", cfg, "--output", out)
    assert code == 0, err
    # the objects are the file generator's bytes: the same config generated to a local folder
    local = tmp_path / "local"
    files = generated_locally(run_cli, cfg, local)
    objects = s3_keys(s3env, bucket, f"data/{fmt}/")
    data_keys = sorted(k[len(f"data/{fmt}/") :] for k in objects if "/.dlio-fast/" not in k)
    assert data_keys == files  # index files (tfrecord's .idx, indexed_binary's .off.idx / .sz.idx) included
    assert len([f for f in files if f.endswith("." + fmt)]) == 6
    s3 = boto(s3env)
    for rel in files:
        body = s3.get_object(Bucket=bucket, Key=f"data/{fmt}/{rel}")["Body"].read()
        assert body == (local / rel).read_bytes(), rel
    assert any(k.endswith(".dlio-fast/manifest-train.npz") for k in objects)
    # the run: 4 files x 2 samples / batch 2 = 4 steps; eval 2 x 2 / 2 = 2 steps
    doc = result(out)
    ep = doc["ranks"][0]["epochs"][0]
    assert doc["complete"] and ep["steps_done"] == 4 and ep["samples"] == 8
    assert doc["settings"]["engine"] == "s3dlio" and ep["cache"] == "n/a (object store)"
    sizes = {rel: os.path.getsize(local / rel) for rel in files}
    train_bytes = sum(v for k, v in sizes.items() if k.startswith("train/") and not k.endswith(".idx"))
    eval_bytes = sum(v for k, v in sizes.items() if k.startswith("valid/") and not k.endswith(".idx"))
    lat = ep["lat"]
    # every planned byte arrived (counted per step by the worker), in as many GETs as the op-log timed
    assert ep["train"]["exact"]["bytes"] == ep["plan_bytes"] > 0
    assert lat["count"] == ep["ops"] and lat["min"] > 0
    objects_train = [v for k, v in sizes.items() if k.startswith("train/") and k.endswith("." + fmt)]
    if fmt == "tfrecord":
        # each batch streams the two records of one file: the whole file, framing included
        assert ep["plan_bytes"] == train_bytes
    elif fmt in RANGED:
        # one range GET per sample, smaller than its object (2 samples per object, plus headers)
        assert ep["ops"] == 8 and ep["plan_bytes"] / 8 <= min(objects_train) / 2
    else:
        # whole-object GETs: each of the 8 samples is one object of the 4 (2 samples per file)
        assert ep["plan_bytes"] == 2 * train_bytes and ep["ops"] == 8
        assert ep["bytes"] == 2 * train_bytes + 2 * eval_bytes  # train + eval: every object once per sample
    assert ep["eval"] is not None and ep["eval"]["steps"] == 2


def test_listing_over_1000_keys_and_data_present(run_cli, s3env, bucket, tmp_path):
    """1,100 tiny objects (one listing page is 1,000 keys): generated, then found complete by a
    second run, which therefore writes nothing."""
    cfg = config(
        tmp_path,
        "npy",
        bucket,
        folder="many",
        dataset__num_files_train=1100,
        dataset__num_files_eval=0,
        dataset__num_samples_per_file=1,
        dataset__record_length_bytes=64,
        reader__batch_size=50,
        workflow__evaluation=False,
        train__computation_time=0.0,
        train__total_training_steps=2,  # 100 GETs: the listing is the point, not the reads
    )
    code, out, err = run_cli("run", "--config", cfg, "--output", tmp_path / "o1")
    assert code == 0, err
    assert "Starting data generation: 1100 objects" in out
    assert len([k for k in s3_keys(s3env, bucket, "many/train/")]) == 1100
    # generate_data still on: the complete dataset (found by listing 1,100 keys) is not written again
    code, out, err = run_cli("run", "--config", cfg, "--output", tmp_path / "o2")
    assert code == 0, err
    assert "complete and matches the config; nothing written" in out and "objects PUT" not in out
    ep = result(tmp_path / "o2")["ranks"][0]["epochs"][0]
    assert ep["steps_done"] == 2 and ep["lat"]["count"] == 100


def test_data_folder_as_uri_and_storage_options(run_cli, s3env, bucket, tmp_path, monkeypatch):
    """DLIO's S3 spelling: data_folder s3://BUCKET/PREFIX, the keys in storage.storage_options."""
    env = s3env.aws_env()
    for k in env:
        monkeypatch.delenv(k)
    cfg = config(
        tmp_path,
        "npz",
        bucket,
        folder=f"s3://{bucket}/uri",
        storage__storage_options={
            "endpoint_url": env["AWS_ENDPOINT_URL"],
            "access_key_id": env["AWS_ACCESS_KEY_ID"],
            "secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
            "region": "us-east-1",
            "s3_force_path_style": True,
            "s3_max_attempts": 2,
        },
    )
    code, out, err = run_cli("-q", "run", "--config", cfg, "--output", tmp_path / "o")
    assert code == 0, err
    assert any(k.startswith("uri/train/") for k in s3_keys(s3env, bucket, "uri/"))


def test_wrong_credentials_before_any_work(run_cli, s3env, bucket, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    cfg = config(tmp_path, "npz", bucket, folder="never")
    code, out, err = run_cli("run", "--config", cfg, "--output", tmp_path / "o")
    assert code == 2
    line = one_line(err)
    assert "refused the credentials" in line and "AWS_SECRET_ACCESS_KEY" in line
    assert "data generation" not in out
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3env.aws_env()["AWS_SECRET_ACCESS_KEY"])
    assert s3_keys(s3env, bucket, "never/") == {}


def test_missing_bucket(run_cli, s3env, tmp_path):
    cfg = config(tmp_path, "npz", "no-such-bucket-here")
    code, _, err = run_cli("generate", "--config", cfg)
    assert code == 2
    line = one_line(err)
    assert "bucket 'no-such-bucket-here' does not exist" in line


def test_cache_drop_refused_on_s3(run_cli, s3env, bucket, tmp_path):
    cfg = config(tmp_path, "npz", bucket, folder="cache")
    code, _, err = run_cli("run", "--config", cfg, "--cache", "drop", "--output", tmp_path / "o")
    assert code == 2
    assert "dlio_fast.cache = drop: not available on S3" in one_line(err)


def test_checkpoints_during_training_on_s3(run_cli, s3env, bucket, tmp_path):
    """workflow.checkpoint on S3: the checkpoint after epoch 1 is an object under the checkpoint
    prefix in the bucket (storage_root), of the planned size."""
    cfg = config(
        tmp_path,
        "npz",
        bucket,
        folder="ckdata",
        workflow__checkpoint=True,
        workflow__evaluation=False,
        model__model_size=3000000,
        checkpoint__checkpoint_folder="ckpts/run1",
        checkpoint__checkpoint_after_epoch=1,
        checkpoint__epochs_between_checkpoints=1,
    )
    code, out, err = run_cli("-q", "run", "--config", cfg, "--output", tmp_path / "o")
    assert code == 0, err
    doc = result(tmp_path / "o")
    (ck,) = doc["ranks"][0]["epochs"][0]["checkpoints"]
    objects = s3_keys(s3env, bucket, "ckpts/run1/")
    assert {k: v for k, v in objects.items()} == {
        f"ckpts/run1/{ck['folder'].rsplit('/', 1)[1]}/{f['name']}": f["bytes"] for f in ck["files"]
    }
    assert ck["bytes"] == sum(objects.values()) > 0 and ck["folder"].startswith(f"s3://{bucket}/ckpts/run1/")
    assert ck["engine"] == "s3dlio"


def test_checkpoint_only_save_and_load_on_s3(run_cli, s3env, bucket, tmp_path):
    """DLIO's checkpoint-only mode on S3: two saves (a 70 MB object goes up as a 5-part multipart
    upload), then one load; GiB/s is bytes over each record's window."""
    code, out, err = run_cli(
        "-q",
        "run",
        "-w",
        "unet3d",
        "--output",
        tmp_path / "o",
        *set_args(**on_s3(bucket)),
        *("--set", "workflow.train=false", "--set", "workflow.generate_data=false"),
        *("--set", "workflow.checkpoint=true", "--set", f"checkpoint.checkpoint_folder=s3://{bucket}/only"),
        *("--set", "checkpoint.num_checkpoints_write=2", "--set", "checkpoint.num_checkpoints_read=1"),
        *("--set", "checkpoint.time_between_checkpoints=0.01", "--set", "model.model_size=70000000"),
    )
    assert code == 0, err
    recs = result(tmp_path / "o")["ranks"][0]["checkpoints"]
    assert [r["kind"] for r in recs] == ["save", "save", "load"]
    objects = s3_keys(s3env, bucket, "only/")
    assert sorted(objects) == [
        "only/global_epoch1_step1/model_states-0.pt",
        "only/global_epoch1_step2/model_states-0.pt",
    ]
    # torch.save's container around DLIO's one int8 tensor adds 1,577 bytes (measured on DLIO's own file)
    size = 70000000 + 1577
    assert set(objects.values()) == {size}
    head = boto(s3env).head_object(Bucket=bucket, Key="only/global_epoch1_step1/model_states-0.pt")
    assert head["ETag"].strip('"').endswith("-5")  # ceil(70,000,000 / 16 MiB) parts
    for r in recs:
        assert r["bytes"] == size
        assert r["GiB_per_second"] == pytest.approx(size / 2**30 / r["duration_s"])


def test_server_killed_mid_run_keeps_partial_results(s3env, bucket, tmp_path):
    """A gateway of its own, killed while training: a one-line error naming the endpoint, exit
    status 1, and the result files with the steps measured before it (marked incomplete)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ceph_s3", os.path.join(REPO, "tools", "ceph_s3.py"))
    ceph_s3 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ceph_s3)
    server = ceph_s3.CephS3(str(tmp_path / "ceph2")).start()
    try:
        boto(server).create_bucket(Bucket="doomed")
        cfg = config(
            tmp_path,
            "npz",
            "doomed",
            folder="d",
            dataset__num_files_train=40,
            dataset__num_files_eval=0,
            dataset__num_samples_per_file=1,
            reader__batch_size=1,
            workflow__evaluation=False,
            train__computation_time=0.1,
            storage__storage_options={"s3_max_attempts": 1},
        )
        env = dict(os.environ, **server.aws_env())
        log, live = tmp_path / "stdout.txt", tmp_path / "live.csv"
        args = ["-q", "run", "--config", str(cfg), "--output", str(tmp_path / "o"), "--live-csv", str(live)]
        with open(log, "w") as lf:
            p = subprocess.Popen(
                [sys.executable, "-m", "dlio", *args, "--status-interval", "0.2"],
                stdout=lf,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None and _train_steps(live) < 3:
            time.sleep(0.05)  # some steps measured (0.1 s of compute each): a loaded host starts slowly
    finally:
        server.stop()
    _, err = p.communicate(timeout=180)
    out = log.read_text()
    assert p.returncode == 1, (out, err)
    line = one_line(err)
    assert server.endpoint in line and "GET" in line, line
    doc = result(tmp_path / "o")
    assert doc["complete"] is False
    ep = doc["ranks"][0]["epochs"][0]
    assert 0 < ep["steps_done"] < 40 and ep["complete"] is False


def _train_steps(live_csv):
    """The training steps the live CSV has shown so far."""
    if not os.path.exists(live_csv):
        return 0
    with open(live_csv) as f:
        rows = [ln.split(",") for ln in f.read().splitlines()[1:]]
    return max([int(r[4]) for r in rows if len(r) > 4 and r[2] == "train"] or [0])


# DLIO's own file, copied unchanged from its source tree (tests/data/dlio-workloads/README.md)
DLIO_S3_YAML = os.path.join(os.path.dirname(__file__), "..", "data", "dlio-workloads", "current", "unet3d_h100_s3.yaml")


def test_dlio_unet3d_h100_s3_yaml_runs_with_an_endpoint_override(s3_server, tmp_path, monkeypatch):
    """DLIO's file as it is (its keys access-key / secret-key, bucket s3pytorchconnector), only the
    endpoint overridden and the dataset made small: generated and trained on the gateway."""
    path = DLIO_S3_YAML
    s3_server.add_user("dlio-yaml", "access-key", "secret-key")
    for k in s3_server.aws_env():
        monkeypatch.delenv(k, raising=False)
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=s3_server.endpoint,
        aws_access_key_id="access-key",
        aws_secret_access_key="secret-key",
        region_name="us-east-1",
    )
    s3.create_bucket(Bucket="s3pytorchconnector")
    out = tmp_path / "o"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "dlio",
            "run",
            "--config",
            path,
            f"++workload.storage.storage_options.endpoint_url={s3_server.endpoint}",
            "++workload.dataset.num_files_train=14",
            "++workload.dataset.record_length_bytes=262144",
            "++workload.train.epochs=1",
            "++workload.train.computation_time=0.01",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
    )
    assert p.returncode == 0, p.stderr
    assert "Starting data generation: 14 objects" in p.stdout and "s3://s3pytorchconnector/" in p.stdout
    doc = result(out)
    ep = doc["ranks"][0]["epochs"][0]
    # 14 samples / batch 7 = 2 steps of 7 whole-object GETs (4 read threads)
    assert doc["complete"] and ep["steps_done"] == 2 and ep["ops"] == 14
    assert doc["settings"]["engine"] == "s3dlio"
    listed = s3.list_objects_v2(Bucket="s3pytorchconnector", Prefix="train/")
    assert listed["KeyCount"] == 14 and {o["Size"] for o in listed["Contents"]} == {ep["bytes"] // 14}


def test_upload_large_objects_as_multipart(s3env, bucket, tmp_path):
    """Objects from multipart_min up go as multipart uploads (the ETag of a multipart object ends
    in -<parts>); their bytes arrive whole. The threshold is lowered so that the test stays small."""
    from dlio.storage.s3 import client, settings

    (tmp_path / "up" / "train").mkdir(parents=True)
    big = os.urandom(13 << 20)
    (tmp_path / "up" / "train" / "big.bin").write_bytes(big + big)  # 26 MiB: two parts of 16 + 10 MiB
    (tmp_path / "up" / "train" / "small.bin").write_bytes(b"x" * 100)
    out = client.run_task(
        settings.resolve(),
        {
            "task": "upload_tree",
            "folder": str(tmp_path / "up"),
            "bucket": bucket,
            "prefix": "mp/",
            "multipart_min": 1 << 20,
        },
    )
    assert out == {"objects": 2, "bytes": 2 * len(big) + 100}
    s3 = boto(s3env)
    head = s3.head_object(Bucket=bucket, Key="mp/train/big.bin")
    assert head["ETag"].strip('"').endswith("-2") and head["ContentLength"] == 2 * len(big)
    assert s3.get_object(Bucket=bucket, Key="mp/train/big.bin")["Body"].read() == big + big
    assert not s3.head_object(Bucket=bucket, Key="mp/train/small.bin")["ETag"].strip('"').count("-")


@pytest.mark.skipif(
    shutil.which("mpiexec") is None or importlib.util.find_spec("mpi4py") is None,
    reason="needs mpiexec and mpi4py (pip install mpich mpi4py)",
)
def test_two_ranks_on_s3_meet_after_every_step(s3env, bucket, tmp_path):
    """mpiexec -n 2 on S3: each rank reads its half, and DLIO's per-step barrier holds: the ranks'
    compute draws differ (seeded per rank) by far more than their last steps' ends do."""
    cfg = config(
        tmp_path,
        "npz",
        bucket,
        folder="mpi",
        dataset__num_files_train=12,
        dataset__num_files_eval=0,
        dataset__num_samples_per_file=1,
        workflow__evaluation=False,
        train__computation_time={"mean": 0.15, "stdev": 0.1},
        train__seed=3,  # rank 0 draws 0.34 s of compute over its 3 steps, rank 1 0.65 s
    )
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run(
        [
            "mpiexec",
            "-n",
            "2",
            sys.executable,
            "-m",
            "dlio",
            "-q",
            "run",
            "--config",
            str(cfg),
            "--output",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        cwd=REPO,
    )
    assert p.returncode == 0, p.stderr
    ranks = result(tmp_path / "o")["ranks"]
    assert len(ranks) == 2
    eps = [r["epochs"][0] for r in ranks]
    # 12 samples over 2 ranks, batch 2: 3 steps of 2 whole-object GETs per rank
    assert [e["steps_done"] for e in eps] == [3, 3] and [e["ops"] for e in eps] == [2 * 3, 2 * 3]
    compute = [sum(e["train"]["compute"]) for e in eps]
    ends = [e["train"]["end_ns"] for e in eps]
    assert abs(compute[0] - compute[1]) > 0.2, compute  # the draws differ: a barrier has work to do
    assert abs(ends[0] - ends[1]) / 1e9 < abs(compute[0] - compute[1]) / 2, (ends, compute)


def test_trace_refused_on_s3(run_cli, tmp_path):
    code, _, err = run_cli(
        "run",
        "-w",
        "unet3d",
        *set_args(**on_s3("bkt")),
        "--trace",
        "--output",
        tmp_path / "o",
    )
    assert code == 2 and "dlio_fast.trace = true: not available on S3" in one_line(err)


def test_dry_run_names_the_prefix(run_cli):
    code, out, err = run_cli("run", "-w", "unet3d", *set_args(**on_s3("bkt")), "--dry-run")
    assert code == 0, err
    assert "data folder         s3://bkt/data/unet3d/ (not checked: on S3)" in out


@pytest.mark.parametrize(
    "workload, keys, place",
    [
        ("unet3d", {}, "s3://bkt/data/unet3d/"),
        ("llama_7b", {}, "checkpoint folder   s3://bkt/checkpoints/llama_7b/"),
        ("kvcache_llama3_8b_opt1", {}, "plan (synthetic)"),
        ("vdb_diskann_1m", {}, "s3://bkt/data/vdb/"),
        ("load_llama3_8b", {"model_load.read_mode": "read"}, "tensor-parallel rank 0 reads"),
    ],
)
def test_every_familys_dry_run_needs_no_endpoint(run_cli, monkeypatch, workload, keys, place):
    """A plan makes no request: a dry run on S3 works before the endpoint and keys are set, in every
    family (the training's, the KV cache's, vector search's, model loading's)."""
    for var in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var, raising=False)
    code, out, err = run_cli("run", "-w", workload, *set_args(**on_s3("bkt"), **keys), "--dry-run")
    assert code == 0, err
    assert place in out
