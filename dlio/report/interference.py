"""What asynchronous checkpoints cost training (dlio.checkpoint.async_save): pure functions of a rank's
records.

An epoch of a run with ``checkpoint.async_save`` keeps its steps' timestamps (``steps``: t_fetch_ns,
t_end_ns, bytes, compute_ns, set_compute_ns on the monotonic clock of the rank), and each asynchronous
save its write's window on the same clock (write_start_ns .. write_end_ns). A step is *during* a
write when its interval [t_fetch, t_end] overlaps that write's window, *outside* when it overlaps no
write's window. Over a set of steps:

    AU %         100 x the compute they were set to spin (min of set and measured, as the exact AU)
                 / the sum of their durations (t_end - t_fetch: the wait for the batch + the compute)
    read MiB/s   the bytes of their batches / the sum of their durations

The snapshot itself happens between steps (the training blocks there: ``blocked_s`` of each save),
so it is in neither set; it is reported on its own.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional

import numpy as np

from dlio.report.result import CheckpointRecord, RankRecord

MiB = float(1 << 20)


def steps_of(rank: RankRecord) -> Dict[str, np.ndarray]:
    """A rank's step arrays over all its epochs (empty arrays when it kept none)."""
    keys = ("t_fetch_ns", "t_end_ns", "bytes", "compute_ns", "set_compute_ns")
    eps = [ep["steps"] for ep in rank.get("epochs", []) if ep.get("steps")]
    if not eps:
        return {k: np.zeros(0, np.int64) for k in keys}
    return {k: np.concatenate([np.asarray(e[k], dtype=np.int64) for e in eps]) for k in keys}


def async_saves(rank: RankRecord) -> List[CheckpointRecord]:
    """The rank's completed asynchronous saves."""
    return [
        c
        for ep in rank.get("epochs", [])
        for c in ep.get("checkpoints") or []
        if c.get("async") and "write_start_ns" in c
    ]


def overlaps(st: Dict[str, np.ndarray], w0: int, w1: int) -> np.ndarray:
    return (st["t_fetch_ns"] < w1) & (st["t_end_ns"] > w0)


def figures(st: Dict[str, np.ndarray], mask: np.ndarray) -> Optional[Dict[str, Any]]:
    """AU % and read MiB/s of the steps in ``mask`` (None when there are none)."""
    n = int(mask.sum())
    if n == 0:
        return None
    dur = (st["t_end_ns"][mask] - st["t_fetch_ns"][mask]).sum() / 1e9
    comp = np.minimum(st["compute_ns"][mask], st["set_compute_ns"][mask]).sum() / 1e9
    nbytes = int(st["bytes"][mask].sum())
    return {
        "steps": n,
        "seconds": float(dur),
        "au_percentage": 100.0 * comp / dur if dur > 0 else 0.0,
        "bytes": nbytes,
        "read_MiB_per_second": nbytes / MiB / dur if dur > 0 else 0.0,
    }


def annotate(rank: RankRecord) -> None:
    """Set each asynchronous save's ``interference`` (during its write, outside every write) and drop
    the saves whose write failed (the run's failure says so)."""
    for ep in rank.get("epochs", []):
        if ep.get("checkpoints"):
            ep["checkpoints"] = [c for c in ep["checkpoints"] if not c.get("failed")]
    saves = async_saves(rank)
    if not saves:
        return
    st = steps_of(rank)
    busy = np.zeros(len(st["t_fetch_ns"]), dtype=bool)
    for c in saves:
        busy |= overlaps(st, c["write_start_ns"], c["write_end_ns"])
    outside = figures(st, ~busy)
    for c in saves:
        during = figures(st, overlaps(st, c["write_start_ns"], c["write_end_ns"]))
        c["interference"] = {"during": during, "outside": outside, **_drops(during, outside)}


