"""Sets of whole files written or read through the C core, timed: a checkpoint's files on a filesystem.

Each file is cut into sequential ``transfer``-byte requests, the last one padded to the O_DIRECT
alignment (``build_ops``); the files go over ``min(4, files)`` threads, each file written (read) start
to end by one thread, balanced by bytes (``thread_plan``). The timed window of a write is what a
framework's save costs the storage: create/truncate each file (``prepare_s``), the writes, and with
``fsync`` one fsync per file, in its writer thread right after its last write (as a framework's writer
and fio's end_fsync do; ``fsync_s``). The content is made before the window (the C core fills its
request buffers with a fast PRNG and stamps every 4 KiB block with its offset and issue time, so no two
blocks are equal); a file's container literals (``SetContent.overlays``) are copied into the requests
that cover them. A write that cannot fit is refused before the window; one that fails leaves no file.
Under O_DIRECT the last request of a file is padded to the alignment and the file then truncated to its
exact size.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from dlio import _core
from dlio.base import tmpclaim
from dlio.base.errors import DlioError, DlioRunError, os_error_message
from dlio.base.units import fmt_bytes
from dlio.storage.base import MAX_SET_THREADS, SetContent, SetOptions, SetResult
from dlio.storage.places import lstat_or_none, remove_name
from dlio.system.execute import execute
from dlio.system.host import drop_cache


def build_ops(sizes: Sequence[int], op: int, transfer: int, align: int = 1) -> np.ndarray:
    """Sequential ``transfer``-byte requests per file, the last one rounded up to ``align`` (O_DIRECT).
    Vectorised; one numpy record per request."""
    counts = [(-(-n // transfer)) if n else 0 for n in sizes]
    ops = np.zeros(int(sum(counts)), dtype=_core.OP_DTYPE)
    at = 0
    for i, (n, c) in enumerate(zip(sizes, counts)):
        if not c:
            continue
        sl = ops[at : at + c]
        sl["file"] = i
        sl["op"] = op
        sl["offset"] = np.arange(c, dtype=np.uint64) * np.uint64(transfer)
        sl["length"] = transfer
        tail = n - (c - 1) * transfer
        sl["length"][-1] = -(-tail // align) * align
        at += c
    return ops


def assign_files(sizes: Sequence[int], threads: int) -> List[List[int]]:
    """File indices per thread: each file written (read) by one thread, start to end, as a framework
    writes a state file; the largest files first to the least loaded thread (balanced bytes)."""
    bins: List[List[int]] = [[] for _ in range(threads)]
    load_ = [0] * threads
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        t = min(range(threads), key=lambda t: load_[t])
        bins[t].append(i)
        load_[t] += sizes[i]
    return [sorted(b) for b in bins]


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


def thread_plan(
    sizes: Sequence[int], op: int, transfer: int, align: int, threads: int
) -> Tuple[np.ndarray, np.ndarray, int]:
    """(ops, thread_first_op, threads). With at least as many files as threads each file goes to one
    thread (two threads appending to one file serialise on its inode lock and fragment it); with fewer
    files than threads (``threads`` asked explicitly) the bytes are split in contiguous ranges."""
    ops = build_ops(sizes, op, transfer, align)
    if threads <= 1 or len(ops) == 0:
        return ops, np.array([0, len(ops)], dtype=np.uint64), 1
    if len([n for n in sizes if n]) < threads:
        return ops, split_threads(ops, threads), threads
    counts = np.bincount(ops["file"].astype(np.int64), minlength=len(sizes))
    starts = np.concatenate([[0], np.cumsum(counts)])
    order, first = [], [0]
    for b in assign_files(sizes, threads):
        for i in b:
            order.append(np.arange(starts[i], starts[i + 1]))
        first.append(first[-1] + int(sum(counts[i] for i in b)))
    return ops[np.concatenate(order)], np.asarray(first, dtype=np.uint64), threads


def threads_for(sizes: Sequence[int], transfer: int, threads: Optional[int]) -> int:
    """Threads of a set: ``threads`` when given, else one per file up to MAX_SET_THREADS; never more
    than its ``transfer``-byte requests."""
    nops = -(-sum(sizes) // transfer)
    t = threads if threads else min(MAX_SET_THREADS, max(1, len(sizes)))
    return max(1, min(int(t), max(1, nops)))


def align_of(folder: str, direct: bool) -> int:
    """The request alignment under O_DIRECT in ``folder`` (statx's, at least 4 KiB); 1 when buffered."""
    if not direct:
        return 1
    try:
        _, off, _ = _core.dio_align(folder)
    except OSError:
        off = 0
    return max(4096, int(off or 0))


def run_core(
    engine: str,
    paths: List[str],
    ops: np.ndarray,
    first: np.ndarray,
    threads: int,
    qd: int,
    direct: bool,
    file_fill: Optional[List[int]] = None,
    file_overlay: Optional[List[Any]] = None,
    on_bytes: Optional[Any] = None,
    what: str = "checkpoint I/O",
    delay_ns: int = 0,
) -> Dict[str, Any]:
    """Run the requests ``ops`` (thread t takes ``ops[first[t]:first[t + 1]]``) through the C core; its
    result. No requests (a rank's empty files): nothing runs, zero times and bytes. A failed run is a
    DlioRunError (out of space: what to do)."""
    if not len(ops):
        return {"t_start": 0, "t_end": 0, "bytes": 0, "threads": []}
    # io_uring at its best, as fio with fixedbufs / registerfiles: registered buffers spare every O_DIRECT
    # request the pinning of its pages (the engine falls back to plain ones when the kernel refuses).
    registered = _core.ENG_REGBUFS | _core.ENG_REGFILES if engine == "io_uring" else 0
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
        delay_ns=delay_ns,
        eng_flags=registered,
    )
    try:
        return execute(run, on_tick=(lambda r: on_bytes(int(r.progress()[1]))) if on_bytes else None)
    except _core.RunError as e:
        hint = (
            ("; " + os_error_message(e, e.filename).split("; ", 1)[-1])
            if e.errno in (errno.ENOSPC, errno.EDQUOT)
            else ""
        )
        raise DlioRunError(f"{what} failed: {e}{hint}") from e


