"""MLPerf Storage's own tool drives dlio-fast: `mlpstorage training datagen / run` and `mlpstorage
checkpointing run` with `--dlio-bin-path`, then `mlpstorage reports reportgen` reads the results tree.

mlpstorage is installed from a source snapshot of mlcommons/storage into a throwaway venv (its
dependencies but DLIO: psutil, pyarrow, pyyaml). Where the snapshot is: $DLIO_FAST_MLPSTORAGE_SRC, else
/tmp/mlpstorage-src (e.g. `git -C MIRROR archive HEAD | tar -x -C /tmp/mlpstorage-src` of a clone). The
test is skipped, with the reason, without one (or without network access to PyPI for its packages).
mlpstorage launches under MPI: Open MPI's mpirun when it runs here (mlpstorage's default `mpirun`, with
--oversubscribe --allow-run-as-root), else the mpich wheel's mpiexec (its `--mpi-bin mpiexec`).
"""

import json
import os
import subprocess
import sys

import pytest
from mlpstorage_lines import dlio_bin_dir, open_mpi_mpirun

SRC = os.environ.get("DLIO_FAST_MLPSTORAGE_SRC", "/tmp/mlpstorage-src")
HAVE_SRC = os.path.isfile(os.path.join(SRC, "pyproject.toml")) and os.path.isdir(os.path.join(SRC, "configs", "dlio"))
pytestmark = pytest.mark.skipif(
    not HAVE_SRC, reason=f"no mlcommons/storage snapshot at {SRC} ($DLIO_FAST_MLPSTORAGE_SRC)"
)
SMALL = ["dataset.record_length_bytes=65536", "dataset.record_length_bytes_stdev=0"]


@pytest.fixture(scope="module")
def mlpstorage(tmp_path_factory):
    """The mlpstorage command of a venv with the snapshot installed (without its DLIO dependency)."""
    venv = tmp_path_factory.mktemp("mlps") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    steps = [pip + ["--no-deps", SRC], pip + ["psutil", "pyarrow", "pyyaml"]]
    for cmd in steps:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            pytest.skip(f"cannot install mlpstorage from {SRC}: {p.stderr.strip().splitlines()[-1:]}")
    return str(venv / "bin" / "mlpstorage")


def _mpi_args():
    """mlpstorage's MPI options and environment for the MPI this host can run."""
    launcher, _ = open_mpi_mpirun()
    if launcher is not None:
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        return ["--oversubscribe", *root], {"MPI_RUN_BIN": launcher}
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.path.exists(mpiexec):
        pytest.skip("no MPI launcher: neither Open MPI's mpirun nor the mpich wheel's mpiexec")
    return ["--mpi-bin", "mpiexec"], {"MPI_EXEC_BIN": mpiexec}


