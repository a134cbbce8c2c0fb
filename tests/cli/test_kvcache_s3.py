"""The KV-cache workload on S3 (storage.storage_type s3) against a real Ceph RADOS Gateway: the C engine
decides and times every request, the relay helper issues them. The bytes dlio-fast.json reports are the
bytes the gateway counted (its own perf counters), the op mix is the file run's for the same seed, the
run's objects are gone at the end, a missing bucket is one line, and the record says what does not
apply to objects (no fsync, no page cache)."""

import json
import os
import subprocess
import time

import pytest
from conftest import TINY_KV_CONFIG, on_s3, set_args
from conftest import s3_boto as boto

from dlio.storage.places import MARKER_TEXT
from dlio.storage.s3.lease import LEASE_S, REFRESHES_PER_LEASE

CONFIG = TINY_KV_CONFIG

pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")


def gateway(server):
    """The gateway's own counters: (PUT bytes, GET bytes, GETs, PUTs) since it started."""
    p = subprocess.run(
        ["ceph", "--admin-daemon", os.path.join(server.folder, "run", "client.rgw.a.asok"), "perf", "dump"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if p.returncode:
        pytest.skip(f"the gateway's perf counters are not readable: {p.stderr.strip()[:200]}")
    rgw = json.loads(p.stdout)["rgw"]
    return rgw["put_b"], rgw["get_b"], rgw["get"], rgw["put"]


def run_args(tmp_path, *more):
    cfg = tmp_path / "kv.yaml"
    cfg.write_text(CONFIG)
    return ["run", "--config", cfg, "-o", tmp_path / "out", *more]


def s3_args(tmp_path, bucket, *more):
    return run_args(tmp_path, *set_args(**on_s3(bucket)), *more)


def record(tmp_path, name="out"):
    with open(tmp_path / name / "dlio-fast.json") as f:
        (rec,) = json.load(f)["records"]
    return rec


def test_the_gateway_saw_the_bytes_the_run_reports(run_cli, s3env, bucket, tmp_path):
    s3 = boto(s3env)
    # Ceph Pacific's get_b counts one byte less than each GET sent: measured here, not assumed
    s3.put_object(Bucket=bucket, Key="probe", Body=b"x" * 1000)
    g0 = gateway(s3env)
    s3.get_object(Bucket=bucket, Key="probe")["Body"].read()
    per_get = 1000 - (gateway(s3env)[1] - g0[1])
    s3.delete_object(Bucket=bucket, Key="probe")

    before, t0 = gateway(s3env), time.monotonic()
    code, out, err = run_cli(*s3_args(tmp_path, bucket))
    after, wall = gateway(s3env), time.monotonic() - t0
    assert code == 0, err
    rec = record(tmp_path)
    c = rec["result"]["counts"]
    put_b, get_b, gets, puts = (a - b for a, b in zip(after, before))
    assert c["storage_writes"] > 0 and c["storage_reads"] > 0
    # besides the entries: the prefix's marker (one PUT) and its lock (a lease: one PUT, then one every
    # lease / 6 seconds while the run goes), each a document of about a hundred bytes
    extra, extra_b = puts - c["storage_writes"] - c["demotions"], put_b - c["storage_write_bytes"] - c["demote_bytes"]
    assert 2 <= extra <= 2 + wall // (LEASE_S / REFRESHES_PER_LEASE), (extra, wall)
    assert len(MARKER_TEXT) + (extra - 1) * 60 <= extra_b <= len(MARKER_TEXT) + (extra - 1) * 200
    # and the lock read as it is taken, before each refresh and before it is deleted (it names this run)
    lock_gets = gets - c["storage_reads"]
    assert lock_gets == 1 + (extra - 2) + 1, (gets, extra)
    assert 60 * lock_gets <= get_b + per_get * gets - c["storage_read_bytes"] <= 200 * lock_gets
    # the helper issued what the engine counted, and every request was timed by the engine
    relay = rec["relay"]
    assert relay["put_bytes"] == put_b - extra_b and relay["gets"] == gets - lock_gets and relay["first_error"] is None
    assert rec["result"]["hists"]["storage_read"]["count"] == c["storage_reads"]
    # what does not apply to objects is said, not faked
    assert rec["attestation"]["not_applicable"].startswith("n/a (object store; no page cache)")
    assert rec["window"]["target"]["kind"] == "none" and "object store" in rec["window"]["target"]["why"]
    assert "Attestation (trial 0, rank 0): n/a (object store; no page cache)" in out
    assert "through the relay" in out
    # the run's objects are gone (the reference deletes its entries)
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    code, out, err = run_cli("check", tmp_path / "out")
    assert code == 0 and "PASS  attestation (trial 0, rank 0): n/a (object store" in out, out + err


def seed_trace(path, seed=42, entries=16):
    """A plan drawn from the seed, as the reference's --io-trace-log CSV: each entry (tiny-1b, 40-160
    tokens) written, read back 1-3 times (decode), and the one before it read again (the next turn)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows, t, prev = ["Timestamp,Operation,Object_Size_Bytes,Tier,Key,Phase"], 1.0e9, 0
    for i in range(entries):
        size = int(rng.integers(40, 161)) * 24576
        rows.append(f"{t:.6f},Write,{size},Tier-2,conv_user_{i:04d}_turn_1,Prefill")
        for _ in range(int(rng.integers(1, 4))):
            t += 0.001
            rows.append(f"{t:.6f},Read,{size},Tier-2,conv_user_{i:04d}_turn_1,Decode")
        if i:
            t += 0.001
            rows.append(f"{t:.6f},Read,{prev},Tier-2,conv_user_{i - 1:04d}_turn_1,Prefill")
        prev, t = size, t + 0.01
    path.write_text("\n".join(rows) + "\n")


def test_same_seed_same_op_mix_as_on_files(run_cli, s3env, bucket, tmp_path):
    """The seed's plan (as a trace) replayed on files and on S3, as fast as possible on one worker: the
    same operations, object sizes and keys in the same order, so the same op mix."""
    from dlio.kvcache import oplog

    seed_ops = tmp_path / "seed.csv"
    seed_trace(seed_ops)
    replay = ("--set", f"kvcache.trace={seed_ops}", "--set", "kvcache.trace_timing=asap", "--set", "kvcache.workers=1")
    replay += ("--set", "kvcache.duration=120")
    logs = {}
    for where in ("files", "s3"):
        logs[where] = tmp_path / f"{where}.csv"
        more = ("--set", f"kvcache.io_trace_log={logs[where]}", "-o", tmp_path / where)
        if where == "files":
            code, _, err = run_cli(*run_args(tmp_path, "--set", f"kvcache.cache_dir={tmp_path}/cache", *replay, *more))
        else:
            code, _, err = run_cli(*s3_args(tmp_path, bucket, *replay, *more))
        assert code == 0, err
    (f, fkeys), (s, skeys) = oplog.read_csv(str(logs["files"])), oplog.read_csv(str(logs["s3"]))
    assert len(f) > 40 and (f["size"] > 0).all()
    for col in ("op", "size", "tier"):
        assert (f[col] == s[col]).all(), col
    assert [fkeys[i] for i in f["key"]] == [skeys[i] for i in s["key"]]
    fm, sm = oplog.mix(f), oplog.mix(s)
    for k in ("reads", "writes", "reads_per_write", "read_write_bytes", "reads_per_key"):
        assert fm[k] == sm[k], k
    fc, sc = record(tmp_path, "files")["result"]["counts"], record(tmp_path, "s3")["result"]["counts"]
    for k in ("storage_reads", "storage_writes", "storage_read_bytes", "storage_write_bytes"):
        assert fc[k] == sc[k] > 0, k


def test_a_missing_bucket_is_one_line(run_cli, s3env, tmp_path):
    code, out, err = run_cli(*s3_args(tmp_path, "no-such-kv-bucket"))
    lines = [x for x in err.strip().splitlines() if x.strip() and not x.startswith("warning:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    line = lines[0]
    assert code in (1, 2) and "no-such-kv-bucket" in line and "does not exist" in line, err
    assert not (tmp_path / "out").exists()
