"""DLIO's checkpoint-only mode (``workflow.train: false, checkpoint: true``): saves, then loads, each
after DLIO's pause, with DLIO's console lines, per_epoch_stats entries and summary fields."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

from dlio.checkpoint.layout import plan_checkpoint
from dlio.checkpoint.load import load, ranks_per_node
from dlio.checkpoint.record import extend_window
from dlio.checkpoint.save import save
from dlio.checkpoint.summary import size_lines
from dlio.errors import DlioError, DlioRunError, Interrupted
from dlio.host import iso
from dlio.mpi import Comm
from dlio.report import checkpoint as ckpt_figures
from dlio.storage import backend_for
from dlio.storage.base import Backend
from dlio.units import GiB


def checkpoints_in(backend: Backend, root: str) -> int:
    """How many checkpoints (global_epoch*_step* folders) are under the checkpoint root."""
    cut = len(root.rstrip("/")) + 1
    return len({n[cut:].split("/", 1)[0] for n in backend.list(root) if "/" in n[cut:]})


def sleep_seconds(cfg: Any) -> float:
    """DLIO sleeps abs(time_between_checkpoints) before each checkpoint-only op: -1 (default) is 1 s."""
    return abs(float(cfg.checkpoint.time_between_checkpoints))


def run_checkpoint_only(
    cfg: Any,
    comm: Optional[Comm],
    echo: Optional[Callable[[str], None]] = None,
    sleep_s: Optional[float] = None,
    engine: Optional[str] = None,
    direct: Optional[bool] = None,
    drop: Optional[bool] = None,
) -> Dict[str, Any]:
    """DLIO's checkpoint-only mode (``workflow.train: false, checkpoint: true``), main.py:281-336.

    ``num_checkpoints_write`` x (sleep, barrier, save ``global_epoch1_step{i}``, barrier if rank_sync,
    inside the window), then a check that ``checkpoint_folder`` holds >= ``num_checkpoints_read``
    entries, then ``num_checkpoints_read`` x (sleep, drop cache, barrier, load ``global_epoch1_step{i}``,
    barrier if rank_sync).  The sleep is ``abs(time_between_checkpoints)`` like DLIO (its -1 default
    sleeps 1 s) unless ``sleep_s`` is given.  ``echo`` gets rank 0's console lines (DLIO's wording).

    Returns {"plan", "records" (this rank's), "all_records" and "summary" (rank 0: every rank's
    records and ``summary_fields``; None elsewhere), "per_epoch_stats" (this rank's, DLIO's shape),
    "start", "end"}."""
    comm = comm if comm is not None else Comm()
    backend = backend_for(cfg)
    say = echo if (echo is not None and comm.rank == 0) else (lambda s: None)
    c = cfg.checkpoint
    plan = plan_checkpoint(cfg, comm.rank, comm.size)
    pause = sleep_seconds(cfg) if sleep_s is None else abs(float(sleep_s))
    for line in size_lines(plan, cfg):
        say(line)
    ppn = None
    if c.recovery_rank_shift:
        ppn = ranks_per_node(comm)
        if comm.size // ppn < 2:
            say("This run is on single client; checkpoint_recovery_rank_shift does not apply.")
    start = iso()
    stats: Dict[str, Any] = {"start": start}
    records: List[Dict[str, Any]] = []
    nw, nr = max(0, c.num_checkpoints_write), max(0, c.num_checkpoints_read)

    def one(kind, i, op):
        """One checkpoint-only save or load: DLIO's pause, lines, rank_sync barrier in the window."""
        time.sleep(pause)
        verb = "saving" if kind == "save" else "loading"
        say(f"Starting {verb} checkpoint {i} after total step {i} for epoch 1")
        rec = op()
        if c.rank_sync:
            t = time.monotonic_ns()
            comm.barrier()
            extend_window(rec, (time.monotonic_ns() - t) / 1e9)
        rec["block"] = i
        records.append(rec)
        stats[f"{kind}_ckpt{i}"] = ckpt_figures.per_epoch_entry(rec)
        if kind == "save":
            extra = f"{rec['bytes'] / GiB:.4f} GiB, {rec['GiB_per_second']:.4f} GiB/s" + (
                f", fsync {rec['fsync_s']:.4f} s" if rec["fsync"] else ""
            )
        else:
            extra = f"{rec['GiB_per_second']:.4f} GiB/s, page cache {rec['cache']}"
        say(
            f"Finished {verb} checkpoint {i} for epoch 1 in {rec['duration_s']:.4f} s; Throughput: "
            f"{rec['dlio_throughput_GB_per_second']:.4f} GB/s"
        )
        say(f"Checkpoint {i} {kind}, this rank: {extra}")  # own line: DLIO's "GB" above are GiB

    try:
        if nw:
            say("Checkpointing write started")
        for i in range(1, nw + 1):
            one(
                "save",
                i,
                lambda: save(cfg, comm, 1, i, engine=engine, direct=direct, plan=plan, barrier=True, backend=backend),
            )
        if nw:
            say("Checkpointing write finished")
        if nr:
            root = backend.checkpoint_root(cfg)
            have = checkpoints_in(backend, root)
            if have < nr:
                raise DlioError(
                    f"checkpoint.num_checkpoints_read = {nr}: only {have} checkpoints in {root}; "
                    "write them first (num_checkpoints_write) or read fewer"
                )
            say("Checkpointing read started")
        for i in range(1, nr + 1):
            one(
                "load",
                i,
                lambda: load(
                    cfg,
                    comm,
                    1,
                    i,
                    engine=engine,
                    direct=direct,
                    drop=drop,
                    plan=plan,
                    ranks_per_node_=ppn,
                    barrier=True,
                    backend=backend,
                ),
            )
        if nr:
            say("Checkpointing read finished")
    except (DlioRunError, Interrupted) as e:  # a failed or stopped save: the ones done before it are kept
        e.records, e.phase = records, {"start": start, "end": iso()}
        raise
    end = iso()
    stats["end"] = end
    gathered = comm.gather(records, root=0)
    all_records = None
    summary = None
    if comm.rank == 0:
        all_records = [r for rank_recs in gathered for r in rank_recs]
        summary = ckpt_figures.summary_fields(all_records, comm.size)
    return {
        "plan": plan.to_dict(),
        "records": records,
        "all_records": all_records,
        "summary": summary,
        "per_epoch_stats": {"1": stats},
        "start": start,
        "end": end,
    }