def test_mlpstorage_drives_dlio_fast(mlpstorage, tmp_path):
    bins = dlio_bin_dir(tmp_path)
    mpi, env = _mpi_args()
    env = {**os.environ, **env, "HOME": str(tmp_path)}  # mlpstorage keeps its history in ~/mlps_history
    data, results, ckpt = tmp_path / "data", tmp_path / "results", tmp_path / "ckpt"
    common = ["--dlio-bin-path", str(bins), "--results-dir", str(results), *mpi]

    def mlps(*args):
        p = subprocess.run(
            [mlpstorage, *args, *common], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
        )
        assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
        return p

    params = ["--param", "dataset.num_files_train=28", *SMALL]
    mlps("training", "datagen", "--model", "unet3d", "--num-processes", "2", "--data-dir", str(data), *params)
    assert len(list((data / "unet3d" / "train").glob("*.npz"))) == 28
    run_params = params + ["train.epochs=2", "train.computation_time=0.001", "model.model_size=1048576"]
    mlps(
        "training", "run", "--model", "unet3d", "--accelerator-type", "h100", "--num-accelerators", "2",
        "--client-host-memory-in-gb", "1", "--data-dir", str(data), "--checkpoint-folder", str(ckpt), *run_params,
    )  # fmt: skip
    ckpt_params = [
        "--param", "checkpoint.time_between_checkpoints=0", "model.num_layers=1",
        "model.transformer.hidden_size=256", "model.transformer.ffn_hidden_size=512",
        "model.transformer.vocab_size=1024",
    ]  # fmt: skip
    mlps(
        "checkpointing", "run", "--model", "llama3-8b", "--num-processes", "1", "--client-host-memory-in-gb", "1",
        "--checkpoint-folder", str(ckpt), "--num-checkpoints-read", "2", "--num-checkpoints-write", "2", *ckpt_params,
    )  # fmt: skip
    p = subprocess.run(
        [mlpstorage, "reports", "reportgen", "--results-dir", str(results)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    with open(results / "results.json") as f:
        runs = json.load(f)
    by = {(r["benchmark_type"], r["command"]): r for r in runs}
    assert set(by) == {("training", "datagen"), ("training", "run_benchmark"), ("checkpointing", None)}, by.keys()
    train = by[("training", "run_benchmark")]
    assert train["model"] == "unet3d" and len(train["metrics"]["train_au_percentage"]) == 2
    assert train["parameters"]["dataset"]["num_files_train"] == 28
    ck = by[("checkpointing", None)]
    assert ck["metrics"]["save_checkpoint_io_mean_GB_per_second"] > 0
    for r in runs:  # each run folder holds the files the rules require
        names = set(os.listdir(r["run_id"]))
        assert {"summary.json", "dlio.log", "0_output.json", "dlio_config"} <= names
        assert sorted(os.listdir(os.path.join(r["run_id"], "dlio_config"))) == [
            "config.yaml",
            "hydra.yaml",
            "overrides.yaml",
        ]


def test_mlpstorage_across_two_simulated_hosts(mlpstorage, tmp_path):
    """`--hosts hA hB` as on a cluster: mlpstorage writes `mpirun -host hA:1,hB:1`, Open MPI starts a rank on
    each simulated host through the agent (what ssh is on a cluster), and dlio-fast's files show both hosts."""
    from multihost import OPEN_MPI_FLAGS, namespaces_missing, open_mpi

    why = namespaces_missing()
    mpirun, no_ompi = open_mpi()
    if why or mpirun is None:
        pytest.skip(why or no_ompi or "no Open MPI")
    # mlpstorage writes its own mpirun line: the agent and the loopback transports go in through Open MPI's
    # environment (OMPI_MCA_<name>), as a site's defaults would
    mca = {f"OMPI_MCA_{k}": v for k, v in zip(OPEN_MPI_FLAGS[3::3], OPEN_MPI_FLAGS[4::3])}
    assert set(mca) == {f"OMPI_MCA_{k}" for k in ("plm_rsh_agent", "btl", "btl_tcp_if_include", "oob_tcp_if_include")}
    env = {**os.environ, **mca, "MPI_RUN_BIN": mpirun, "HOME": str(tmp_path)}
    data, results = tmp_path / "data", tmp_path / "results"
    common = ["--dlio-bin-path", str(dlio_bin_dir(tmp_path)), "--results-dir", str(results), "--hosts", "hA", "hB"]
    common += ["--oversubscribe", *(["--allow-run-as-root"] if os.geteuid() == 0 else [])]

    def mlps(*args):
        p = subprocess.run(
            [mlpstorage, *args, *common], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
        )
        assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
        return p.stdout + p.stderr

    params = ["--param", "dataset.num_files_train=28", *SMALL]
    out = mlps("training", "datagen", "--model", "unet3d", "--num-processes", "2", "--data-dir", str(data), *params)
    assert "-host hA:1,hB:1" in out and len(list((data / "unet3d" / "train").glob("*.npz"))) == 28
    out = mlps(
        "training", "run", "--model", "unet3d", "--accelerator-type", "h100", "--num-accelerators", "2",
        "--client-host-memory-in-gb", "1", "--data-dir", str(data), "--checkpoint-folder", str(tmp_path / "ckpt"),
        *params, "train.epochs=2", "train.computation_time=0.001",
    )  # fmt: skip
    assert "host hA (ranks 0)" in out and "host hB (ranks 1)" in out
    (run_dir,) = (results / "training" / "unet3d" / "run").iterdir()
    with open(run_dir / "dlio-fast.json") as f:
        doc = json.load(f)
    assert doc["hostnames"] == ["hA", "hB"] and doc["complete"] is True
    per_host = {h["host"]: h for h in doc["metrics"]["per_host"]}
    assert set(per_host) == {"hA", "hB"} and per_host["hA"]["ranks"] == [0] and per_host["hB"]["ranks"] == [1]
    assert sum(h["bytes"] for h in per_host.values()) == doc["metrics"]["bytes_read"] > 0
    with open(run_dir / "summary.json") as f:
        assert json.load(f)["num_hosts"] == 2
    assert {"0_output.json", "1_output.json"} <= set(os.listdir(run_dir))
    p = subprocess.run(
        [mlpstorage, "reports", "reportgen", "--results-dir", str(results)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    with open(results / "results.json") as f:
        runs = {r["command"]: r for r in json.load(f)}
    assert len(runs["run_benchmark"]["metrics"]["train_au_percentage"]) == 2
