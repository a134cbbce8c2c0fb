"""Vector search from many ranks (and hosts) on one index, as several vdbbench clients search one Milvus.

Each rank runs its own vdb.processes query threads over its own share of the query stream: the planned pool
of segment searches is the same on every rank (made from vdb.seed), and rank r searches the r-th of `size`
consecutive slices of it (disjoint, cycled within the slice when a duration run needs more). A query budget
(vdb.queries) is the run's total, dealt to the ranks. The ranks start each timed run together (a barrier)
and run the same duration.

A rank's record of a run (rank_record) is its C result's counts and histograms as JSON; rank 0 merges
records into one C-result-shaped dict (merge), so the run's figures (dlio.vdb.metrics.run_metrics) are
computed over all ranks' batches and queries at once: the counts added, the latency histograms added (a
percentile is never averaged), the run's wall time its slowest rank's (the ranks start at the barrier; their
clocks are not compared). Per host and per rank the same merge over fewer records: their queries and bytes
add up to the totals.
"""

from __future__ import annotations

import socket
from typing import Any, Dict, List, Optional, Sequence

from dlio.report import verdict as verdicts
from dlio.system import stats
from dlio.vdb import metrics
from dlio.vdb.model import Chains

COUNTS = (
    "queries",
    "batches",
    "searches",
    "hops",
    "reads",
    "bytes",
    "pq_reads",
    "cache_hits",
    "io_wait_ns",
    "cpu_hop_ns",
    "search_ns",
    "search_cpu_ns",
)
HISTS = ("query_lat", "batch_lat", "hop_lat", "read_lat")
# the figures a host's or a rank's row keeps (the run's own has them all)
ROW_FIGURES = (
    "queries",
    "seconds",
    "throughput_qps",
    "mean_latency_ms",
    "p95_latency_ms",
    "p99_latency_ms",
    "p999_latency_ms",
    "min_latency_ms",
    "max_latency_ms",
    "query_completion_p99_ms",
    "iops",
    "read_mb_per_s",
    "reads_per_query",
)


def share(chains: Chains, rank: int, size: int) -> Chains:
    """Rank `rank`'s slice of the pool of segment searches: searches [n*rank/size, n*(rank+1)/size), as a
    Chains of its own (offsets rebased), so the C run cycles within it."""
    n = chains.searches
    a, b = n * rank // size, n * (rank + 1) // size
    h0, h1 = int(chains.hop_first[a]), int(chains.hop_first[b])
    r0, r1 = int(chains.read_first[h0]), int(chains.read_first[h1])
    return Chains(
        chains.hop_first[a : b + 1] - chains.hop_first[a],
        chains.read_first[h0 : h1 + 1] - chains.read_first[h0],
        chains.nodes[r0:r1],
        chains.medoid,
    )


def queries_of(total: int, rank: int, size: int) -> int:
    """Rank `rank`'s part of a query budget (0: a duration run, no budget)."""
    return total * (rank + 1) // size - total * rank // size


def rank_record(res: Dict[str, Any], counters: Dict[str, Any], rank: int) -> Dict[str, Any]:
    """One rank's run as JSON for the gather: its counts, wall time, histograms and counters."""
    return {
        "rank": rank,
        "host": socket.gethostname(),
        "seconds": max(1e-9, (res["t_end"] - res["t_start"]) / 1e9),
        **{k: int(res[k]) for k in COUNTS},
        **{k: stats.to_json(res[k]) for k in HISTS},
        "counters": counters,
    }


def merge(records: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Ranks' records as one C result (dc_vdb_run's keys): counts added, histograms added, the wall time the
    slowest rank's (all started at one barrier)."""
    wall = max(r["seconds"] for r in records)
    out: Dict[str, Any] = {"t_start": 0, "t_end": int(round(wall * 1e9))}
    out.update({k: sum(r[k] for r in records) for k in COUNTS})
    out.update({k: stats.merge(stats.from_json(r[k]) for r in records) for k in HISTS})
    return out


