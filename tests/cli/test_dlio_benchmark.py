"""`dlio_benchmark`: DLIO's command line (as MLPerf Storage's mlpstorage builds it) runs dlio-fast and
leaves every file mlpstorage reads, with and without MPI (the mpich wheel's mpiexec, and Open MPI's
mpirun as mlpstorage launches it when it is installed)."""

import os
import sys
import time

import pytest
import tomllib
import yaml
from conftest import REPO, one_line
from mlpstorage_lines import (
    HYDRA_OUTPUT_SUBDIR,
    command,
    config_dir,
    dlio_bin_dir,
    load_json,
    mpi_prefix,
    open_mpi_mpirun,
    read_back,
    run,
)

VENV_MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")
NO_MPIEXEC = "no mpiexec in this venv (pip install mpich)"
needs_mpiexec = pytest.mark.skipif(not os.path.exists(VENV_MPIEXEC), reason=NO_MPIEXEC)
OPEN_MPI, NO_OPEN_MPI = open_mpi_mpirun()
needs_open_mpi = pytest.mark.skipif(OPEN_MPI is None, reason=NO_OPEN_MPI or "")

# Small runs: 64 KiB samples, 1 ms of compute, no pause between checkpoints.
SMALL = {
    "dataset.record_length_bytes": 65536,
    "dataset.record_length_bytes_stdev": 0,
}
TRAIN = {"train.epochs": 2, "train.computation_time": 0.001, "model.model_size": 1 << 20}


def test_console_scripts_are_declared():
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts["dlio_benchmark"] == "dlio.cli.dlio_benchmark:main"
    assert scripts["dlio_postprocessor"] == "dlio.cli.dlio_postprocessor:main"


def _train_params(tmp_path, files):
    # mlpstorage's add_datadir_param: dataset.data_folder = DATA_DIR/MODEL, after the user's --param's
    return {"dataset.num_files_train": files, **SMALL, **TRAIN, "dataset.data_folder": tmp_path / "data" / "unet3d"}


def _check_training_folder(folder, nranks, command_word, files):
    """Every file mlpstorage reads, read its way, and the DLIO files beside them."""
    got = read_back(folder)
    assert set(got["configs"]) == {"config.yaml", "hydra.yaml", "overrides.yaml"}
    assert got["type"] == "training" and got["command"] == command_word
    assert got["model"] == "unet3d" and got["num_processes"] == nranks
    s = got["summary"]
    assert s["num_hosts"] == 1 and len(s["host_memory_GB"]) == 1 and s["host_cpu_count"][0] == os.cpu_count()
    assert got["total_memory_bytes"] > 0 and s["num_files_train"] == files and "start" in s
    params = got["parameters"]
    assert params["dataset"]["num_files_train"] == files
    assert params["dataset"]["record_length_bytes"] == 65536
    assert got["overrides"]["dataset.num_files_train"] == str(files)
    hydra = got["configs"]["hydra.yaml"]["hydra"]
    assert hydra["run"]["dir"] == str(folder) and hydra["output_subdir"] == HYDRA_OUTPUT_SUBDIR
    assert hydra["job"]["name"] == "dlio_benchmark" and hydra["runtime"]["choices"]["workload"].startswith("unet3d")
    assert hydra["overrides"]["task"] == got["configs"]["overrides.yaml"]
    names = set(os.listdir(folder))
    assert "dlio.log" in names
    assert {f"{r}_output.json" for r in range(nranks)} <= names
    if command_word == "run":
        assert params["reader"]["batch_size"] == 7  # mlpstorage's dataset-size rule reads it
        m = got["metrics"]
        assert m["train_au_meet_expectation"] in ("success", "fail") and len(m["train_au_percentage"]) == 2
        assert {f"{r}_per_epoch_stats.json" for r in range(nranks)} <= names
        steps = files // (7 * nranks)
        for r in range(nranks):
            out = load_json(os.path.join(folder, f"{r}_output.json"))
            assert [len(out[e]["load"]["block1"]) for e in ("1", "2")] == [steps, steps]


