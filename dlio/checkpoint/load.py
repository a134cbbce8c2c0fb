"""A checkpoint load of one rank through the C core, timed.

A load (``load``) first drops the files' cached pages (posix_fadvise DONTNEED after fdatasync, outside
the window; DLIO reads straight back from the page cache), then reads every byte of the files in the
same requests as a save (``dlio.checkpoint.transfers``).  With ``checkpoint.recovery_rank_shift``
rank r reads the files of rank ``(r + ranks_per_node) % size`` (DLIO's intent; its typo disables it).
The record is ``dlio.checkpoint.record``'s.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Dict, Optional

from dlio.checkpoint.layout import CheckpointPlan, folder_of, plan_checkpoint, rank_files, step_folder
from dlio.checkpoint.record import finish_record, new_record
from dlio.checkpoint.transfers import TRANSFER, run_core, thread_plan, threads_for
from dlio.config import engines
from dlio.errors import DlioError
from dlio.host import drop_cache
from dlio.mpi import Comm


def ranks_per_node(comm: Comm) -> int:
    """Ranks on this rank's host (collective: every rank must call it)."""
    hosts = comm.allgather(socket.gethostname())
    return max(1, hosts.count(hosts[comm.rank]))


def recovery_source(rank: int, size: int, ppn: int) -> int:
    """The rank whose files ``rank`` reads with recovery_rank_shift: (rank + ppn) % size."""
    return (rank + ppn) % size


def default_drop(cfg: Any) -> bool:
    """Checkpoint loads drop the page cache unless dlio_fast.cache was set to keep explicitly."""
    return not (cfg.dlio_fast.cache == "keep" and cfg.origin("dlio_fast.cache") != "default")


def load(
    cfg: Any,
    comm: Optional[Comm],
    epoch: int,
    step: int,
    engine: Optional[str] = None,
    direct: Optional[bool] = None,
    qd: Optional[int] = None,
    threads: Optional[int] = None,
    drop: Optional[bool] = None,
    transfer: int = TRANSFER,
    plan: Optional[CheckpointPlan] = None,
    ranks_per_node_: Optional[int] = None,
    barrier: bool = False,
) -> Dict[str, Any]:
    """Read back the checkpoint files of ``global_epoch{epoch}_step{step}``; returns the record.

    ``drop``: drop the files' cached pages first (default: yes, see ``default_drop``).  With
    ``checkpoint.recovery_rank_shift`` the files of rank ``(rank + ranks_per_node) % size`` are read;
    ``ranks_per_node_`` gives the ranks per node, else it is found collectively (all ranks call load)."""
    comm = comm if comm is not None else Comm()
    if cfg.storage.storage_type == "s3":
        from dlio.objstore import checkpoint as s3_checkpoint

        return s3_checkpoint.load(cfg, comm, epoch, step, plan, barrier, ranks_per_node_)
    plan = plan if plan is not None else plan_checkpoint(cfg, comm.rank, comm.size)
    eng, direct = engines.resolve(cfg.dlio_fast.engine if engine is None else engine, direct, checkpoint=True)
    qd = int(qd if qd is not None else cfg.dlio_fast.qd)
    drop = default_drop(cfg) if drop is None else bool(drop)
    src = comm.rank
    if cfg.checkpoint.recovery_rank_shift:
        ppn = ranks_per_node_ if ranks_per_node_ is not None else ranks_per_node(comm)
        src = recovery_source(comm.rank, comm.size, ppn)
    files = list(plan.files) if src == comm.rank else rank_files(cfg, src, comm.size)
    folder = folder_of(cfg, epoch, step)
    paths = [os.path.join(folder, f.name) for f in files]
    for p, f in zip(paths, files):
        try:
            size = os.stat(p).st_size
        except OSError:
            raise DlioError(
                f"{p}: checkpoint file missing (rank {src}'s file of {step_folder(epoch, step)}); "
                "write the checkpoint first"
            ) from None
        if size < f.nbytes:
            raise DlioError(
                f"{p}: {size} bytes, the checkpoint plan says {f.nbytes}: written with another model configuration?"
            )
    cache = "kept"
    if drop and eng != "null":
        cache = drop_cache(paths)
    ops, first, nthreads = thread_plan(files, 0, transfer, 1, threads_for(files, transfer, threads))
    if barrier:
        comm.barrier()
    w0 = time.time()
    m0 = time.monotonic_ns()
    res = run_core(eng, paths, ops, first, nthreads, qd, direct)
    m1 = time.monotonic_ns()
    rec = new_record(
        "load",
        comm,
        epoch,
        step,
        folder,
        plan.dlio_size_GiB,
        files,
        source_rank=src,
        bytes=int(res["bytes"]),
        prepare_s=0.0,
        io_s=(res["t_end"] - res["t_start"]) / 1e9 if len(ops) else 0.0,
        io_window_s=(m1 - m0) / 1e9,
        fsync_s=0.0,
        sync_s=0.0,
        engine=eng,
        direct=direct,
        threads=nthreads,
        qd=qd,
        transfer_size=transfer,
        fsync=False,
        cache=cache,
        randomize_tensor=bool(cfg.checkpoint.randomize_tensor),
        writer="c-core",
    )
    return finish_record(rec, w0, m0, m1)
