"""A trial's C result -> the figures, in two sets:

  - the reference's (kv_cache/cache.py get_stats, benchmark.py _calculate_stats; rules 6.3.4): its
    field names, units and formulas, including its known losses (demotion writes are neither storage
    bytes written nor write latencies; "storage throughput" is tokens over the sum of per-request
    storage time, not wall-clock; device latency is the fsync span of a write and the np.load span of
    a read);
  - dlio-fast's exact ones: bandwidth from the bytes that moved over the trial's wall-clock window,
    demotion writes counted and timed on their own and in the storage write total, tokens/s both
    ways, device P95/P99 pooled over ranks and trials as well as the rules' max of per-rank P95s.

Then the rules' aggregation over ranks and trials (6.3.4): bandwidth and tokens/s summed over ranks
within a trial and averaged over trials, device P95 the maximum over ranks and trials.
Percentiles come from the C core's histograms (< 0.8 % error), not from per-operation samples.
"""

from __future__ import annotations

from statistics import fmean
from typing import Any, Dict, List, Sequence

from dlio.system import stats

GiB = float(1 << 30)
PCTS = ((50, "p50"), (95, "p95"), (99, "p99"), (99.9, "p999"), (99.99, "p9999"))
# the reference's QoS targets (config.yaml qos_profiles: target_latency_p95_ms) and names
QOS = (("interactive", "e2e_interactive", 50), ("responsive", "e2e_responsive", 100), ("batch", "e2e_batch", 1000))
# storage_health thresholds of the reference's latency profile (cache.py _evaluate_storage_performance)
WRITE_P95_MS, READ_P95_MS, CPU_P95_MS, HIT_RATE = 500, 200, 150, 0.3


def _h(rec: Dict[str, Any], name: str) -> Dict[str, Any]:
    h = rec["result"]["hists"][name]
    return stats.from_json(h) if isinstance(h.get("buckets"), list) else h


def _ms(h: Dict[str, Any], p: float) -> float:
    return stats.percentile(h, p) / 1e6


def _dist_ms(h: Dict[str, Any]) -> Dict[str, float]:
    n = h["count"]
    out = {"mean": h["sum"] / n / 1e6 if n else 0.0}
    out.update({name: _ms(h, p) for p, name in PCTS})
    return out


DISTORTION = 0.05  # the rules' bandwidth is flagged when the drain adds more than this share to the duration


def elapsed_s(rec: Dict[str, Any]) -> float:
    """The reference's duration: start to when no new request could start (its actual_duration: the wait for
    the stop event). The bytes of the requests that drain after it are counted over it too, as there."""
    r = rec["result"]
    if r.get("virtual_s"):
        return r["virtual_s"]
    return max(1e-9, (r["stop_ns"] - r["start_ns"]) / 1e9)


def wall_s(rec: Dict[str, Any]) -> float:
    """The trial's wall-clock window: start to the end of the last request."""
    r = rec["result"]
    if r.get("virtual_s"):
        return r["virtual_s"]
    return max(1e-9, (r["end_ns"] - r["start_ns"]) / 1e9)