def _drops(during: Optional[Dict[str, Any]], outside: Optional[Dict[str, Any]]) -> Dict[str, Optional[float]]:
    if during is None or outside is None:
        return {"au_drop_points": None, "read_MiB_per_second_ratio": None}
    r = outside["read_MiB_per_second"]
    return {
        "au_drop_points": outside["au_percentage"] - during["au_percentage"],
        "read_MiB_per_second_ratio": during["read_MiB_per_second"] / r if r > 0 else None,
    }


def _mean(vals: Iterable[Optional[float]]) -> Optional[float]:
    v = [x for x in vals if x is not None]
    return float(np.mean(v)) if v else None


def summary(records: Iterable[CheckpointRecord]) -> Optional[Dict[str, Any]]:
    """All ranks' asynchronous saves together (None when there are none): means per save of the
    blocking, the write and the snapshot-to-durable window; AU and read MiB/s during the writes and
    outside them, weighted by the steps' time (every rank's steps)."""
    saves = [c for c in records if c.get("async") and "write_start_ns" in c]
    if not saves:
        return None

    def pooled(which: str) -> Optional[Dict[str, float]]:
        parts = {}
        for c in saves:  # one "outside" per rank: counted once
            f = (c.get("interference") or {}).get(which)
            if f is not None:
                key = (c["rank"], c["epoch"], c["step"]) if which == "during" else c["rank"]
                parts[key] = f
        if not parts:
            return None
        sec = sum(f["seconds"] for f in parts.values())
        au = sum(f["au_percentage"] * f["seconds"] for f in parts.values()) / sec if sec else 0.0
        mib = sum(f["bytes"] for f in parts.values()) / MiB / sec if sec else 0.0
        return {"steps": sum(f["steps"] for f in parts.values()), "au_percentage": au, "read_MiB_per_second": mib}

    return {
        "saves": len(saves),
        "blocked_s_mean": _mean(c["blocked_s"] for c in saves),
        "blocked_s_max": max(c["blocked_s"] for c in saves),
        "copy_s_mean": _mean(c["copy_s"] for c in saves),
        "wait_s_mean": _mean(c["wait_s"] for c in saves),
        "write_s_mean": _mean(c["write_s"] for c in saves),
        "write_GiB_per_second_mean": _mean(c["write_GiB_per_second"] for c in saves),
        "snapshot_to_durable_s_mean": _mean(c.get("snapshot_to_durable_s") for c in saves),
        "staged": any(c.get("staged") for c in saves),
        "during": pooled("during"),
        "outside": pooled("outside"),
    }


def lines(records: Iterable[CheckpointRecord]) -> List[str]:
    """The console's lines on the asynchronous saves of a run."""
    s = summary(records)
    if s is None:
        return []
    dur = s["snapshot_to_durable_s_mean"]
    out = [
        f"Asynchronous checkpoints ({s['saves']} saves, all ranks): training blocked {s['blocked_s_mean']:.4f} s "
        f"per save (max {s['blocked_s_max']:.4f} s; copy {s['copy_s_mean']:.4f} s, waiting for the previous save "
        f"{s['wait_s_mean']:.4f} s); write {s['write_s_mean']:.3f} s at {s['write_GiB_per_second_mean']:.3f} GiB/s; "
        + (f"durable {dur:.3f} s after the snapshot" if dur is not None else "not fsynced (no durable point)")
        + ("; the state was copied through a staging buffer (larger than the host buffer)" if s["staged"] else "")
    ]
    d, o = s["during"], s["outside"]
    if d and o:
        out.append(
            f"Training during the checkpoint writes: AU {d['au_percentage']:.2f} % ({d['steps']} steps) vs "
            f"{o['au_percentage']:.2f} % outside ({o['steps']} steps); read {d['read_MiB_per_second']:.1f} MiB/s vs "
            f"{o['read_MiB_per_second']:.1f} MiB/s"
        )
    elif not d:
        out.append("Training during the checkpoint writes: no step ran while a write was in flight")
    return out
