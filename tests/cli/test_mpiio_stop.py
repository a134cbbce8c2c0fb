"""`io --engine mpiio` under mpiexec: its ranks never deadlock, a signal ends a collective grid on every
rank within about a second, and no test file outlives the run (a killed rank's included).

Real jobs: `mpiexec -n 2` of MPICH (the venv's), real files, real signals. Skipped, with the reason,
when mpiexec, mpi4py or dlio._mpiio is missing.
"""

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO

needs_mpiio = pytest.mark.skipif(
    not (shutil.which("mpiexec") and importlib.util.find_spec("mpi4py") and importlib.util.find_spec("dlio._mpiio")),
    reason="needs mpiexec, mpi4py and dlio._mpiio (pip install mpich mpi4py; an MPI compiler at build time)",
)

GRID = ["--engine", "mpiio", "--layout", "fpp,segmented", "--collective", "--bs", "1m", "--file-size", "32m"]


pytestmark = pytest.mark.usefixtures("no_shm_leftovers")


def env(mark=""):
    return {**os.environ, "PYTHONPATH": REPO, "DLIO_TEST_MARK": mark, "PYTHONUNBUFFERED": "1"}


def start(folder, *args, mark=""):
    cmd = ["mpiexec", "-n", "2", sys.executable, "-m", "dlio", "-q", "io", str(folder), *map(str, args)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(mark), cwd=REPO)


def rank_pids(mark):
    """{rank: pid} of the two ranks started with DLIO_TEST_MARK=mark."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            text = open(f"/proc/{pid}/environ").read()
        except OSError:
            continue
        kv = dict(x.split("=", 1) for x in text.split("\0") if "=" in x)
        if kv.get("DLIO_TEST_MARK") == mark and "PMI_RANK" in kv:
            found[int(kv["PMI_RANK"])] = int(pid)
    return found


def read_bytes(pid):
    """Bytes the process has read so far (rchar of /proc/PID/io)."""
    for line in open(f"/proc/{pid}/io"):
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def measuring(proc, folder, mark, nbytes=16 << 20, timeout=60):
    """Wait until both ranks exist and rank 0 reads its measured requests (nbytes read since the
    test file was written); returns {rank: pid}."""
    deadline = time.monotonic() + timeout
    pids, base = {}, None
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        pids = rank_pids(mark)
        if len(pids) == 2 and os.listdir(folder):
            try:
                now = read_bytes(pids[0])
            except OSError:
                now = None
            if now is not None:
                base = now if base is None else base
                if now - base >= nbytes:
                    return pids
        time.sleep(0.05)
    raise AssertionError("the measured run did not start")


def kill_all(proc, pids):
    for pid in [*pids.values(), proc.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@needs_mpiio
def test_collective_grid_ten_times_in_a_row(tmp_path):
    """The grid of the report (fpp then segmented, collective) deadlocked in 1 of 8 tries: two ranks
    dropping the shared file's cache at once, one found pages left and raised alone."""
    for i in range(10):
        folder = tmp_path / f"t{i}"
        folder.mkdir()
        p = start(folder, *GRID, "--json", tmp_path / f"r{i}.json")
        try:
            out, err = p.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            kill_all(p, {})
            pytest.fail(f"try {i + 1}: the grid hung (killed after 90 s)")
        assert p.returncode == 0, f"try {i + 1}: {err}"
        doc = json.load(open(tmp_path / f"r{i}.json"))
        assert doc["complete"] and [x["layout"] for x in doc["points"]] == ["fpp", "segmented"]
        for x in doc["points"]:
            assert x["bytes"] == 2 * (32 << 20) and x["errors"] == 0  # one pass of each rank's 32 MiB
        assert os.listdir(folder) == []  # every test file removed


def assert_stopped_together(doc, signame):
    """The interrupted point's record: both ranks stopped after the same request (the vote)."""
    assert doc["complete"] is False and doc["reason"]
    rec = doc["points"][-1]
    assert rec["interrupted"] == signame and rec["layout"] == "segmented"
    per = {r["rank"]: r for r in rec["per_rank"]}
    assert sorted(per) == [0, 1]
    assert per[0]["ops"] == per[1]["ops"] > 0  # the same number of collective calls on both ranks
    assert rec["bytes"] == sum(r["bytes"] for r in per.values()) == rec["ops"] * (1 << 20)


