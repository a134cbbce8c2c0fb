"""The files of a kvcache run, written by rank 0 from every rank's records, and its console lines:

  trial_<T>/rank_<N>/kvcache_results_<stamp>.json  the reference's results file of that rank and
                                                   trial (its --output JSON; the rules' layout 6.3.3.3)
  summary.json      the rules' aggregation, as mlpstorage's kvcache_run_summary: options[<workload>]
  dlio-fast.json    schema dlio-fast.kvcache/1: settings, plan, every rank and trial's exact
                    figures, histograms, counters and attestation, the aggregate and the verdicts

All written atomically; a stopped run's files say "complete": false.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Sequence

from dlio.base.units import fmt_figure, fmt_ns, fmt_rate, fmt_size
from dlio.config import Config
from dlio.kvcache import attest, metrics
from dlio.report import verdict, verdict_lines
from dlio.report.family import FamilyReading, FamilyReport, Figure
from dlio.system import output

SCHEMA = "dlio-fast.kvcache/1"


def verdicts(recs: Sequence[Dict[str, Any]], workers: int) -> List[Dict[str, Any]]:
    """Is this a storage result? Per trial and host, for the reads and for the writes, by the
    project's rules (dlio.report.verdict) on the device counters against the bytes that moved."""
    groups: Dict[tuple, List[Dict[str, Any]]] = {}
    for r in recs:
        groups.setdefault((r["trial"], r["host"]), []).append(r)
    out = []
    for (trial, host), rs in sorted(groups.items()):
        for direction in ("read", "write"):
            app = sum(x["exact"]["storage_read_bytes" if direction == "read" else "storage_write_bytes"] for x in rs)
            w = rs[0]["window"]
            c = {
                "wall_s": max(x["window"]["wall_s"] for x in rs),
                "app_bytes": app,
                "app_ops": 0,
                "direction": direction,
                "target": w["target"],
                **_device_share([x["window"] for x in rs], direction),
                "network_bytes": None,
                "resident_before": None,
                "cpu_user_s": sum(x["window"]["cpu_user_s"] for x in rs),
                "cpu_sys_s": sum(x["window"]["cpu_sys_s"] for x in rs),
                "reader_cpu_s": sum(x["window"]["cpu_user_s"] + x["window"]["cpu_sys_s"] for x in rs),
                "reader_threads": workers * len(rs),
                "cores": min(os.cpu_count() or 1, sum(int(x.get("cores") or 1) for x in rs)),
                "host_cpus": os.cpu_count() or 1,
                "host_busy_share": _largest(x["window"].get("host_busy_share") for x in rs),
            }
            if rs[0]["io_mode"] == "null":  # decisions only: nothing to count on a device
                c["device_bytes"] = None
                c["target"] = dict(w["target"], kind="none", why="kvcache.io_mode null issues no I/O")
            out.append(
                {
                    "phase": f"trial {trial} {direction}s",
                    "trial": trial,
                    "host": host,
                    "counters": c,
                    **verdict.classify(c),
                }
            )
    return out


def _largest(xs: Any) -> Any:
    """The largest of the values given (None ones left out), None when none is."""
    given = [x for x in xs if x is not None]
    return max(given) if given else None


def _device_share(windows: Sequence[Dict[str, Any]], direction: str) -> Dict[str, Any]:
    """One host's device and own bytes both ways (the fields of dlio.system.counters.device_share) from its
    ranks' trial windows: the device's are the host's (the largest), the ranks' own are added."""
    out: Dict[str, Any] = {}
    for side in ("read", "write"):
        devs = [w["device"][f"{side}_bytes"] for w in windows if w.get("device")]
        owns = [(w.get("own") or {}).get(f"{side}_bytes") for w in windows]
        out[f"device_{side}_bytes"] = max(devs) if devs else None
        out[f"own_{side}_bytes"] = None if any(o is None for o in owns) else sum(int(o or 0) for o in owns)
    out["device_bytes"], out["own_bytes"] = out[f"device_{direction}_bytes"], out[f"own_{direction}_bytes"]
    out["written_back_bytes"] = max((w.get("written_back_bytes") or 0 for w in windows), default=0)
    return out


# The request engine that ran: the reference's figures, computed the reference's way, from dlio-fast's own
# client (C threads), whose per-request overhead is below kv-cache.py's Python one (by design).
CLIENT = "dlio-fast's C client (the reference is kv-cache.py, a Python client with more overhead per request)"


