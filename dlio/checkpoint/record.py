"""The record of one checkpoint save or load on one rank, and its timed window.

A plain JSON-ready dict (``dlio.report.result.CheckpointRecord``; every backend's saves and loads)::

    kind ("save"|"load"), rank, epoch, step, folder (absolute), source_rank (load), start/end (DLIO's
    local ISO time strings), wall_start_ns/wall_end_ns (time.time_ns, to line ranks up),
    duration_s (the window: prepare + I/O + fsync [+ rank_sync barrier in checkpoint-only mode]),
    prepare_s (mkdir/create for a save), io_s (the C run's first request to last completion),
    fsync_s, sync_s, bytes, nfiles, files [{name, bytes}], GiB_per_second (bytes / duration),
    dlio_throughput_GB_per_second (DLIO's: checkpoint_size_GB / duration, see dlio.report.checkpoint),
    checkpoint_size_GB (DLIO's size), engine, direct, threads, qd, transfer_size, fsync, cache,
    randomize_tensor.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Sequence

from dlio.base.units import GiB
from dlio.checkpoint.layout import CkptFile
from dlio.config import Config
from dlio.storage.base import Backend, SetResult
from dlio.system.host import iso
from dlio.system.mpi import Comm


def new_record(
    kind: str,
    comm: Comm,
    epoch: int,
    step: int,
    folder: str,
    plan_size: float,
    files: Sequence[CkptFile],
    **kw: Any,
) -> Dict[str, Any]:
    """A save's or load's record before its window is known (``finish_record`` adds it); ``kw`` are
    its other fields, in order."""
    rec = {
        "kind": kind,
        "rank": comm.rank,
        "comm_size": comm.size,
        "epoch": int(epoch),
        "step": int(step),
        "folder": folder,
        "files": [{"name": f.name, "bytes": f.nbytes} for f in files],
        "nfiles": len(files),
        "checkpoint_size_GB": plan_size,
    }
    rec.update(kw)
    return rec


def set_fields(res: SetResult) -> Dict[str, Any]:
    """The fields of a record that say how its set moved (the backend's choices), in order."""
    return {
        "engine": res.engine,
        "direct": res.direct,
        "threads": res.threads,
        "qd": res.qd,
        "transfer_size": res.transfer_size,
    }


def _set_duration(rec: Dict[str, Any], dur: float) -> None:
    """The window's length and the rates over it (the exact GiB/s and DLIO's throughput)."""
    rec["duration_s"] = dur
    rec["GiB_per_second"] = rec["bytes"] / GiB / dur if dur > 0 else 0.0
    rec["dlio_throughput_GB_per_second"] = rec["checkpoint_size_GB"] / dur if dur > 0 else 0.0


def finish_record(rec: Dict[str, Any], w0: float, m0: int, m1: int) -> Dict[str, Any]:
    """Add the window to ``rec``: it started at wall time ``w0`` (s) and monotonic ``m0``, ended at
    monotonic ``m1`` (ns)."""
    dur = (m1 - m0) / 1e9
    rec["start"] = iso(w0)
    rec["end"] = iso(w0 + dur)
    rec["wall_start_ns"] = int(w0 * 1e9)
    rec["wall_end_ns"] = int(w0 * 1e9 + (m1 - m0))
    _set_duration(rec, dur)
    return rec


def extend_window(rec: Dict[str, Any], extra_s: float, what: str = "sync_s") -> Dict[str, Any]:
    """Add ``extra_s`` seconds spent after the I/O (a rank_sync barrier) to a record's window."""
    rec[what] = rec.get(what, 0.0) + extra_s
    m = rec["duration_s"] + extra_s
    w0 = rec["wall_start_ns"] / 1e9
    _set_duration(rec, m)
    rec["end"] = iso(w0 + m)
    rec["wall_end_ns"] = rec["wall_start_ns"] + int(m * 1e9)
    return rec


def counted(cfg: Config, backend: Backend, kind: str, op: Callable[[], Dict[str, Any]]) -> Dict[str, Any]:
    """A save's or load's record with the kernel's counters around it as "counters", for its verdict
    (dlio.report.verdict.annotate_run, per host): in checkpoint-only mode and between training's steps."""
    phase = backend.phase([backend.checkpoint_root(cfg)], str(cfg.dlio_fast.engine or ""))
    rec = op()
    rec["counters"] = phase.end(rec["bytes"], len(rec["files"]), None, rec["threads"], write=kind == "save")
    return rec
