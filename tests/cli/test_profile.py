"""`dlio-fast profile` end to end: real jobs (tests/cli/jobs/profile_job.py) over datasets made by
`dlio-fast generate`, captured by the LD_PRELOAD interposer; the inferred YAML must recover the
known batch, epochs, threads, compute, files and sizes, and its replay must score as a match."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import yaml

from dlio.config.load import load_config

JOB = os.path.join(os.path.dirname(__file__), "jobs", "profile_job.py")
CLI = [sys.executable, "-m", "dlio"]
# The job must be bound by its compute, not by its readers, or no trace shows the compute time.
# A 256 KiB JPEG of noise takes 5-40 ms to decode on this shared 2-core machine: the JPEG samples
# are 64 KiB (1-10 ms), so each of the two readers fetches its batch of 4 well within its two 40 ms
# steps. npz and hdf5 load a 256 KiB sample in about a millisecond. 24 steps per epoch: at an
# epoch's start the replay's C readers fill two batches each in parallel where this GIL-bound
# Python loader reads one file at a time, and with fewer steps that transient alone would be a
# quarter of the concurrency sample.
BATCH, EPOCHS, THREADS, COMPUTE, NFILES = 4, 2, 2, 0.040, 96
REC = {"npz": 262144, "hdf5": 262144, "jpeg": 65536}


def _run(args, cwd, check=True):
    p = subprocess.run(CLI + args, cwd=cwd, capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"{args} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def _dataset(tmp, fmt):
    cfg = {
        "model": {"name": "src"},
        "framework": "pytorch",
        "workflow": {"generate_data": True, "train": True},
        "dataset": {
            "data_folder": str(tmp / "src"),
            "format": fmt,
            "num_files_train": NFILES,
            "num_samples_per_file": 1,
            "record_length_bytes": REC[fmt],
        },
        "reader": {"batch_size": BATCH},
        "train": {"epochs": 1},
    }
    (tmp / "src.yaml").write_text(yaml.safe_dump(cfg))
    _run(["generate", "--config", str(tmp / "src.yaml")], tmp)
    return tmp / "src" / "train"


def _profile_and_replay(tmp_path, fmt, *job_flags):
    """Profile the job over a fresh dataset, check what the YAML recovers, replay it, score it."""
    data = _dataset(tmp_path, fmt)
    out = tmp_path / "prof"
    _run(
        [
            "profile",
            "-o",
            str(out),
            "--data-folder",
            str(tmp_path / "replay_data"),
            "--",
            sys.executable,
            JOB,
            "--data",
            str(data),
            "--batch",
            str(BATCH),
            "--epochs",
            str(EPOCHS),
            "--threads",
            str(THREADS),
            "--compute",
            str(COMPUTE),
            *job_flags,
        ],
        tmp_path,
    )
    wl = yaml.safe_load((out / "workload.yaml").read_text())
    load_config(config_file=str(out / "workload.yaml"), env={})
    files = sorted(p for p in data.iterdir())
    ds = wl["dataset"]
    assert ds["format"] == fmt
    assert ds["num_files_train"] == len(files) == NFILES
    assert ds["record_length_bytes"] == REC[fmt]  # so the generator writes files of the same size
    assert wl["reader"]["batch_size"] == BATCH
    assert wl["reader"]["read_threads"] == THREADS
    assert wl["train"]["epochs"] == EPOCHS
    assert abs(wl["train"]["computation_time"] - COMPUTE) <= 0.1 * COMPUTE
    report = (out / "report.txt").read_text()
    sizes = [p.stat().st_size for p in files]
    assert f"{len(files)} files, {min(sizes)}..{max(sizes)} bytes, {sum(sizes)} in all" in report
    _run(["run", "--config", str(out / "workload.yaml"), "--trace", "-o", str(tmp_path / "run")], tmp_path)
    gen = sorted((tmp_path / "replay_data" / "train").iterdir())
    assert [p.stat().st_size for p in gen] == sizes  # the replay's dataset has the same sizes
    p = _run(["profile", "--compare", str(out / "raw"), str(tmp_path / "run")], tmp_path, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "7/7 figures within bounds" in p.stdout


@pytest.mark.parametrize("fmt", ["npz", "hdf5", "jpeg"])
def test_profile_recovers_workload_and_replay_matches(tmp_path, fmt):
    _profile_and_replay(tmp_path, fmt)


def test_worker_processes(tmp_path):
    """Readers in forked worker processes (each its process's main thread), as a DataLoader's are."""
    _profile_and_replay(tmp_path, "npz", "--processes")


def test_pytorch_dataloader_workers(tmp_path):
    """A real DataLoader: its readers are worker processes (each process's main thread)."""
    pytest.importorskip("torch", reason="torch is not installed: the DataLoader variant needs it")
    _profile_and_replay(tmp_path, "npz", "--torch")


def test_random_ranges_are_not_whole_files(tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(np.random.default_rng(0).integers(0, 255, 16 << 20, dtype=np.uint8).tobytes())
    out = tmp_path / "prof"
    _run(["profile", "-o", str(out), "--", sys.executable, JOB, "--ranges", str(big), "--reads", "1500"], tmp_path)
    wl = yaml.safe_load((out / "workload.yaml").read_text())
    report = (out / "report.txt").read_text()
    assert re.search(r"^  pattern +ranges ", report, re.M), report
    assert wl["dataset"]["num_files_train"] == 1
    assert wl["dataset"]["record_length_bytes"] == 4096
    assert wl["dataset"]["num_samples_per_file"] == (16 << 20) // 4096
    assert wl["reader"]["sample_shuffle"] == "seed"


def test_profile_errors_are_one_line(tmp_path):
    p = _run(["profile", "-o", str(tmp_path / "p"), "--", "no-such-command-xyz"], tmp_path, check=False)
    assert p.returncode == 2 and "no-such-command-xyz: command not found" in p.stderr
    assert "Traceback" not in p.stderr
    p = _run(["profile", "--trace", str(tmp_path)], tmp_path, check=False)
    assert p.returncode == 2 and "no trace here" in p.stderr


def test_capture_keeps_every_path_past_the_name_buffer(tmp_path):
    """The interposer buffers path lines (64 KiB) and writes them with the records: 1500 opens of
    120-character paths overflow that buffer several times, in a parent and a forked child."""
    from dlio.profile.parsers import OP_READ, load_trace

    d = tmp_path / ("d" * 100)
    d.mkdir()
    names = [d / f"f{i:05d}.dat" for i in range(1500)]
    for i, p in enumerate(names):
        p.write_bytes(bytes([i % 251]) * 100)
    job = (
        "import os, sys\n"
        "fs = sorted(os.path.join(sys.argv[1], f) for f in os.listdir(sys.argv[1]))\n"
        "def rd(part):\n"
        "    for f in part:\n"
        "        with open(f, 'rb') as h: h.read()\n"
        "rd(fs[:700])\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    rd(fs[700:]); os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
    )
    out = tmp_path / "prof"
    _run(["profile", "-o", str(out), "--", sys.executable, "-c", job, str(d)], tmp_path)
    tr = load_trace(str(out / "raw"))
    rd = tr.events[(tr.events["op"] == OP_READ) & (tr.events["size"] == 100)]
    assert sorted(set(tr.paths[rd["file"]].astype(str))) == [str(p) for p in names]
    assert len(np.unique(rd["pid"])) == 2
