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
    assert m["latency_mean_ms"] == pytest.approx(500.5)
    assert m["latency_p95_ms"] == pytest.approx(950, rel=0.008) and m["latency_p99_ms"] == pytest.approx(990, rel=0.008)
    assert m["latency_p999_ms"] == pytest.approx(999, rel=0.008)
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


def test_summary_is_the_mean_of_the_runs():
    runs = [dict.fromkeys(metrics.RULE_FIELDS, 1.0), dict.fromkeys(metrics.RULE_FIELDS, 3.0)]
    s = metrics.summary(runs)
    assert all(s[k] == 2.0 for k in metrics.RULE_FIELDS) and len(s["runs"]) == 2
