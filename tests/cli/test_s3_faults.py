"""S3 storage that stops answering, and the host's limits (issue 33): every request and worker message has
a deadline on silence; a frozen (SIGSTOP) gateway ends `io` and `run` with one line naming the endpoint,
what was being done, the timeout and how to raise it, exit status 1, and what was measured kept; a stop
signal during a stalled request ends the run within seconds; a task message of any size reaches the
worker; the open files that the requests in flight need are checked against RLIMIT_NOFILE."""

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO, on_s3, one_line, s3_workload, set_args
from conftest import s3_boto as boto

pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")


@pytest.fixture(scope="module")
def own(s3_server, tmp_path_factory):
    """A gateway of this module's own: frozen and thawed by the tests (the session's is shared)."""
    g = s3_server.module.CephS3(str(tmp_path_factory.mktemp("ceph-own"))).start()
    try:
        yield g
    finally:
        g.stop()


def make_bucket(g, name):
    try:
        boto(g).create_bucket(Bucket=name)
    except Exception as e:
        if "BucketAlreadyOwnedByYou" not in str(e):
            raise


@contextlib.contextmanager
def frozen(g):
    """The gateway's radosgw stopped (SIGSTOP: connections are accepted by the kernel, never answered)."""
    with open(os.path.join(g.folder, "run", "client.rgw.a.pid")) as f:
        pid = int(f.read())
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def dlio(args, env, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "dlio", *map(str, args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        **kw,
    )


def finish(p, timeout):
    """(stdout, stderr, seconds it took) of a process that must end within `timeout` (killed if not)."""
    t0 = time.monotonic()
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"still running {timeout} s later: {err[-2000:]}")
    return out, err, time.monotonic() - t0


def test_io_on_a_frozen_server_ends_at_its_deadline_and_keeps_the_points(own, tmp_path):
    make_bucket(own, "frozen-io")
    js = tmp_path / "f.json"
    env = dict(os.environ, **own.aws_env())
    args = ["-q", "io", "s3://frozen-io/p", "--bs", "64k", "--qd", "1,2", "--runtime", "1s", "--timeout", "3s"]
    p = dlio([*args, "--json", js], env)
    lines = []
    while len(lines) < 2:  # the header, then the first point's row: the second point runs now
        line = p.stdout.readline()
        assert line, p.stderr.read()
        lines.append(line)
    time.sleep(0.3)
    with frozen(own):
        out, err, took = finish(p, 40)
    assert p.returncode == 1, err
    line = one_line(err)
    assert own.endpoint in line and "did not answer for 3 s" in line, line
    assert "GET of 64KiB objects, 2 in flight x 1 threads" in line and "raise --timeout (now 3 s)" in line, line
    assert took < 3 + 15, took
    doc = json.loads(js.read_text())
    assert doc["complete"] is False
    first, second = doc["points"]
    assert first["ops"] > 0 and first["errors"] == 0 and "error" not in first
    assert "did not answer" in second["error"]


def _config(tmp_path, bucket, **over):
    sections = {
        "model": {"name": "s3-faults"},
        "dataset": {"data_folder": "d", "num_files_train": 30, "record_length_bytes": 4096},
        "reader": {"batch_size": 1, "read_threads": 1, "prefetch_size": 1},
        "train": {"epochs": 2, "computation_time": 0.1},
    }
    return s3_workload(tmp_path / "w.yaml", bucket, sections, **over)


