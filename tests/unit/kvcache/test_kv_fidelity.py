"""The op mix of each option against the reference benchmark's own: object sizes (KS distance), reads
per write, read:write bytes and key reuse (reads per key read), within 5 %.

The reference data (tests/data/kvcache/ref_*.keys.csv.gz, README there) are its --io-trace-log CSVs of
each option (trace mode: no I/O, the decisions only), summed per key and tier: 30 s of options 1 and 3,
the first 14 s of option 2 (after that the reference falls behind its own users in trace mode).
dlio-fast makes the same decisions in virtual time (io_mode null), which takes a second; three trials
are averaged, as the reference trace is one sample of the same process.
"""

import os

import numpy as np
import pytest

from dlio.config import load_config
from dlio.kvcache import engine, oplog
from dlio.kvcache.plan import synthetic_plan
from dlio.kvcache.settings import settings

# each test runs as a measured phase (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("measured_phase")

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "kvcache")
TOLERANCE = 0.05
TRIALS = 3


def ours(option, seconds, tier):
    s = settings(load_config(option, env={}, sets=[f"kvcache.duration={seconds}", "kvcache.io_mode=null"]))
    mixes = []
    for trial in range(TRIALS):
        res, failure, log = engine.run_trial(s, synthetic_plan(s, 0, trial), "/", None, log=True)
        assert failure is None
        mixes.append(oplog.mix(oplog.from_log(log, res["oplog_n"]), tier))
    out = {k: float(np.mean([m[k] for m in mixes])) for k in ("reads_per_write", "read_write_bytes", "reads_per_key")}
    out["write_sizes"] = np.concatenate([m["write_sizes"] for m in mixes])
    return out


@pytest.mark.parametrize(
    "option, ref, seconds, tier",
    [
        ("kvcache_llama3_8b_opt1", "ref_opt1_30s.keys.csv.gz", 30, 2),
        ("kvcache_llama3_8b_opt2", "ref_opt2_14s.keys.csv.gz", 14, 2),  # storage: demotions only
        ("kvcache_llama3_8b_opt2", "ref_opt2_14s.keys.csv.gz", 14, None),  # the RAM tier and storage
        ("kvcache_llama3_70b_opt3", "ref_opt3_30s.keys.csv.gz", 30, 2),
    ],
)
def test_op_mix_matches_the_reference(option, ref, seconds, tier):
    theirs = oplog.mix(oplog.read_keys_csv(os.path.join(DATA, ref)), tier)
    d = oplog.compare(theirs, ours(option, seconds, tier))
    assert d["size_ks"] < TOLERANCE, d
    for k in ("reads_per_write", "read_write_bytes", "reads_per_key"):
        assert d[k] < TOLERANCE, (k, d)


def test_option2_storage_takes_demotions():
    """Option 2: nearly every prefill lands in the 4 GiB RAM tier, so storage writes are demotions (the
    rest: entries over half the tier's target while it holds little), which the reference counts
    neither as bytes written nor as write latency."""
    theirs = oplog.mix(oplog.read_keys_csv(os.path.join(DATA, "ref_opt2_14s.keys.csv.gz")), 2)
    s = settings(load_config("kvcache_llama3_8b_opt2", env={}, sets=["kvcache.duration=14", "kvcache.io_mode=null"]))
    res, _, log = engine.run_trial(s, synthetic_plan(s, 0, 0), "/", None, log=True)
    m = oplog.mix(oplog.from_log(log, res["oplog_n"]), 2)
    for x in (theirs, m):
        assert x["evict_writes"] >= 0.99 * x["writes"] > 0
    assert m["evict_writes"] == res["counts"]["demotions"]
    assert res["counts"]["storage_writes"] == m["writes"] - m["evict_writes"]  # all the reference counts
