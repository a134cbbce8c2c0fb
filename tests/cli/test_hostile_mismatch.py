"""A dataset generated with one config and run with another is detected before training."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import one_line, set_args, wait_for_text

OPTS = [
    "--workload",
    "default",
    *set_args("train.epochs=1", "train.computation_time=0", "workflow.evaluation=false"),
]


def dlio(*args):
    p = subprocess.run([sys.executable, "-m", "dlio", *map(str, args)], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    d = tmp_path_factory.mktemp("ds") / "d"
    code, _, err = dlio("generate", *OPTS, "--set", f"dataset.data_folder={d}")
    assert code == 0, err
    return d


@pytest.mark.parametrize("manifest", ["generated", "none", "scanned"])
@pytest.mark.parametrize(
    "key, value, made_value",
    [
        ("dataset.record_length_bytes", "8192", "4096"),
        ("dataset.record_length_bytes", "1024", "4096"),
        ("dataset.num_samples_per_file", "2", "1"),
        ("dataset.record_element_type", "float32", "uint8"),
    ],
)
def test_run_with_another_config_than_the_dataset_stops_naming_both(
    run_cli, tmp_path, made, manifest, key, value, made_value
):
    d = tmp_path / "d"
    shutil.copytree(made, d)
    if manifest != "generated":
        shutil.rmtree(d / ".dlio-fast")
    if manifest == "scanned":  # a run with the right config scans and saves a manifest without a key
        code, _, err = run_cli("run", *OPTS, "--set", f"dataset.data_folder={d}", "-o", tmp_path / "o0")
        assert code == 0, err
    code, out, err = run_cli(
        "run", *OPTS, "--set", f"dataset.data_folder={d}", "--set", f"{key}={value}", "-o", tmp_path / "o"
    )
    assert code == 2
    line = one_line(err)
    if manifest == "generated":
        assert key in line and made_value in line and value in line
    else:
        assert "bytes" in line and "record_length_bytes" in line and str(d) in line
    assert not (tmp_path / "o" / "dlio-fast.json").exists()


def test_the_same_config_runs(run_cli, tmp_path, made):
    code, out, err = run_cli("run", *OPTS, "--set", f"dataset.data_folder={made}", "-o", tmp_path / "o")
    assert code == 0, err


@pytest.mark.parametrize("skip", [True, False])
def test_a_file_truncated_during_the_run(tmp_path, skip):
    """The dataset checked at the start, then a file truncated under the running job: with
    --skip-bad-files its samples are left out and counted (the run completes); without, the run stops
    naming the file and keeps the epochs it measured."""
    data, out, log = tmp_path / "d", tmp_path / "o", tmp_path / "log"
    common = ["-w", "default", "--set", f"dataset.data_folder={data}", "--set", "workflow.evaluation=false"]
    gen = subprocess.run([sys.executable, "-m", "dlio", "generate", *common], capture_output=True, text=True)
    assert gen.returncode == 0, gen.stderr
    args = [*common, "--set", "train.epochs=3", "--set", "train.computation_time=0.05", "-o", str(out)]
    p = subprocess.Popen(
        [sys.executable, "-m", "dlio", "run", *args, *(["--skip-bad-files"] if skip else [])],
        stdout=open(log, "w"),
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    wait_for_text(log, "Ending epoch 1 ", p)
    victims = sorted(str(f) for f in (data / "train").rglob("*.npz"))
    for v in victims:
        os.truncate(v, 100)
    err = p.communicate(timeout=120)[1]
    doc = json.loads((out / "dlio-fast.json").read_text())
    epochs = doc["ranks"][0]["epochs"]
    if skip:
        assert p.returncode == 0, err
        later = [e for e in epochs if e["epoch"] > 1]
        assert sum(e.get("skipped_samples", 0) for e in later) > 0
        assert set(later[-1]["bad_files_during"]) <= set(victims) and later[-1]["bad_files_during"]
        assert "Skipped" in log.read_text()
    else:
        assert p.returncode == 1, err
        assert "shorter than the plan expects" in err and any(os.path.basename(v) in err for v in victims)
        assert epochs[0]["epoch"] == 1 and doc["complete"] is False


def test_verify_of_a_folder_checks_it_against_its_own_manifest(run_cli, tmp_path):
    """verify --data DIR of a dataset generated with other counts than the workload's (8 files, not
    unet3d's 168): its own manifest decides what is there, said in a note; nothing is 'missing'."""
    d = tmp_path / "u3"
    sets = ["--set", "dataset.num_files_train=8", "--set", "dataset.record_length_bytes=65536"]
    sets += ["--set", "dataset.record_length_bytes_stdev=0", "--set", f"dataset.data_folder={d}"]
    code, _, err = run_cli("generate", "-w", "unet3d", *sets, "--checksum")
    assert code == 0, err
    code, out, err = run_cli("verify", "--data", d, "-w", "unet3d")
    assert code == 0, out + err
    assert "8 files checked (npz in" in out and "with content checksums): 0 bad" in out
    assert "own manifest: generated with num_files_train 8 (config: 168)" in err
