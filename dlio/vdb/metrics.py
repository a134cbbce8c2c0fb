"""A timed run's figures and its verdict. The latency users compare is vdbbench's (MLPerf Storage v3's
vector-search reference, `simple_bench.py` calculate_statistics): each query of a batch is given its
batch's time / the batch's queries, and mean_latency_ms, p95_latency_ms ... are over those; the batch
times under *_batch_time_ms. dlio-fast's own figure, each query's completion time within its batch
(send to its last segment search's end), is query_completion_*_ms: about batch-size times larger."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from dlio.base.units import fmt_us
from dlio.report.verdict import classify
from dlio.system import stats

IO_SHARE_MIN = 0.5  # below: most of a search's time is the client's CPU, not the reads it waits for

# vdbbench's statistics.json fields (mlpstorage copies them into each run's summary.json)
LATENCY_PERCENTILES = (("median", 50.0), ("p95", 95.0), ("p99", 99.0), ("p999", 99.9), ("p9999", 99.99))
RULE_FIELDS = ("throughput_qps", "mean_latency_ms", "p95_latency_ms", "p99_latency_ms", "p999_latency_ms")


def _ms(ns: float) -> float:
    return ns / 1e6


def vdbbench_statistics(batch_hist: Dict[str, Any], queries: int, seconds: float) -> Dict[str, Any]:
    """vdbbench's statistics from the batches' times (a histogram) and the queries they carried. The mean
    is exact (the batches' summed time / the queries: each query has its batch's time / its size); the
    percentiles divide the batch times' by the mean batch size, exact when every batch is full (only a
    query-count budget's last batch of a client is not), within the histogram's 0.8 %."""
    batches = int(batch_hist["count"])
    per = queries / batches if batches else 1.0  # queries per batch

    def pct(p: float) -> float:
        return float(stats.percentile(batch_hist, p))

    out: Dict[str, Any] = {
        "total_queries": int(queries),
        "total_time_seconds": float(seconds),
        "min_latency_ms": _ms(batch_hist["min"] / per) if batches else 0.0,
        "max_latency_ms": _ms(batch_hist["max"] / per) if batches else 0.0,
        "mean_latency_ms": _ms(batch_hist["sum"] / queries) if queries else 0.0,
    }
    out.update({f"{name}_latency_ms": _ms(pct(p) / per) for name, p in LATENCY_PERCENTILES})
    out["throughput_qps"] = queries / seconds if seconds > 0 else 0.0
    out.update({"batch_count": batches, "successful_batches": batches, "failed_batches": 0})
    out["min_batch_time_ms"] = _ms(batch_hist["min"]) if batches else 0.0
    out["max_batch_time_ms"] = _ms(batch_hist["max"]) if batches else 0.0
    out["mean_batch_time_ms"] = _ms(batch_hist["sum"] / batches) if batches else 0.0
    out.update({f"{name}_batch_time_ms": _ms(pct(p)) for name, p in LATENCY_PERCENTILES})
    out["recall"] = None  # no result sets: the emulation reads the index, it returns no neighbours
    return out


def disk_io(counters: Dict[str, Any], seconds: float) -> Dict[str, Any]:
    """vdbbench's disk_io block: the bytes the device under the index read during the run (this process's
    own block reads where the kernel counts them, so another process on the device is not in them), or
    N/A with the reason when no device counts the index's bytes (tmpfs, NFS, an object store)."""
    target = (counters or {}).get("target") or {}
    own = (counters or {}).get("own_bytes")
    read = own if own is not None else (counters or {}).get("device_bytes")
    if read is None:
        return {"applicable": False, "status": "N/A", "not_applicable_reason": target.get("why") or "no counters"}
    return {
        "applicable": True,
        "status": "OK",
        "device": target.get("device"),
        "total_bytes_read": int(read),
        "total_bytes_read_per_sec": read / seconds if seconds > 0 else 0.0,
    }


