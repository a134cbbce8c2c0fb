"""`dlio-fast profile` follows every descriptor a job reads through: np.load of a .npy reads the
header through Python's file object, then the array through a duplicate of its descriptor
(os.dup: fcntl(F_DUPFD_CLOEXEC)) opened as a FILE* (numpy's fromfile: fdopen, fseeko, fread).
Both the recorder and the strace reader must see those reads, and when most of the bytes of the
opened files were never seen read the profile says so."""

import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "jobs"))
import profile_cases as pc  # noqa: E402

NFILES, SIZE, EPOCHS = 128, 256 << 10, 2
JOB = (
    "import glob, sys, numpy as np\n"
    "fs = sorted(glob.glob(sys.argv[1] + '/*.npy'))\n"
    f"for _ in range({EPOCHS}):\n"
    "    [np.load(p) for p in fs]\n"
)


def _dataset(tmp_path):
    d = tmp_path / "npy"
    d.mkdir()
    for i in range(NFILES):  # 128-byte header + array: 256 KiB files
        np.save(d / f"s{i:03d}.npy", np.full(SIZE - 128, i % 251, np.uint8))
    assert {os.path.getsize(d / f) for f in os.listdir(d)} == {SIZE}
    return d


def _check(report):
    assert re.search(rf"^  files +{NFILES} ", report, re.M), report
    assert re.search(rf"^  epochs +{EPOCHS} ", report, re.M), report
    # the array's read carries the bytes (the 4 KiB header read is the other half of the calls)
    t = int(pc.report_value(report, "transfer"))
    assert SIZE - 8192 <= t <= SIZE, report
    assert not re.search(r"^  unread ", report, re.M), report


def test_np_load_of_npy_files_is_seen_whole_by_the_recorder(tmp_path):
    d = _dataset(tmp_path)
    out = tmp_path / "prof"
    pc._run(["profile", "-o", str(out), "--", sys.executable, "-c", JOB, str(d)], str(tmp_path))
    report = (out / "report.txt").read_text()
    _check(report)
    from dlio.profile.dataview import data_view
    from dlio.profile.parsers import load_trace

    dv = data_view(load_trace(str(out / "raw")))
    assert dv.logical_bytes == EPOCHS * NFILES * SIZE  # every byte of every file, once per pass


@pytest.mark.skipif(not shutil.which("strace"), reason="strace is not installed")
def test_np_load_of_npy_files_is_seen_whole_in_an_strace_log(tmp_path):
    d = _dataset(tmp_path)
    log = tmp_path / "st.log"
    cmd = ["strace", "-f", "-tt", "-T", "-o", str(log), sys.executable, "-c", JOB, str(d)]
    subprocess.run(cmd, check=True, timeout=300)
    assert "F_DUPFD_CLOEXEC" in log.read_text()  # the duplicate the reads go through
    p = pc._run(["profile", "--trace", str(log), "-o", str(tmp_path / "prof")], str(tmp_path))
    _check(p.stdout)


def test_bytes_never_seen_read_are_said(tmp_path):
    """A job that maps its files and reads them through the mapping (page faults: no read call)
    is not seen reading; the profile says how much of the opened bytes it saw."""
    d = _dataset(tmp_path)
    job = (
        "import glob, os, sys\n"
        "for p in sorted(glob.glob(sys.argv[1] + '/*.npy')):\n"
        "    fd = os.open(p, os.O_RDONLY); os.read(fd, 4096); os.close(fd)\n"
    )
    out = tmp_path / "prof"
    p = pc._run(["profile", "-o", str(out), "--", sys.executable, "-c", job, str(d)], str(tmp_path))
    seen, total = NFILES * 4096 / 2**20, NFILES * SIZE / 2**20
    line = f"of the {total:.1f} MiB of the {NFILES} data files the job opened, only {seen:.1f} MiB were seen read"
    assert f"warning: {line}" in p.stderr, p.stderr
    assert line in (out / "report.txt").read_text()


def test_compare_of_a_mismatched_replay_fails_with_real_durations(tmp_path):
    """The np.load job reads back to back (no steps): its replay reads a pass in a few batches.
    The score gives both durations (each pass whole when it has too few steps for a fill to leave
    out, never 0.000 s) and marks the KS figures it cannot test with so few values as failures."""
    d = _dataset(tmp_path)
    out, run = tmp_path / "prof", tmp_path / "run"
    pc._run(
        ["profile", "-o", str(out), "--data-folder", str(tmp_path / "rd"), "--", sys.executable, "-c", JOB, str(d)],
        str(tmp_path),
    )
    pc._run(["run", "-q", "--config", str(out / "workload.yaml"), "--trace", "-o", str(run)], str(tmp_path))
    p = pc._run(["profile", "--compare", str(out / "raw"), str(run)], str(tmp_path), check=False)
    assert p.returncode == 1, p.stdout
    row = re.search(r"^duration +([\d.]+) s +([\d.]+) s ", p.stdout, re.M)
    assert row and float(row.group(1)) > 0 and float(row.group(2)) > 0, p.stdout
    assert re.search(r"^inter-burst gaps .*untestable: \d+ vs \d+ values +FAIL$", p.stdout, re.M), p.stdout
