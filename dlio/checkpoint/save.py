"""A checkpoint save of one rank through the C core, timed.

A save (``save``) of rank r writes the files of ``checkpoint.plan_checkpoint`` under
``{checkpoint_folder}/global_epoch{E}_step{S}/`` in ``TRANSFER`` (16 MiB) sequential requests with
``min(4, files)`` threads, each file written start to end by one thread (files balanced over the
threads by bytes), with the configured engine and queue depth (``dlio.checkpoint.transfers``).
The timed window is what a framework's save costs the storage: mkdir, create/truncate each file, the
writes, and (``checkpoint.fsync: true``) one fsync per file, timed on its own as ``fsync_s``.  It does
not contain tensor generation: the C core fills its request buffers with a fast PRNG before the
window (DLIO's ``torch.rand`` runs at init; its pickling/CRC inside the window is not storage).
Before the window: a save that cannot fit is refused (``check_free_space``); a save that fails
leaves no half-written files (``remove_partial``).

Deviations, all recorded in the record (``dlio.checkpoint.record``):
  * ``randomize_tensor: false`` writes tensors of ones in each file's dtype (0x01 for int8, 1.0 for
    fp16/bf16/fp32/fp64) through the same C path: the request buffers hold that pattern
    (``Run(file_fill=...)``), compressible and dedupable as DLIO means them to be.
  * Random content: the C core fills its request buffers once and stamps every 4 KiB block it
    writes with its offset and issue time, so no two blocks of a checkpoint are equal.
  * Under O_DIRECT the last request of a file is padded to the filesystem's alignment and the file is
    then truncated to its exact size.
  * Engines: ``odirect`` is posix + O_DIRECT, ``mmap`` cannot write and is replaced by posix.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence

import numpy as np

from dlio import _core
from dlio.checkpoint.layout import CheckpointPlan, CkptFile, folder_of, plan_checkpoint
from dlio.checkpoint.record import finish_record, new_record
from dlio.checkpoint.transfers import (
    TRANSFER,
    align_of,
    file_overlays,
    ones_pattern,
    run_core,
    thread_plan,
    threads_for,
)
from dlio.config import engines
from dlio.errors import DlioRunError, os_error_message
from dlio.mpi import Comm
from dlio.units import fmt_bytes


def save(
    cfg: Any,
    comm: Optional[Comm],
    epoch: int,
    step: int,
    engine: Optional[str] = None,
    direct: Optional[bool] = None,
    qd: Optional[int] = None,
    threads: Optional[int] = None,
    fsync: Optional[bool] = None,
    transfer: int = TRANSFER,
    plan: Optional[CheckpointPlan] = None,
    barrier: bool = False,
) -> Dict[str, Any]:
    """Write this rank's checkpoint files of ``global_epoch{epoch}_step{step}``; returns the record.

    ``barrier``: a barrier just before the window (checkpoint-only mode).  ``plan`` avoids recomputing
    the layout (``plan_checkpoint(cfg, comm.rank, comm.size)``)."""
    comm = comm if comm is not None else Comm()
    if cfg.storage.storage_type == "s3":  # objects under the checkpoint prefix (dlio.objstore.checkpoint)
        from dlio.objstore import checkpoint as s3_checkpoint

        return s3_checkpoint.save(cfg, comm, epoch, step, plan, barrier)
    plan = plan if plan is not None else plan_checkpoint(cfg, comm.rank, comm.size)
    eng, direct = engines.resolve(cfg.dlio_fast.engine if engine is None else engine, direct, checkpoint=True)
    qd = int(qd if qd is not None else cfg.dlio_fast.qd)
    do_fsync = bool(cfg.checkpoint.fsync if fsync is None else fsync)
    randomize = bool(cfg.checkpoint.randomize_tensor)
    if direct and eng == "null":
        direct = False
    folder = folder_of(cfg, epoch, step)
    files = list(plan.files)
    paths = [os.path.join(folder, f.name) for f in files]
    parent = os.path.dirname(folder)
    os.makedirs(parent, exist_ok=True)
    align = align_of(parent, direct)
    ops, first, nthreads = thread_plan(files, _core.OP_WRITE, transfer, align, threads_for(files, transfer, threads))
    # randomize_tensor: false writes tensors of ones, through the same C path (patterned buffers)
    fills = None if randomize else [ones_pattern(f.dtype) for f in files]
    overlay = file_overlays(files)
    check_free_space(parent, paths, plan.rank_bytes)
    if barrier:
        comm.barrier()
    try:
        return _save_files(
            _Save(
                cfg=cfg,
                comm=comm,
                epoch=epoch,
                step=step,
                eng=eng,
                direct=direct,
                qd=qd,
                do_fsync=do_fsync,
                randomize=randomize,
                folder=folder,
                files=files,
                paths=paths,
                align=align,
                ops=ops,
                first=first,
                nthreads=nthreads,
                fills=fills,
                overlay=overlay,
                plan=plan,
                transfer=transfer,
            )
        )
    except BaseException:
        remove_partial(folder, paths)  # a half-written checkpoint must not look like one
        raise


def check_free_space(parent: str, paths: Sequence[str], nbytes: int) -> None:
    """Refuse a save that cannot fit (this rank's files; ones being overwritten count as free)."""
    try:
        st = os.statvfs(parent)
    except OSError:
        return
    free = st.f_bavail * st.f_frsize + sum(os.path.getsize(p) for p in paths if os.path.isfile(p))
    if nbytes > free:
        raise DlioRunError(
            f"{parent}: the checkpoint needs {fmt_bytes(nbytes)} on this rank but only "
            f"{fmt_bytes(free)} is free; free some space, use another checkpoint.checkpoint_folder "
            "or a smaller model"
        )
    if st.f_files > 0 and st.f_favail < len(paths):
        raise DlioRunError(
            f"{parent}: no free inodes left for {len(paths)} checkpoint file(s) (the disk has "
            "space, but no room for more files); remove files or use another checkpoint_folder"
        )


def remove_partial(folder: str, paths: Sequence[str]) -> None:
    for p in paths:
        try:
            os.unlink(p)
        except OSError:
            pass
    try:
        os.rmdir(folder)  # only when empty: other ranks' files stay for them to remove
    except OSError:
        pass


@dataclass
class _Save:
    """One rank's save, planned: what _save_files writes and records."""

    cfg: Any
    comm: Comm
    epoch: int
    step: int
    eng: str
    direct: bool
    qd: int
    do_fsync: bool
    randomize: bool
    folder: str
    files: List[CkptFile]
    paths: List[str]
    align: int
    ops: np.ndarray
    first: np.ndarray
    nthreads: int
    fills: Optional[List[int]]
    overlay: Optional[List[Any]]
    plan: CheckpointPlan
    transfer: int


def _fsync_one(p: str) -> None:
    fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_all(paths: Iterable[str]) -> None:
    """fsync every file, in parallel (os.fsync releases the GIL), as a framework's writer threads
    (and fio's jobs with end_fsync) do: one after another would add the small files' flush times."""
    paths = list(paths)
    if len(paths) <= 1:
        for p in paths:
            _fsync_one(p)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, len(paths))) as ex:
        list(ex.map(_fsync_one, paths))


