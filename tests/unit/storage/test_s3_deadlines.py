"""The S3 client's deadlines and limits without a gateway: settings, error classes, the open-file check,
the silence watch, the shared counters, a cut-short op-log, the workers' CPU in a phase's counters, and
a worker facing a server that accepts connections and never answers (a listening socket nobody reads)."""

import io
import os
import resource
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from dlio.base.errors import DlioError
from dlio.report import verdict
from dlio.storage.s3 import client, deadline, failures, limits, oplog, settings, shared

ENV = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "ak", "AWS_SECRET_ACCESS_KEY": "sk"}


def test_the_timeout_reaches_the_client_library():
    env = settings.resolve(environ=ENV, timeout_s=2.5, timeout_key="--timeout").child_env()
    assert env["S3DLIO_OPERATION_TIMEOUT_SECS"] == "3"  # whole seconds, rounded up
    assert env["S3DLIO_CONNECT_TIMEOUT_SECS"] == "3"
    env = settings.resolve(environ=ENV).child_env()  # the default: a minute, connects at most 20 s
    assert (env["S3DLIO_OPERATION_TIMEOUT_SECS"], env["S3DLIO_CONNECT_TIMEOUT_SECS"]) == ("60", "20")
    s = settings.resolve(environ=ENV, timeout_s=7, timeout_key="--timeout")
    assert (s.timeout_s, s.timeout_key) == (7.0, "--timeout")


@pytest.mark.parametrize(
    "message,kind",
    [
        ("dispatch failure (io error: Too many open files (os error 24)) connection", "files"),
        ("dispatch failure: os error 23", "files"),
        ("dispatch failure (connection timeout: tcp connect error: Connection refused (os error 111))", "connect"),
        ("S3 GET for s3://b/k failed: request timed out after 5s — increase S3DLIO_OPERATION_TIMEOUT_SECS", "timeout"),
        ("streaming error: minimum throughput was specified at 1 B/s, but throughput of 0 B/s", "timeout"),
        ("service error: NoSuchBucket", "bucket"),
        ("service error: SignatureDoesNotMatch", "auth"),
    ],
)
def test_error_classes(message, kind):
    """EMFILE / ENFILE are this host's limit, never the endpoint's fault (they come inside connect errors)."""
    assert failures.classify(message) == kind


def test_open_files_checked_against_the_hard_limit(monkeypatch):
    monkeypatch.setattr(resource, "getrlimit", lambda r: (100, 300))
    assert limits.check_open_files(40, "x", "y") == 40 + limits.BASE_FILES  # the worker raises its soft limit
    with pytest.raises(DlioError) as e:
        limits.check_open_files(400, "--qd 400 x --threads 1", "lower --qd or --threads")
    msg = str(e.value)
    assert "400 requests in flight need about 656 open files" in msg and "allows 300" in msg
    assert "RLIMIT_NOFILE" in msg and "ulimit -n 656" in msg and "lower --qd or --threads" in msg
    monkeypatch.setattr(resource, "getrlimit", lambda r: (100, resource.RLIM_INFINITY))
    assert limits.check_open_files(10**6, "x", "y") == 10**6 + limits.BASE_FILES


