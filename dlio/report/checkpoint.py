"""Checkpoint figures: DLIO's per-epoch entries and summary fields of the checkpoint records, dlio-fast's
exact figures (bytes over the window every rank was writing), and the console lines; the GiB/s of each
checkpoint of a run document, whatever its records' shape (``checkpoint_series``, for report and plots)."""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Optional

import numpy as np

from dlio.base.units import GiB
from dlio.report.metrics import mean_std
from dlio.report.result import CheckpointRecord


def per_epoch_entry(rec: CheckpointRecord) -> Dict[str, Any]:
    """DLIO's ``save_ckpt{b}`` / ``load_ckpt{b}`` value: start, end, duration (float s), throughput
    (DLIO's checkpoint_size_GB / duration)."""
    return {
        "start": rec["start"],
        "end": rec["end"],
        "duration": rec["duration_s"],
        "throughput": rec["dlio_throughput_GB_per_second"],
    }


def _exact(recs: List[CheckpointRecord], comm_size: int) -> Dict[str, Any]:
    groups: Dict[tuple, List[CheckpointRecord]] = {}
    for r in recs:
        groups.setdefault((r["epoch"], r["step"], r.get("block")), []).append(r)
    ckpts = []
    per_rank: Dict[int, List[float]] = {}
    per_rank_dur: Dict[int, List[float]] = {}
    for key in sorted(groups, key=lambda k: (k[0], k[1], k[2] or 0)):
        g = groups[key]
        nbytes = sum(r["bytes"] for r in g)
        window = (max(r["wall_end_ns"] for r in g) - min(r["wall_start_ns"] for r in g)) / 1e9
        slow = max(g, key=lambda r: r["duration_s"])
        for r in g:
            per_rank.setdefault(r["rank"], []).append(r["GiB_per_second"])
            per_rank_dur.setdefault(r["rank"], []).append(r["duration_s"])
        ckpts.append(
            {
                "epoch": key[0],
                "step": key[1],
                "ranks": len(g),
                "bytes": nbytes,
                "window_seconds": window,
                "aggregate_GiB_per_second": nbytes / GiB / window if window > 0 else 0.0,
                "slowest_rank": slow["rank"],
                "slowest_rank_seconds": slow["duration_s"],
                "fsync_seconds_max": max(r.get("fsync_s", 0.0) for r in g),
                "per_rank_GiB_per_second": {
                    str(r["rank"]): r["GiB_per_second"] for r in sorted(g, key=lambda r: r["rank"])
                },
            }
        )
    agg = [c["aggregate_GiB_per_second"] for c in ckpts]
    fs = [r.get("fsync_s", 0.0) for r in recs]
    mean_dur = {rk: float(np.mean(v)) for rk, v in per_rank_dur.items()}
    slowest = max(mean_dur, key=lambda rk: mean_dur[rk]) if mean_dur else None
    am, asd = mean_std(agg) if agg else (0.0, 0.0)
    return {
        "count": len(ckpts),
        "bytes_per_checkpoint": ckpts[0]["bytes"] if ckpts else 0,
        "aggregate_GiB_per_second_mean": am,
        "aggregate_GiB_per_second_stdev": asd,
        "aggregate_GB_per_second_mean": am * GiB / 1e9,
        "window_seconds_mean": float(np.mean([c["window_seconds"] for c in ckpts])) if ckpts else 0.0,
        "per_rank_GiB_per_second_mean": {str(rk): float(np.mean(v)) for rk, v in sorted(per_rank.items())},
        "slowest_rank": slowest,
        "slowest_rank_seconds_mean": mean_dur[slowest] if slowest is not None else 0.0,
        "fsync_seconds_mean": float(np.mean(fs)) if fs else 0.0,
        "fsync_seconds_max": max(fs) if fs else 0.0,
        "checkpoints": ckpts,
    }


