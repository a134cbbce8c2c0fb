"""A timed run's figures (the rules' summary.json fields and dlio-fast's own) and its verdict."""

from __future__ import annotations

from typing import Any, Dict, List

from dlio.base.units import fmt_us
from dlio.report.verdict import classify
from dlio.system import stats

IO_SHARE_MIN = 0.5  # below: most of a search's time is the client's CPU, not the reads it waits for

RULE_FIELDS = ("throughput_qps", "latency_mean_ms", "latency_p95_ms", "latency_p99_ms", "latency_p999_ms")


def _ms(ns: float) -> float:
    return ns / 1e6


def run_metrics(res: Dict[str, Any], counters: Dict[str, Any]) -> Dict[str, Any]:
    """The figures of one C run (dc_vdb_run's result) and the phase's counters."""
    wall = max(1e-9, (res["t_end"] - res["t_start"]) / 1e9)
    q = max(1, res["queries"])
    s = max(1, res["searches"])
    lat = stats.summary(res["query_lat"], (50.0, 95.0, 99.0, 99.9))
    batch = stats.summary(res["batch_lat"], (50.0, 99.0))
    rd = stats.summary(res["read_lat"], (50.0, 99.0))
    node_reads = res["reads"] - res["pq_reads"]
    dev = counters.get("device_bytes") if counters else None
    return {
        "queries": res["queries"],
        "seconds": wall,
        "throughput_qps": res["queries"] / wall,
        "latency_mean_ms": _ms(lat["mean"]),
        "latency_p50_ms": _ms(lat["p50"]),
        "latency_p95_ms": _ms(lat["p95"]),
        "latency_p99_ms": _ms(lat["p99"]),
        "latency_p999_ms": _ms(lat["p99.9"]),
        "batch_latency_mean_ms": _ms(batch["mean"]),
        "batch_latency_p99_ms": _ms(batch["p99"]),
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
    """The rules' summary over the runs: each field's mean, and every run's figures."""
    out: Dict[str, Any] = {}
    for k in RULE_FIELDS:
        vals = [r[k] for r in runs]
        out[k] = sum(vals) / len(vals) if vals else None
    out["runs"] = [{k: r[k] for k in RULE_FIELDS} for r in runs]
    return out