def check_free_space(parent: str, paths: Sequence[str], nbytes: int) -> None:
    """Refuse a write that cannot fit (files being overwritten count as free)."""
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


def remove_partial(paths: Sequence[str]) -> None:
    """A half-written set must not look like one: its files go, and their folder when it is empty
    (other ranks' files stay for them to remove)."""
    for p in paths:
        try:
            os.unlink(p)
        except OSError:
            pass
    folders = {os.path.dirname(p) for p in paths}
    for d in folders:
        try:
            os.rmdir(d)
        except OSError:
            pass


def own_names(paths: Sequence[str]) -> None:
    """Before a write: a name that is a symbolic link or a file with other names (hard links) is removed,
    so the write makes a file of its own and never writes through into something elsewhere; a regular
    file of one name is truncated in place, as a framework's save does."""
    for p in paths:
        st = lstat_or_none(p, DlioRunError)
        if st is None:
            continue
        if stat.S_ISDIR(st.st_mode):
            raise DlioRunError(f"{p}: a folder where a checkpoint file goes; remove it or use another folder")
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            remove_name(p, DlioRunError)


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
    from concurrent.futures import ThreadPoolExecutor  # only saves of several files need it

    with ThreadPoolExecutor(max_workers=min(8, len(paths))) as ex:
        list(ex.map(_fsync_one, paths))


def write_set(paths: Sequence[str], sizes: Sequence[int], content: SetContent, o: SetOptions) -> SetResult:
    """Create and write the files (see the module's docstring); a failure removes them."""
    paths = list(paths)
    folders = sorted({os.path.dirname(p) for p in paths})
    parent = os.path.dirname(folders[0]) if folders else "."
    os.makedirs(parent, exist_ok=True)
    direct = o.direct and o.engine != "null"
    align = align_of(parent, direct)
    ops, first, nthreads = thread_plan(
        sizes, _core.OP_WRITE, o.transfer, align, threads_for(sizes, o.transfer, o.threads)
    )
    check_free_space(parent, paths, int(sum(sizes)))
    own_names(paths)

    def write(names: List[str]) -> SetResult:
        """The timed write under ``names``; a failure removes what it made."""
        if o.before_window is not None:
            o.before_window()
        try:
            return _timed_write(names, sizes, content, o, direct, align, ops, first, nthreads, folders)
        except BaseException:
            remove_partial(names)
            raise

    return _write_renamed(paths, folders, write) if o.temp_names else write(paths)