def run_metrics(res: Dict[str, Any], counters: Dict[str, Any]) -> Dict[str, Any]:
    """The figures of one C run (dc_vdb_run's result) and the phase's counters."""
    wall = max(1e-9, (res["t_end"] - res["t_start"]) / 1e9)
    q = max(1, res["queries"])
    s = max(1, res["searches"])
    lat = stats.summary(res["query_lat"], (50.0, 95.0, 99.0, 99.9))
    rd = stats.summary(res["read_lat"], (50.0, 99.0))
    node_reads = res["reads"] - res["pq_reads"]
    dev = counters.get("own_bytes") if counters and counters.get("own_bytes") is not None else None
    dev = dev if dev is not None else (counters.get("device_bytes") if counters else None)
    return {
        "queries": res["queries"],
        "seconds": wall,
        **vdbbench_statistics(res["batch_lat"], res["queries"], wall),
        "disk_io": disk_io(counters, wall),
        "batch_time_hist": stats.to_json(res["batch_lat"]),  # the runs' pooled statistics merge these
        "query_completion_mean_ms": _ms(lat["mean"]),
        "query_completion_p50_ms": _ms(lat["p50"]),
        "query_completion_p95_ms": _ms(lat["p95"]),
        "query_completion_p99_ms": _ms(lat["p99"]),
        "query_completion_p999_ms": _ms(lat["p99.9"]),
        "searches_per_query": res["searches"] / q,
        "reads_per_query": res["reads"] / q,
        "hops_per_query": res["hops"] / q,
        "reads_per_search": (node_reads + res["cache_hits"]) / s,
        "device_reads_per_search": node_reads / s,
        "hops_per_search": res["hops"] / s,
        "cache_hits_per_query": res["cache_hits"] / q,
        "pq_reads_per_query": res["pq_reads"] / q,
        "read_bytes_mean": res["bytes"] / max(1, res["reads"]),
        "app_bytes_per_query": res["bytes"] / q,
        "device_bytes_per_query": None if dev is None else dev / q,
        "iops": res["reads"] / wall,
        "read_mb_per_s": res["bytes"] / wall / 1e6,
        "read_latency_p50_us": rd["p50"] / 1e3,
        "read_latency_p99_us": rd["p99"] / 1e3,
        "io_share": res["io_wait_ns"] / max(1, res["search_ns"]),
        "client_cpu_per_query_us": res["search_cpu_ns"] / q / 1e3,
    }


def verdict(m: Dict[str, Any], counters: Dict[str, Any]) -> Dict[str, Any]:
    """dlio.report.verdict's rules, then the chain's own: a search waits for its hops one after another, so
    on a fast device the client's time per hop (CPU, wake-ups) can set the pace with the CPUs far from full."""
    v = classify(counters) if counters else {"verdict": "inconclusive", "reason": "no counters"}
    chain = (
        f"a latency-bound chain: {m['hops_per_search']:.1f} hops in sequence per segment search, reads of "
        f"{fmt_us(m['read_latency_p50_us'])} (p50), {m['io_share']:.0%} of the search time waiting for reads"
    )
    if v["verdict"] == "storage-bound" and m["io_share"] < IO_SHARE_MIN:
        v = dict(
            v,
            verdict="client-bound",
            part="search chain",
            reason=f"{chain}: the rest is the client's time per hop (CPU per hop, thread wake-ups)",
            setting="vdb.cpu_per_hop_us lower, more vdb.search_threads, or a slower (farther) storage",
        )
    else:
        v = dict(v, reason=f"{v['reason']}; {chain}")
    return v


def summary(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The run folder's summary.json: vdbbench's statistics of every timed run's batches pooled (the
    same definitions over all of them), and each run's own, as mlpstorage writes one per run."""
    pooled = vdbbench_statistics(
        stats.merge(stats.from_json(r["batch_time_hist"]) for r in runs),
        sum(r["total_queries"] for r in runs),
        sum(r["total_time_seconds"] for r in runs),
    )
    io = [r["disk_io"] for r in runs]
    read = sum(d["total_bytes_read"] for d in io) if all(d["applicable"] for d in io) else None
    pooled["disk_io"] = (
        io[0] | {"total_bytes_read": read, "total_bytes_read_per_sec": read / pooled["total_time_seconds"]}
        if read is not None and pooled["total_time_seconds"] > 0
        else {"applicable": False, "status": "N/A", "not_applicable_reason": "not every run was counted"}
    )
    return pooled | {"run_count": len(runs), "runs": [statistics_of(r) for r in runs]}


def statistics_of(run: Dict[str, Any]) -> Dict[str, Any]:
    """One run's vdbbench statistics.json (and mlpstorage's summary.json of that run)."""
    return {k: run[k] for k in STATISTICS_FIELDS}


STATISTICS_FIELDS: Sequence[str] = (*vdbbench_statistics(stats.empty(), 0, 0.0), "disk_io")
