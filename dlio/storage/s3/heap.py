"""The S3 worker's heap: the allocator settings of its processes and the prefault before a timed phase.

s3dlio gathers every response body into a buffer of the object's size, and get_many_stats holds a
whole batch of them until it returns. With glibc's defaults those buffers come from mmap (or from
per-thread heaps that are trimmed on free), so every GET faults in and zeroes fresh pages: 40 % of
the client's CPU at 16 MiB objects (perf), CPU a shared host takes from the server. One arena that
keeps what it frees lets a buffer reuse the pages of the one before it, and touching the timed
phase's peak once before the clock means no GET in it faults at all (bench/vs_s3.py: 0.63 -> 0.44
CPU-s per GiB at 16 MiB).
"""

from __future__ import annotations

import ctypes
import os
from typing import Callable, Optional

# glibc malloc settings of the worker processes (S3Settings.child_env; a value the user set is kept):
# every block up to 1 GiB from one heap, never given back to the system while the worker lives. A
# worker serves one task, so its memory is the task's peak, returned at exit.
MALLOC_REUSE = {
    "MALLOC_ARENA_MAX": "1",
    "MALLOC_MMAP_THRESHOLD_": str(1 << 30),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 62),
}
_BLOCK = 256 << 20  # below the mmap threshold: blocks come from the heap, and stay in it when freed


def prefault(nbytes: int, on_block: Optional[Callable[[], None]] = None) -> int:
    """Fault in `nbytes` of heap and free it again (the heap keeps it under MALLOC_REUSE), so the
    client's response buffers in the timed requests land on pages already there. Bounded by a
    quarter of the memory available; the bytes touched. on_block: called after each block is touched
    (the worker's beat: gigabytes take seconds on a busy host)."""
    avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    nbytes = max(0, min(int(nbytes), avail // 4))
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [(libc.malloc(min(_BLOCK, nbytes - off)), min(_BLOCK, nbytes - off)) for off in range(0, nbytes, _BLOCK)]
    for b, n in blocks:
        if b:
            ctypes.memset(b, 1, n)
        if on_block is not None:
            on_block()
    for b, _ in blocks:
        libc.free(b)
    return sum(n for b, n in blocks if b)