def _write_renamed(paths: List[str], folders: List[str], write: Callable[[List[str]], SetResult]) -> SetResult:
    """write(temporary names) beside ``paths`` (claimed: dlio.base.tmpclaim, so a later save sweeps what a
    killed one left), then each renamed to its own name."""
    try:
        for d in folders:
            os.makedirs(d, exist_ok=True)
            tmpclaim.sweep(d)  # what an earlier save killed mid-write left, proven dlio-fast's by its claim
    except OSError as e:
        raise DlioRunError(os_error_message(e, e.filename or folders[0])) from None
    suffixes = {d: tmpclaim.claim(d) for d in folders}
    try:
        tmp = [
            os.path.join(os.path.dirname(p), f".{os.path.basename(p)}{suffixes[os.path.dirname(p)]}-{i}")
            for i, p in enumerate(paths)
        ]
        res = write(tmp)
        try:
            for t, p in zip(tmp, paths):
                os.rename(t, p)
        except OSError as e:
            remove_partial(tmp)
            raise DlioRunError("checkpoint rename failed: " + os_error_message(e, e.filename)) from None
        return res
    finally:
        for d in folders:
            tmpclaim.release(d)


def _timed_write(
    paths: List[str],
    sizes: Sequence[int],
    content: SetContent,
    o: SetOptions,
    direct: bool,
    align: int,
    ops: np.ndarray,
    first: np.ndarray,
    nthreads: int,
    folders: List[str],
) -> SetResult:
    w0 = time.time()
    m0 = time.monotonic_ns()
    try:
        for d in folders:
            os.makedirs(d, exist_ok=True)
        for p in paths:  # the C engines open with O_CREAT but not O_TRUNC
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))
    except OSError as e:
        raise DlioRunError(os_error_message(e, e.filename or folders[0], None)) from None
    m_prep = time.monotonic_ns()
    do_fsync = o.fsync and o.engine != "null"
    # fsync in the writer thread after a file's last write, unless O_DIRECT padding must be truncated
    # first: then after that.
    needs_truncate = align > 1 and o.engine != "null" and any(n % align for n in sizes)
    c_fsync = do_fsync and not needs_truncate and len(ops) > 0
    if c_fsync:
        last = np.flatnonzero(np.append(ops["file"][1:] != ops["file"][:-1], True))
        ops["flags"][last] |= _core.OPF_FSYNC
    res = run_core(
        o.engine,
        paths,
        ops,
        first,
        nthreads,
        o.qd,
        direct,
        content.fills,
        content.overlays,
        o.on_bytes,
        delay_ns=o.delay_ns,
    )
    m_io = time.monotonic_ns()
    try:
        if needs_truncate:
            for p, n in zip(paths, sizes):
                if n % align:
                    os.truncate(p, n)
        fs0 = time.monotonic_ns()
        if do_fsync and not c_fsync:
            _fsync_all(paths)
        m1 = time.monotonic_ns()
    except OSError as e:
        raise DlioRunError(
            "checkpoint fsync/truncate failed: " + os_error_message(e, e.filename or folders[0])
        ) from None
    fsync_s = 0.0
    if o.fsync:
        fsync_s = max(t["fsync_ns"] for t in res["threads"]) / 1e9 if c_fsync else (m1 - fs0) / 1e9
    written = int(res["bytes"])
    return SetResult(
        bytes=min(written, int(sum(sizes))) if align > 1 else written,
        bytes_issued=written,
        wall_start_s=w0,
        m0=m0,
        m1=m1,
        prepare_s=(m_prep - m0) / 1e9,
        io_s=(res["t_end"] - res["t_start"]) / 1e9 if len(ops) else 0.0,
        io_window_s=(m_io - m_prep) / 1e9,
        fsync_s=fsync_s,
        engine=o.engine,
        direct=direct,
        threads=nthreads,
        qd=o.qd,
        transfer_size=o.transfer,
        cache="n/a",
    )


