"""Hostile input and faults: clear one-line errors, nothing lost, nothing half-written."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import one_line, set_args

SMALL = ["--workload", "default", "--set", "train.computation_time=0.001", "--set", "train.epochs=1"]


def data_args(folder):
    return ["--set", f"dataset.data_folder={folder}"]


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_run_and_keeps_partial_results(tmp_path, sig, code):
    data, out = tmp_path / "data", tmp_path / "out"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dlio",
            "-q",
            "run",
            "--workload",
            "default",
            *data_args(data),
            *set_args("train.epochs=1000", "train.computation_time=0.02"),
            "-o",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # wait until training has produced steps: generation is quick for this dataset
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (data / ".dlio-fast").exists():
        time.sleep(0.1)
    time.sleep(2.5)
    t0 = time.monotonic()
    p.send_signal(sig)
    stdout, stderr = p.communicate(timeout=30)
    assert time.monotonic() - t0 < 5, "the run took too long to stop"
    assert p.returncode == code, stderr
    assert "Traceback" not in stderr
    doc = json.loads((out / "dlio-fast.json").read_text())
    assert doc["complete"] is False and signal.Signals(sig).name in doc["reason"]
    epochs = doc["ranks"][0]["epochs"]
    assert epochs and epochs[-1]["complete"] is False and epochs[-1]["steps_done"] > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metric"]["train_au_percentage"]
    assert not [f for f in os.listdir(out) if ".tmp" in f]


def test_unwritable_output_detected_before_anything_runs(run_cli, tmp_path):
    data = tmp_path / "data"
    code, out, err = run_cli("run", *SMALL, *data_args(data), "-o", "/proc/dlio-fast-out")
    assert code == 2
    assert "/proc/dlio-fast-out" in one_line(err)
    assert not data.exists()  # nothing was generated


def test_truncated_file_stops_with_path_or_is_skipped(run_cli, tmp_path):
    data = tmp_path / "data"
    code, _, err = run_cli("generate", "--workload", "default", *data_args(data))
    assert code == 0, err
    victim = data / "train" / "1" / "img_01_of_64.npz"
    victim.write_bytes(victim.read_bytes()[:100])
    code, out, err = run_cli("run", *SMALL, *data_args(data), "-o", tmp_path / "o1")
    assert code == 2
    line = one_line(err)
    assert str(victim) in line and "100 bytes" in line
    code, out, err = run_cli("run", *SMALL, *data_args(data), "-o", tmp_path / "o2", "--skip-bad-files")
    assert code == 0, err
    doc = json.loads((tmp_path / "o2" / "dlio-fast.json").read_text())
    assert doc["ranks"][0]["bad_files"] == [str(victim)]
    # 63 good files / batch 4 = 15 steps; the bad file's sample is never read
    assert doc["ranks"][0]["epochs"][0]["steps_done"] == 15
    code, out, err = run_cli("verify", "--workload", "default", "--data", data)
    assert code == 1 and f"BAD  {victim}" in out


def test_missing_dataset_file_reports_path(run_cli, tmp_path):
    data = tmp_path / "data"
    assert run_cli("generate", "--workload", "default", *data_args(data))[0] == 0
    victim = data / "train" / "1" / "img_33_of_64.npz"
    victim.unlink()
    code, out, err = run_cli("run", *SMALL, *data_args(data), "-o", tmp_path / "o")
    assert code == 2 and str(victim) in one_line(err)
    # `generate` remakes exactly the missing file
    before = {p: p.stat().st_mtime_ns for p in (data / "train").rglob("*.npz")}
    assert run_cli("generate", "--workload", "default", *data_args(data))[0] == 0
    assert victim.exists()
    assert all(p.stat().st_mtime_ns == t for p, t in before.items())


@pytest.fixture
def tiny_fs(tmp_path):
    d = tmp_path / "tiny"
    d.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)], capture_output=True).returncode
        != 0
    ):
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield d
    subprocess.run(["umount", str(d)], capture_output=True)


def test_full_disk_refused_before_generating_with_the_size_needed(run_cli, tiny_fs):
    code, out, err = run_cli(
        "generate", "--workload", "default", *data_args(tiny_fs / "d"), "--set", "dataset.record_length_bytes=1048576"
    )
    assert code == 2
    line = one_line(err)
    assert re.search(r"needs [\d,.]+ MiB more but only [\d,.]+ MiB is free", line), line  # never 0.00 GiB
    leftovers = [os.path.join(r, f) for r, _, fs in os.walk(tiny_fs) for f in fs]
    assert not [f for f in leftovers if f.endswith(".npz") or ".tmp" in f]


def test_io_enospc_while_writing_test_files(run_cli, tiny_fs):
    code, out, err = run_cli("io", tiny_fs, "--file-size", "4m", "--size", "64k")
    assert code == 2
    assert "free" in one_line(err) or "space" in err
    assert not os.listdir(tiny_fs)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "--workload", "default", "--set", "reader.batch_size=0"], "reader.batch_size"),
        (["run", "--workload", "default", "--set", "dataset.num_file_train=3"], "num_files_train"),
        (["run", "--workload", "nosuch"], "nosuch"),
        (["run", "--workload", "default", "--set", "dataset.format=floppy"], "floppy"),
        (["run", "--workload", "default", "--set", "reader.read_threads=5000"], "read_threads"),
        (["run", "--workload", "default", "++workload.train.epochs=-1"], "train.epochs"),
        (["run"], "--workload"),
    ],
)
def test_bad_config_one_line_exit_2(run_cli, tmp_path, args, needle):
    code, out, err = run_cli(*args, "-o", tmp_path / "o")
    assert code == 2
    assert needle in one_line(err)


def test_broken_and_empty_yaml(run_cli, tmp_path):
    broken = tmp_path / "b.yaml"
    broken.write_text("dataset:\n  format: npz\n   bad_indent: 1\n")
    code, out, err = run_cli("run", "--config", broken, "-o", tmp_path / "o")
    assert code == 2 and str(broken) in one_line(err)
    empty = tmp_path / "e.yaml"
    empty.write_text("")
    code, out, err = run_cli("run", "--config", empty, "-o", tmp_path / "o")
    assert code == 2 and "empty" in one_line(err)


def test_zero_steps_is_a_clear_error(run_cli, tmp_path):
    code, out, err = run_cli(
        "run",
        "--workload",
        "default",
        *data_args(tmp_path / "d"),
        *set_args("dataset.num_files_train=3", "reader.batch_size=4"),
        "-o",
        tmp_path / "o",
    )
    assert code == 2
    line = one_line(err)
    assert "0 training steps" in line and "batch of 4" in line
