"""`dlio-fast datasize`, `run`'s dataset-size refusal for workloads CLOSED under MLPerf Storage v3.0,
and `dlio-fast workloads`' rules column."""

import json
import os

import pytest
from conftest import one_line, set_args

GiB = 1 << 30
TINY = [
    *set_args(
        "dataset.record_length_bytes=4096",
        "dataset.record_length_bytes_stdev=0",
        "dataset.num_files_train=14",
        "train.epochs=1",
        "train.computation_time=0.001",
    ),
]


def test_datasize_prints_the_rule_and_commands(run_cli):
    code, out, err = run_cli("datasize", "--workload", "unet3d_b200", "--accelerators", 8, "--host-memory", "512g")
    assert code == 0, err
    assert "minimum             28000 samples = 28000 files" in out
    assert "mpiexec -n 8 dlio-fast generate --workload unet3d_b200 --set dataset.num_files_train=28000" in out
    assert "dlio-fast check --rules v3.0" in out


def test_datasize_bad_memory_is_one_line(run_cli):
    code, out, err = run_cli("datasize", "-w", "unet3d_b200", "-n", 8, "--host-memory", "lots")
    assert code == 2 and "--host-memory" in one_line(err)


def test_workloads_shows_rules_version_and_division(run_cli):
    code, out, err = run_cli("workloads")
    assert code == 0
    rows = {l.split()[0]: l.rstrip() for l in out.splitlines() if l.strip() and not l.endswith(":")}
    assert rows["unet3d_b200"].endswith("v3.0 closed")
    assert rows["retinanet_b200"].split()[1] == "jpeg"
    assert rows["resnet50_h100"].endswith("v3.0 whatif, v2.0 closed")


def test_run_refuses_a_closed_workload_with_too_small_a_dataset(run_cli, tmp_path):
    code, out, err = run_cli(
        "run", "-w", "unet3d_b200", *TINY, "--set", f"dataset.data_folder={tmp_path / 'd'}", "-o", tmp_path / "o", "-q"
    )
    assert code == 2
    line = one_line(err)
    assert "Rules 3.1.2" in line and "this run has 14" in line and "dlio_fast.mlperf_rules=warn" in line
    assert not os.path.exists(tmp_path / "d")  # refused before generating anything


def test_run_warns_with_the_flag_and_runs(run_cli, tmp_path):
    code, out, err = run_cli(
        "run",
        "-w",
        "unet3d_b200",
        *TINY,
        *set_args(f"dataset.data_folder={tmp_path / 'd'}", "dlio_fast.mlperf_rules=warn"),
        "-o",
        tmp_path / "o",
        "-q",
    )
    assert code == 0, err
    assert "warning: unet3d_b200 claims MLPerf Storage v3.0 CLOSED" in err
    assert json.load(open(tmp_path / "o" / "dlio-fast.json"))["complete"]


@pytest.mark.parametrize(
    "args, words",
    [
        (["-w", "llama_8b_zero3", "-n", "8", "--host-memory", "512g"], "reads no dataset"),
        (["-w", "unet3d_b200", "-n", "8", "--host-memory", "512"], "--host-memory 512: give a unit"),
    ],
)
def test_datasize_refuses_what_has_no_answer(run_cli, args, words):
    """A checkpoint-only workload has no dataset to size; a bare number is not taken as bytes."""
    code, out, err = run_cli("datasize", *args)
    assert code == 2 and words in one_line(err) and not out