def check_sizes(paths: Sequence[str], sizes: Sequence[int]) -> Optional[str]:
    """The first file that is missing or shorter than expected, as text; None when all are there."""
    for p, n in zip(paths, sizes):
        try:
            have = os.stat(p).st_size
        except OSError:
            return f"{p}: missing"
        if have < n:
            return f"{p}: {have} bytes, {n} expected"
    return None


def read_set(paths: Sequence[str], sizes: Sequence[int], o: SetOptions) -> SetResult:
    """Read the files whole, timed; with ``drop`` their cached pages are dropped first (outside the
    window, checked with mincore)."""
    return _timed_read(
        paths, sizes, o, lambda: thread_plan(sizes, 0, o.transfer, 1, threads_for(sizes, o.transfer, o.threads))
    )


def ops_threads(ops: np.ndarray, nfiles: int, threads: int) -> Tuple[np.ndarray, np.ndarray, int]:
    """(ops reordered, thread_first_op, threads) for ranges of ``nfiles`` files: each file's ops in
    their order on one thread, files balanced by bytes (``assign_files``); fewer files than threads:
    contiguous runs of about equal bytes."""
    threads = max(1, min(threads, len(ops)))
    if threads == 1:
        return ops, np.array([0, len(ops)], dtype=np.uint64), 1
    per_file = np.bincount(ops["file"].astype(np.int64), weights=ops["length"].astype(np.float64), minlength=nfiles)
    if np.count_nonzero(per_file) < threads:
        return ops, split_threads(ops, threads), threads
    order = np.argsort(ops["file"], kind="stable")
    by_file = ops[order]
    starts = np.searchsorted(by_file["file"], np.arange(nfiles + 1))
    parts, first = [], [0]
    for b in assign_files([int(x) for x in per_file], threads):
        parts += [np.arange(starts[i], starts[i + 1]) for i in b]
        first.append(first[-1] + int(sum(starts[i + 1] - starts[i] for i in b)))
    return by_file[np.concatenate(parts)], np.asarray(first, dtype=np.uint64), threads


def read_ranges(paths: Sequence[str], sizes: Sequence[int], ops: np.ndarray, o: SetOptions) -> SetResult:
    """Read the ranges ``ops`` of the files through the C core, timed (dlio.storage.base.read_ranges);
    ``minflt`` / ``majflt``: the reading threads' page faults while they ran the requests (the C core's
    getrusage RUSAGE_THREAD: the mmap engine's touches, not the process's other work)."""
    return _timed_read(paths, sizes, o, lambda: ops_threads(ops, len(paths), o.threads or 1))


def _timed_read(
    paths: Sequence[str],
    sizes: Sequence[int],
    o: SetOptions,
    plan: Callable[[], Tuple[np.ndarray, np.ndarray, int]],
) -> SetResult:
    """read_set and read_ranges: the sizes checked, the pages dropped if asked, ``plan()`` -> (ops,
    thread_first_op, threads) run through the C core in a window of its own."""
    paths = list(paths)
    problem = check_sizes(paths, sizes)
    if problem:
        raise DlioError(problem)
    cache = "kept"
    if o.drop and o.engine != "null":
        cache = drop_cache(paths)
    ops, first, nthreads = plan()
    if o.before_window is not None:
        o.before_window()
    w0 = time.time()
    m0 = time.monotonic_ns()
    res = run_core(o.engine, paths, ops, first, nthreads, o.qd, o.direct, what="read", on_bytes=o.on_bytes)
    m1 = time.monotonic_ns()
    return SetResult(
        bytes=int(res["bytes"]),
        bytes_issued=int(res["bytes"]),
        wall_start_s=w0,
        m0=m0,
        m1=m1,
        prepare_s=0.0,
        io_s=(res["t_end"] - res["t_start"]) / 1e9 if len(ops) else 0.0,
        io_window_s=(m1 - m0) / 1e9,
        fsync_s=0.0,
        engine=o.engine,
        direct=o.direct,
        threads=nthreads,
        qd=o.qd,
        transfer_size=o.transfer,
        cache=cache,
        writer="c-core",
        minflt=sum(int(t.get("minflt", 0)) for t in res["threads"]),
        majflt=sum(int(t.get("majflt", 0)) for t in res["threads"]),
    )