def run_doc(
    cfg: Config,
    s: Any,
    plan_lines: List[str],
    recs: Sequence[Dict[str, Any]],
    complete: bool,
    reason: str,
    started: str,
    ranks: int,
) -> Dict[str, Any]:
    agg = metrics.aggregate(recs, s.trials)
    return {
        "schema": SCHEMA,
        "workload": cfg.workload or cfg.model.name,
        "complete": complete,
        "reason": reason or None,
        "started": started,
        "environment": output.environment(),
        "settings": {
            "model": s.model.name,
            "bytes_per_token": s.bytes_per_token,
            "users": s.users,
            "workers": s.workers,
            "duration_s": s.duration_s,
            "trials": s.trials,
            "seed": s.seed,  # rank N's users: seed + N
            "max_conversations": s.max_conversations if s.multiturn else 0,
            "trial_gap_s": s.trial_gap_s,
            "cpu_bytes": s.cpu_bytes,
            "max_concurrent_allocs": s.max_concurrent_allocs,
            "io_mode": s.io_mode,
            "storage": recs[0]["storage"] if recs else cfg.storage.storage_type,
            "generation_mode": s.generation_mode,
            "client": CLIENT,
            "chunk_tokens": s.chunk_tokens,
            "cache_dir": os.path.abspath(s.cache_dir),
            "trace": s.trace,
            "ranks": ranks,
        },
        "plan": plan_lines,
        "aggregate": agg,
        "verdicts": verdicts(recs, s.workers),
        "records": [{k: v for k, v in r.items() if k != "reference"} for r in recs],
        "config": cfg.to_dict(),
    }


