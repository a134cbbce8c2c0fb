"""Every workload YAML DLIO has shipped (tests/data/dlio-workloads: 2.0.0 and current) runs unchanged:
`dlio-fast run --config FILE --dry-run` loads it, plans it and gives exactly the warnings listed here."""

import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import REPO

from dlio.config import load_config

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(os.path.dirname(HERE), "data", "dlio-workloads")
FILES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "*", "*.yaml")))

# The keys each shipped file gets a warning for (the README's differences table lists them).
EXPECTED_WARNINGS = {
    "2.0.0/cosmoflow_a100.yaml": ["reader.shuffle_size"],
    "2.0.0/cosmoflow_h100.yaml": ["reader.shuffle_size"],
    "2.0.0/dlrm.yaml": [
        "workflow.do_eval",
        "dataset.eval_num_samples_per_file",
        "train.total_eval_steps",
        "evaluation.steps_between_evals",
    ],
    "current/cosmoflow_a100.yaml": ["reader.shuffle_size"],
    "current/cosmoflow_h100.yaml": ["reader.shuffle_size"],
}
# Planning holds about a hundred bytes per sample a rank reads in an epoch (not per sample of the dataset):
# a workload whose epoch reads more than this runs fewer steps, its dataset unchanged (dlrm: 4 G samples in
# one file, 32,768 steps of 2048), so the test does not depend on the memory free on the machine.
MAX_SAMPLES = 10_000_000


def warned_keys(err):
    return [re.match(r"warning: \S+:\d+: (\S+)", line).group(1) for line in err.splitlines() if line]


def test_the_shipped_files_are_all_here():
    assert len([f for f in FILES if f.startswith("2.0.0/")]) == 14
    assert len([f for f in FILES if f.startswith("current/")]) == 24


@pytest.mark.parametrize("name", FILES)
def test_dlio_workload_runs_unchanged(run_cli, tmp_path, name):
    path = os.path.join(ROOT, name)
    cfg = load_config(config_file=path, env={})
    big = cfg.steps_per_epoch() * cfg.reader.batch_size > MAX_SAMPLES
    steps = ["--set", f"train.total_training_steps={MAX_SAMPLES // cfg.reader.batch_size}"] if big else []
    code, out, err = run_cli("run", "--config", path, "--dry-run", "-o", tmp_path / "o", *steps)
    if "_s3" in name and code == 2:  # object storage is refused until it is emulated: clearly, in one line
        assert err.count("\n") == 1 and "storage.storage_type" in err and "'s3'" in err, err
        return
    assert code == 0, err
    assert "files" in out and not os.path.exists(tmp_path / "o")
    assert warned_keys(err) == EXPECTED_WARNINGS.get(name, []), err
    # every 2.0.0 file spells `model: NAME` (and most dataset.record_length): detected as 2.0.0
    assert cfg.dlio_fast.dialect == name.partition("/")[0]
    assert len(cfg.warnings) == len(EXPECTED_WARNINGS.get(name, []))


def test_config_warnings_go_to_stderr_once_and_into_the_results(run_cli, tmp_path):
    cfg = tmp_path / "w.yaml"
    cfg.write_text(
        "model: tiny\nframework: pytorch\nworkflow:\n  generate_data: true\n  do_eval: true\n"
        f"dataset:\n  data_folder: {tmp_path / 'data'}\n  format: npy\n  num_files_train: 2\n  record_length: 512\n"
        "reader:\n  batch_size: 1\n  read_threads: 0\ntrain:\n  computation_time: 0\n"
    )
    code, out, err = run_cli("run", "--config", cfg, "-o", tmp_path / "o", "--set", "dlio_fast.mlperf_rules=off")
    assert code == 0, err
    lines = [line for line in err.splitlines() if "do_eval" in line]
    assert lines == [
        f"warning: {cfg}:5: workflow.do_eval is not a DLIO key: ignored (DLIO ignores it too); "
        "nearest valid key: workflow.evaluation"
    ]
    with open(tmp_path / "o" / "dlio-fast.json") as f:
        doc = json.load(f)
    assert doc["config_warnings"] == lines


def test_unknown_key_on_the_command_line_exits_2(run_cli, tmp_path):
    code, out, err = run_cli("run", "-w", "default", "++workload.workflow.do_eval=true", "--dry-run")
    assert code == 2 and err.count("\n") == 1 and "workflow.do_eval" in err and "workflow.evaluation" in err


