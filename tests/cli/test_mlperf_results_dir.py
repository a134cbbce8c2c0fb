"""dlio_fast.results_dir: runs land in MLPerf Storage's results tree with a provenance.json."""

import glob
import hashlib
import json
import os
import re
import subprocess

from conftest import REPO, one_line, set_args

BASE = [
    "run",
    "-w",
    "default",
    "-q",
    *set_args("train.epochs=1", "train.computation_time=0.001", "workflow.evaluation=False"),
]


def run_into(run_cli, tmp_path, *extra):
    results = tmp_path / "results"
    code, out, err = run_cli(
        *BASE, "--set", f"dataset.data_folder={tmp_path / 'd'}", "--set", f"dlio_fast.results_dir={results}", *extra
    )
    assert code == 0, err
    leaves = sorted(glob.glob(str(results / "training" / "default" / "run" / "*")))
    return leaves


def test_layout_and_provenance(run_cli, tmp_path):
    leaves = run_into(run_cli, tmp_path)
    # MLPerf's timestamp, and the pid that keeps two runs started in the same second apart
    assert len(leaves) == 1 and re.fullmatch(r"\d{8}_\d{6}(_\d+)?", os.path.basename(leaves[0]))
    assert {"dlio-fast.json", "summary.json", "provenance.json"} <= set(os.listdir(leaves[0]))
    doc = json.load(open(os.path.join(leaves[0], "provenance.json")))
    canonical = json.dumps(doc["config"], sort_keys=True, separators=(",", ":"))
    assert doc["config_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert doc["config"]["train"]["computation_time"] == 0.001
    assert doc["config"]["dlio_fast"]["results_dir"] == str(tmp_path / "results")
    core = {k: dict(v) if isinstance(v, dict) else v for k, v in doc["config"].items()}
    for section, key in (
        ("dataset", "data_folder"),
        ("checkpoint", "checkpoint_folder"),
        ("output", "log_file"),
        ("dlio_fast", "results_dir"),
        ("dlio_fast", "plots"),
        ("dlio_fast", "trace"),
    ):
        core[section].pop(key, None)
    canonical = json.dumps(core, sort_keys=True, separators=(",", ":"))
    assert doc["core_config_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    head = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert doc["git"]["commit"] == head.stdout.strip()
    assert doc["host"]["memory_bytes"] > 0 and doc["ranks"] == 1 and doc["workload"] == "default"
    assert doc["dlio_fast_version"]


def test_same_settings_same_core_hash_other_settings_other_hash(run_cli, tmp_path):
    """Two runs of one workload into other folders: same core hash (the full hash differs: the folders);
    another read_threads: another core hash."""
    a = json.load(open(os.path.join(run_into(run_cli, tmp_path / "a")[0], "provenance.json")))
    b = json.load(open(os.path.join(run_into(run_cli, tmp_path / "b")[0], "provenance.json")))
    c = json.load(
        open(os.path.join(run_into(run_cli, tmp_path / "c", "--set", "reader.read_threads=2")[0], "provenance.json"))
    )
    assert a["core_config_sha256"] == b["core_config_sha256"] != c["core_config_sha256"]
    assert a["config_sha256"] != b["config_sha256"]


def test_without_results_dir_no_provenance(run_cli, tmp_path):
    code, out, err = run_cli(*BASE, "--set", f"dataset.data_folder={tmp_path / 'd'}", "-o", tmp_path / "o")
    assert code == 0 and not os.path.exists(tmp_path / "o" / "provenance.json")


def test_a_refused_run_leaves_nothing_in_the_results_tree(run_cli, tmp_path):
    """A CLOSED workload refused by the dataset-size rule (before anything is measured) leaves no
    folder in the results tree: `check RESULTS/.../run/*` must not meet a folder holding only a lock.
    A run that finishes leaves no lock file either."""
    res = tmp_path / "res"
    small = [
        "-w",
        "unet3d_b200",
        *set_args(
            "dataset.num_files_train=8",
            "dataset.record_length_bytes=65536",
            "dataset.record_length_bytes_stdev=0",
            f"dataset.data_folder={tmp_path / 'd'}",
            f"dlio_fast.results_dir={res}",
        ),
    ]
    code, _, err = run_cli("run", *small)
    assert code == 2 and "3.1.2" in one_line(err), err
    runs = [d for d in res.rglob("*") if d.is_dir() and d.parent.name == "run"]
    assert runs == [], runs
    code, _, err = run_cli(
        "run",
        *small,
        *set_args("dlio_fast.mlperf_rules=off", "train.epochs=1", "train.computation_time=0.001"),
    )
    assert code == 0, err
    (run,) = [d for d in res.rglob("*") if d.is_dir() and d.parent.name == "run"]
    assert (run / "summary.json").is_file() and not (run / ".dlio-fast.lock").exists()