def summary_fields(records: Iterable[CheckpointRecord], comm_size: int) -> Dict[str, Any]:
    """summary.json checkpoint fields from the save/load records of all ranks.

    DLIO's (statscounter.py:144-166), computed as DLIO does: from **rank 0's** records only,
    ``save_checkpoint_io_{mean,stdev}_GB_per_second`` = mean / population stdev of
    ``checkpoint_size_GB / duration`` per checkpoint, ``save_checkpoint_duration_{mean,stdev}_seconds``,
    the ``load_checkpoint_*`` equivalents when there were loads, and ``checkpoint_size_GB`` (DLIO's
    size, in GiB as DLIO's "GB" are).  Save fields are left out when there were no saves (DLIO would
    write NaN).  ``exact`` holds {"save": ..., "load": ...}, each over all ranks: per checkpoint the
    bytes of all ranks / (latest end - earliest start), per-rank GiB/s, the slowest rank, fsync time.
    """
    recs = list(records)
    out: Dict[str, Any] = {}
    r0 = [r for r in recs if r["rank"] == 0]
    for kind in ("save", "load"):
        mine = [r for r in r0 if r["kind"] == kind]
        if not mine:
            continue
        io_m, io_s = mean_std([r["dlio_throughput_GB_per_second"] for r in mine])
        d_m, d_s = mean_std([r["duration_s"] for r in mine])
        out[f"{kind}_checkpoint_io_mean_GB_per_second"] = io_m
        out[f"{kind}_checkpoint_io_stdev_GB_per_second"] = io_s
        out[f"{kind}_checkpoint_duration_mean_seconds"] = d_m
        out[f"{kind}_checkpoint_duration_stdev_seconds"] = d_s
    if recs:
        out["checkpoint_size_GB"] = recs[0]["checkpoint_size_GB"]
    out["exact"] = {
        kind: _exact([r for r in recs if r["kind"] == kind], comm_size)
        for kind in ("save", "load")
        if any(r["kind"] == kind for r in recs)
    }
    return out


def metric_lines(summary: Dict[str, Any]) -> List[str]:
    """DLIO's [METRIC] checkpoint lines (without the prefix), plus the exact aggregate."""
    out = []
    for kind, word in (("save", "save"), ("load", "load")):
        k = f"{kind}_checkpoint_duration_mean_seconds"
        if k in summary:
            out.append(
                f"Checkpoint {word} duration (seconds): {summary[k]:.4f} "
                f"({summary[f'{kind}_checkpoint_duration_stdev_seconds']:.4f})"
            )
            out.append(
                f"Checkpoint {word} I/O Throughput (GB/second): "
                f"{summary[f'{kind}_checkpoint_io_mean_GB_per_second']:.4f} "
                f"({summary[f'{kind}_checkpoint_io_stdev_GB_per_second']:.4f})"
            )
        ex = summary.get("exact", {}).get(kind)
        if ex:
            out.append(
                f"Checkpoint {word} aggregate over all ranks (GiB/second): "
                f"{ex['aggregate_GiB_per_second_mean']:.4f} ({ex['aggregate_GiB_per_second_stdev']:.4f}); "
                f"slowest rank {ex['slowest_rank']} {ex['slowest_rank_seconds_mean']:.4f} s"
                + (f"; fsync {ex['fsync_seconds_mean']:.4f} s mean" if kind == "save" else "")
            )
    return out


# ---------------------------------------------------------------------------------------------
# a run document's checkpoint figures (dlio.report.compare, plots): any record shape, ranks together


