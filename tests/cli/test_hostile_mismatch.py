"""A dataset generated with one config and run with another is detected before training."""

import shutil
import subprocess
import sys

import pytest
from conftest import one_line

OPTS = [
    "--workload",
    "default",
    "--set",
    "train.epochs=1",
    "--set",
    "train.computation_time=0",
    "--set",
    "workflow.evaluation=false",
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
