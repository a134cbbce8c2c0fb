"""The writing of a generation: the files left, in batches taken by `threads` threads; each batch
described as segment programs in Python, then written by the C core with the GIL released
(dlio.dataset.formats.program), or file by file by the format's own write() where it has no
program for the layout (hdf5 with chunks or compression, synthetic). Every file is written
atomically (temporary name, then rename). A failed write becomes a DatasetError (out of space:
InsufficientSpace with what is left)."""

import errno
import os
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Callable, Dict, List, NoReturn, Optional

import numpy as np
from numpy.typing import NDArray

from dlio import _core
from dlio.base import tmpclaim
from dlio.base.errors import DatasetError, InsufficientSpace
from dlio.dataset.formats import mix_seed, mix_seeds
from dlio.dataset.formats.program import Program
from dlio.dataset.gen_plan import GenPlan, free_bytes
from dlio.dataset.spec import estimated_sizes
from dlio.system.output import atomic_path

BATCH_BYTES = 64 << 20  # a thread's batch of files: about this many bytes ...
BATCH_FILES = 512  # ... or this many files (bounds the programs held in memory)
POLL_S = 0.25  # progress is reported this often


def _batches(pl: GenPlan, threads: int = 1) -> List[NDArray[np.int64]]:
    """The files left, in batches of about BATCH_BYTES (by estimated size) or BATCH_FILES, largest
    files first: threads take the next batch as they finish one, so the last batches, which decide
    when the threads are all done, are the smallest (bytes, not file counts, balance the threads).
    The last 2 x threads x BATCH_BYTES go in batches of an eighth of that, so a thread that finds
    no batch left waits for the others' last small ones, not for a whole batch."""
    todo = np.array(pl.todo, dtype=np.int64)
    if todo.size == 0:
        return []
    est = estimated_sizes(pl.spec, pl.dims[todo])
    order = np.argsort(-est, kind="stable")
    todo, est = todo[order], est[order]
    csum = np.cumsum(est)
    tail_from = csum[-1] - 2 * max(1, int(threads)) * BATCH_BYTES
    cuts: List[NDArray[np.int64]] = []
    start = 0
    while start < todo.size:
        base = csum[start - 1] if start else 0
        step = BATCH_BYTES if base < tail_from else BATCH_BYTES // 8
        end = int(np.searchsorted(csum, base + step, side="left")) + 1
        end = max(start + 1, min(end, start + BATCH_FILES, todo.size))
        cuts.append(_by_folder(pl, todo[start:end]))
        start = end
    return cuts


def _by_folder(pl: GenPlan, idx: NDArray[np.int64]) -> NDArray[np.int64]:
    """A batch's files folder by folder: the C core keeps the last file's folder open, and a dataset's
    files go round-robin over its folders (ImageNet's 1,000), so in file order every file opened its
    folder again (two calls of the six a small file costs)."""
    folders = [pl.paths[i].rpartition("/")[0] for i in idx.tolist()]
    return idx[sorted(range(len(folders)), key=folders.__getitem__)]


