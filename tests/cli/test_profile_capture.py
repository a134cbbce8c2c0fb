"""`dlio-fast profile -- CMD` keeps the capture when the job dies or profile is stopped.

The recorder writes as the job goes (shared mappings, src/dlio_profile/interpose.c), so a job
killed by SIGKILL, one that aborts or segfaults and one that exits 3 each leave a capture that
`profile` analyses: the workload (the job's 4-file batches, 32 files, 2 passes) is inferred from
it, the report says the capture is incomplete and why, and the exit status is 1 with one line
naming how the job ended. Ctrl-C / SIGTERM to profile itself stop the job, the capture so far is
analysed and written, and profile exits 128 + N. The job is a real Python loop reading real npz
files (tests/cli/jobs/profile_dying_job.py)."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jobs", "profile_dying_job.py")
CLI = [sys.executable, "-m", "dlio", "profile"]
NFILES, BATCH = 32, 4


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    for i in range(NFILES):
        np.savez(d / f"f{i:03d}.npz", x=np.full((64, 64), i, np.uint8))
    return d


def _job(data, end, *extra):
    return [sys.executable, JOB, "--data", str(data), "--batch", str(BATCH), "--end", end, *extra]


def _check_analysed(out, stdout, why):
    """The workload of the two passes read before the end, and the report saying why it is partial."""
    raw = out / "raw"
    assert any(n.startswith("ev-") for n in os.listdir(raw))
    wl = yaml.safe_load((out / "workload.yaml").read_text())
    assert wl["dataset"]["num_files_train"] == NFILES
    assert wl["reader"]["batch_size"] == BATCH
    report = (out / "report.txt").read_text()
    assert f"capture incomplete: {why}" in report, report
    assert report in stdout


@pytest.mark.parametrize(
    "end,why",
    [
        ("kill", "the job was killed by SIGKILL"),
        ("abort", "the job was killed by SIGABRT"),
        ("segv", "the job was killed by SIGSEGV"),
        ("exit3", "the job failed with exit status 3"),
    ],
)
def test_a_job_that_dies_leaves_its_capture_analysed_and_exit_1(tmp_path, data, end, why):
    out = tmp_path / "prof"
    r = subprocess.run(CLI + ["-o", str(out), "--", *_job(data, end)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr.replace("Fatal Python error", "")  # the job's own crash report may print
    last = r.stderr.strip().splitlines()[-1]
    assert last == f"dlio-fast: error: {why}; the workload above is from what was captured before, in {out}/raw"
    _check_analysed(out, r.stdout, why)


def _start_and_wait_ready(tmp_path, data, out, *extra):
    ready = tmp_path / "ready"
    p = subprocess.Popen(
        CLI + ["-o", str(out), "--", *_job(data, "wait", "--ready", str(ready), *extra)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    t0 = time.monotonic()
    while not ready.exists():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() - t0 < 60, "the job never got ready"
        time.sleep(0.05)
    return p


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_profile_stops_the_job_keeps_and_analyses_the_capture(tmp_path, data, sig):
    out = tmp_path / "prof"
    p = _start_and_wait_ready(tmp_path, data, out)
    p.send_signal(sig)
    t0 = time.monotonic()
    stdout, stderr = p.communicate(timeout=60)
    assert time.monotonic() - t0 < 30
    assert p.returncode == 128 + sig, stderr
    name = signal.Signals(sig).name
    assert f"profile was interrupted by {name} and stopped the job" in (out / "report.txt").read_text()
    assert stderr.strip().splitlines()[-1].startswith(f"dlio-fast: stopped because of {name}: the job was stopped")
    _check_analysed(out, stdout, f"profile was interrupted by {name} and stopped the job")


def test_a_second_signal_kills_a_job_that_ignores_the_first(tmp_path, data):
    out = tmp_path / "prof"
    job_ignores = tmp_path / "ignore.py"
    job_ignores.write_text(
        "import signal, runpy, sys\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"sys.argv = [{JOB!r}] + sys.argv[1:]\n"
        f"runpy.run_path({JOB!r}, run_name='__main__')\n"
    )
    ready = tmp_path / "ready"
    cmd = [
        sys.executable,
        str(job_ignores),
        "--data",
        str(data),
        "--steps",
        "16",
        "--end",
        "wait",
        "--ready",
        str(ready),
    ]
    p = subprocess.Popen(CLI + ["-o", str(out), "--", *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not ready.exists():
        assert p.poll() is None, p.communicate()
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    assert p.poll() is None  # the job ignores SIGTERM: profile waits (up to its grace period)
    p.send_signal(signal.SIGTERM)
    stdout, stderr = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGTERM, stderr
    assert (out / "workload.yaml").exists() and "capture incomplete" in (out / "report.txt").read_text()


@pytest.fixture
def small_fs(tmp_path):
    """A 128 KiB tmpfs (root only): the capture fills it."""
    d = tmp_path / "small"
    d.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(d)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    yield d
    subprocess.run(["umount", str(d)], check=False)


def test_a_full_disk_stops_the_recorder_not_the_job(tmp_path, data, small_fs):
    """Storing into a mapping of a file past the disk's end would raise SIGBUS in the job: the
    recorder reserves each block first, and when that fails it stops and says so."""
    out = small_fs / "prof"
    r = subprocess.run(
        CLI + ["-o", str(out), "--", *_job(data, "exit3", "--steps", "64")], capture_output=True, text=True, timeout=120
    )
    assert "the job failed with exit status 3" in r.stderr  # not killed by SIGBUS
    assert "the recorder stopped early in this process (No space left on device)" in r.stderr, r.stderr
    assert r.returncode in (1, 2), r.stderr  # 2 if too little was captured to infer anything


def test_a_path_longer_than_a_page_and_a_sigkill_right_after_it(tmp_path):
    """A name line longer than the recorder's first chunk (one page) gets a chunk of its own; the
    records and the name survive the SIGKILL that follows at once."""
    from dlio.profile.capture import capture_env
    from dlio.profile.parsers import OP_READ, load_trace

    # a path of over 4 KiB cannot be opened whole: the job opens its second half from the first
    first = tmp_path.joinpath(*[c * 250 for c in "abcdefgh"])
    first.mkdir(parents=True)
    second = os.path.join(*[c * 250 for c in "ijklmnop"], "q" * 60, "x.bin")
    dfd = os.open(first, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for k in range(1, 10):
            os.mkdir(os.path.join(*second.split("/")[:k]), dir_fd=dfd)
    except FileExistsError:
        pass
    with open(os.open(second, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dfd), "wb") as w:
        w.write(b"z" * 10000)
    os.close(dfd)
    f = f"{first}/{second}"
    raw = tmp_path / "raw"
    raw.mkdir()
    code = (
        "import os, signal, sys\n"
        "os.chdir(sys.argv[1])\n"
        "fd = os.open(sys.argv[2], os.O_RDONLY)\n"
        "n = len(os.read(fd, 10000))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(first), second], env=capture_env(str(raw)), timeout=60)
    assert r.returncode == -signal.SIGKILL
    tr = load_trace(str(raw))
    reads = tr.events[(tr.events["op"] == OP_READ) & (tr.paths[tr.events["file"]] == f)]
    assert len(f) > 4096 and [int(x) for x in reads["size"]] == [10000]


def test_ctrl_c_at_a_terminal_stops_the_job_once_and_keeps_the_capture(tmp_path, data):
    """A real Ctrl-C: profile and the job in the foreground of a pseudo-terminal, ^C typed on it.
    The terminal sends SIGINT to both; profile does not send a second one, waits for the job to
    end, analyses what it captured and exits 130."""
    import pty

    out, ready, seen = tmp_path / "prof", tmp_path / "ready", tmp_path / "sigints"
    counting = tmp_path / "counting.py"  # the job, counting the SIGINTs it gets for a second
    counting.write_text(
        "import os, runpy, signal, sys, threading\n"
        f"fd = os.open({str(seen)!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND)\n"
        "def got(signum, frame):\n"
        "    os.write(fd, b'1')\n"
        "    threading.Timer(1.0, os._exit, [130]).start()\n"
        "signal.signal(signal.SIGINT, got)\n"
        f"sys.argv = [{JOB!r}] + sys.argv[1:]\n"
        f"runpy.run_path({JOB!r}, run_name='__main__')\n"
    )
    job = _job(data, "wait", "--ready", str(ready))
    argv = CLI + ["-o", str(out), "--", sys.executable, str(counting), *job[2:]]
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader whose controlling terminal is the pty
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    text, t0 = b"", time.monotonic()
    try:
        while not ready.exists():
            assert time.monotonic() - t0 < 60, "the job never got ready"
            time.sleep(0.05)
        os.write(fd, b"\x03")  # ^C: SIGINT to the terminal's foreground process group
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: every process holding the terminal has exited
                break
            if not chunk:
                break
            text += chunk
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 130, text.decode(errors="replace")
    assert seen.read_bytes() == b"1"  # one SIGINT: the terminal's, not a second from profile
    log = text.decode(errors="replace")
    assert "Traceback" not in log.split("Captured")[-1]  # profile's own output (the job's may hold one)
    assert "dlio-fast: stopped because of SIGINT: the job was stopped" in log
    assert "profile was interrupted by SIGINT and stopped the job" in (out / "report.txt").read_text()
    assert yaml.safe_load((out / "workload.yaml").read_text())["reader"]["batch_size"] == BATCH