def _wait_for(path, text, p, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text():
            return
        assert p.poll() is None, p.stderr.read()
        time.sleep(0.05)
    pytest.fail(f"no {text!r} in {path}")


def _run_until(tmp_path, own, bucket, text, *extra, **over):
    """`dlio-fast run` of a small S3 workload started, once `text` is in its output (stdout to a file)."""
    make_bucket(own, bucket)
    cfg = _config(tmp_path, bucket, **over)
    log = tmp_path / "stdout.txt"
    env = dict(os.environ, **own.aws_env())
    with open(log, "w") as lf:
        p = subprocess.Popen(
            [sys.executable, "-m", "dlio", "run", "--config", cfg, "-o", tmp_path / "o", *extra],
            stdout=lf,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
    _wait_for(log, text, p)
    return p


def _steps_done(live_csv):
    """The training steps the live CSV has shown so far."""
    if not os.path.exists(live_csv):
        return 0
    with open(live_csv) as f:
        rows = [ln.split(",") for ln in f.read().splitlines()[1:]]
    return max([int(r[4]) for r in rows if len(r) > 4 and r[2] == "train"] or [0])


def _result(folder):
    with open(os.path.join(folder, "dlio-fast.json")) as f:
        return json.load(f)


def test_run_on_a_frozen_server_ends_at_its_deadline_and_keeps_the_epochs(own, tmp_path):
    p = _run_until(tmp_path, own, "frozen-run", "Ending epoch 1", "--set", "dlio_fast.storage_timeout=3")
    time.sleep(0.5)  # some steps of epoch 2
    with frozen(own):
        _, err, took = finish(p, 60)
    assert p.returncode == 1, err
    line = one_line(err)
    assert own.endpoint in line and "did not answer for 3 s while GETs of training batches" in line, line
    assert "raise dlio_fast.storage_timeout (now 3 s)" in line, line
    assert took < 3 + 20, took
    doc = _result(tmp_path / "o")
    assert doc["complete"] is False
    epochs = doc["ranks"][0]["epochs"]
    assert epochs[0]["complete"] and epochs[0]["steps_done"] == 30
    if len(epochs) > 1:  # the steps of epoch 2 measured before the freeze
        assert not epochs[1]["complete"] and 0 < epochs[1]["steps_done"] < 30


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_during_a_stalled_request_stops_within_seconds(own, tmp_path, sig):
    """The deadline is a minute (the default), the server frozen mid-epoch: the signal stops the worker
    (killed after a short grace), and the steps it measured are in the results."""
    live = tmp_path / "live.csv"
    p = _run_until(tmp_path, own, "stalled-run", "Starting epoch 1", "--live-csv", live, "--status-interval", "0.2")
    deadline = time.monotonic() + 60
    while not _steps_done(live) >= 3:  # some steps measured (0.1 s of compute each)
        assert time.monotonic() < deadline and p.poll() is None, p.stderr.read()
        time.sleep(0.05)
    with frozen(own):
        time.sleep(1.0)  # the loader's GET is stalled now
        t0 = time.monotonic()
        p.send_signal(getattr(signal, sig))
        _, err, _ = finish(p, 60)
        took = time.monotonic() - t0
    assert p.returncode == 128 + getattr(signal, sig), err
    assert took < 2, f"stopping took {took:.1f} s"  # the stalled worker is not waited for (it took 2.6-6.5 s)
    assert "Traceback" not in err
    doc = _result(tmp_path / "o")
    assert doc["complete"] is False
    ep = doc["ranks"][0]["epochs"][0]
    assert 0 < ep["steps_done"] < 30 and not ep["complete"]


def test_a_large_task_message_reaches_the_worker(s3_server):
    """A task of megabytes (a grid point's keys at 64 threads x qd 1024 are ~5 MB) is handed over whole:
    today's worker got the first pipe buffer and waited forever for the rest."""
    make_bucket(s3_server, "large-task")
    code = (
        "from dlio.storage.s3 import client, settings\n"
        "print(client.run_task(settings.resolve(), {'task': 'list', 'bucket': 'large-task', 'prefix': 'x/', "
        "'pad': 'k' * (6 << 20)}))\n"
    )
    env = dict(os.environ, **s3_server.aws_env())
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.returncode == 0 and "'count': 0" in p.stdout, p.stderr[-2000:]


def _low_files(soft, hard):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_open_files_beyond_the_hard_limit_are_refused_before_any_request(s3_server):
    """ulimit -n 300 (soft and hard) and 400 requests in flight: one line naming the limit, the command to
    raise it and a lower --qd; exit status 2; no object written (today: EMFILE blamed on the endpoint)."""
    make_bucket(s3_server, "files-hard")
    env = dict(os.environ, **s3_server.aws_env())
    p = subprocess.run(
        [sys.executable, "-m", "dlio", "io", "s3://files-hard/p", "--bs", "4k", "--qd", "400", "--runtime", "1s"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        preexec_fn=_low_files(300, 300),
    )
    assert p.returncode == 2, p.stderr
    line = one_line(p.stderr)
    assert "RLIMIT_NOFILE" in line and "ulimit -n" in line and "lower --qd or --threads" in line, line
    assert "400 requests in flight" in line and "300" in line, line
    assert "endpoint" not in line, line
    assert boto(s3_server).list_objects_v2(Bucket="files-hard").get("KeyCount", 0) == 0


def test_the_soft_open_file_limit_is_raised_up_to_the_hard_one(s3_server, tmp_path):
    """ulimit -Sn 128 with a hard limit of 4096: 300 requests in flight run (the worker raises its soft
    limit), every request counted, no error."""
    make_bucket(s3_server, "files-soft")
    env = dict(os.environ, **s3_server.aws_env())
    js = tmp_path / "s.json"
    args = ["io", "s3://files-soft/p", "--bs", "4k", "--qd", "300", "--size", "1200k", "--json", js]
    p = subprocess.run(
        [sys.executable, "-m", "dlio", "-q", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        preexec_fn=_low_files(128, 4096),
    )
    assert p.returncode == 0, p.stderr
    (pt,) = json.loads(js.read_text())["points"]
    assert pt["ops"] == 300 and pt["errors"] == 0, pt


def test_missing_bucket_says_how_to_create_it_and_create_bucket_does(s3_server, tmp_path):
    env = dict(os.environ, **s3_server.aws_env())
    args = ["io", "s3://made-by-io/p", "--rw", "write", "--bs", "4k", "--size", "16k"]
    p = subprocess.run([sys.executable, "-m", "dlio", *args], env=env, capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 2
    line = one_line(p.stderr)
    assert "bucket 'made-by-io' does not exist" in line and "--create-bucket" in line, line
    assert f"aws s3 mb s3://made-by-io --endpoint-url {s3_server.endpoint}" in line, line
    assert "create_bucket(Bucket='made-by-io')" in line, line
    p = subprocess.run(
        [sys.executable, "-m", "dlio", "-q", *args, "--create-bucket"],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert p.returncode == 0, p.stderr
    boto(s3_server).head_bucket(Bucket="made-by-io")


def test_generate_creates_the_bucket_on_request(s3_server, tmp_path):
    env = dict(os.environ, **s3_server.aws_env())
    cfg = _config(tmp_path, "made-by-generate", dataset__num_files_train=4)
    cmd = [sys.executable, "-m", "dlio", "-q", "generate", "--config", str(cfg)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 2 and "--create-bucket" in one_line(p.stderr)
    p = subprocess.run([*cmd, "--create-bucket"], env=env, capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr
    keys = boto(s3_server).list_objects_v2(Bucket="made-by-generate", Prefix="d/train/")["KeyCount"]
    assert keys == 4


def test_create_bucket_and_timeout_are_refused_where_they_mean_nothing(run_cli, tmp_path):
    code, _, err = run_cli("io", tmp_path, "--create-bucket")
    assert code == 2 and "--create-bucket is for s3:// paths only" in one_line(err)
    code, _, err = run_cli("io", tmp_path, "--timeout", "5s")
    assert code == 2 and "--timeout is for s3:// paths only" in one_line(err)
    code, _, err = run_cli("io", "s3://abc/x", "--timeout", "0.5s", "--endpoint", "http://127.0.0.1:1")
    assert code == 2 and "--timeout 0.5s: must be between 1 s and 86400 s" in one_line(err)
    code, _, err = run_cli(
        "generate", "-w", "default", "--set", f"dataset.data_folder={tmp_path / 'd'}", "--create-bucket"
    )
    line = one_line(err)
    assert code == 2 and "dlio_fast.create_bucket = true: not available on files" in line, line


def test_checkpoint_only_keeps_the_saves_done_when_the_server_freezes(own, tmp_path):
    """Save 1 done, the gateway frozen before save 2: exit 1 at the deadline with the line naming the PUT,
    and save 1's record in the results."""
    make_bucket(own, "frozen-ckpt")
    env = dict(os.environ, **own.aws_env())
    log = tmp_path / "stdout.txt"
    args = [
        *("run", "-w", "unet3d", "--output", tmp_path / "o"),
        *set_args(**on_s3("frozen-ckpt")),
        *("--set", "workflow.train=false", "--set", "workflow.generate_data=false"),
        *("--set", "workflow.checkpoint=true", "--set", "checkpoint.checkpoint_folder=s3://frozen-ckpt/ck"),
        *("--set", "checkpoint.num_checkpoints_write=2", "--set", "checkpoint.num_checkpoints_read=1"),
        *("--set", "checkpoint.time_between_checkpoints=1.0", "--set", "model.model_size=1000000"),
        *("--set", "dlio_fast.storage_timeout=3"),
    ]
    with open(log, "w") as lf:
        p = subprocess.Popen(
            [sys.executable, "-m", "dlio", *map(str, args)], stdout=lf, stderr=subprocess.PIPE, text=True, env=env
        )
    _wait_for(log, "Checkpoint 1 save", p)
    with frozen(own):
        _, err, took = finish(p, 60)
    assert p.returncode == 1, err
    line = one_line(err)
    assert own.endpoint in line and "did not answer for 3 s while PUT of 1 checkpoint objects" in line, line
    assert "global_epoch1_step2" in line and "raise dlio_fast.storage_timeout" in line, line
    assert took < 1 + 3 + 15, took
    doc = _result(tmp_path / "o")
    assert doc["complete"] is False
    (save1,) = doc["ranks"][0]["checkpoints"]
    assert save1["kind"] == "save" and save1["bytes"] > 1_000_000