def _write_batch(
    pl: GenPlan,
    idx: NDArray[np.int64],
    fsync: bool,
    stop: NDArray[np.int32],
    counters: NDArray[np.uint64],
    direct: bool = False,
) -> int:
    """Write one batch of files; returns the bytes written. Files whose format has a program go to
    the C core together (with O_DIRECT when direct); the others are written one by one by the
    format (buffered: h5py writes chunked/compressed hdf5 through the page cache)."""
    spec, fmt, spf = pl.spec, pl.fmt, pl.spec.num_samples_per_file
    prog = Program()
    by_python: List[int] = []  # files the format writes itself (no program for their layout)
    main_of: Dict[int, int] = {}  # the program's file number of each data file -> the file's index
    if fmt.programs is not None:  # the format describes the whole batch with numpy
        fmt.programs(prog, pl.dims[idx], spf, spec, mix_seeds(spec.seed_content, idx), [pl.paths[i] for i in idx])
        main_of = dict(enumerate(idx.tolist()))
        idx = idx[:0]
    for i in idx.tolist():
        dims = tuple(int(x) for x in pl.dims[i])
        if (
            fmt.program is not None
            and fmt.program(prog, dims, spf, spec, mix_seed(spec.seed_content, i), pl.paths[i]) is not False
        ):
            main_of[len(prog.paths) - 1] = i  # the data file comes last, after its companions
        else:
            by_python.append(i)
    prog.finish()
    done = 0
    if prog.paths:
        with tmpclaim.claimed(spec.data_folder) as suffix:  # temporary names .NAME.tmp-TOKEN-gen (no O_TMPFILE)
            complete = _core.gen_files(
                suffix + "-gen",
                prog.paths,
                prog.seeds,
                prog.first,
                prog.counts(),
                prog.seg_array(),
                bytes(prog.blob),
                fsync=fsync,
                stop=stop,
                counters=counters,
                direct=direct,
            )
        if not complete:  # stopped between files (another thread failed, or an interrupt)
            return done
        for k, i in main_of.items():
            pl.sizes[i] = prog.sizes[k]
        done += sum(prog.sizes)
    for i in by_python:
        if stop[0]:
            break
        p = pl.paths[i]
        with atomic_path(p, fsync=fsync, claim_root=spec.data_folder) as tmp:
            n = fmt.write(
                tmp, tuple(int(x) for x in pl.dims[i]), spf, spec, mix_seed(spec.seed_content, i), final=p, index=i
            )
        pl.sizes[i] = os.stat(p).st_size
        counters[0] += n  # (only this thread writes its counters)
        counters[1] += 1
        done += n
    return done


def write_all(
    pl: GenPlan, threads: int, progress: Optional[Callable[[int, int], None]], fsync: bool, direct: bool = False
) -> int:
    """Write pl.todo on `threads` threads, each taking the next batch; progress(bytes, files) is
    called from this thread every POLL_S with the rank's running totals (skipped files included).
    Returns the bytes written."""
    batches = _batches(pl, threads)
    nthreads = max(1, min(int(threads), len(batches))) if batches else 0
    if not nthreads:
        return 0
    stop = np.zeros(1, np.int32)
    counters = np.zeros((nthreads, 2), np.uint64)  # per thread: bytes, files
    lock, it = threading.Lock(), iter(batches)

    def worker(t: int) -> int:
        total = 0
        while not stop[0]:
            with lock:
                idx = next(it, None)
            if idx is None:
                break
            try:
                total += _write_batch(pl, idx, fsync, stop, counters[t], direct)
            except BaseException:
                stop[0] = 1
                raise
        return total

    group = 1 + len(pl.fmt.companions(pl.paths[pl.todo[0]], pl.spec))  # files the C core counts per data file

    def report() -> None:
        if progress is not None:
            progress(pl.present_bytes + int(counters[:, 0].sum()), len(pl.skipped) + int(counters[:, 1].sum()) // group)

    with ThreadPoolExecutor(max_workers=nthreads, thread_name_prefix="dlio-gen") as ex:
        futs = [ex.submit(worker, t) for t in range(nthreads)]
        try:
            while True:
                finished, pending = wait(futs, timeout=POLL_S, return_when=FIRST_EXCEPTION)
                report()
                if not pending or any(f.exception() is not None for f in finished):
                    break
        except BaseException:
            stop[0] = 1
            raise
    errors = [e for e in (f.exception() for f in futs) if e is not None]
    if errors:
        _raise_write_error(pl, errors[0], direct)
    return sum(f.result() for f in futs)


def _raise_write_error(pl: GenPlan, e: BaseException, direct: bool = False) -> NoReturn:
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        left = np.array([j for j in pl.todo if pl.sizes[j] == 0], dtype=np.int64)
        remaining = int(np.ceil(estimated_sizes(pl.spec, pl.dims[left]).sum())) if left.size else 0
        raise InsufficientSpace(remaining, free_bytes(pl.spec.data_folder), 0.0, pl.spec.data_folder) from e
    if direct and isinstance(e, OSError) and e.errno == errno.EINVAL and str(e.strerror).startswith("create"):
        raise DatasetError(
            f"{pl.spec.data_folder}: the filesystem refuses O_DIRECT (open: {os.strerror(errno.EINVAL)}); "
            "generate without --direct"
        ) from e
    if isinstance(e, OSError):
        raise DatasetError(f"{e.filename or pl.spec.data_folder}: {e.strerror or e}") from e
    raise e
