"""Checkpoint I/O: a save or a load of one rank through the C core, timed, and checkpoint-only mode.

A save (``save``) of rank r writes the files of ``checkpoint.plan_checkpoint`` under
``{checkpoint_folder}/global_epoch{E}_step{S}/`` in ``TRANSFER`` (16 MiB) sequential requests with
``min(4, files)`` threads, each file written start to end by one thread (files balanced over the
threads by bytes), with the configured engine and queue depth.
The timed window is what a framework's save costs the storage: mkdir, create/truncate each file, the
writes, and (``checkpoint.fsync: true``) one fsync per file, timed on its own as ``fsync_s``.  It does
not contain tensor generation: the C core fills its request buffers with a fast PRNG before the
window (DLIO's ``torch.rand`` runs at init; its pickling/CRC inside the window is not storage).

A load (``load``) first drops the files' cached pages (posix_fadvise DONTNEED after fdatasync, outside
the window; DLIO reads straight back from the page cache), then reads every byte of the files in the
same requests.  With ``checkpoint.recovery_rank_shift`` rank r reads the files of rank
``(r + ranks_per_node) % size`` (DLIO's intent; its typo disables it).

A ``.pt`` file is written as torch.save lays it out (``dlio.checkpoint.torchzip``): the same
sequential requests cover the whole file, and the C core copies the container's literal bytes (zip
headers, pickle, central directory: a few hundred bytes per tensor, planned once per file shape)
into the requests that cover them (``Run(file_overlay=...)``); the tensors' bytes are the content
below.  ``torch.load`` opens the files.

Deviations, all recorded in the record:
  * ``randomize_tensor: false`` writes tensors of ones in each file's dtype (0x01 for int8, 1.0 for
    fp16/bf16/fp32/fp64) through the same C path: the request buffers hold that pattern
    (``Run(file_fill=...)``), compressible and dedupable as DLIO means them to be.
  * Random content: the C core fills its request buffers once and stamps every 4 KiB block it
    writes with its offset and issue time, so no two blocks of a checkpoint are equal.
  * Under O_DIRECT the last request of a file is padded to the filesystem's alignment and the file is
    then truncated to its exact size.
  * Engines: ``odirect`` is posix + O_DIRECT, ``mmap`` cannot write and is replaced by posix.

Record of one save / load on one rank (plain JSON-ready dict)::

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

import errno
import os
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

import numpy as np

from dlio import _core
from dlio.checkpoint.layout import (
    ONE_BYTES,
    CheckpointPlan,
    CkptFile,
    plan_checkpoint,
    rank_files,
    step_folder,
)
from dlio.checkpoint.summary import size_lines
from dlio.config import engines
from dlio.errors import DlioError, DlioRunError, os_error_message
from dlio.execute import execute
from dlio.host import drop_cache, iso
from dlio.mpi import Comm
from dlio.report import checkpoint as ckpt_figures
from dlio.units import GiB, fmt_bytes

TRANSFER = 16 << 20
MAX_THREADS = 4


def _comm(comm: Optional[Comm]) -> Comm:
    return comm if comm is not None else Comm()


def folder_of(cfg: Any, epoch: int, step: int) -> str:
    return os.path.abspath(os.path.join(cfg.checkpoint.checkpoint_folder, step_folder(epoch, step)))


def ranks_per_node(comm: Comm) -> int:
    """Ranks on this rank's host (collective: every rank must call it)."""
    hosts = comm.allgather(socket.gethostname())
    return max(1, hosts.count(hosts[comm.rank]))


def recovery_source(rank: int, size: int, ppn: int) -> int:
    """The rank whose files ``rank`` reads with recovery_rank_shift: (rank + ppn) % size."""
    return (rank + ppn) % size


# --------------------------------------------------------------------------------------------------
# the plan of requests