def test_the_worker_raises_its_soft_limit_up_to_the_hard_one():
    code = (
        "import resource; from dlio.storage.s3 import limits\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 2000))\n"
        "limits.raise_soft_limit(1500); print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
        "limits.raise_soft_limit(5000); print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 2000:
        pytest.skip("the hard open-file limit here is below 2000")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1500", "2000"]


def test_counters_shared_with_the_worker(tmp_path):
    path = shared.create(str(tmp_path))
    w, r = shared.Counters(path, write=True), shared.Counters(path)
    w.start_cpu()
    w.add(3, 300)
    w.add(1, 100, steps=1)
    assert r.progress() == (4, 400, 1)
    sig = r.signature()
    w.beat()
    assert r.signature() != sig  # a beat is a sign of life
    w.words[shared.CPU0_USER_NS], w.words[shared.CPU0_SYS_NS] = 1_000_000_000, 500_000_000
    w.spun(2_000_000_000)
    # whole-life rusage 5 s user, 1 s sys: less 1 s before the task, less 2 s of compute spin
    assert r.task_cpu(5.0, 1.0) == pytest.approx((2.0, 0.5))


def test_silence_counts_from_the_last_sign_of_life(tmp_path):
    """A sleeping process is silent; one that keeps reading is not; a counter that moves is a sign too."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    reader = subprocess.Popen(
        [sys.executable, "-c", "import time\nwhile True:\n open('/proc/self/stat').read(); time.sleep(0.02)"]
    )
    path = shared.create(str(tmp_path))
    try:
        time.sleep(0.3)  # both started
        quiet = deadline.Silence(sleeper.pid, shared.Counters(path))
        busy = deadline.Silence(reader.pid)
        time.sleep(0.6)
        assert quiet.seconds() >= 0.5
        assert busy.seconds() < 0.3
        shared.Counters(path, write=True).add(1, 10)
        assert quiet.seconds() < 0.1
    finally:
        sleeper.kill()
        reader.kill()
        sleeper.wait()
        reader.wait()
    msg = deadline.silence_message("http://h:1", 3.0, "GET of 4KiB objects", "--timeout")
    assert (
        msg == "http://h:1 did not answer for 3 s while GET of 4KiB objects; if the server is only slow, raise "
        "--timeout (now 3 s)"
    )


def test_an_op_log_cut_short_keeps_its_whole_rows(tmp_path):
    zstandard = pytest.importorskip("zstandard")
    head = "\t".join(oplog.COLUMNS)
    t = "2026-11-30T20:00:00.000001000Z"
    rows = [
        "\t".join([str(i), "1", "GET", "c", "1", str(1000 + i), "e", "f", "", t, t, t, str(5000 + 7 * i)])
        for i in range(20000)
    ]
    text = (head + "\n" + "\n".join(rows) + "\n").encode()
    buf = io.BytesIO()
    w = zstandard.ZstdCompressor().stream_writer(buf, closefd=False)
    for i in range(0, len(text), 4096):
        w.write(text[i : i + 4096])
    w.close()
    data = buf.getvalue()
    p = tmp_path / "log.zst"
    p.write_bytes(data)
    assert len(oplog.read(str(p))["op"]) == 20000
    p.write_bytes(data[: len(data) // 2])  # a worker killed at its deadline: the rows written whole so far
    got = oplog.read(str(p))
    assert 0 < len(got["op"]) < 20000
    assert (got["bytes"] == 1000 + np.arange(len(got["op"]))).all()
    p.write_bytes(data[:10])
    assert len(oplog.read(str(p))["op"]) == 0


def test_a_phase_on_s3_counts_the_workers_cpu_as_the_clients(monkeypatch):
    """The S3 workers read for this process: 1.8 cores of theirs over a phase are this process's, so the
    verdict is client-bound (process), not 'other processes' (usability bug 5)."""
    from dlio.storage.s3.backend import WorkerPhase

    monkeypatch.setattr(client, "WORKER_CPU", [10.0, 2.0])
    ph = WorkerPhase("s3dlio")
    time.sleep(0.2)
    wall = 0.2
    client.WORKER_CPU[0] += 1.5 * wall
    client.WORKER_CPU[1] += 0.3 * wall
    c = ph.end(1 << 20, 100, None, 2)
    assert c["worker_cpu_s"] >= 1.8 * wall  # the workers' own CPU (user + sys), the benchmark's
    assert c["target"]["kind"] == "none" and "object store" in c["target"]["why"]
    c.update(cores=2, host_cpus=2, host_busy_share=1.0, wall_s=wall)  # a full 2-core host, as measured
    v = verdict.classify(c)
    assert v["verdict"] == "client-bound" and v["part"] in ("process", "reader threads", "this process"), v


@pytest.fixture
def silent_endpoint():
    """A server that accepts connections (the kernel does) and never answers: a frozen gateway."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    try:
        yield f"http://127.0.0.1:{s.getsockname()[1]}"
    finally:
        s.close()


def test_a_worker_facing_a_silent_server_is_stopped_at_the_deadline(silent_endpoint):
    pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]'")
    s = settings.resolve(silent_endpoint, environ={**ENV, "AWS_ENDPOINT_URL": ""}, timeout_s=2, timeout_key="--timeout")
    t0 = time.monotonic()
    with pytest.raises(client.WorkerFailed) as e:
        client.run_task(s, {"task": "check", "bucket": "bkt", "prefix": "p/"}, "listing s3://bkt/p/")
    took = time.monotonic() - t0
    assert e.value.kind == "timeout"
    assert str(e.value) == (
        f"{silent_endpoint} did not answer for 2 s while listing s3://bkt/p/; if the server is only slow, raise "
        "--timeout (now 2 s)"
    )
    assert 2 <= took < 2 + 6, took
    assert client.WORKER_CPU[0] + client.WORKER_CPU[1] >= 0


def test_a_stopped_worker_is_gone_within_the_grace(silent_endpoint):
    pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]'")
    s = settings.resolve(silent_endpoint, environ={**ENV, "AWS_ENDPOINT_URL": ""}, timeout_s=60)
    sess = client.Session(s, {"task": "check", "bucket": "bkt", "prefix": "p/"})
    time.sleep(0.5)
    t0 = time.monotonic()
    sess.request_stop()
    assert sess.reply() is None  # stopped: no answer, no error
    sess.close()
    assert time.monotonic() - t0 < client.STOP_GRACE_S + 1.5
    assert sess.proc.returncode is not None
    assert not os.path.exists(sess.dir)
