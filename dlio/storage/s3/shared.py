"""The counters a worker process shares with its parent while a task runs: a small file both map.

The worker adds the requests and bytes it has done (after each batch call), the steps a training task
has done, and a beat while it works on its own (no request outstanding: preparing payloads, waiting for
the trainer); it notes its CPU time when the task began and the CPU its emulated compute spun. The
parent reads them for the live display, for the silence deadline (dlio.storage.s3.deadline) and for the
worker's CPU (dlio.storage.s3.client.Session), and they outlive a worker that is killed.
"""

from __future__ import annotations

import asyncio
import os
import resource
import threading
import time
from types import ModuleType
from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

OPS, BYTES, STEPS, BEAT, CPU0_USER_NS, CPU0_SYS_NS, SPIN_NS = range(7)
WORDS = 8
FILE = "counters.u64"
MULTIPART_MIN = 64 << 20  # objects this large go up as multipart uploads (parts in parallel)
PART_SIZE = 16 << 20  # a multipart upload's part


def create(folder: str) -> str:
    """The parent's side: a zeroed counters file in `folder`; its path (handed to the worker)."""
    path = os.path.join(folder, FILE)
    np.zeros(WORDS, np.uint64).tofile(path)
    return path


class Counters:
    """A mapped counters file. Writers (the worker's threads) go through add(), under a lock: one
    call per batch of requests, never per request."""

    def __init__(self, path: str, write: bool = False) -> None:
        self.words = np.memmap(path, dtype=np.uint64, mode="r+" if write else "r", shape=(WORDS,))
        self.lock = threading.Lock()

    # ---- the worker ----
    def add(self, ops: int = 0, nbytes: int = 0, steps: int = 0) -> None:
        with self.lock:
            self.words[OPS] += np.uint64(ops)
            self.words[BYTES] += np.uint64(nbytes)
            self.words[STEPS] += np.uint64(steps)

    def beat(self) -> None:
        """A sign of life that is not a request: the worker is busy on its own, not waiting on storage."""
        self.words[BEAT] += np.uint64(1)

    def start_cpu(self) -> None:
        """The worker's CPU time now (the task begins; a spare's start-up is not the task's)."""
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.words[CPU0_USER_NS] = np.uint64(ru.ru_utime * 1e9)
        self.words[CPU0_SYS_NS] = np.uint64(ru.ru_stime * 1e9)

    def spun(self, ns: int) -> None:
        """CPU the emulated accelerator's compute used (the trainer thread's, during compute())."""
        self.words[SPIN_NS] += np.uint64(max(0, int(ns)))

    # ---- the parent ----
    def progress(self) -> Tuple[int, int, int]:
        """(requests, bytes, steps) so far."""
        w = self.words
        return int(w[OPS]), int(w[BYTES]), int(w[STEPS])

    def signature(self) -> Tuple[int, ...]:
        """What changes while the worker makes progress (the silence deadline compares it)."""
        w = self.words
        return int(w[OPS]), int(w[BYTES]), int(w[STEPS]), int(w[BEAT])

    def task_cpu(self, user_s: float, sys_s: float) -> Tuple[float, float]:
        """The task's CPU (user, sys) from the worker's whole-life rusage: less its CPU before the task,
        less the emulated compute's spin (the accelerator's, not the client's)."""
        w = self.words
        user = user_s - int(w[CPU0_USER_NS]) / 1e9 - int(w[SPIN_NS]) / 1e9
        return max(0.0, user), max(0.0, sys_s - int(w[CPU0_SYS_NS]) / 1e9)


def threads_in_a_window(worker: Callable[[int], None], threads: int, errors: List[str]) -> Tuple[int, int]:
    """Run worker(0..threads-1) on threads of their own, timed: (wall-clock start ns, window ns). The
    workers append what went wrong to ``errors`` (and stop when it is not empty): the first is raised."""
    wall0 = time.time_ns()
    m0 = time.monotonic_ns()
    running = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for x in running:
        x.start()
    for x in running:
        x.join()
    window = time.monotonic_ns() - m0
    if errors:
        raise RuntimeError(errors[0])
    return wall0, window


def put_multipart(s3: ModuleType, uri: str, path: str, in_flight: int) -> None:
    """PUT the local file path as the object uri in parts of PART_SIZE, in_flight parts at once."""
    bucket, key = uri[5:].split("/", 1)
    w = s3.MultipartUploadWriter(bucket, key, part_size=PART_SIZE, max_in_flight=in_flight)
    try:
        with open(path, "rb") as f:
            while True:
                chunk = f.read(PART_SIZE)  # a fresh buffer per part: the writer borrows it until close()
                if not chunk:
                    break
                w.write(chunk)
        w.close()
    except BaseException:
        w.abort()
        raise


def ranges_in_a_window(
    s3: ModuleType,
    uris: Sequence[str],
    ops: Sequence[Sequence[int]],
    inflight: int,
    c: TaskCounters,
    keep: Optional[Callable[[int, int, memoryview], None]] = None,
) -> Tuple[int, int, int]:
    """Range GETs of ops ([object index, offset, length] into uris), inflight at once on one event loop,
    timed from the first request to the last completion: (bytes, wall-clock start ns, window ns).
    keep(object index, offset, data) is handed each range as it arrives."""
    if ops:
        s3.list(uris[0].rsplit("/", 1)[0] + "/.dlio-fast-probe/")  # client built, connection open
    got = [0] * inflight

    async def worker(w: int) -> None:
        for j in range(w, len(ops), inflight):
            f, off, n = (int(x) for x in ops[j])
            data = memoryview(await s3.get_range_async(uris[f], off, n))
            if keep is not None:
                keep(f, off, data)
            got[w] += len(data)
            c.add(1, len(data))  # bytes arrived: the task's deadline on silence starts again

    async def all_workers() -> None:
        await asyncio.gather(*(worker(w) for w in range(inflight)))

    wall0 = time.time_ns()
    m0 = time.monotonic_ns()
    asyncio.run(all_workers())
    return sum(got), wall0, time.monotonic_ns() - m0


class NoCounters:
    """The counters of a task run without a parent's file (a test calling a task directly)."""

    def add(self, ops: int = 0, nbytes: int = 0, steps: int = 0) -> None:
        pass

    def beat(self) -> None:
        pass

    def start_cpu(self) -> None:
        pass

    def spun(self, ns: int) -> None:
        pass


# what a task counts into: the parent's mapped file, or nothing
TaskCounters = Union[Counters, NoCounters]