def finite_number(v: Any) -> bool:
    """v is an int or float (not a bool) and finite."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def checkpoint_figures(summary: Any, doc: Any) -> Optional[Dict[str, Any]]:
    """Checkpoint figures of a run, or None when it has none:
    {'save': [GiB/s per checkpoint, all ranks], 'load': [...], 'save_GiB_s': mean of those,
     'save_GB_s': DLIO's mean (summary.json save_checkpoint_io_mean_GB_per_second), 'load_...'}.

    Per checkpoint, the records of all ranks (doc['checkpoints']: one per rank and checkpoint,
    with kind save/load, epoch, step, bytes, duration_s, wall_start_ns/wall_end_ns) are summed:
    bytes of all ranks / (latest end - earliest start)."""
    m = (summary or {}).get("metric", {}) if isinstance(summary, dict) else {}
    series = checkpoint_series(doc)
    out: Dict[str, Any] = {"save": series.get("save", []), "load": series.get("load", [])}
    for kind in ("save", "load"):
        v: Any = m.get(f"{kind}_checkpoint_io_mean_GB_per_second")
        out[f"{kind}_GB_s"] = float(v) if finite_number(v) else None
        out[f"{kind}_GiB_s"] = sum(out[kind]) / len(out[kind]) if out[kind] else None
    if not any(out[k] for k in ("save", "load")) and out["save_GB_s"] is None and out["load_GB_s"] is None:
        return None
    return out


def checkpoint_records_of(doc: Any) -> List[Dict[str, Any]]:
    """The checkpoint records of a run document (dlio-fast.json) or of a Result in memory."""
    c = (doc or {}).get("checkpoints")
    if isinstance(c, dict):
        c = c.get("all_records") or c.get("records") or c.get("checkpoints")
    if not c and isinstance((doc or {}).get("ranks"), list):
        # a Result in memory (run --plots): the records are still in the ranks' epochs
        c = [x for r in doc["ranks"] for ep in r.get("epochs") or [] for x in ep.get("checkpoints") or []]
        c += [x for r in doc["ranks"] for x in r.get("checkpoints") or []]
    return [e for e in c or [] if isinstance(e, dict)]


def checkpoint_series(doc: Any) -> Dict[str, List[float]]:
    """{'save': [GiB/s of each checkpoint, all ranks together], 'load': [...]} in checkpoint order."""
    groups: Dict[str, Dict[Any, List[Dict[str, Any]]]] = {}
    for pos, e in enumerate(checkpoint_records_of(doc)):
        kind = _ckpt_kind(e)
        if not kind:
            continue
        if any(k in e for k in ("epoch", "step", "index")):
            key: Any = (e.get("epoch"), e.get("step"), e.get("block"), e.get("index"))
        else:
            key = pos
        groups.setdefault(kind, {}).setdefault(key, []).append(e)
    out: Dict[str, List[float]] = {}
    for kind, g in groups.items():
        vals = [_ckpt_aggregate(recs) for recs in g.values()]
        out[kind] = [v for v in vals if v is not None]
    return out


def _ckpt_aggregate(recs: List[Dict[str, Any]]) -> Optional[float]:
    if len(recs) == 1:
        return _ckpt_gbs(recs[0])
    nbytes: List[Any] = [r.get("bytes") for r in recs]
    if all(finite_number(b) for b in nbytes):
        starts: List[Any] = [r.get("wall_start_ns") for r in recs]
        ends: List[Any] = [r.get("wall_end_ns") for r in recs]
        if all(finite_number(x) for x in starts + ends) and max(ends) > min(starts):
            return sum(nbytes) / 1024**3 / ((max(ends) - min(starts)) / 1e9)
        durs: List[Any] = [r.get("duration_s") for r in recs]
        if all(finite_number(d) for d in durs) and max(durs) > 0:
            return sum(nbytes) / 1024**3 / max(durs)
    rates = [_ckpt_gbs(r) for r in recs]
    known = [x for x in rates if x is not None]
    return sum(known) if len(known) == len(rates) else None


def _ckpt_kind(e: Dict[str, Any]) -> Optional[str]:
    for k in ("kind", "op", "type", "mode", "operation"):
        v = str(e.get(k, "")).lower()
        if v in ("save", "write", "w"):
            return "save"
        if v in ("load", "read", "r"):
            return "load"
    return None


def _ckpt_gbs(e: Dict[str, Any]) -> Optional[float]:
    """One record's GiB/s."""
    for k in (
        "GiB_per_second",
        "aggregate_GiB_per_second",
        "GB_per_second",
        "throughput_GB_per_second",
        "dlio_throughput_GB_per_second",
        "throughput",
    ):
        if finite_number(e.get(k)):
            return float(e[k])
    nbytes: Any = e.get("bytes", e.get("size_bytes"))
    dur: Any = e.get("duration_s", e.get("duration"))
    if finite_number(nbytes) and finite_number(dur) and float(dur) > 0:
        return float(nbytes) / 1024**3 / float(dur)
    return None
