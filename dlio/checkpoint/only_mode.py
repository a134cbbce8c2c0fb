"""DLIO's checkpoint-only mode (``workflow.train: false, checkpoint: true``): saves, then loads, each
after DLIO's pause, with DLIO's console lines, per_epoch_stats entries and summary fields."""

from __future__ import annotations

import dataclasses
import signal
import time
from typing import Any, Callable, Dict, List, Optional, Tuple, cast

from dlio.base.errors import DlioError, DlioRunError, Interrupted
from dlio.base.units import dlio_line, fmt_bytes
from dlio.checkpoint.layout import CheckpointPlan, plan_checkpoint
from dlio.checkpoint.load import load, ranks_per_node
from dlio.checkpoint.record import counted, extend_window
from dlio.checkpoint.save import save
from dlio.checkpoint.summary import size_lines
from dlio.checkpoint.transfers import TransferOptions
from dlio.config import Config
from dlio.progress import LONG_PAUSE_S, Progress
from dlio.progress import pause as announced_pause
from dlio.report import checkpoint as ckpt_figures
from dlio.report.result import CheckpointRecord
from dlio.storage import backend_for
from dlio.storage.base import Backend
from dlio.system.execute import pending
from dlio.system.host import iso
from dlio.system.mpi import Comm


def checkpoints_in(backend: Backend, root: str) -> int:
    """How many checkpoints (global_epoch*_step* folders) are under the checkpoint root."""
    cut = len(root.rstrip("/")) + 1
    return len({n[cut:].split("/", 1)[0] for n in backend.list(root) if "/" in n[cut:]})


def sleep_seconds(cfg: Config) -> float:
    """DLIO sleeps abs(time_between_checkpoints) before each checkpoint-only op: -1 (default) is 1 s."""
    return abs(float(cfg.checkpoint.time_between_checkpoints))


