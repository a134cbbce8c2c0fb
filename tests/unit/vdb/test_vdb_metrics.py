"""A run's figures from a known C result (histograms built by the C code from known latencies), and the verdict's
own rule for hop chains."""

import numpy as np
import pytest

from dlio import _core
from dlio.vdb import metrics


def result(io_wait_ns=900, search_ns=1000):
    lat = np.arange(1, 1001) * 1_000_000  # queries of 1 .. 1000 ms
    return {
        "t_start": 0,
        "t_end": 4_000_000_000,
        "queries": 1000,
        "batches": 100,
        "searches": 3000,
        "hops": 90_000,
        "reads": 600_000,
        "bytes": 600_000 * 8192,
        "pq_reads": 0,
        "cache_hits": 45_000,
        "io_wait_ns": io_wait_ns,
        "search_ns": search_ns,
        "search_cpu_ns": 2_000_000_000,
        "cpu_hop_ns": 0,
        "query_lat": _core.hist_from_array(lat),
        "batch_lat": _core.hist_from_array(lat[:100]),
        "hop_lat": _core.hist_from_array([1]),
        "read_lat": _core.hist_from_array(np.full(10, 200_000)),
    }


def storage_counters(app):
    return {
        "app_bytes": app,
        "device_bytes": app,
        "wall_s": 4.0,
        "cpu_user_s": 0.1,
        "cpu_sys_s": 0.1,
        "reader_cpu_s": 0.2,
        "reader_threads": 2,
        "cores": 2,
        "host_cpus": 2,
        "host_busy_share": 0.2,
        "target": {"device": "vda"},
        "direction": "read",
    }


def test_figures():
    res = result()
    m = metrics.run_metrics(res, storage_counters(res["bytes"]))
    assert m["throughput_qps"] == 250.0 and m["iops"] == 150_000.0
    assert m["query_completion_mean_ms"] == pytest.approx(500.5)
    assert m["query_completion_p95_ms"] == pytest.approx(950, rel=0.008)
    assert m["query_completion_p99_ms"] == pytest.approx(990, rel=0.008)
    assert m["query_completion_p999_ms"] == pytest.approx(999, rel=0.008)
    assert m["reads_per_query"] == 600 and m["hops_per_query"] == 90 and m["hops_per_search"] == 30
    assert m["reads_per_search"] == (600_000 + 45_000) / 3000 and m["cache_hits_per_query"] == 45
    assert m["device_bytes_per_query"] == res["bytes"] / 1000 and m["read_bytes_mean"] == 8192
    assert m["client_cpu_per_query_us"] == 2000 and m["io_share"] == 0.9 and m["read_latency_p50_us"] == 200


def test_a_chain_waiting_less_than_half_its_time_is_client_bound():
    res = result(io_wait_ns=300, search_ns=1000)
    c = storage_counters(res["bytes"])
    v = metrics.verdict(metrics.run_metrics(res, c), c)
    assert v["verdict"] == "client-bound" and v["part"] == "search chain" and "30% of the search time" in v["reason"]
    res = result()
    v = metrics.verdict(metrics.run_metrics(res, c), c)
    assert v["verdict"] == "storage-bound" and "latency-bound chain" in v["reason"]


def vdbbench(batch_ms, batch_size):
    """vdbbench's calculate_statistics, written out: each batch's time / its size, repeated size times."""
    lat = np.repeat(np.asarray(batch_ms, dtype=float) / batch_size, batch_size)
    return {
        "mean_latency_ms": lat.mean(),
        **{f"{n}_latency_ms": np.percentile(lat, p) for n, p in metrics.LATENCY_PERCENTILES},
        "mean_batch_time_ms": np.mean(batch_ms),
        "p99_batch_time_ms": np.percentile(batch_ms, 99),
    }


def test_latency_is_vdbbenchs_batch_time_over_batch_size():
    """100 batches of 10 queries, taking 1 .. 100 ms: the figures vdbbench computes from those batches."""
    res = result()
    m = metrics.run_metrics(res, storage_counters(res["bytes"]))
    want = vdbbench(np.arange(1, 101), 10)
    assert m["mean_latency_ms"] == pytest.approx(want["mean_latency_ms"])  # exact: summed batch time / queries
    for k in ("median_latency_ms", "p95_latency_ms", "p99_latency_ms", "p999_latency_ms", "p9999_latency_ms"):
        assert m[k] == pytest.approx(want[k], rel=0.02), k  # the histogram's bucket, numpy's interpolation
    assert m["mean_batch_time_ms"] == pytest.approx(want["mean_batch_time_ms"])
    assert m["p99_batch_time_ms"] == pytest.approx(want["p99_batch_time_ms"], rel=0.02)
    assert m["total_queries"] == 1000 and m["batch_count"] == 100 and m["throughput_qps"] == 250.0
    assert set(metrics.STATISTICS_FIELDS) <= set(m)


def test_summary_pools_the_runs_batches():
    """Two runs: the pooled figures are vdbbench's over every batch of both, not a mean of percentiles."""
    a, b = result(), result()
    b["batch_lat"] = _core.hist_from_array(np.arange(101, 201) * 1_000_000)
    runs = [metrics.run_metrics(r, storage_counters(r["bytes"])) for r in (a, b)]
    s = metrics.summary(runs)
    want = vdbbench(np.arange(1, 201), 10)
    assert s["run_count"] == 2 and s["total_queries"] == 2000 and s["throughput_qps"] == 250.0
    assert s["mean_latency_ms"] == pytest.approx(want["mean_latency_ms"])
    assert s["p99_latency_ms"] == pytest.approx(want["p99_latency_ms"], rel=0.02)
    assert [r["p99_latency_ms"] for r in s["runs"]] == [r["p99_latency_ms"] for r in runs]


def test_disk_io_is_the_runs_own_device_reads_or_not_applicable():
    res = result()
    c = storage_counters(res["bytes"]) | {"own_bytes": 1000}
    d = metrics.run_metrics(res, c)["disk_io"]
    assert d["applicable"] and d["total_bytes_read"] == 1000 and d["total_bytes_read_per_sec"] == 250.0
    tmpfs = {"target": {"why": "tmpfs has no block device"}, "device_bytes": None, "wall_s": 4.0}
    d = metrics.disk_io(tmpfs, 4.0)
    assert not d["applicable"] and d["status"] == "N/A" and "tmpfs" in d["not_applicable_reason"]