def cache_stats(rec: Dict[str, Any]) -> Dict[str, Any]:
    """The reference's cache_stats (MultiTierCache.get_stats) of one trial of one rank."""
    c, r = rec["result"]["counts"], rec["result"]
    d = elapsed_s(rec)
    acc = c["hits"] + c["misses"]
    tier = {
        "gpu": (0, 0),
        "cpu": (c["cpu_read_bytes"], c["cpu_write_bytes"]),
        "storage": (c["storage_read_bytes"], c["storage_write_bytes"]),
    }
    out: Dict[str, Any] = {
        "cache_hit_rate": c["hits"] / acc if acc else 0,
        "cache_hits": c["hits"],
        "cache_misses": c["misses"],
        "gpu_entries": 0,
        "cpu_entries": r["cpu_entries"],
        "storage_entries": r["storage_entries"],
        "gpu_memory_used_gb": 0.0,
        "cpu_memory_used_gb": r["cpu_used"] / GiB,
        "offloads_cpu": c["offloads_cpu"],
        "offloads_storage": c["offloads_storage"],
        "storage_health": storage_health(rec),
        "prefill_writes": c["prefill_writes"],
        "decode_reads": c["decode_reads"],
    }
    for t, (rb, wb) in tier.items():
        out[f"tier_{t}_kv_bytes_written_gb"] = wb / GiB
    for t, (rb, wb) in tier.items():
        out[f"tier_{t}_kv_bytes_read_gb"] = rb / GiB
    for t, (rb, wb) in tier.items():
        out[f"tier_{t}_read_bandwidth_gbps"] = rb / GiB / d
        out[f"tier_{t}_write_bandwidth_gbps"] = wb / GiB / d
    out.update(
        {
            "system_prompt_hits": c["system_hits"],
            "common_phrase_hits": 0,
            "user_cache_hits": c["user_hits"],
            "multi_turn_hits": c["multi_turn_hits"],
            "total_read_bytes": c["read_bytes"],
            "total_write_bytes": c["write_bytes"],
            "total_read_gb": c["read_bytes"] / GiB,
            "total_write_gb": c["write_bytes"] / GiB,
            "read_write_ratio": c["read_bytes"] / max(c["write_bytes"], 1),
            "read_iops": c["read_ops"],
            "write_iops": c["write_ops"],
            "storage_tokens_processed": c["storage_tokens_x1000"] / 1000.0,
        }
    )
    for t, op, name in (
        ("cpu", "read", "cpu_read"),
        ("cpu", "write", "cpu_write"),
        ("storage", "read", "storage_read"),
        ("storage", "write", "storage_write"),
    ):
        h = _h(rec, name)
        if h["count"]:
            for p, pn in PCTS:
                out[f"{t}_{op}_{pn}_ms"] = _ms(h, p)
    for op in ("read", "write"):
        for part in ("device", "host"):
            h = _h(rec, f"storage_{op}_{'dev' if part == 'device' else 'host'}")
            if h["count"]:
                for p, pn in PCTS:
                    out[f"storage_{op}_{part}_{pn}_ms"] = _ms(h, p)
    return out


def storage_health(rec: Dict[str, Any]) -> Dict[str, Any]:
    """The reference's pass/fail criteria of its latency profile (informational, as there)."""
    crit = []
    c = rec["result"]["counts"]
    for op, limit in (("write", WRITE_P95_MS), ("read", READ_P95_MS)):
        h = _h(rec, f"storage_{op}_dev")
        if h["count"]:
            v = _ms(h, 95)
            crit.append(
                {
                    "name": f"Storage Tier {op.title()} Device P95 < {limit}ms",
                    "target": limit,
                    "actual": v,
                    "unit": "ms",
                    "passed": v < limit,
                }
            )
    cpu = stats.merge([_h(rec, "cpu_read"), _h(rec, "cpu_write")])
    if cpu["count"]:
        v = _ms(cpu, 95)
        crit.append({"name": "CPU RAM P95 < 150ms", "target": CPU_P95_MS, "actual": v, "unit": "ms", "passed": v < 150})
    acc = c["hits"] + c["misses"]
    if acc:
        v = c["hits"] / acc
        crit.append(
            {"name": "Cache Hit Rate > 30%", "target": HIT_RATE, "actual": v, "unit": "ratio", "passed": v > HIT_RATE}
        )
    ok = all(x["passed"] for x in crit)
    return {
        "overall_status": "PASS" if ok else "FAIL",
        "criteria": crit,
        "passed_count": sum(x["passed"] for x in crit),
        "total_count": len(crit),
    }


