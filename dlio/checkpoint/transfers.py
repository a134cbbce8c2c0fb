"""A checkpoint's files as requests for the C core, and their run.

Each file is cut into sequential ``TRANSFER`` (16 MiB) requests, the last one padded to the
O_DIRECT alignment (``build_ops``); the files go over ``min(4, files)`` threads, each file written
(read) start to end by one thread, balanced by bytes (``thread_plan``).  A ``.pt`` file is written as
torch.save lays it out (``dlio.checkpoint.torchzip``): the same sequential requests cover the whole
file, and the C core copies the container's literal bytes (zip headers, pickle, central directory:
a few hundred bytes per tensor, planned once per file shape) into the requests that cover them
(``file_overlays``, ``Run(file_overlay=...)``); the tensors' bytes are the content below them.
``torch.load`` opens the files.  ``ones_pattern`` is the request buffers' pattern of a tensor of
ones (``randomize_tensor: false``).
"""

from __future__ import annotations

import errno
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from dlio import _core
from dlio.checkpoint.layout import ONE_BYTES, CkptFile
from dlio.errors import DlioRunError, os_error_message
from dlio.execute import execute

TRANSFER = 16 << 20
MAX_THREADS = 4


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


def threads_for(files: Sequence[CkptFile], transfer: int, threads: Optional[int]) -> int:
    """Threads of a save or load of ``files``: ``threads`` when given, else one per file up to
    MAX_THREADS; never more than its ``transfer``-byte requests."""
    nops = -(-sum(f.nbytes for f in files) // transfer)
    t = threads if threads else min(MAX_THREADS, max(1, len(files)))
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


def file_overlays(files: Sequence[CkptFile]) -> Optional[List[Any]]:
    """Per file, the literal ranges of its container (torch.save's zip records), or None when no
    file has one (raw files: tensorflow)."""
    out = [f.torch_file.segments if f.state is not None else None for f in files]
    return out if any(x is not None for x in out) else None


def ones_pattern(dtype: str) -> int:
    """The 8-byte pattern of a tensor of ones in dtype (1.0 in fp16/bf16/fp32/fp64, 1 in int8)."""
    one = ONE_BYTES.get(dtype, b"\x01")
    return int(np.frombuffer(one * (8 // len(one)), dtype=np.uint64)[0])


def run_core(
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
    """Run the requests ``ops`` (thread t takes ``ops[first[t]:first[t + 1]]``) through the C core;
    its result.  No requests (a rank's empty files): nothing runs, zero times and bytes.  A failed run
    is a DlioRunError (out of space: what to do)."""
    if not len(ops):
        return {"t_start": 0, "t_end": 0, "bytes": 0, "threads": []}
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
