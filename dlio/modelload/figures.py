"""The figures of a model load, pure functions of the ranks' pass records (dlio.modelload.family):

time to ready    per rank: from the moment all ranks start (a barrier) until the rank holds every
                 byte it reads (its files opened, mapped or read, its pages faulted in); the load's
                 time is the slowest rank's (serving starts when the last rank is ready)
GiB/s            per rank: its bytes / its time to ready; all ranks: every rank's bytes / the slowest
                 rank's time (what the storage delivered to the job)
page faults      minor and major faults of the rank's process over the load (getrusage): mmap loads
                 fault the pages in; a fault maps a whole folio of the page cache (and its fault-around
                 neighbours), so there are fewer faults than pages, how many fewer the kernel decides
verdict          per load and host, dlio.report.verdict's rules on the kernel counters (device bytes
                 against the bytes read); a warm load is the page cache's figure and is labelled so
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from dlio.base.units import fmt_bytes, fmt_size
from dlio.report import verdict, verdict_lines
from dlio.report.family import FamilyReading, Figure

GiB = float(1 << 30)


def pass_summary(recs: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """One load of all ranks: slowest and fastest rank, all ranks' GiB/s, faults."""
    t = np.array([r["time_to_ready_s"] for r in recs], dtype=np.float64)
    nbytes = sum(int(r["bytes"]) for r in recs)
    slow = int(np.argmax(t))
    return {
        "pass": recs[0]["pass"],
        "kind": recs[0]["kind"],
        "slowest_rank": int(recs[slow]["rank"]),
        "slowest_rank_s": float(t[slow]),
        "fastest_rank_s": float(t.min()),
        "bytes": nbytes,
        "GiB_per_second": nbytes / GiB / t[slow] if t[slow] > 0 else 0.0,
        "rank_GiB_per_second_mean": float(np.mean([r["GiB_per_second"] for r in recs])),
        "minflt": sum(int(r.get("minflt") or 0) for r in recs),
        "majflt": sum(int(r.get("majflt") or 0) for r in recs),
    }


def verdicts(recs: Sequence[Dict[str, Any]], warm: bool) -> List[Dict[str, Any]]:
    """The verdict of one load per host (its ranks' counters combined); a warm load says it read the
    page cache whatever the counters say."""
    hosts: Dict[str, List[Dict[str, Any]]] = {}
    for r in recs:
        if r.get("counters"):
            hosts.setdefault(r["hostname"], []).append(r["counters"])
    out = []
    for host, cs in hosts.items():
        v = verdict.classify(verdict.combine(cs))
        if warm and v["verdict"] != "cache":
            v = dict(v, verdict="cache", reason=f"warm load: a second pass over the shards just read ({v['reason']})")
        out.append({"phase": f"load {recs[0]['pass']}", "host": host, **v})
    return out