def build_ops(files: Sequence[CkptFile], op: int, transfer: int = TRANSFER, align: int = 1):
    """(ops, lengths on disk) of ``files``: sequential ``transfer``-byte requests per file, the last
    one rounded up to ``align`` (O_DIRECT).  Vectorised; one numpy record per request."""
    counts = [(-(-f.nbytes // transfer)) if f.nbytes else 0 for f in files]
    n = int(sum(counts))
    ops = np.zeros(n, dtype=_core.OP_DTYPE)
    at = 0
    for i, (f, c) in enumerate(zip(files, counts)):
        if not c:
            continue
        sl = ops[at : at + c]
        sl["file"] = i
        sl["op"] = op
        sl["offset"] = np.arange(c, dtype=np.uint64) * np.uint64(transfer)
        sl["length"] = transfer
        tail = f.nbytes - (c - 1) * transfer
        sl["length"][-1] = -(-tail // align) * align
        at += c
    return ops


def assign_files(files: Sequence[CkptFile], threads: int) -> List[List[int]]:
    """File indices per thread: each file written (read) by one thread, start to end, as a framework
    writes a state file; the largest files first to the least loaded thread (balanced bytes)."""
    bins: List[List[int]] = [[] for _ in range(threads)]
    load_ = [0] * threads
    for i in sorted(range(len(files)), key=lambda i: -files[i].nbytes):
        t = min(range(threads), key=lambda t: load_[t])
        bins[t].append(i)
        load_[t] += files[i].nbytes
    return [sorted(b) for b in bins]


def thread_plan(files: Sequence[CkptFile], op: int, transfer: int, align: int, threads: int):
    """(ops, thread_first_op, threads).  With at least as many files as threads each file goes to one
    thread (two threads appending to one file serialise on its inode lock and fragment it); with fewer
    files than threads (``threads`` asked explicitly) the bytes are split in contiguous ranges."""
    ops = build_ops(files, op, transfer, align)
    if threads <= 1 or len(ops) == 0:
        return ops, np.array([0, len(ops)], dtype=np.uint64), 1
    if len([f for f in files if f.nbytes]) < threads:
        return ops, split_threads(ops, threads), threads
    counts = np.bincount(ops["file"].astype(np.int64), minlength=len(files))
    starts = np.concatenate([[0], np.cumsum(counts)])
    order, first = [], [0]
    for b in assign_files(files, threads):
        for i in b:
            order.append(np.arange(starts[i], starts[i + 1]))
        first.append(first[-1] + int(sum(counts[i] for i in b)))
    return ops[np.concatenate(order)], np.asarray(first, dtype=np.uint64), threads


def split_threads(ops: np.ndarray, threads: int) -> np.ndarray:
    """thread_first_op for ``threads`` contiguous op ranges of about equal bytes."""
    n = len(ops)
    if n == 0:
        return np.zeros(threads + 1, dtype=np.uint64)
    cum = np.cumsum(ops["length"].astype(np.float64))
    targets = cum[-1] * np.arange(1, threads) / threads
    cuts = np.searchsorted(cum, targets, side="left") + 1
    first = np.concatenate([[0], np.minimum(cuts, n), [n]]).astype(np.uint64)
    return np.maximum.accumulate(first)


def _threads_for(nfiles: int, nops: int, threads: Optional[int]) -> int:
    t = threads if threads else min(MAX_THREADS, max(1, nfiles))
    return max(1, min(int(t), max(1, nops)))


def _align_of(folder: str, direct: bool) -> int:
    if not direct:
        return 1
    try:
        _, off, _ = _core.dio_align(folder)
    except OSError:
        off = 0
    return max(4096, int(off or 0))


# --------------------------------------------------------------------------------------------------
# writers / readers


def file_overlays(files: Sequence[CkptFile]) -> Optional[List[Any]]:
    """Per file, the literal ranges of its container (torch.save's zip records), or None when no
    file has one (raw files: tensorflow)."""
    out = [f.torch_file.segments if f.state is not None else None for f in files]
    return out if any(x is not None for x in out) else None


def ones_pattern(dtype: str) -> int:
    """The 8-byte pattern of a tensor of ones in dtype (1.0 in fp16/bf16/fp32/fp64, 1 in int8)."""
    one = ONE_BYTES.get(dtype, b"\x01")
    return int(np.frombuffer(one * (8 // len(one)), dtype=np.uint64)[0])


def _run_core(
    engine: str,
    paths: List[str],
    ops: np.ndarray,
    first: np.ndarray,
    threads: int,
    qd: int,
    direct: bool,
    file_fill=None,
    file_overlay=None,
) -> Dict[str, Any]:
    run = _core.Run(
        "io",
        engine,
        paths,
        ops,
        threads=threads,
        qd=qd,
        direct=direct,
        thread_first_op=first,
        loop=False,
        file_fill=file_fill,
        file_overlay=file_overlay,
    )
    try:
        return execute(run)
    except _core.RunError as e:
        hint = (
            ("; " + os_error_message(e, e.filename).split("; ", 1)[-1])
            if e.errno in (errno.ENOSPC, errno.EDQUOT)
            else ""
        )
        raise DlioRunError(f"checkpoint I/O failed: {e}{hint}") from e


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


def _record(
    kind: str,
    cfg: Any,
    comm: Comm,
    epoch: int,
    step: int,
    folder: str,
    plan_size: float,
    files: Sequence[CkptFile],
    **kw: Any,
) -> Dict[str, Any]:
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


def _finish(rec: Dict[str, Any], w0: float, m0: int, m1: int) -> Dict[str, Any]:
    dur = (m1 - m0) / 1e9
    rec["start"] = iso(w0)
    rec["end"] = iso(w0 + dur)
    rec["wall_start_ns"] = int(w0 * 1e9)
    rec["wall_end_ns"] = int(w0 * 1e9 + (m1 - m0))
    rec["duration_s"] = dur
    rec["GiB_per_second"] = rec["bytes"] / GiB / dur if dur > 0 else 0.0
    rec["dlio_throughput_GB_per_second"] = rec["checkpoint_size_GB"] / dur if dur > 0 else 0.0
    return rec


def extend_window(rec: Dict[str, Any], extra_s: float, what: str = "sync_s") -> Dict[str, Any]:
    """Add ``extra_s`` seconds spent after the I/O (a rank_sync barrier) to a record's window."""
    rec[what] = rec.get(what, 0.0) + extra_s
    m = rec["duration_s"] + extra_s
    w0 = rec["wall_start_ns"] / 1e9
    rec["duration_s"] = m
    rec["end"] = iso(w0 + m)
    rec["wall_end_ns"] = rec["wall_start_ns"] + int(m * 1e9)
    rec["GiB_per_second"] = rec["bytes"] / GiB / m if m > 0 else 0.0
    rec["dlio_throughput_GB_per_second"] = rec["checkpoint_size_GB"] / m if m > 0 else 0.0
    return rec


# --------------------------------------------------------------------------------------------------
# save / load


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
    comm = _comm(comm)
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
    align = _align_of(parent, direct)
    ops, first, nthreads = thread_plan(
        files, _core.OP_WRITE, transfer, align, _threads_for(len(files), -(-plan.rank_bytes // transfer), threads)
    )
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
    res = {"t_start": 0, "t_end": 0, "bytes": 0, "threads": []}
    if len(job.ops):
        res = _run_core(
            job.eng, job.paths, job.ops, job.first, job.nthreads, job.qd, job.direct, job.fills, job.overlay
        )
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
    rec = _record(
        "save",
        job.cfg,
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
    return _finish(rec, w0, m0, m1)


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
    comm = _comm(comm)
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
    ops, first, nthreads = thread_plan(
        files, 0, transfer, 1, _threads_for(len(files), -(-sum(f.nbytes for f in files) // transfer), threads)
    )
    if barrier:
        comm.barrier()
    w0 = time.time()
    m0 = time.monotonic_ns()
    res = (
        _run_core(eng, paths, ops, first, nthreads, qd, direct) if len(ops) else {"t_start": 0, "t_end": 0, "bytes": 0}
    )
    m1 = time.monotonic_ns()
    rec = _record(
        "load",
        cfg,
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
    return _finish(rec, w0, m0, m1)


# --------------------------------------------------------------------------------------------------
# DLIO's per_epoch_stats entry, checkpoint-only mode, summary


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
    comm = _comm(comm)
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

    if nw:
        say("Checkpointing write started")
    for i in range(1, nw + 1):
        one("save", i, lambda: save(cfg, comm, 1, i, engine=engine, direct=direct, plan=plan, barrier=True))
    if nw:
        say("Checkpointing write finished")
    if nr:
        if cfg.storage.storage_type == "s3":
            from dlio.objstore import checkpoint as s3_checkpoint

            root, have = c.checkpoint_folder, s3_checkpoint.count(cfg)
        else:
            root = os.path.abspath(c.checkpoint_folder)
            have = len(os.listdir(root)) if os.path.isdir(root) else 0
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
                cfg, comm, 1, i, engine=engine, direct=direct, drop=drop, plan=plan, ranks_per_node_=ppn, barrier=True
            ),
        )
    if nr:
        say("Checkpointing read finished")
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