def counters_of(records: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """One host's counters of the run: its ranks' combined (dlio.report.verdict.combine)."""
    return verdicts.combine([r["counters"] for r in records])


def hosts_of(records: Sequence[Dict[str, Any]]) -> Dict[str, List[Dict[str, Any]]]:
    """The records by host, hosts in the order of their first rank."""
    out: Dict[str, List[Dict[str, Any]]] = {}
    for r in sorted(records, key=lambda r: r["rank"]):
        out.setdefault(r["host"], []).append(r)
    return out


def _row(res: Dict[str, Any], counters: Dict[str, Any]) -> Dict[str, Any]:
    m = metrics.run_metrics(res, counters)
    return {k: m[k] for k in ROW_FIGURES} | {"bytes": int(res["bytes"]), "reads": int(res["reads"])}


def run_figures(records: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """A timed run's figures from every rank's record: the run's (metrics.run_metrics over all of them) and,
    from more than one rank, per host (with its verdict) and per rank. One host: the run's verdict is the
    host's; more: a verdict per host (`verdicts`), none for the run (the hosts' devices are not one)."""
    hosts = hosts_of(records)
    host_counters = {h: counters_of(rs) for h, rs in hosts.items()}
    if len(hosts) == 1:
        counters = next(iter(host_counters.values()))
    else:
        counters = {"target": {"why": "the run's hosts each count their own device: see per_host"}}
        counters |= {"own_bytes": _sum_or_none(c.get("own_bytes") for c in host_counters.values())}
        if counters["own_bytes"] is None:
            counters |= {"device_bytes": _sum_or_none(c.get("device_bytes") for c in host_counters.values())}
    total = merge(records)
    m = metrics.run_metrics(total, counters)
    out: Dict[str, Any] = {**m, "bytes": int(total["bytes"]), "reads": int(total["reads"]), "counters": counters}
    if len(hosts) == 1:
        out["verdict"] = metrics.verdict(m, counters)
    else:
        out["disk_io"] = _disk_io(host_counters.values(), m["seconds"])
    if len(records) == 1:
        return out
    out["ranks"] = len(records)
    out["per_host"] = []
    for host, rs in hosts.items():
        res, c = merge(rs), host_counters[host]
        row = {"host": host, "ranks": [r["rank"] for r in rs], **_row(res, c)}
        if len(hosts) > 1:
            row["counters"] = c
            row["verdict"] = metrics.verdict(metrics.run_metrics(res, c), c)
        out["per_host"].append(row)
    out["per_rank"] = [{"rank": r["rank"], "host": r["host"], **_row(merge([r]), r["counters"])} for r in records]
    return out


def _sum_or_none(xs: Any) -> Optional[int]:
    vals = list(xs)
    return None if not vals or any(v is None for v in vals) else int(sum(vals))


def _disk_io(host_counters: Any, seconds: float) -> Dict[str, Any]:
    """vdbbench's disk_io of the run: the hosts' own device reads added, N/A unless every host counted its."""
    ios = [metrics.disk_io(c, seconds) for c in host_counters]
    if not all(d["applicable"] for d in ios):
        why = next(d["not_applicable_reason"] for d in ios if not d["applicable"])
        return {"applicable": False, "status": "N/A", "not_applicable_reason": why}
    read = sum(d["total_bytes_read"] for d in ios)
    return {
        "applicable": True,
        "status": "OK",
        "device": ", ".join(sorted({str(d["device"]) for d in ios})),
        "total_bytes_read": int(read),
        "total_bytes_read_per_sec": read / seconds if seconds > 0 else 0.0,
    }


def run_verdicts(run: Dict[str, Any]) -> List[Any]:
    """A run's verdicts as (phase, verdict, counters): the run's, or one per host."""
    if isinstance(run.get("verdict"), dict):
        return [(f"run {run['run']}", run["verdict"], run.get("counters"))]
    return [
        (f"run {run['run']} [{h['host']}]", h["verdict"], h.get("counters"))
        for h in run.get("per_host") or []
        if isinstance(h.get("verdict"), dict)
    ]


def host_lines(run: Dict[str, Any]) -> List[str]:
    """The console's per-host lines of a run from more than one host."""
    hosts = run.get("per_host") or []
    if len(hosts) < 2:
        return []
    return [
        f"host {h['host']} (ranks {','.join(map(str, h['ranks']))}): {h['queries']:,} queries, "
        f"{h['throughput_qps']:.1f} QPS, mean latency {h['mean_latency_ms']:.3f} ms, p99 {h['p99_latency_ms']:.3f} ms, "
        f"{h['bytes'] / 2**20:.2f} MiB read"
        for h in hosts
    ]


def hosts_text(runs: Sequence[Dict[str, Any]]) -> Optional[str]:
    """`report`'s per-host figure over a document's runs (None from one host): each host's queries over the
    runs' wall time, its mean latency (vdbbench's, query-weighted: exact), its bytes read."""
    rows: Dict[str, List[Dict[str, Any]]] = {}
    for r in runs:
        for h in r.get("per_host") or []:
            rows.setdefault(h["host"], []).append(h)
    if len(rows) < 2:
        return None
    out = []
    for host, hs in rows.items():
        q, secs = sum(h["queries"] for h in hs), sum(h["seconds"] for h in hs)
        mean = sum(h["mean_latency_ms"] * h["queries"] for h in hs) / q if q else 0.0
        mib = sum(h["bytes"] for h in hs) / 2**20
        out.append(f"{host}: {q / secs if secs else 0.0:.1f} QPS, {mean:.3f} ms, {mib:.1f} MiB")
    return "; ".join(out)
