"""dlio-fast io s3://... against a real Ceph RADOS Gateway (the s3_server fixture, tools/ceph-s3.sh)."""

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import one_line

pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")

from dlio.storage.s3 import client, settings  # noqa: E402


def _settings():
    return settings.resolve()


def count(bucket, prefix):
    return client.run_task(_settings(), {"task": "list", "bucket": bucket, "prefix": prefix})["count"]


def test_get_put_range_points(run_cli, bucket, tmp_path):
    js = tmp_path / "o.json"
    code, out, err = run_cli(
        "-q",
        "io",
        f"s3://{bucket}/bench",
        "--rw",
        "read,write,randread",
        "--bs",
        "64k",
        "--qd",
        "1,4",
        "--threads",
        "2",
        "--size",
        "2m",
        "--file-size",
        "1m",
        "--json",
        js,
        "--csv",
        tmp_path / "o.csv",
    )
    assert code == 0, err
    doc = json.loads(js.read_text())
    assert doc["complete"] and len(doc["points"]) == 6
    for r in doc["points"]:
        # --size 2m at 64 KiB per request over 2 threads: 16 requests each, every one counted once
        assert r["ops"] == 32 and r["errors"] == 0, r
        assert r["bytes"] == 32 * 65536
        assert r["lat_hist"]["count"] == r["ops"] == r["lat_ns"]["count"]
        assert r["bw_bytes_s"] == pytest.approx(r["bytes"] / r["runtime_s"])
        assert r["iops"] == pytest.approx(r["ops"] / r["runtime_s"])
        assert 0 < r["lat_ns"]["min"] <= r["lat_ns"]["p50"] <= r["lat_ns"]["max"]
        # no request can take longer than the whole point
        assert r["lat_ns"]["max"] <= r["runtime_s"] * 1e9
        if r["rw"] == "read":
            assert 0 < r["ttfb_ns"]["p50"] <= r["lat_ns"]["max"]
        assert r["object_size"] == (1 << 20 if r["rw"] == "randread" else 65536)
    assert "s3dlio" in out and "ttfb_p50" in out
    assert (tmp_path / "o.csv").read_text().count("\n") == 7
    assert count(bucket, "bench/") == 0, "test objects are removed afterwards"


def test_keep_leaves_objects_and_time_budget(run_cli, bucket):
    code, out, err = run_cli(
        "-q", "io", f"s3://{bucket}/k", "--bs", "4k", "--qd", "2", "--threads", "1", "--runtime", "300ms", "--keep"
    )
    assert code == 0, err
    # GET objects for 4 KiB: max(2*1*2, min(64, 256 MiB / 4 KiB)) = 64
    assert count(bucket, "k/") == 64


def test_kept_objects_are_reused_not_overwritten(bucket):
    # an io run with --keep leaves its test objects; the next run PUTs only those missing or of
    # another size (overwriting just before a GET point halves what the gateway serves)
    keys = [f"reuse/.dlio-fast-io/get-16/o{i}" for i in range(4)]
    put = {"task": "put_objects", "bucket": bucket}
    # what is written is read back once, untimed (the first GET after a PUT costs the server more)
    assert client.run_task(_settings(), {**put, "groups": [(16, keys)]}) == {"written": 4, "read_back": 4 * 16}
    assert client.run_task(_settings(), {**put, "groups": [(16, keys)]}) == {"written": 0, "read_back": 0}
    assert client.run_task(_settings(), {**put, "groups": [(8, keys[1:2])]})["written"] == 1
    assert (
        client.run_task(_settings(), {**put, "groups": [(16, keys + ["reuse/.dlio-fast-io/get-16/o9"])]})["written"]
        == 2
    ), "the object of the wrong size and the missing one"
    assert client.run_task(_settings(), {**put, "groups": [(16, keys)]})["written"] == 0, "all 16 bytes now"


def test_listing_over_1000_keys(bucket):
    keys = [f"many/o{i:05d}" for i in range(1100)]
    client.run_task(_settings(), {"task": "put_objects", "bucket": bucket, "groups": [(16, keys)], "inflight": 32})
    assert count(bucket, "many/") == 1100


def test_wrong_credentials(run_cli, bucket, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    code, out, err = run_cli("io", f"s3://{bucket}/w", "--size", "64k")
    assert code == 2
    line = one_line(err)
    assert "refused the credentials" in line and "SignatureDoesNotMatch" in line
    assert out == ""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testsecret")
    assert count(bucket, "w/") == 0, "nothing is written before the check"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "nobody")
    code, out, err = run_cli("io", f"s3://{bucket}/w", "--size", "64k")
    assert code == 2 and "InvalidAccessKeyId" in one_line(err)