def summary_doc(
    cfg: Config,
    recs: Sequence[Dict[str, Any]],
    s: Any,
    ranks: int,
    hosts: int,
    stamp: str,
    complete: bool = True,
    reason: str = "",
) -> Dict[str, Any]:
    """mlpstorage's kvcache_run_summary for this one option (rules 6.3.4); a stopped or failed run's is
    partial_failure and "complete": false, with the reason."""
    agg = metrics.aggregate(recs, s.trials)["reference"]
    name = cfg.workload or cfg.model.name
    return {
        "schema_version": "1.0",
        "run_datetime": stamp,
        "npernode": max(1, ranks // max(1, hosts)),
        "host_count": hosts,
        "total_ranks": ranks,
        "trials_per_option": s.trials,
        "options": {name: {"option": name, **agg}},
        "partial_failure": agg["partial_failure"] or not complete,
        "complete": complete,
        "reason": reason or None,
        "client": CLIENT,  # not the reference's kv-cache.py: a CLOSED comparison must say so
    }


def write_all(
    folder: str, doc: Dict[str, Any], cfg: Config, s: Any, recs: Sequence[Dict[str, Any]], ranks: int, hosts: int
) -> None:
    """The run's files in folder: each record's reference JSON, summary.json and dlio-fast.json (doc, run_doc's)."""
    stamp = time.strftime("%Y%m%d_%H%M%S")
    for r in recs:
        d = os.path.join(folder, f"trial_{r['trial']}", f"rank_{r['rank']}")
        os.makedirs(d, exist_ok=True)
        output.write_json(os.path.join(d, f"kvcache_results_{stamp}.json"), r["reference"])
    summary = summary_doc(cfg, recs, s, ranks, hosts, stamp, doc["complete"], doc.get("reason") or "")
    output.write_json(os.path.join(folder, "summary.json"), summary)
    output.write_json(os.path.join(folder, "dlio-fast.json"), doc)


def _f(x: Any, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def _fig(x: Any) -> str:
    """The rules' figure in its own unit, three significant digits below 1 (0.00412, never 0.00)."""
    return "-" if x is None else fmt_figure(x, 2)


def _ms(ms: Any) -> str:
    """The reference's milliseconds in the console's unit family (fmt_ns: 73.2us, 1.25ms, 13.35s)."""
    return "-" if ms is None else fmt_ns(ms * 1e6)


def _gibps(gibps: Any) -> str:
    """dlio-fast's own GiB/s in the console's scale (fmt_rate: 71.7 MiB/s, not 0.07 GiB/s)."""
    return "-" if gibps is None else fmt_rate(gibps * 2**30)


def lines(doc: Dict[str, Any]) -> List[str]:
    """The end of a run on the console: the rules' figures, dlio-fast's, the verdicts, the attestation."""
    a, x = doc["aggregate"]["reference"], doc["aggregate"]["exact"]
    n = doc["settings"]["ranks"]
    out = [
        f"KV cache {doc['workload']}: {n} rank(s) x {doc['settings']['users']} users, {a['trial_count']} trial(s), "
        f"io_mode {doc['settings']['io_mode']}" + ("" if doc["complete"] else f"  [incomplete: {doc['reason']}]"),
        f"    client: {doc['settings'].get('client') or CLIENT}",
        "  as the rules aggregate the reference's figures (summary.json):",
        f"    storage read {_fig(a['aggregated_read_bandwidth_gbps'])} GiB/s, write "
        f"{_fig(a['aggregated_write_bandwidth_gbps'])} GiB/s (demotions left out, as the reference does)",
        f"    device P95 read {_ms(a['aggregated_device_read_p95_ms'])}, write "
        f"{_ms(a['aggregated_device_write_p95_ms'])} (max over ranks and trials)",
        f"    storage throughput {_f(a['aggregated_storage_throughput_tokens_per_sec'], ',.1f')} tokens/s (tokens / "
        f"sum of request storage time); average throughput "
        f"{_f(a['aggregated_avg_throughput_tokens_per_sec'], ',.1f')} tokens/s (tokens / the trial's duration)",
        *overrun_lines(x),
        "  dlio-fast (bytes that moved over the wall-clock window, start to the last request's end; dlio-fast.json):",
        f"    storage read {_gibps(x['storage_read_gibps'])}, write {_gibps(x['storage_write_gibps'])}, of which "
        f"demotions {_gibps(x['demotion_gibps'])} ({x['demotion_writes']} writes)",
        f"    device read P95 {_ms(x['device_read_p95_ms_pooled'])} P99 {_ms(x['device_read_p99_ms_pooled'])}, "
        f"write P95 {_ms(x['device_write_p95_ms_pooled'])} P99 {_ms(x['device_write_p99_ms_pooled'])} (pooled)",
        f"    tokens/s over the wall-clock window {_f(x['tokens_per_s_wall'], ',.1f')}; {x['requests']:,} requests",
    ]
    recs = doc["records"]
    if recs:
        lk = sum(r["result"]["counts"]["hits"] + r["result"]["counts"]["misses"] for r in recs)
        st = sum(r["result"]["counts"]["storage_reads"] for r in recs)
        hits = sum(r["result"]["counts"]["hits"] for r in recs)
        if lk:
            out.append(
                f"    hit rate {hits / lk:.1%} (RAM tier {(hits - st) / lk:.1%}, storage {st / lk:.1%}) of "
                f"{lk:,} lookups"
            )
    out += multi_turn_lines(x.get("multi_turn_stats"))
    split = sum(r["result"]["store"]["split_writes"] for r in recs)
    if split:
        writes = sum(r["result"]["counts"]["storage_writes"] + r["result"]["counts"]["demotions"] for r in recs)
        stage = max(r["result"].get("stage_bytes") or 0 for r in recs)
        out.append(
            f"    note: {split:,} of {writes:,} storage writes were larger than the {stage / 2**20:.0f} MiB staging "
            "buffer and went out in pieces (the reference: one write() per entry; kvcache.stage_bytes)"
        )
    out += verdict_lines.run_lines(doc["verdicts"])
    seen = set()
    for r in recs:
        a_ = r.get("attestation")
        if not a_:
            continue
        key = (tuple(a_["problems"]), a_["fsync_reached_kernel"], a_["fadvise_reached_kernel"])
        if key in seen:
            continue
        seen.add(key)
        out += attest.lines(a_, f" (trial {r['trial']}, rank {r['rank']})")
    return out


def overrun_lines(x: Dict[str, Any]) -> List[str]:
    """What the drain after the duration did to the rules' figures (they divide its bytes by the duration)."""
    out = []
    if x.get("rules_bandwidth_distorted"):
        out.append(
            f"    note: the drain after the duration ran {x['overrun_s']:.1f} s "
            f"(+{x['rules_bandwidth_overrun_share']:.0%} of it): the rules' bandwidth counts its bytes over the "
            "duration alone and overstates what the storage moved; dlio-fast's figures below are over the whole window"
        )
    if x.get("requests_cut"):
        out.append(
            f"    {x['requests_cut']:,} requests in flight at the end stopped between their steps (not counted as "
            "completed; their bytes are)"
        )
    if x.get("capacity_waits"):
        out.append(
            f"    {x['capacity_waits']:,} storage writes waited for an entry in flight to land (the tier keeps to its "
            "capacity plus one entry; kvcache.storage_capacity)"
        )
    return out


def multi_turn_lines(mt: Any) -> List[str]:
    """The earlier-turn reads per request, and the ones the conversation window took away."""
    if not mt:
        return []
    out = [
        f"    multi-turn: {mt['lookups_per_request']:.2f} earlier-turn lookups per request ({mt['cache_hits']:,} hits, "
        f"{mt['cache_misses']:,} misses, hit rate {mt['hit_rate']:.1%})"
    ]
    if mt["conversations_evicted"]:
        out.append(
            f"    conversation window: {mt['conversations_evicted']:,} conversations forgotten; "
            f"{mt['requests_conversation_forgotten']:,} later turns served after theirs was forgotten read no "
            "earlier turn (kvcache.max_conversations, as the reference)"
        )
    if mt["users_stopped"]:
        out.append(
            f"    {mt['users_stopped']:,} users stopped (they continued a forgotten conversation, as the reference's "
            f"user threads die there): {mt['requests_unsent']:,} requests not sent"
        )
    return out


def reading(doc: Dict[str, Any]) -> FamilyReading:
    """What `dlio-fast report` shows of a kvcache document: the rules' aggregation and dlio-fast's."""
    a, x, st = doc["aggregate"]["reference"], doc["aggregate"]["exact"], doc["settings"]
    recs = doc.get("records") or []
    lookups = sum(r["result"]["counts"]["hits"] + r["result"]["counts"]["misses"] for r in recs)
    hits = sum(r["result"]["counts"]["hits"] for r in recs)
    figs = {
        "workload": doc.get("workload") or "-",
        "start": doc.get("started") or "-",
        "trials": a.get("trial_count"),
        **{k: a.get(k) for k in _RULE_KEYS},
        **{k: x.get(k) for k in _EXACT_KEYS},
        "hit_rate_pct": 100.0 * hits / lookups if lookups else None,
    }
    vs = doc.get("verdicts") or []
    verdicts = [(name, v, v.get("counters")) for name, v in zip(verdict_lines.phase_names(vs), vs)]
    settings = {k: st.get(k) for k, _ in REPORT_SETTINGS}
    settings["cpu_bytes"] = fmt_size(int(st["cpu_bytes"])) if st.get("cpu_bytes") else st.get("cpu_bytes")
    return FamilyReading(settings, figs, verdicts)


_RULE_KEYS = (
    "aggregated_read_bandwidth_gbps",
    "aggregated_write_bandwidth_gbps",
    "aggregated_device_read_p95_ms",
    "aggregated_device_write_p95_ms",
    "aggregated_storage_throughput_tokens_per_sec",
)
_EXACT_KEYS = (
    "storage_read_gibps",
    "storage_write_gibps",
    "demotion_gibps",
    "device_read_p95_ms_pooled",
    "device_write_p95_ms_pooled",
    "tokens_per_s_wall",
    "requests",
)
REPORT_SETTINGS = [
    ("model", "model"),
    ("io_mode", "io mode"),
    ("users", "users per rank"),
    ("workers", "workers per rank"),
    ("ranks", "ranks"),
    ("cpu_bytes", "CPU tier bytes"),
    ("max_concurrent_allocs", "concurrent allocations"),
    ("duration_s", "duration per trial (s)"),
    ("trace", "trace"),
]
REPORT_FIGURES: List[Figure] = [
    ("trials", "trials", "", 0),
    ("aggregated_read_bandwidth_gbps", "storage read (rules' formula)", "GiB/s", 3),
    ("aggregated_write_bandwidth_gbps", "storage write, demotions left out (rules' formula)", "GiB/s", 3),
    ("aggregated_device_read_p95_ms", "device read P95 (rules: max over ranks and trials)", "ms", 3),
    ("aggregated_device_write_p95_ms", "device write P95 (rules: max over ranks and trials)", "ms", 3),
    ("aggregated_storage_throughput_tokens_per_sec", "storage throughput (rules' formula)", "tokens/s", 1),
    ("storage_read_gibps", "storage read (bytes over the wall clock)", "GiB/s", 3),
    ("storage_write_gibps", "storage write, demotions included (wall clock)", "GiB/s", 3),
    ("demotion_gibps", "of which demotions", "GiB/s", 3),
    ("device_read_p95_ms_pooled", "device read P95 (pooled)", "ms", 3),
    ("device_write_p95_ms_pooled", "device write P95 (pooled)", "ms", 3),
    ("tokens_per_s_wall", "tokens/s (wall clock)", "tokens/s", 1),
    ("requests", "requests", "", 0),
    ("hit_rate_pct", "cache hit rate (all tiers)", "%", 1),
]
REPORT = FamilyReport(SCHEMA, "KV cache", REPORT_SETTINGS, REPORT_FIGURES, reading)
