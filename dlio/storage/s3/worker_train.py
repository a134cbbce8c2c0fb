"""Worker task `train`: steps of a training plan on S3, inside `python -m dlio.storage.s3.worker`.

The plan arrives as the C runner's arrays (ops, steps; dlio.train.planner) in a folder. A loader
thread fetches each step's batch with ONE client call: get_many_stats for whole objects, or range
GETs of the samples' bytes from one asyncio loop; at most `inflight` (read threads x qd) requests
are in flight, and up to `prefetch` batches wait for the trainer, as the C runner's reader threads
do. The trainer (the main thread) takes a batch and spins the step's compute in C (GIL released).
Each request is timed by the client itself (its op-log, read by the parent), the steps here with
the C core's clock, so the parent builds the same result as a C run. Each step's times go into a file
the parent preallocated (times.u64) as the step ends, and the steps done into the shared counters
(dlio.storage.s3.shared): a worker killed at its deadline or after a stop keeps what it measured.
"""

from __future__ import annotations

import asyncio
import os
import queue
import resource
import signal
import threading
import time
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Tuple

import numpy as np

from dlio.storage.s3 import heap
from dlio.storage.s3.failures import short
from dlio.system.execute import StopFlag

if TYPE_CHECKING:
    from dlio.storage.s3.shared import TaskCounters

_STOP = StopFlag()  # set by SIGTERM's handler: no lock (dlio.system.execute.StopFlag)
# After a stop, how long the trainer waits for the loader thread: a GET stuck on a frozen server must
# not hold the answer (the process exits and takes the thread with it).
LOADER_JOIN_S = 1.0
TIMES_COLUMNS = 5  # t_fetch, t_ready, t_end, compute_ns, bytes


# the parent's request_stop(): finish the step, keep what was measured
def _on_term(signum: int, frame: Optional[FrameType]) -> None:
    _STOP.set()


def _sleep_unless_stopped(seconds: float) -> None:
    end = time.monotonic() + seconds
    while not _STOP.is_set() and (left := end - time.monotonic()) > 0:
        time.sleep(min(left, 0.05))


class _Loader:
    def __init__(
        self,
        s3: ModuleType,
        t: Dict[str, Any],
        ops: np.ndarray,
        steps: np.ndarray,
        uris: np.ndarray,
        sizes: np.ndarray,
        counters: TaskCounters,
    ) -> None:
        self.s3, self.t, self.ops, self.steps, self.uris, self.sizes = s3, t, ops, steps, uris, sizes
        self.counters = counters
        self.q: queue.Queue = queue.Queue(maxsize=max(1, t["prefetch"]))
        self.error: str | None = None
        self.loop = asyncio.new_event_loop()

    def _ranges(self, uris: Sequence[str], offsets: np.ndarray, lengths: np.ndarray) -> int:
        s3, inflight = self.s3, self.t["inflight"]

        async def one(sem: asyncio.Semaphore, u: str, o: int, n: int) -> int:
            async with sem:
                b = await s3.get_range_async(u, o, n)
            return len(memoryview(b))

        async def batch() -> int:
            sem = asyncio.Semaphore(inflight)
            got = await asyncio.gather(*(one(sem, u, int(o), int(n)) for u, o, n in zip(uris, offsets, lengths)))
            return sum(got)

        return self.loop.run_until_complete(batch())

    def fetch(self, i: int) -> int:
        """Step i's requests; the bytes received."""
        st = self.steps[i]
        a = int(st["first_op"])
        o = self.ops[a : a + int(st["nops"])]
        if not len(o):
            return 0
        files = o["file"].astype(np.int64)
        uris = self.uris[files].tolist()
        if bool(((o["offset"] == 0) & (o["length"] == self.sizes[files])).all()):
            _, nbytes = self.s3.get_many_stats(uris, max_in_flight=self.t["inflight"])
            return int(nbytes)
        return self._ranges(uris, o["offset"], o["length"])

    def put(self, item: Optional[Tuple[int, int]]) -> bool:
        while not _STOP.is_set():
            try:
                self.q.put(item, timeout=0.05)
                return True
            except queue.Full:
                self.counters.beat()  # waiting for the trainer, not for storage
                continue
        return False

    def run(self) -> None:
        pre_s = self.t["preprocess_ns"] / 1e9
        threads = max(1, self.t["threads"])
        try:
            for i in range(len(self.steps)):
                if _STOP.is_set():
                    break
                nbytes = self.fetch(i)
                if pre_s:  # DLIO's preprocess_time per sample, spread over the read threads
                    _sleep_unless_stopped(pre_s * int(self.steps[i]["nsamples"]) / threads)
                if not self.put((i, nbytes)):
                    break
        except Exception as e:  # the message goes to the parent; the trainer stops at this step
            self.error = short(str(e))
            _STOP.set()
        finally:
            if not _STOP.is_set():
                self.put(None)