def test_missing_bucket(run_cli, s3env):
    code, out, err = run_cli("io", "s3://no-such-bucket-here/x", "--size", "64k")
    assert code == 2
    assert "bucket 'no-such-bucket-here' does not exist" in one_line(err)


def test_refusals(run_cli, s3env, monkeypatch):
    code, _, err = run_cli("io", "s3://abc/x", "--cache", "drop")
    assert code == 2 and "--cache drop has no meaning on S3" in one_line(err)
    code, _, err = run_cli("io", "s3://abc/x", "--rw", "randwrite")
    assert code == 2 and "written whole" in one_line(err)
    code, _, err = run_cli("io", "s3://abc/x", "--direct", "--engine", "io_uring")
    line = one_line(err)
    assert code == 2 and "--engine (for files, --engine mpiio), --direct/--buffered (for files" in line
    assert "not used on s3:// paths; leave them out" in line
    code, _, err = run_cli("io", "s3://abc/x", "--rw", "randread", "--file-size", "6g")
    assert code == 2 and "--file-size 6GiB: range GETs read objects of at most 5GiB" in one_line(err)
    code, _, err = run_cli(
        "io", "s3://abc/x", "--bs", "64m", "--qd", "1024", "--threads", "64", "--endpoint", "http://0:1"
    )
    line = one_line(err)  # refused before the endpoint is tried
    assert code == 2 and "read of 64MiB x 1024 in flight x 64 threads" in line and "lower --bs, --qd" in line, line
    code, _, err = run_cli("io", "s3://A_b/x")
    assert code == 2 and "not a valid bucket name" in one_line(err)
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    code, _, err = run_cli("io", "s3://abc/x")
    assert code == 2 and "no S3 endpoint" in one_line(err)
    code, _, err = run_cli("io", "s3://abc/x", "--endpoint", "http://127.0.0.1:1")
    assert code == 2 and "cannot reach the S3 endpoint" in one_line(err)


def test_server_killed_mid_run(s3_server, tmp_path):
    """A second gateway, killed while the second point runs: one-line error, exit 1, JSON kept."""
    own = s3_server.module.CephS3(str(tmp_path / "ceph")).start()
    try:
        env = dict(os.environ, **own.aws_env(), AWS_MAX_ATTEMPTS="1")
        subprocess.run(
            [sys.executable, "-c", "import boto3, os; boto3.client('s3').create_bucket(Bucket='kill')"],
            env=env,
            check=True,
            timeout=60,
        )
        js = tmp_path / "k.json"
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dlio",
                "-q",
                "io",
                "s3://kill/p",
                "--bs",
                "64k",
                "--qd",
                "1,2",
                "--runtime",
                "3s",
                "--json",
                str(js),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines = []
        while len(lines) < 2:  # the header, then the first point's line
            line = p.stdout.readline()
            assert line, p.stderr.read()
            lines.append(line)
        time.sleep(0.5)  # the second point is running now
        own.stop()
        out, err = p.communicate(timeout=120)
    finally:
        own.stop()
    assert p.returncode == 1, err
    line = one_line(err)
    assert "failed" in line and "written (marked incomplete)" in line
    doc = json.loads(js.read_text())
    assert doc["complete"] is False
    assert len(doc["points"]) == 2
    first, second = doc["points"]
    assert first["ops"] > 0 and first["errors"] == 0 and "error" not in first
    assert second["error"] and second["errors"] >= 1


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_during_a_point_stops_the_grid_at_once(s3env, bucket, tmp_path, sig):
    """Ctrl-C / SIGTERM while an S3 point's worker runs: the worker is stopped, the result file is
    written (incomplete), exit 128 + signal, well before the 20 s point would have ended."""
    import signal

    js = tmp_path / "s.json"
    cmd = [sys.executable, "-m", "dlio", "-q", "io", f"s3://{bucket}/p", "--bs", "64k", "--qd", "1,2"]
    p = subprocess.Popen(
        [*cmd, "--runtime", "20s", "--json", str(js)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert p.stdout.readline(), p.stderr.read()  # the table's header: the first point starts now
    time.sleep(2.0)
    t0 = time.monotonic()
    p.send_signal(getattr(signal, sig))
    out, err = p.communicate(timeout=60)
    assert time.monotonic() - t0 < 10, "the S3 point ran on after the signal"
    assert p.returncode == 128 + getattr(signal, sig), err
    assert "Traceback" not in err and f"interrupted by {sig}" in err
    doc = json.loads(js.read_text())
    assert doc["complete"] is False and sig in doc["reason"] and doc["points"] == []
