"""The KV cache's prefix on S3 is claimed as a folder is (issue 40), against a real Ceph RADOS Gateway:
a prefix holding objects of the run's names that no dlio-fast run made is refused before anything is
written or deleted; the relay removes only the run's own objects; the prefix is locked by a lease object
(a conditional PUT), so a second run on it at once is refused naming the first, and a stale lease (its
holder gone) is taken over with a note."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import TINY_KV_CONFIG, on_s3, one_line, s3_keys, set_args
from conftest import s3_boto as boto

pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")

LOCK = "kvc/rank_0/.dlio-fast-place.lock"


def kv_args(tmp_path, bucket, *more, out="out"):
    cfg = tmp_path / "kv.yaml"
    cfg.write_text(TINY_KV_CONFIG)
    return ["run", "--config", cfg, "-o", tmp_path / out, *set_args("kvcache.cache_dir=kvc", *more, **on_s3(bucket))]


def _first_run(s3env, bucket, tmp_path, log, **env):
    """A 60 s KV run on the prefix, started in the background and waited for until it holds its lock and has
    made its output folder."""
    first = subprocess.Popen(
        [sys.executable, "-m", "dlio", *map(str, kv_args(tmp_path, bucket, "kvcache.duration=60", out="one"))],
        stdout=subprocess.DEVNULL,
        stderr=log,
        env=dict(os.environ, **env),
    )
    deadline = time.monotonic() + 120
    while not (tmp_path / "one").exists() or LOCK not in s3_keys(s3env, bucket, "kvc/"):
        if first.poll() is not None or time.monotonic() > deadline:
            first.kill()
            pytest.fail("the first run never took its lock: " + open(tmp_path / "first.err").read())
        time.sleep(0.1)
    return first


def test_a_kv_run_refuses_a_prefix_holding_a_users_object_and_leaves_it(run_cli, s3env, bucket, tmp_path):
    s3 = boto(s3env)
    mine = os.urandom(5000)
    s3.put_object(Bucket=bucket, Key="kvc/rank_0/kv_00000000.bin", Body=mine)
    code, out, err = run_cli(*kv_args(tmp_path, bucket))
    assert code != 0
    line = one_line(err)
    assert "kvc/rank_0" in line and "kv_00000000.bin" in line and "no dlio-fast run made" in line, err
    assert "kvcache.cache_dir" in line and "Traceback" not in err
    # the user's object byte for byte, and nothing of the run's (no marker, no lock, no entry)
    assert s3.get_object(Bucket=bucket, Key="kvc/rank_0/kv_00000000.bin")["Body"].read() == mine
    assert sorted(s3_keys(s3env, bucket, "")) == ["kvc/rank_0/kv_00000000.bin"]


def test_a_kv_run_removes_only_its_own_objects(run_cli, s3env, bucket, tmp_path):
    s3 = boto(s3env)
    notes = b"my notes, not a KV entry\n"
    s3.put_object(Bucket=bucket, Key="kvc/rank_0/notes.txt", Body=notes)
    s3.put_object(Bucket=bucket, Key="kvc/rank_0/sub/kv_00000001.bin", Body=b"deeper: not the run's")
    code, out, err = run_cli(*kv_args(tmp_path, bucket))
    assert code == 0, err
    with open(tmp_path / "out" / "dlio-fast.json") as f:
        (rec,) = json.load(f)["records"]
    assert rec["result"]["counts"]["storage_writes"] > 0  # the run wrote entries there, and removed them
    assert sorted(s3_keys(s3env, bucket, "")) == ["kvc/rank_0/notes.txt", "kvc/rank_0/sub/kv_00000001.bin"]
    assert s3.get_object(Bucket=bucket, Key="kvc/rank_0/notes.txt")["Body"].read() == notes


def test_a_second_run_on_the_prefix_is_refused_naming_the_first(dlio_cmd, s3env, bucket, tmp_path):
    s3 = boto(s3env)
    log = open(tmp_path / "first.err", "w")
    first = _first_run(s3env, bucket, tmp_path, log)
    try:
        held = json.loads(s3.get_object(Bucket=bucket, Key=LOCK)["Body"].read())
        assert held["pid"] == first.pid and held["expires"] > time.time()
        code, out, err = dlio_cmd(*kv_args(tmp_path, bucket, out="two"), timeout=120)
        assert code != 0
        line = one_line(err)
        assert f"pid {first.pid}" in line and "another dlio-fast run" in line and "lease ends at" in line, err
        assert "kvcache.cache_dir" in line and not os.path.exists(tmp_path / "two" / "dlio-fast.json")
        assert first.poll() is None  # the first goes on
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=60)
        log.close()
    # Ctrl-C released the lock
    assert LOCK not in s3_keys(s3env, bucket, "kvc/")


def test_a_stale_lease_is_taken_over_with_a_note(run_cli, s3env, bucket, tmp_path):
    s3 = boto(s3env)
    ended = time.time() - 5
    gone = {"host": "gone-host", "pid": 4194301, "started": ended - 100, "expires": ended}
    s3.put_object(Bucket=bucket, Key=LOCK, Body=json.dumps(gone).encode())
    code, out, err = run_cli(*kv_args(tmp_path, bucket))
    assert code == 0, err
    said = out + err
    assert "host gone-host, pid 4194301" in said and "is taken over" in said, said
    assert LOCK not in s3_keys(s3env, bucket, "kvc/")  # released at the end


def test_a_run_paused_past_its_lease_stops_when_its_lock_was_taken_over(s3env, bucket, tmp_path):
    """A run frozen (SIGSTOP) longer than its lease has lost the lock: another run took it over meanwhile.
    When it goes on it stops at its next refresh as a stop signal would, keeps what it measured marked
    incomplete with the reason, and leaves the other run's lock alone (it used to rewrite and delete it)."""
    s3 = boto(s3env)
    log = open(tmp_path / "first.err", "w")
    first = _first_run(s3env, bucket, tmp_path, log, DLIO_FAST_LEASE_S="3")
    try:
        time.sleep(2)  # measuring
        first.send_signal(signal.SIGSTOP)
        time.sleep(3.5)  # past its lease: the next run takes the lock over
        other = {"host": "other-host", "pid": 4194302, "started": time.time(), "expires": time.time() + 60}
        s3.put_object(Bucket=bucket, Key=LOCK, Body=json.dumps(other).encode())
        resumed = time.monotonic()
        first.send_signal(signal.SIGCONT)
        code = first.wait(timeout=30)
        stopped_s = time.monotonic() - resumed
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        log.close()
    err = open(tmp_path / "first.err").read()
    assert code == 128 + signal.SIGTERM and "Traceback" not in err, err
    assert stopped_s < 3.0 + 1.5, stopped_s  # its refresh (lease / 6) and the stop within a tick
    assert "taken over by another run (host other-host, pid 4194302" in err, err
    with open(tmp_path / "one" / "dlio-fast.json") as f:
        doc = json.load(f)
    assert doc["complete"] is False and "taken over by another run" in json.dumps(doc)
    assert json.loads(s3.get_object(Bucket=bucket, Key=LOCK)["Body"].read())["host"] == "other-host"


@pytest.mark.parametrize("value", ["0", "nan", "1e9", "soon"])
def test_a_bad_lease_length_is_refused_by_name(dlio_cmd, s3env, bucket, tmp_path, value):
    code, _, err = dlio_cmd(*kv_args(tmp_path, bucket), env={"DLIO_FAST_LEASE_S": value}, timeout=120)
    assert code == 2 and "Traceback" not in err, err
    assert "DLIO_FAST_LEASE_S" in one_line(err) and value in err
    assert LOCK not in s3_keys(s3env, bucket, "kvc/") and not (tmp_path / "out" / "dlio-fast.json").exists()