@needs_mpiio
@pytest.mark.parametrize("who", ["both", "rank 1"])
def test_sigterm_ends_a_collective_grid_within_a_second(tmp_path, who):
    """SIGTERM to every rank (what mpiexec or a batch system does), or to one: every rank stops after
    the same collective request, the results are written, marked incomplete, and no file is left."""
    folder, js = tmp_path / "io", tmp_path / "r.json"
    folder.mkdir()
    mark = f"{tmp_path}-{who}"
    args = ["--engine", "mpiio", "--layout", "segmented", "--collective", "--bs", "1m", "--file-size", "32m"]
    p = start(folder, *args, "--size", "1t", "--json", js, mark=mark)
    pids = {}
    try:
        pids = measuring(p, folder, mark)
        t0 = time.monotonic()
        for r in (0, 1) if who == "both" else (1,):
            os.kill(pids[r], signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        kill_all(p, pids)
    assert p.returncode == 143, err
    assert took < 5, f"{took:.1f} s to stop"
    assert "Traceback" not in err
    if who == "rank 1":
        assert "stopped because rank 1 was interrupted by SIGTERM" in err, err
    else:
        assert "interrupted by SIGTERM" in err, err
    assert_stopped_together(json.load(open(js)), "SIGTERM")
    assert os.listdir(folder) == []


@needs_mpiio
def test_a_frozen_rank_does_not_hold_the_others(tmp_path):
    """Rank 1 frozen (SIGSTOP: a hung node) in the middle of a collective run: SIGTERM to rank 0 ends
    it within seconds, saying that the other rank did not answer, and rank 0 removes the test file."""
    folder = tmp_path / "io"
    folder.mkdir()
    mark = f"{tmp_path}-frozen"
    args = ["--engine", "mpiio", "--layout", "segmented", "--collective", "--bs", "1m", "--file-size", "32m"]
    p = start(folder, *args, "--size", "1t", mark=mark)
    pids = {}
    try:
        pids = measuring(p, folder, mark)
        os.kill(pids[1], signal.SIGSTOP)
        time.sleep(0.5)
        t0 = time.monotonic()
        os.kill(pids[0], signal.SIGTERM)
        while time.monotonic() - t0 < 30:
            try:
                if open(f"/proc/{pids[0]}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            except OSError:
                break
            time.sleep(0.05)
        took = time.monotonic() - t0
        left = os.listdir(folder)
    finally:
        kill_all(p, pids)
        out, err = p.communicate(timeout=30)
    assert took < 10, f"rank 0 took {took:.1f} s (or never) to leave"
    assert "did not answer within 1 s" in err, err
    assert "Traceback" not in err
    assert left == []  # rank 0 removed the shared file before leaving


@needs_mpiio
def test_a_killed_ranks_test_file_is_swept_by_the_next_run(tmp_path):
    """SIGKILL to rank 1 mid-run: mpiexec kills rank 0 too, so nobody can clean up; the shared test file
    (under a name claimed by rank 0) is removed by the next run in the folder, of another layout."""
    folder = tmp_path / "io"
    folder.mkdir()
    mark = f"{tmp_path}-killed"
    args = ["--engine", "mpiio", "--layout", "segmented", "--collective", "--bs", "1m", "--file-size", "32m"]
    p = start(folder, *args, "--size", "1t", mark=mark)
    pids = {}
    try:
        pids = measuring(p, folder, mark)
        os.kill(pids[1], signal.SIGKILL)
        p.communicate(timeout=60)
    finally:
        kill_all(p, pids)
    assert p.returncode != 0
    left = [n for n in os.listdir(folder) if "dlio-fast-ior" in n]
    assert left and all(n.startswith(".") for n in left), left  # never under its final name
    nxt = start(folder, "--engine", "mpiio", "--layout", "fpp", "--bs", "1m", "--file-size", "4m")
    out, err = nxt.communicate(timeout=90)
    assert nxt.returncode == 0, err
    assert os.listdir(folder) == []
