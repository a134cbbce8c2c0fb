"""Traces: the reference's --io-trace-log CSV (a real one, recorded from the reference), Mooncake and
ShareGPT shapes, into plans; their replay through the engine reproduces their operations."""

import gzip
import json
import os

import numpy as np
import pytest

from dlio import _core
from dlio.base.errors import DlioError
from dlio.config import load_config
from dlio.kvcache import engine, oplog, traces
from dlio.kvcache.settings import settings

# each test runs as a measured phase (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("measured_phase")

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "kvcache")
TINY = os.path.join(DATA, "ref_tiny1b_4users_4s.csv")


def kv(*sets):
    return settings(load_config("kvcache_llama3_8b_opt1", env={}, sets=["kvcache.model=tiny-1b", *sets]))


def test_ks_distance():
    a = np.array([1, 2, 3, 4])
    assert oplog.ks_distance(a, a) == 0.0
    assert oplog.ks_distance(a, a + 10) == 1.0
    assert oplog.ks_distance(np.array([1, 2]), np.array([2, 3])) == 0.5


def test_reads_the_references_trace():
    ops, names = oplog.read_csv(TINY)
    m = oplog.mix(ops)
    assert m["writes"] == int((ops["op"] == 1).sum()) > 0 and m["reads"] > m["writes"]
    assert all(n.startswith("conv_user_") for n in names)
    k = oplog.per_key(ops)
    assert k["writes"].sum() == m["writes"] and oplog.mix(k)["read_write_bytes"] == m["read_write_bytes"]


def test_a_bad_trace_is_one_line(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("Timestamp,Operation,Object_Size_Bytes,Tier,Key,Phase\n1.0,Delete,5,Tier-2,k,Prefill\n")
    with pytest.raises(DlioError, match="Operation 'Delete' unknown"):
        oplog.read_csv(str(p))


def test_csv_replay_repeats_the_traces_operations(tmp_path):
    s = kv(f"kvcache.trace={TINY}", "kvcache.io_mode=null", "kvcache.trace_timing=asap")
    plan = traces.trace_plan(s)
    ops, _ = oplog.read_csv(TINY)
    res, failure, log = engine.run_trial(s, plan, str(tmp_path), None, log=True)
    assert failure is None
    c = res["counts"]
    w, r = ops["op"] == 1, ops["op"] == 0
    assert c["write_ops"] == int(w.sum()) and c["write_bytes"] == int(ops["size"][w].sum())
    assert c["read_ops"] == int(r.sum()) and c["read_bytes"] == int(ops["size"][r].sum()) and c["misses"] == 0


def test_mooncake_blocks_are_read_when_reused(tmp_path):
    p = tmp_path / "m.jsonl"
    reqs = [
        {"timestamp": 0, "input_length": 1024, "output_length": 10, "hash_ids": [1, 2]},
        {"timestamp": 5, "input_length": 1536, "output_length": 20, "hash_ids": [1, 2, 3]},
        {"timestamp": 9, "input_length": 512, "output_length": 5, "hash_ids": [4]},
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in reqs))
    s = kv(f"kvcache.trace={p}", "kvcache.io_mode=null", "kvcache.block_tokens=512")
    plan = traces.trace_plan(s)
    assert len(plan.entries) == 4 and plan.entries["bytes"][0] == 512 * 24576
    res, failure, _ = engine.run_trial(s, plan, str(tmp_path), None)
    c = res["counts"]
    assert (c["write_ops"], c["read_ops"], c["tokens"]) == (4, 2, 35)  # blocks 1, 2 reused by request 2


def test_sharegpt_turns_become_conversations(tmp_path):
    p = tmp_path / "s.json.gz"
    conv = [{"from": "human", "value": "x" * 400}, {"from": "gpt", "value": "y" * 80}] * 3
    with gzip.open(p, "wt") as f:
        json.dump([{"id": "a", "conversations": conv}, {"id": "b", "conversations": conv[:2]}], f)
    s = kv(f"kvcache.trace={p}", "kvcache.io_mode=null", "kvcache.trace_format=sharegpt", "kvcache.prefix_probe=0")
    plan = traces.trace_plan(s)
    assert plan.nreqs == 4 and set(plan.entries["tokens"]) == {100}
    res, failure, _ = engine.run_trial(s, plan, str(tmp_path), None)
    c = res["counts"]
    # the 3-turn conversation reads turns 1 and 2 before its 2nd and 3rd: 0 + 1 + 2 multi-turn reads
    assert (c["requests"], c["mt_hits"], c["write_ops"]) == (4, 3, 4)
    assert c["tokens"] == 4 * 20 and c["read_ops"] == 3 + 4 * (1 + 1)


def test_our_log_writes_the_references_csv(tmp_path):
    s = kv("kvcache.users=3", "kvcache.duration=2", "kvcache.io_mode=null")
    from dlio.kvcache.plan import synthetic_plan

    plan = synthetic_plan(s)
    res, _, log = engine.run_trial(s, plan, str(tmp_path), None, log=True)
    ops = oplog.from_log(log, res["oplog_n"], 1e9)
    out = tmp_path / "ops.csv"
    oplog.write_csv(str(out), ops, plan.key_of)
    back, names = oplog.read_csv(str(out))
    assert len(back) == len(ops) == res["counts"]["read_ops"] + res["counts"]["write_ops"]
    assert oplog.mix(back)["read_write_bytes"] == pytest.approx(oplog.mix(ops)["read_write_bytes"])
    assert names[0].startswith("conv_user_") and _core.KV_LOG_DTYPE.itemsize == 24