def run_checkpoint_only(
    cfg: Config,
    comm: Optional[Comm],
    echo: Optional[Callable[[str], None]] = None,
    sleep_s: Optional[float] = None,
    opts: Optional[TransferOptions] = None,
    progress: Optional[Progress] = None,
) -> Dict[str, Any]:
    """DLIO's checkpoint-only mode (``workflow.train: false, checkpoint: true``), main.py:281-336.

    ``num_checkpoints_write`` x (sleep, barrier, save ``global_epoch1_step{i}``, barrier if rank_sync,
    inside the window), then a check that ``checkpoint_folder`` holds >= ``num_checkpoints_read``
    entries, then ``num_checkpoints_read`` x (sleep, drop cache, barrier, load ``global_epoch1_step{i}``,
    barrier if rank_sync).  The sleep is ``abs(time_between_checkpoints)`` like DLIO (its -1 default
    sleeps 1 s) unless ``sleep_s`` is given; ``opts``: how the files move (None: the config's; every
    save and load has a barrier right before its window); the sleeps are announced (a line from
    dlio.progress.LONG_PAUSE_S, a phase of their own on the live display) and a stop signal ends one
    early.  ``echo`` gets rank 0's console lines (DLIO's wording); ``progress`` (dlio.progress.Progress,
    rank 0) shows each save and load, with the checkpoint ops as the run line.

    Returns {"plan", "records" (this rank's), "all_records" and "summary" (rank 0: every rank's
    records and ``summary_fields``; None elsewhere), "per_epoch_stats" (this rank's, DLIO's shape),
    "start", "end", "failure"}: a save or load that fails (a full disk, storage gone) or a stop signal
    ends the mode with the records of those done kept, and "failure" the DlioRunError or Interrupted
    (then no collective runs and "all_records" is None)."""
    comm = comm if comm is not None else Comm()
    backend = backend_for(cfg)
    say = echo if (echo is not None and comm.rank == 0) else (lambda s: None)
    c = cfg.checkpoint
    plan = plan_checkpoint(cfg, comm.rank, comm.size)
    pause = sleep_seconds(cfg) if sleep_s is None else abs(float(sleep_s))
    for line in size_lines(plan, cfg):
        say(dlio_line(line))
    ppn = None
    if c.recovery_rank_shift:
        ppn = ranks_per_node(comm)
        if comm.size // ppn < 2:
            say("This run is on single client; checkpoint_recovery_rank_shift does not apply.")
    start = iso()
    stats: Dict[str, Any] = {"start": start}
    records: List[Dict[str, Any]] = []
    nw, nr = max(0, c.num_checkpoints_write), max(0, c.num_checkpoints_read)

    if progress is not None:
        progress.run_begin("checkpoints", "op", nw + nr)
    if pause * (nw + nr) >= LONG_PAUSE_S:
        say(
            f"Each of the {nw + nr} checkpoint saves and loads waits {pause:g} s first "
            f"(checkpoint.time_between_checkpoints): {pause * (nw + nr):g} s of sleep in all"
        )

    def one(kind: str, i: int, op: Callable[[], Dict[str, Any]]) -> None:
        """One checkpoint-only save or load: DLIO's pause, lines, rank_sync barrier in the window."""
        k = i if kind == "save" else nw + i
        if progress is not None:
            progress.run_at(k, f"{kind} {i} of {nw if kind == 'save' else nr}")
        why = "checkpoint.time_between_checkpoints"
        if not announced_pause(progress, pause, f"before checkpoint {i} {kind}", why, echo=say):
            raise pending() or Interrupted(signal.SIGINT)
        verb = "saving" if kind == "save" else "loading"
        say(f"Starting {verb} checkpoint {i} after total step {i} for epoch 1")
        rec = counted(cfg, backend, kind, op)
        if c.rank_sync:
            t = time.monotonic_ns()
            comm.barrier()
            extend_window(rec, (time.monotonic_ns() - t) / 1e9)
        rec["block"] = i
        records.append(rec)
        stats[f"{kind}_ckpt{i}"] = ckpt_figures.per_epoch_entry(cast(CheckpointRecord, rec))
        if kind == "save":
            extra = f"{fmt_bytes(rec['bytes'])}, {rec['GiB_per_second']:.4f} GiB/s" + (
                f", fsync {rec['fsync_s']:.4f} s" if rec["fsync"] else ""
            )
        else:
            extra = f"{rec['GiB_per_second']:.4f} GiB/s, page cache {rec['cache']}"
        say(
            dlio_line(
                f"Finished {verb} checkpoint {i} for epoch 1 in {rec['duration_s']:.4f} s; Throughput: "
                f"{rec['dlio_throughput_GB_per_second']:.4f} GB/s"
            )
        )
        say(f"Checkpoint {i} {kind}, this rank: {extra}")

    failure: Optional[BaseException] = None
    try:
        xfer = dataclasses.replace(opts if opts is not None else TransferOptions(), barrier=True)
        _saves_and_loads(cfg, comm, one, say, (nw, nr), backend, xfer, plan, ppn, progress)
    except (DlioRunError, Interrupted) as e:  # a failed or stopped save or load: those done are kept
        failure = e
    end = iso()
    stats["end"] = end
    out = {"plan": plan.to_dict(), "records": records, "per_epoch_stats": {"1": stats}, "start": start, "end": end}
    if failure is not None:  # no collective: another rank may be gone (the caller writes each rank's part)
        return {**out, "all_records": None, "summary": None, "failure": failure}
    gathered = comm.gather(records, root=0)
    all_records = None
    summary = None
    if comm.rank == 0:
        assert gathered is not None  # rank 0 gathers
        all_records = [r for rank_recs in gathered for r in rank_recs]
        summary = ckpt_figures.summary_fields(cast(List[CheckpointRecord], all_records), comm.size)
    return {**out, "all_records": all_records, "summary": summary, "failure": None}


def _saves_and_loads(
    cfg: Config,
    comm: Comm,
    one: Callable[[str, int, Callable[[], Dict[str, Any]]], None],
    say: Callable[[str], None],
    counts: Tuple[int, int],
    backend: Backend,
    xfer: TransferOptions,
    plan: CheckpointPlan,
    ppn: Optional[int],
    progress: Optional[Progress],
) -> None:
    """``counts`` (saves, loads) in turn, each an ``one`` op; the loads after a check that the
    checkpoints they read were written."""
    nw, nr = counts
    if nw:
        say("Checkpointing write started")
    for i in range(1, nw + 1):
        one(
            "save",
            i,
            lambda: save(cfg, comm, 1, i, xfer, plan=plan, backend=backend, progress=progress),
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
            lambda: load(cfg, comm, 1, i, xfer, plan=plan, backend=backend, progress=progress, ranks_per_node_=ppn),
        )
    if nr:
        say("Checkpointing read finished")