def overall(passes: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The timed loads together: the slowest rank's time to ready (mean, min, max) and GiB/s."""
    timed = [p for p in passes if p["kind"] == "timed"]
    if not timed:
        return {}
    s = np.array([p["slowest_rank_s"] for p in timed])
    g = np.array([p["GiB_per_second"] for p in timed])
    return {
        "loads": len(timed),
        "time_to_ready_s": {"mean": float(s.mean()), "min": float(s.min()), "max": float(s.max())},
        "GiB_per_second": {"mean": float(g.mean()), "min": float(g.min()), "max": float(g.max())},
    }


def pass_line(p: Dict[str, Any], cache: str, nranks: int) -> str:
    kind = "warm-up, not counted" if p["kind"] == "warm-up" else cache
    faults = f"; page faults {p['minflt']:,} minor, {p['majflt']:,} major" if p["minflt"] or p["majflt"] else ""
    ranks = f" (rank {p['slowest_rank']}; fastest {p['fastest_rank_s']:.3f} s)" if nranks > 1 else ""
    return (
        f"Load {p['pass']} [{kind}]: ready in {p['slowest_rank_s']:.3f} s{ranks}, "
        f"{fmt_bytes(p['bytes'])} read, {p['GiB_per_second']:.3f} GiB/s{faults}"
    )


def summary_lines(result: Dict[str, Any]) -> List[str]:
    """The console's lines after the loads."""
    o = result.get("summary") or {}
    out = []
    if o:
        t, g = o["time_to_ready_s"], o["GiB_per_second"]
        warm = " (warm: the page cache's figure, not the storage's)" if result["settings"]["cache"] == "warm" else ""
        out.append(
            f"Time to ready (slowest rank), {o['loads']} load(s): mean {t['mean']:.3f} s, min {t['min']:.3f} s, "
            f"max {t['max']:.3f} s; all ranks {g['mean']:.3f} GiB/s{warm}"
        )
    vs = result.get("verdicts") or []
    if vs:
        out.append("Verdict (is this a storage result?):")
        out += ["  " + verdict_lines.line(name, v) for name, v in zip(verdict_lines.phase_names(vs), vs)]
        out.append(f"  thresholds: {verdict.THRESHOLDS}")
    return out


def reading(doc: Dict[str, Any]) -> FamilyReading:
    """What `dlio-fast report` shows of a model-load document (REPORT in dlio.modelload.family)."""
    st, model = doc["settings"], doc["model"]
    o = doc.get("summary") or {}
    timed = [p for p in doc.get("loads") or [] if p["kind"] == "timed"]
    t, g = o.get("time_to_ready_s") or {}, o.get("GiB_per_second") or {}
    faults = [p["minflt"] + p["majflt"] for p in timed]
    figs = {
        "workload": doc.get("workload") or "-",
        "start": doc.get("start") or "-",
        "ranks": doc.get("comm_size"),
        "model_GiB": int(model["bytes"]) / 2**30,  # binary, as the GiB/s beside it
        "shards": len(model.get("shards") or []),
        "loads": o.get("loads"),
        "ready_mean_s": t.get("mean"),
        "ready_min_s": t.get("min"),
        "ready_max_s": t.get("max"),
        "GiB_s_mean": g.get("mean"),
        "rank_GiB_s_mean": float(np.mean([p["rank_GiB_per_second_mean"] for p in timed])) if timed else None,
        "faults_per_load": float(np.mean(faults)) if faults else None,
    }
    settings = {k: st.get(k) for k, _ in REPORT_SETTINGS}
    settings["transfer_size"] = fmt_size(int(st["transfer_size"])) if st.get("transfer_size") else None
    # each verdict beside the counters it was made from: its load's ranks on its host, combined
    counters: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for r in doc.get("ranks") or []:
        if r.get("counters"):
            counters.setdefault((f"load {r['pass']}", r["hostname"]), []).append(r["counters"])
    vs = doc.get("verdicts") or []
    verdicts = [
        (name, v, verdict.combine(counters[(v["phase"], v["host"])]) if (v["phase"], v["host"]) in counters else None)
        for name, v in zip(verdict_lines.phase_names(vs), vs)
    ]
    return FamilyReading(settings, figs, verdicts)


REPORT_SETTINGS = [
    ("model", "model"),
    ("read_mode", "read mode"),
    ("cache", "cache"),
    ("tensor_parallel", "tensor parallel"),
    ("threads", "threads per rank"),
    ("qd", "queue depth"),
    ("transfer_size", "transfer size"),
    ("storage_type", "storage"),
]
REPORT_FIGURES: List[Figure] = [
    ("ranks", "ranks", "", 0),
    ("model_GiB", "model size", "GiB", 2),
    ("shards", "shards", "", 0),
    ("loads", "timed loads", "", 0),
    ("ready_mean_s", "time to ready (slowest rank), mean", "s", 3),
    ("ready_min_s", "time to ready, fastest load", "s", 3),
    ("ready_max_s", "time to ready, slowest load", "s", 3),
    ("GiB_s_mean", "GiB/s, all ranks (bytes / slowest rank's time)", "GiB/s", 3),
    ("rank_GiB_s_mean", "GiB/s per rank, mean", "GiB/s", 3),
    ("faults_per_load", "page faults per load (all ranks)", "", 0),
]