def _step_sync(i: int) -> bool:
    """DLIO's per-step allreduce, done by the parent (an MPI barrier between the ranks): tell it
    step i is computed and wait for its word. False: the parent stops the run."""
    import sys

    sys.stdout.write(f"S{i}\n")
    sys.stdout.flush()
    return sys.stdin.readline().strip() == "go"


def _largest_step_bytes(ops: np.ndarray, steps: np.ndarray) -> int:
    """The most bytes one step reads: a batch's responses are all held until its call returns."""
    if not len(steps):
        return 0
    ends = np.concatenate(([0], np.cumsum(ops["length"], dtype=np.int64)))
    first = steps["first_op"].astype(np.int64)
    return int((ends[first + steps["nops"].astype(np.int64)] - ends[first]).max())


def task_train(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    from dlio import _core

    signal.signal(signal.SIGTERM, _on_term)
    d = t["dir"]
    ops = np.load(os.path.join(d, "ops.npy"))
    steps = np.load(os.path.join(d, "steps.npy"))
    sizes = np.load(os.path.join(d, "sizes.npy"))
    with open(os.path.join(d, "uris.txt")) as f:
        uris = np.array(f.read().split("\n"), dtype=object)
    times = np.memmap(
        os.path.join(d, "times.u64"), dtype=np.uint64, mode="r+", shape=(max(1, len(steps)), TIMES_COLUMNS)
    )
    # build the client and open a connection before anything is timed or logged
    s3.list(f"{t['probe']}.dlio-fast-probe/")
    heap.prefault(
        _largest_step_bytes(ops, steps) + t["inflight"] * (int(ops["length"].max()) if len(ops) else 0), c.beat
    )
    s3.init_op_log(t["oplog"])
    loader = _Loader(s3, t, ops, steps, uris, sizes, c)
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    th = threading.Thread(target=loader.run, daemon=True)
    t_start = _core.now_ns()
    th.start()
    done = spun_cpu = 0
    for i in range(len(steps)):
        t_fetch = _core.now_ns()
        item = None
        while not _STOP.is_set():
            try:
                item = loader.q.get(timeout=0.05)
                break
            except queue.Empty:
                continue
        if item is None:
            break
        t_ready = _core.now_ns()
        # the accelerator's CPU is the trainer thread's CPU during compute (not its wall time: on a busy
        # host a preempted spin takes longer than the CPU it uses)
        c0 = time.thread_time_ns()
        comp = _core.compute(int(steps[i]["compute_ns"]), t["compute_mode"])
        spin = time.thread_time_ns() - c0
        spun_cpu += spin
        c.spun(spin)
        synced = not t.get("step_sync") or _step_sync(i)
        times[i] = (t_fetch, t_ready, _core.now_ns(), comp, item[1])
        if not synced:
            _STOP.set()
            break
        done = i + 1
        c.add(int(steps[i]["nops"]), int(item[1]), steps=1)  # after its times: the parent reads [:steps]
    t_end = _core.now_ns()
    stopped = _STOP.is_set()
    _STOP.set()
    th.join(LOADER_JOIN_S if stopped else 60)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    s3.finalize_op_log()
    times.flush()
    # the reading's CPU: the process's, less the CPU the trainer's compute spun (the emulated accelerator)
    cpu = max(0.0, (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime) - spun_cpu / 1e9)
    return {
        "steps_done": done,
        "stopped": done < len(steps),
        "error": loader.error,
        "cpu_ns": int(cpu * 1e9),
        "t_start": t_start,
        "t_end": t_end,
    }