def _qos(rec: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for level, hname, target in QOS:
        h = _h(rec, hname)
        if not h["count"]:
            out[level] = {"no_data": True}
            continue
        d = _dist_ms(h)
        over = _count_over(h, target * 1e6)
        compliance = 1.0 - over / h["count"]
        out[level] = {
            "total_requests": int(h["count"]),
            "latency_ms": {"mean": d["mean"], "p50": d["p50"], "p95": d["p95"], "p99": d["p99"], "max": h["max"] / 1e6},
            "sla": {
                "target_p95_ms": target,
                "actual_p95_ms": d["p95"],
                "compliance": compliance,
                "met": compliance >= 0.95,
            },
        }
    return out


def _count_over(h: Dict[str, Any], ns: float) -> int:
    """Requests over ns, from the histogram (a bucket counts as over when its midpoint is)."""
    import numpy as np

    b = np.asarray(h["buckets"], dtype=np.uint64)
    return int(b[stats.bucket_values() > ns].sum())


def multi_turn_stats(c: Dict[str, int]) -> Dict[str, Any]:
    """The reference's multi_turn_stats (benchmark.py: hits and misses of the earlier-turn reads)."""
    return {
        "cache_hits": c["mt_hits"],
        "cache_misses": c["mt_misses"],
        "hit_rate": c["mt_hits"] / max(c["mt_hits"] + c["mt_misses"], 1),
    }


def multi_turn_exact(c: Dict[str, int]) -> Dict[str, Any]:
    """multi_turn_stats per request, and what the conversation window did (counts of the C engine,
    summed over records): the share of earlier-turn reads a saturated run loses."""
    n = max(c["requests"], 1)
    lookups = c["mt_hits"] + c["mt_misses"]
    return {
        **multi_turn_stats(c),
        "lookups": lookups,
        "lookups_per_request": lookups / n,
        "hits_per_request": c["mt_hits"] / n,
        "misses_per_request": c["mt_misses"] / n,
        "requests_conversation_forgotten": c["mt_conv_gone"],
        "conversations_evicted": c["conv_evictions"],
        "users_stopped": c["users_stopped"],
        "requests_unsent": c["requests_unsent"],
    }


MT_COUNTS = ("requests", "mt_hits", "mt_misses", "mt_conv_gone", "conv_evictions", "users_stopped", "requests_unsent")


def _mt_counts(recs: Sequence[Dict[str, Any]]) -> Dict[str, int]:
    return {k: sum(r["result"]["counts"].get(k, 0) for r in recs) for k in MT_COUNTS}


def reference_results(rec: Dict[str, Any], seed: int) -> Dict[str, Any]:
    """One rank's results file of one trial as the reference writes it (--output JSON). The
    per-request latency lists it also writes are left out (histograms instead, in dlio-fast.json)."""
    c = rec["result"]["counts"]
    d = elapsed_s(rec)
    io_s = c["storage_ns"] / 1e9
    e2e = stats.merge([_h(rec, n) for _, n, _ in QOS])
    gen = _h(rec, "generation")
    summary = {
        "total_requests": c["requests"],
        "total_tokens": c["tokens"],
        "elapsed_time": d,
        "avg_throughput_tokens_per_sec": c["tokens"] / d,
        "total_storage_io_time": io_s,
        "storage_throughput_tokens_per_sec": c["tokens"] / io_s if io_s > 0 else 0,
        "requests_per_second": c["requests"] / d,
        "end_to_end_latency_ms": _dist_ms(e2e),
        "storage_io_latency_ms": _dist_ms(_h(rec, "req_storage")),
        "generation_latency_ms": _dist_ms(gen),
        "cache_stats": cache_stats(rec),
        "qos_metrics": _qos(rec),
        "prefix_cache_stats": {
            "prefix_hits": c["probes"],
            "prefix_misses": max(0, c["requests"] - c["probes"]),
            "system_prompt_reuse": c["probes"],
            "common_phrase_reuse": 0,
        },
        "autoscaling_stats": [],
        "autoscaling_summary": None,
        "multi_turn_stats": multi_turn_stats(c),
    }
    return {
        "requests_completed": c["requests"],
        "total_tokens_generated": c["tokens"],
        "total_storage_io_latency": io_s,
        "total_generation_latency": gen["sum"] / 1e9,
        "multi_turn_cache_hits": c["mt_hits"],
        "multi_turn_cache_misses": c["mt_misses"],
        "seed": seed,
        "summary": summary,
    }


def exact(rec: Dict[str, Any]) -> Dict[str, Any]:
    """dlio-fast's figures of one trial of one rank (bytes that moved, over the wall-clock window)."""
    c = rec["result"]["counts"]
    w = wall_s(rec)
    rb = c["storage_read_bytes"]
    wb = c["storage_write_bytes"] + c["demote_bytes"]
    lookups = c["hits"] + c["misses"]
    out = {
        "wall_s": w,
        "elapsed_s": elapsed_s(rec),
        "requests": c["requests"],
        "requests_per_s": c["requests"] / w,
        "requests_dropped": c["requests_dropped"],
        "requests_cut": c.get("requests_cut", 0),
        "overrun_s": max(0.0, w - elapsed_s(rec)),
        "capacity_waits": c.get("capacity_waits", 0),
        "requests_queued_at_stop": max(
            0, rec["result"]["enqueued"] - c["requests"] - c["requests_dropped"] - c.get("requests_cut", 0)
        ),
        "storage_read_bytes": rb,
        "storage_write_bytes": wb,
        "storage_read_gibps": rb / GiB / w,
        "storage_write_gibps": wb / GiB / w,
        "prefill_write_bytes": c["storage_write_bytes"],
        "demotion_writes": c["demotions"],
        "demotion_bytes": c["demote_bytes"],
        "demotion_gibps": c["demote_bytes"] / GiB / w,
        "deletes": c["deletes"],
        "tokens": c["tokens"],
        "tokens_per_s_wall": c["tokens"] / w,
        "tokens_per_s_storage": c["tokens"] / (c["storage_ns"] / 1e9) if c["storage_ns"] else 0.0,
        "hit_rate": c["hits"] / lookups if lookups else 0.0,
        "hit_rate_cpu": (c["hits"] - c["storage_reads"]) / lookups if lookups else 0.0,
        "hit_rate_storage": c["storage_reads"] / lookups if lookups else 0.0,
        "failed_allocs": c["failed_allocs"],
        "multi_turn_stats": multi_turn_exact(_mt_counts([rec])),
    }
    for op, names in (("read", ("storage_read_dev",)), ("write", ("storage_write_dev", "demote_write_dev"))):
        h = stats.merge([_h(rec, n) for n in names])
        out[f"device_{op}_p95_ms"] = _ms(h, 95) if h["count"] else None
        out[f"device_{op}_p99_ms"] = _ms(h, 99) if h["count"] else None
    h = _h(rec, "demote_write")
    out["demotion_write_p95_ms"] = _ms(h, 95) if h["count"] else None
    return out


def aggregate(recs: Sequence[Dict[str, Any]], trials: int) -> Dict[str, Any]:
    """The rules' aggregation (6.3.4) of the reference's figures, and the exact one, over ranks and
    trials. recs: one per rank and trial, each with "rank", "trial", "reference" and "exact"."""
    by_trial: Dict[int, List[Dict[str, Any]]] = {}
    for r in recs:
        by_trial.setdefault(r["trial"], []).append(r)
    rb, wb, tput, avg, dev_r, dev_w, p95 = [], [], [], [], [], [], []
    x_rb, x_wb, x_demo, x_tw, x_ts = [], [], [], [], []
    cpu_tier_ranks = []
    for t in sorted(by_trial):
        rs = by_trial[t]
        cs = [r["reference"]["summary"]["cache_stats"] for r in rs]
        sm = [r["reference"]["summary"] for r in rs]
        rb.append(sum(c["tier_storage_read_bandwidth_gbps"] for c in cs))
        wb.append(sum(c["tier_storage_write_bandwidth_gbps"] for c in cs))
        tput.append(sum(s["storage_throughput_tokens_per_sec"] for s in sm))
        avg.append(sum(s["avg_throughput_tokens_per_sec"] for s in sm))
        dev_r += [c.get("storage_read_device_p95_ms", 0.0) for c in cs]
        dev_w += [c.get("storage_write_device_p95_ms", 0.0) for c in cs]
        p95 += [s["storage_io_latency_ms"]["p95"] for s in sm]
        cpu_tier_ranks += [f"trial {t} rank {r['rank']}" for r, c in zip(rs, cs) if c["storage_entries"] == 0]
        w = max(r["exact"]["wall_s"] for r in rs)  # the ranks start together: the trial's window
        x_rb.append(sum(r["exact"]["storage_read_bytes"] for r in rs) / GiB / w)
        x_wb.append(sum(r["exact"]["storage_write_bytes"] for r in rs) / GiB / w)
        x_demo.append(sum(r["exact"]["demotion_bytes"] for r in rs) / GiB / w)
        x_tw.append(sum(r["exact"]["tokens"] for r in rs) / w)
        x_ts.append(sum(r["exact"]["tokens_per_s_storage"] for r in rs))
    ranks = len({r["rank"] for r in recs})
    # the drain after each trial's duration: its bytes count over the duration (the reference's formula)
    overrun = max((r["exact"].get("overrun_s", 0.0) for r in recs), default=0.0)
    distortion = max((r["exact"].get("overrun_s", 0.0) / max(1e-9, r["exact"]["elapsed_s"]) for r in recs), default=0.0)
    reference = {
        "aggregated_read_bandwidth_gbps": fmean(rb) if rb else 0.0,
        "aggregated_write_bandwidth_gbps": fmean(wb) if wb else 0.0,
        "aggregated_avg_throughput_tokens_per_sec": fmean(avg) if avg else 0.0,
        "aggregated_storage_throughput_tokens_per_sec": fmean(tput) if tput else 0.0,
        "aggregated_device_read_p95_ms": max(dev_r) if dev_r else None,
        "aggregated_device_write_p95_ms": max(dev_w) if dev_w else None,
        "aggregated_p95_latency_ms": max(p95) if p95 else None,
        "rank_count": ranks,
        "trial_count": len(by_trial),
        "partial_failure": len(by_trial) < trials
        or any(len(v) < ranks for v in by_trial.values())
        or any(not r.get("complete", True) for r in recs),
        "missing_files": [],
        "cpu_tier_ranks": cpu_tier_ranks,
    }
    pooled = {}
    for op, names in (("read", ("storage_read_dev",)), ("write", ("storage_write_dev", "demote_write_dev"))):
        h = stats.merge([_h(r, n) for r in recs for n in names])
        pooled[f"device_{op}_p95_ms"] = _ms(h, 95) if h["count"] else None
        pooled[f"device_{op}_p99_ms"] = _ms(h, 99) if h["count"] else None
    exact_agg = {
        "storage_read_gibps": fmean(x_rb) if x_rb else 0.0,
        "storage_write_gibps": fmean(x_wb) if x_wb else 0.0,
        "demotion_gibps": fmean(x_demo) if x_demo else 0.0,
        "tokens_per_s_wall": fmean(x_tw) if x_tw else 0.0,
        "tokens_per_s_storage": fmean(x_ts) if x_ts else 0.0,
        "device_read_p95_ms_max_of_ranks": max((r["exact"]["device_read_p95_ms"] or 0 for r in recs), default=None),
        "device_write_p95_ms_max_of_ranks": max((r["exact"]["device_write_p95_ms"] or 0 for r in recs), default=None),
        **{f"{k}_pooled": v for k, v in pooled.items()},
        "requests": sum(r["exact"]["requests"] for r in recs),
        "requests_cut": sum(r["exact"].get("requests_cut", 0) for r in recs),
        "capacity_waits": sum(r["exact"].get("capacity_waits", 0) for r in recs),
        "overrun_s": overrun,
        "rules_bandwidth_distorted": distortion > DISTORTION,
        "rules_bandwidth_overrun_share": distortion,
        "demotion_writes": sum(r["exact"]["demotion_writes"] for r in recs),
        "multi_turn_stats": multi_turn_exact(_mt_counts(recs)),
    }
    return {"reference": reference, "exact": exact_agg}