def _datagen_and_run(tmp_path, nranks=1, mpi=None, files=28):
    bins, configs = dlio_bin_dir(tmp_path), config_dir(tmp_path)
    results = tmp_path / "results" / "training" / "unet3d"
    gen_dir, run_dir = results / "datagen" / "20260101_000000", results / "run" / "20260101_000001"
    params = _train_params(tmp_path, files)
    gen_params = {k: v for k, v in params.items() if not k.startswith(("train.", "model."))}
    pre = None if mpi is None else mpi_prefix(mpi[0], nranks, root=mpi[1])
    p = run(command(bins, "unet3d_datagen", gen_dir, gen_params, configs, pre), cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert len(list((tmp_path / "data" / "unet3d" / "train").glob("*.npz"))) == files
    _check_training_folder(gen_dir, nranks, "datagen", files)
    params["checkpoint.checkpoint_folder"] = tmp_path / "ckpt" / "unet3d"
    p = run(command(bins, "unet3d_h100", run_dir, params, configs, pre), cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    _check_training_folder(run_dir, nranks, "run", files)
    return run_dir


def test_mlpstorage_training_datagen_and_run(tmp_path):
    run_dir = _datagen_and_run(tmp_path)
    # the files are all one size (stdev 0), each sample a whole npz: 4 steps of 7 files per epoch
    sizes = {f.stat().st_size for f in (tmp_path / "data" / "unet3d" / "train").glob("*.npz")}
    assert len(sizes) == 1
    doc = load_json(run_dir / "dlio-fast.json")
    assert [e["bytes"] for e in doc["ranks"][0]["epochs"]] == [4 * 7 * sizes.pop()] * 2


@needs_mpiexec
def test_mlpstorage_training_under_mpiexec(tmp_path):
    _datagen_and_run(tmp_path, nranks=2, mpi=(VENV_MPIEXEC, False))


@needs_open_mpi
def test_mlpstorage_training_under_open_mpi(tmp_path):
    """mlpstorage's own launch line with Debian's Open MPI: the mpich wheel's mpi4py would abort with
    "unsupported PMI version PMIx"; dlio.system.mpi points mpi4py at Open MPI's library instead."""
    _datagen_and_run(tmp_path, nranks=2, mpi=(OPEN_MPI, True))


def _checkpoint_params(tmp_path, nranks):
    # mlpstorage's add_checkpoint_params below llama3-8b's 8 CLOSED processes: subset mode, with data
    # parallelism 8 / 8 = 1 (DLIO refuses DP x TP x PP < ranks: OPEN's multiple, the ranks, with 2)
    return {
        "model.num_layers": 1,
        "model.transformer.hidden_size": 256,
        "model.transformer.ffn_hidden_size": 512,
        "model.transformer.vocab_size": 1024,
        "checkpoint.time_between_checkpoints": 0,
        "checkpoint.mode": "subset",
        "model.parallelism.data": nranks,
        "checkpoint.num_checkpoints_read": 2,
        "checkpoint.num_checkpoints_write": 2,
        "checkpoint.checkpoint_folder": tmp_path / "ckpt" / "llama3-8b",
    }


@pytest.mark.parametrize("nranks", [1, 2])
def test_mlpstorage_checkpointing(tmp_path, nranks):
    if nranks > 1 and not os.path.exists(VENV_MPIEXEC):
        pytest.skip(NO_MPIEXEC)
    bins, configs = dlio_bin_dir(tmp_path), config_dir(tmp_path)
    out = tmp_path / "results" / "checkpointing" / "llama3-8b" / "20260101_000000"
    pre = mpi_prefix(VENV_MPIEXEC, nranks) if nranks > 1 else None
    p = run(command(bins, "llama3_8b", out, _checkpoint_params(tmp_path, nranks), configs, pre), cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    got = read_back(out)
    assert got["type"] == "checkpointing" and got["command"] == "run" and got["model"] == "llama_8b"
    assert got["num_processes"] == nranks and got["overrides"]["checkpoint.mode"] == "subset"
    m = got["metrics"]
    assert m["save_checkpoint_io_mean_GB_per_second"] > 0 and m["load_checkpoint_io_mean_GB_per_second"] > 0
    saved = sorted(os.listdir(tmp_path / "ckpt" / "llama3-8b"))
    assert len(saved) == 2


def test_cfg_job_prints_the_composed_workload(tmp_path):
    bins, configs = dlio_bin_dir(tmp_path), config_dir(tmp_path)
    cmd = command(bins, "unet3d_h100", tmp_path / "r", {"dataset.num_files_train": 14}, configs) + ["--cfg", "job"]
    p = run(cmd, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    w = yaml.safe_load(p.stdout)["workload"]
    assert w["dataset"]["num_files_train"] == 14 and w["model"]["name"] == "unet3d"
    assert not (tmp_path / "r").exists()  # printed, nothing run
    p = run(cmd[:-1] + ["hydra"], cwd=tmp_path)
    assert yaml.safe_load(p.stdout)["hydra"]["run"]["dir"] == str(tmp_path / "r")


def test_help_lists_the_config_dirs_workloads(tmp_path):
    bins, configs = dlio_bin_dir(tmp_path), config_dir(tmp_path)
    p = run([str(bins / "dlio_benchmark"), "--help", f"--config-dir={configs}"], cwd=tmp_path)
    assert p.returncode == 0 and "unet3d_datagen" in p.stdout and "llama3_8b" in p.stdout


def test_run_dir_interpolations_of_dlios_primary_config(tmp_path):
    """Without ++hydra.run.dir the run folder is DLIO's: ./hydra_log/${workload.model.name}/${now:...}."""
    bins = dlio_bin_dir(tmp_path)
    p = run(
        [
            str(bins / "dlio_benchmark"),
            "workload=default",
            f"++workload.dataset.data_folder={tmp_path / 'data'}",
            "++workload.dataset.num_files_train=8",
            "++workload.dataset.num_files_eval=0",
            "++workload.workflow.evaluation=False",
            "++workload.train.epochs=1",
            "++workload.train.computation_time=0.001",
        ],
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    (folder,) = (tmp_path / "hydra_log" / "default").iterdir()
    assert len(folder.name) == len("2026-01-01-00-00-00") and (folder / ".hydra" / "hydra.yaml").exists()
    assert (folder / "summary.json").exists()


@pytest.mark.parametrize(
    "args,words",
    [
        (["workload=nope"], "unknown workload 'nope'"),
        (["workload=unet3d_h100", "workload.dataset.nope=1"], "Could not override 'workload.dataset.nope'"),
        (["workload=unet3d_h100", "+workload.dataset.format=npy"], "Could not append to config"),
        (["workload=unet3d_h100", "badtoken"], "badtoken"),
        (["workload=unet3d_h100", "--nope"], "unrecognized argument --nope"),
        (["-m", "workload=unet3d_h100"], "--multirun"),
        (["workload=unet3d_h100", "--config-dir=/nonexistent"], "config directory /nonexistent not found"),
        (["workload=unet3d_h100", "++hydra.run.dir=${oops}"], "cannot resolve ${oops}"),
    ],
)
def test_bad_command_lines_exit_1_with_one_line(tmp_path, args, words):
    """Hydra's status for every error is 1 (dlio-fast's own commands say 2 for bad input)."""
    bins = dlio_bin_dir(tmp_path)
    p = run([str(bins / "dlio_benchmark"), *args], cwd=tmp_path)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert words in one_line(p.stderr)


def test_plain_override_of_a_key_the_file_has_is_accepted(tmp_path):
    """`workload.KEY=V` (no +) changes a key the workload file has, as Hydra allows."""
    bins = dlio_bin_dir(tmp_path)
    p = run(
        [str(bins / "dlio_benchmark"), "workload=unet3d_h100", "workload.train.epochs=3", "--cfg", "job"], cwd=tmp_path
    )
    assert p.returncode == 0, p.stderr
    assert yaml.safe_load(p.stdout)["workload"]["train"]["epochs"] == 3


def test_config_path_and_name_choose_the_primary_config(tmp_path):
    """--config-path replaces the built-in configs: its --config-name file's defaults pick the workload
    and its hydra.run.dir names the run folder (${workload.model.name}, ${now:...} resolved)."""
    from dlio.config.workloads import workload_text

    cp = tmp_path / "cp"
    (cp / "workload").mkdir(parents=True)
    (cp / "workload" / "mine.yaml").write_text(workload_text("unet3d_h100"))
    (cp / "exp.yaml").write_text(
        "defaults:\n - _self_\n - workload: mine\nhydra:\n  run:\n    dir: out/${workload.model.name}/${now:%Y}\n"
        "  output_subdir: cfgs\n"
    )
    bins = dlio_bin_dir(tmp_path)
    base = [str(bins / "dlio_benchmark"), f"--config-path={cp}", "--config-name", "exp"]
    p = run(base + ["--cfg", "all"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = yaml.safe_load(p.stdout)
    assert doc["workload"]["model"]["name"] == "unet3d"
    h = doc["hydra"]
    assert h["run"]["dir"] == f"out/unet3d/{time.strftime('%Y')}" and h["output_subdir"] == "cfgs"
    assert h["runtime"]["choices"] == {"workload": "mine"} and h["job"]["config_name"] == "exp"
    assert [s["provider"] for s in h["runtime"]["config_sources"]] == ["main"]  # no built-ins behind it
    p = run(base + ["workload=unet3d_h100", "--cfg", "job"], cwd=tmp_path)  # not in --config-path
    assert p.returncode == 1 and "could not find 'workload/unet3d_h100'" in p.stderr


def test_hints_are_in_dlio_benchmarks_grammar(tmp_path):
    """What `run` would advise as its options (`--engine io_uring`) is said as the override dlio_benchmark
    takes (++workload.dlio_fast.engine=io_uring): mlpstorage users cannot type run's options."""
    bins = dlio_bin_dir(tmp_path)
    args = ["workload=unet3d_h100", "++workload.dlio_fast.engine=posix", "++workload.dlio_fast.qd=4"]
    p = run([str(bins / "dlio_benchmark"), *args], cwd=tmp_path)
    assert p.returncode == 1, (p.stdout, p.stderr)
    line = one_line(p.stderr)
    assert "++workload.dlio_fast.engine=io_uring" in line and "--engine" not in line, line