def _save_files(job: _Save) -> Dict[str, Any]:
    """The timed part of a save: create the files, write them through the C core, fsync, the record."""
    w0 = time.time()
    m0 = time.monotonic_ns()
    try:
        os.makedirs(job.folder, exist_ok=True)
        for p in job.paths:  # the C engines open with O_CREAT but not O_TRUNC
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644))
    except OSError as e:
        raise DlioRunError(os_error_message(e, e.filename or job.folder, None)) from None
    m_prep = time.monotonic_ns()
    # fsync each file in its writer thread right after its last write (as a framework's writer,
    # and fio's end_fsync, do), unless O_DIRECT padding must be truncated first: then after that.
    needs_truncate = job.align > 1 and job.eng != "null" and any(f.nbytes % job.align for f in job.files)
    c_fsync = job.do_fsync and job.eng != "null" and not needs_truncate and len(job.ops) > 0
    if c_fsync:
        last = np.flatnonzero(np.append(job.ops["file"][1:] != job.ops["file"][:-1], True))
        job.ops["flags"][last] |= _core.OPF_FSYNC
    res = run_core(job.eng, job.paths, job.ops, job.first, job.nthreads, job.qd, job.direct, job.fills, job.overlay)
    m_io = time.monotonic_ns()
    try:
        if needs_truncate:
            for p, f in zip(job.paths, job.files):
                if f.nbytes % job.align:
                    os.truncate(p, f.nbytes)
        fs0 = time.monotonic_ns()
        if job.do_fsync and job.eng != "null" and not c_fsync:
            _fsync_all(job.paths)
        m1 = time.monotonic_ns()
    except OSError as e:
        raise DlioRunError(
            "checkpoint fsync/truncate failed: " + os_error_message(e, e.filename or job.folder)
        ) from None
    fsync_s = 0.0
    if job.do_fsync:
        fsync_s = max(t["fsync_ns"] for t in res["threads"]) / 1e9 if c_fsync else (m1 - fs0) / 1e9
    written = int(res["bytes"])
    rec = new_record(
        "save",
        job.comm,
        job.epoch,
        job.step,
        job.folder,
        job.plan.dlio_size_GiB,
        job.files,
        bytes=min(written, job.plan.rank_bytes) if job.align > 1 else written,
        bytes_issued=written,
        prepare_s=(m_prep - m0) / 1e9,
        io_s=(res["t_end"] - res["t_start"]) / 1e9 if len(job.ops) else 0.0,
        io_window_s=(m_io - m_prep) / 1e9,
        fsync_s=fsync_s,
        sync_s=0.0,
        engine=job.eng,
        direct=job.direct,
        threads=job.nthreads,
        qd=job.qd,
        transfer_size=job.transfer,
        fsync=job.do_fsync,
        cache="n/a",
        randomize_tensor=job.randomize,
    )
    return finish_record(rec, w0, m0, m1)
