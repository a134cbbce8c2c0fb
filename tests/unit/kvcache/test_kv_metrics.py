"""The figures from known records: the reference's formulas, the exact ones, and the rules' aggregation
over ranks and trials, each computed here independently."""

import pytest

from dlio import _core
from dlio.kvcache import metrics
from dlio.system import stats

# each test runs as a measured phase (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("measured_phase")

GiB = 1 << 30


def hist(values):
    return stats.to_json(_core.hist_from_values(values))


def record(
    rank,
    trial,
    *,
    read_b,
    write_b,
    demote_b=0,
    tokens=1000,
    storage_ns=2e9,
    requests=10,
    elapsed=10.0,
    wall=12.0,
    read_dev=(1e6,),
    write_dev=(2e6,),
    demote_dev=(),
):
    counts = {name: 0 for name in _core.KV_COUNTS}
    counts.update(
        storage_read_bytes=read_b,
        storage_write_bytes=write_b,
        demote_bytes=demote_b,
        read_bytes=read_b,
        write_bytes=write_b,
        tokens=tokens,
        storage_ns=int(storage_ns),
        requests=requests,
        hits=8,
        misses=2,
        storage_reads=6,
        demotions=len(demote_dev),
    )
    hists = {name: hist([]) for name in _core.KV_HISTS}
    hists["storage_read_dev"] = hist(read_dev)
    hists["storage_write_dev"] = hist(write_dev)
    hists["demote_write_dev"] = hist(demote_dev)
    hists["req_storage"] = hist([storage_ns / requests] * requests)
    hists["e2e_batch"] = hist([3e9] * requests)
    result = {
        "counts": counts,
        "hists": hists,
        "start_ns": 0,
        "stop_ns": int(elapsed * 1e9),
        "end_ns": int(wall * 1e9),
        "enqueued": requests,
        "cpu_entries": 0,
        "storage_entries": 5,
        "cpu_used": 0,
        "storage_used": 0,
    }
    rec = {"rank": rank, "trial": trial, "result": result}
    rec["reference"] = metrics.reference_results(rec, 42)
    rec["exact"] = metrics.exact(rec)
    return rec


def test_the_references_formulas():
    r = record(0, 0, read_b=5 * GiB, write_b=2 * GiB, demote_b=1 * GiB, demote_dev=(5e6,))
    s = r["reference"]["summary"]
    cs = s["cache_stats"]
    assert cs["tier_storage_read_bandwidth_gbps"] == pytest.approx(5 / 10)  # GiB over the duration
    assert cs["tier_storage_write_bandwidth_gbps"] == pytest.approx(2 / 10)  # demotions left out
    assert s["storage_throughput_tokens_per_sec"] == pytest.approx(1000 / 2)  # tokens / storage seconds
    assert s["avg_throughput_tokens_per_sec"] == pytest.approx(1000 / 10)
    assert cs["cache_hit_rate"] == pytest.approx(0.8)
    assert cs["storage_read_device_p95_ms"] == pytest.approx(1.0, rel=0.01)
    assert s["qos_metrics"]["batch"]["sla"]["compliance"] == 0.0  # 3 s against its 1 s target


def test_the_exact_figures_count_demotions_and_use_the_wall_clock():
    x = record(0, 0, read_b=6 * GiB, write_b=2 * GiB, demote_b=1 * GiB, demote_dev=(5e6,))["exact"]
    assert x["storage_read_gibps"] == pytest.approx(6 / 12)
    assert x["storage_write_gibps"] == pytest.approx(3 / 12)
    assert x["demotion_gibps"] == pytest.approx(1 / 12)
    assert x["tokens_per_s_wall"] == pytest.approx(1000 / 12)
    assert (x["hit_rate_storage"], x["hit_rate_cpu"]) == (pytest.approx(0.6), pytest.approx(0.2))
    assert x["device_write_p95_ms"] == pytest.approx(5.0, rel=0.01)  # the demotion's write is the slowest


def test_the_rules_aggregation():
    # two ranks, two trials: bandwidth summed over ranks in a trial, then averaged; P95 the maximum
    recs = [
        record(0, 0, read_b=10 * GiB, write_b=1 * GiB, read_dev=(1e6,)),
        record(1, 0, read_b=20 * GiB, write_b=1 * GiB, read_dev=(3e6,)),
        record(0, 1, read_b=30 * GiB, write_b=1 * GiB, read_dev=(2e6,)),
        record(1, 1, read_b=40 * GiB, write_b=1 * GiB, read_dev=(7e6,)),
    ]
    agg = metrics.aggregate(recs, trials=2)
    ref = agg["reference"]
    assert ref["aggregated_read_bandwidth_gbps"] == pytest.approx(((10 + 20) / 10 + (30 + 40) / 10) / 2)
    assert ref["aggregated_write_bandwidth_gbps"] == pytest.approx(0.2)
    assert ref["aggregated_storage_throughput_tokens_per_sec"] == pytest.approx(1000)
    assert ref["aggregated_device_read_p95_ms"] == pytest.approx(7.0, rel=0.01)
    assert (ref["rank_count"], ref["trial_count"], ref["partial_failure"]) == (2, 2, False)
    x = agg["exact"]
    assert x["storage_read_gibps"] == pytest.approx(((10 + 20) / 12 + (30 + 40) / 12) / 2)
    assert x["device_read_p95_ms_pooled"] == pytest.approx(7.0, rel=0.01)
    assert metrics.aggregate(recs[:3], trials=2)["reference"]["partial_failure"]