TINY_RUN = (
    "++workload.dataset.num_files_train=2",
    "++workload.reader.batch_size=1",
    "++workload.dataset.num_files_eval=0",
    "++workload.workflow.evaluation=false",
    "++workload.train.epochs=1",
    "++workload.train.computation_time=0",
    "++workload.dataset.data_folder=data",
    "--set",
    "dlio_fast.mlperf_rules=off",
)


def test_hydra_run_dir_sets_the_output_folder(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(
        "run",
        "workload=default",
        "hydra.run.dir=hout",
        *TINY_RUN,
    )
    assert code == 0, err
    assert os.path.exists(tmp_path / "hout" / "dlio-fast.json")
    assert yaml.safe_load((tmp_path / "hout" / ".hydra" / "overrides.yaml").read_text())[0] == "workload=default"


def test_overrides_yaml_lists_the_command_line_as_typed(run_cli, tmp_path, monkeypatch):
    # Hydra's overrides.yaml: the task overrides in order, deletions included, hydra.* left out
    monkeypatch.chdir(tmp_path)
    typed = ["++workload.train.seed=7", "~workload.train.seed", *TINY_RUN[:-2]]
    code, out, err = run_cli(
        "run", "-w", "default", "hydra.run.dir=o", *typed, "--set", "train.epochs=1", *TINY_RUN[-2:]
    )
    assert code == 0, err
    over = yaml.safe_load((tmp_path / "o" / ".hydra" / "overrides.yaml").read_text())
    assert over == ["workload=default", *typed, "++workload.train.epochs=1", "++workload.dlio_fast.mlperf_rules=off"]


@pytest.mark.parametrize("subdir, where", [("configs", "configs"), ("null", None), ("a/b", "a/b")])
def test_hydra_output_subdir_places_the_hydra_files(run_cli, tmp_path, monkeypatch, subdir, where):
    # MLPerf Storage's benchmark.sh passes ++hydra.output_subdir=configs and reads configs/overrides.yaml
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("run", "workload=default", "hydra.run.dir=o", f"++hydra.output_subdir={subdir}", *TINY_RUN)
    assert code == 0, err
    assert "output_subdir" not in err  # honoured: no "not emulated" warning
    made = sorted(str(p.parent.relative_to(tmp_path / "o")) for p in (tmp_path / "o").rglob("overrides.yaml"))
    assert made == ([where] if where else [])
    if where:
        over = yaml.safe_load((tmp_path / "o" / where / "overrides.yaml").read_text())
        assert f"++hydra.output_subdir={subdir}" not in over and over[0] == "workload=default"
        assert yaml.safe_load((tmp_path / "o" / where / "config.yaml").read_text())["workload"]["train"]["epochs"] == 1


@pytest.mark.parametrize("subdir", ["../out", "/abs", "a//b", "''"])
def test_hydra_output_subdir_outside_the_folder_is_refused(run_cli, tmp_path, monkeypatch, subdir):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("run", "workload=default", f"hydra.output_subdir={subdir}", "--dry-run")
    assert code == 2 and err.count("\n") == 1 and "hydra.output_subdir" in err and "inside the output folder" in err


@pytest.mark.skipif(
    not (shutil.which("mpiexec") and importlib.util.find_spec("mpi4py")),
    reason="needs mpiexec and mpi4py (pip install mpich mpi4py)",
)
def test_config_warnings_are_printed_once_per_job_under_mpi():
    path = os.path.join(ROOT, "2.0.0", "dlrm.yaml")
    p = subprocess.run(
        ["mpiexec", "-n", "2", sys.executable, "-m", "dlio", "run", "--config", path, "--dry-run", "--scale", "0.001"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": REPO},
    )
    assert p.returncode == 0, p.stderr
    assert warned_keys(p.stderr) == EXPECTED_WARNINGS["2.0.0/dlrm.yaml"], p.stderr


def test_workload_name_next_to_another_config_file_is_refused(run_cli, tmp_path):
    path = os.path.join(ROOT, "current", "unet3d_h100.yaml")
    code, out, err = run_cli("run", "--config", path, "workload=bert_v100", "--dry-run")
    assert code == 2 and err.count("\n") == 1, err
    assert "workload=bert_v100" in err and path in err and "give one" in err
    code, out, err = run_cli("run", "--config", path, "workload=unet3d_h100", "--dry-run", "-o", tmp_path / "o")
    assert code == 0, err
