"""The process that talks to S3: `python -m dlio.storage.s3.worker` reads one task on stdin (a JSON
line, or '@FILE' naming a JSON file: a task of any size) and writes one JSON answer on stdout. While it
runs it counts its requests and bytes in a file its parent maps (dlio.storage.s3.shared).

Why a process per task: s3dlio's client is a process-wide singleton configured once from the
environment, and its op-log (the per-request timings) can be opened once per process. A fresh
process per point gives each point its own settings and its own log, and leaves the CLI process
free of client threads. Requests go out in batches (get_many_stats / put_many, GIL released), with
exactly `qd` requests in flight per thread; range GETs, for which s3dlio has no batch call, go out
from `qd` asyncio workers per thread (the request and its timing are still in Rust).
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import threading
import time
from types import ModuleType
from typing import Any, Callable, Dict, List, Set, Tuple

import numpy as np

from dlio.storage.s3 import heap, limits, shared
from dlio.storage.s3.failures import classify, short
from dlio.storage.s3.shared import NoCounters, TaskCounters

# s3dlio's get_many_stats holds every response of a batch until the batch returns: the GET batches
# of a point hold at most this many bytes in all (but always qd requests per thread).
GET_BATCH_BYTES = 1 << 30
PUT_CHUNK = 4  # test objects are PUT in calls of this many x the requests in flight (counted between calls)


def task_check(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    """List a key that cannot exist under the prefix: fails on credentials, bucket, endpoint."""
    s3.list(f"s3://{t['bucket']}/{t['prefix']}.dlio-fast-probe/")
    return {}


def task_create_bucket(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    s3.create_bucket(t["bucket"])
    return {}


def _present(s3: ModuleType, bucket: str, keys: List[str], size: int) -> Set[str]:
    """The keys that already exist with `size` bytes (one listing per folder, HEADs of those listed)."""
    listed = set()
    for folder in sorted({k.rsplit("/", 1)[0] + "/" for k in keys}):
        listed.update(s3.list(f"s3://{bucket}/{folder}", recursive=True))
    uris = [f"s3://{bucket}/{k}" for k in keys if f"s3://{bucket}/{k}" in listed]
    if not uris:
        return set()

    async def heads() -> List[Dict[str, Any]]:
        return await s3.stat_many_async(uris)

    sizes = [int(m["size"]) for m in asyncio.run(heads())]
    return {u[len(f"s3://{bucket}/") :] for u, n in zip(uris, sizes) if n == size}


def task_put_objects(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    """Write the test objects: groups of (size, [keys]) with one random payload per size. Objects
    already there with the right size (kept by --keep) are not written again: a GET point measured
    right after overwriting its objects measures the server's clean-up of the old ones too (on Ceph
    RGW, half the bandwidth for seconds), which a fresh run does not see.
    The objects written are then read once, untimed: the first GET of an object after its PUT is not
    what later GETs cost (Ceph RGW on memstore: 380-600 MiB/s, then 900-1000, however long after
    the PUT), and a point should not measure that one-off pass."""
    rng = np.random.default_rng(7)
    written = read_back = 0
    inflight = t.get("inflight", 16)
    for size, keys in t["groups"]:
        have = _present(s3, t["bucket"], keys, size) if t.get("reuse", True) else set()
        uris = [f"s3://{t['bucket']}/{k}" for k in keys if k not in have]
        if not uris:
            continue
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        for i in range(0, len(uris), PUT_CHUNK * inflight):
            chunk = uris[i : i + PUT_CHUNK * inflight]
            s3.put_many([(u, data) for u in chunk], max_in_flight=inflight)
            c.add(len(chunk), len(chunk) * size)
        written += len(uris)
        per_batch = max(1, min(PUT_CHUNK * inflight, GET_BATCH_BYTES // size))
        for i in range(0, len(uris), per_batch):
            read_back += s3.get_many_stats(uris[i : i + per_batch], max_in_flight=inflight)[1]
            c.beat()
    return {"written": written, "read_back": read_back}


def task_delete(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    s3.delete(f"s3://{t['bucket']}/{t['prefix']}", recursive=True)
    return {}


def task_delete_keys(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    """Only the objects named (a KV run's own entries), several at once (s3dlio deletes one per call)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        for _ in pool.map(s3.delete, t["uris"]):
            c.beat()
    return {}


def task_list(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    uris = s3.list(f"s3://{t['bucket']}/{t['prefix']}", recursive=True)
    return {"count": len(uris), "first": uris[:3]}


class _Threads:
    """The point's threads: each runs its loop until the deadline, the byte budget or a failure."""

    def __init__(self, t: Dict[str, Any]) -> None:
        self.t = t
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.requests = [0] * t["threads"]

    def run(self, body: Callable[[int], None]) -> None:
        th = [threading.Thread(target=self._guard, args=(body, i), daemon=True) for i in range(self.t["threads"])]
        for x in th:
            x.start()
        for x in th:
            x.join()

    def _guard(self, body: Callable[[int], None], i: int) -> None:
        try:
            body(i)
        except Exception as e:  # the message goes back to the parent; the other threads stop
            self.errors.append(str(e))
            self.stop.set()

    def more(self, i: int, done_requests: int) -> bool:
        if self.stop.is_set():
            return False
        t = self.t
        if t["requests_per_thread"]:
            return done_requests < t["requests_per_thread"]
        return time.monotonic_ns() < t["deadline"]


def get_batch_cap(bs: int, threads: int, qd: int) -> int:
    """Most requests in one GET batch of a thread: GET_BATCH_BYTES over all threads, at least qd."""
    return max(qd, GET_BATCH_BYTES // threads // bs)


def batch_len(nitems: int, qd: int, limit: int, max_items: int = 0) -> int:
    """Entries of a thread's batch: at least 8 x qd (batch tails are then short), or `limit` /
    `max_items` if smaller."""
    n = max(8 * qd, nitems)
    for cap in (limit, max_items):
        if cap:
            n = min(n, cap)
    return n


def _batch(items: List[Any], qd: int, limit: int, max_items: int = 0) -> List[Any]:
    """`items` repeated to batch_len(...) entries."""
    n = batch_len(len(items), qd, limit, max_items)
    reps = -(-n // len(items))
    return (items * reps)[:n]


def task_point(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    """One io point with the op-log open; the answer holds the per-request arrays' summary. Each
    thread adds its requests and bytes to the shared counters after each batch call (the live
    display and the parent's deadline read them)."""
    # A fresh process: build the client and open qd connections before anything is timed or logged.
    s3.list(f"s3://{t['bucket']}/{t['keys'][0][0]}.dlio-fast-probe/")
    qd, bucket, rw = t["qd"], t["bucket"], t["rw"]
    limit = t["requests_per_thread"]
    per_batch = get_batch_cap(t["bs"], t["threads"], qd)
    if rw != "write":
        heap.prefault(t["held_bytes"], c.beat)
    if rw == "read":
        # last before the clock: qd connections opened, and the server busy rather than idle
        s3.get_many_stats([f"s3://{bucket}/{k}" for k in t["keys"][0][:qd]], max_in_flight=qd)
    s3.init_op_log(t["oplog"])
    pool = _Threads(t)

    def get_loop(i: int) -> None:
        batch = _batch([f"s3://{bucket}/{k}" for k in t["keys"][i]], qd, limit, per_batch)
        done = 0
        while pool.more(i, done):
            n, nbytes = s3.get_many_stats(batch[: limit - done] if limit else batch, max_in_flight=qd)
            c.add(n, nbytes)
            done += n

    def put_loop(i: int) -> None:
        data = np.random.default_rng(i).integers(0, 256, t["bs"], dtype=np.uint8).tobytes()
        items = _batch([(f"s3://{bucket}/{k}", data) for k in t["keys"][i]], qd, limit)
        done = 0
        while pool.more(i, done):
            chunk = items[: limit - done] if limit else items
            s3.put_many(chunk, max_in_flight=qd)
            c.add(len(chunk), len(chunk) * t["bs"])
            done += len(chunk)

    def range_loop(i: int) -> None:
        keys = [f"s3://{bucket}/{k}" for k in t["keys"][i]]
        nblocks = max(1, t["object_size"] // t["bs"])
        rng = np.random.default_rng(1000 + i)

        async def worker(w: int, plan: Tuple[np.ndarray, np.ndarray]) -> None:
            for j in range(w, len(plan[0]), qd):
                await s3.get_range_async(keys[plan[0][j]], int(plan[1][j]), t["bs"])

        done = 0
        while pool.more(i, done):
            n = min(limit - done, 64 * qd) if limit else 64 * qd
            plan = (rng.integers(0, len(keys), n), rng.integers(0, nblocks, n) * t["bs"])

            async def wave() -> None:
                await asyncio.gather(*(worker(w, plan) for w in range(qd)))

            asyncio.run(wave())
            c.add(n, n * t["bs"])
            done += n

    ramp_end = time.time_ns() + t["ramp_ns"]
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    m0 = time.monotonic_ns()
    t["deadline"] = m0 + t["ramp_ns"] + t["runtime_ns"]
    pool.run({"read": get_loop, "write": put_loop, "randread": range_loop}[rw])
    wall = time.monotonic_ns() - m0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    s3.finalize_op_log()
    st = s3.op_log_stats() or {}
    return {
        "errors": pool.errors,
        "measure_start": ramp_end,
        "wall_ns": wall,
        "cpu_s": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
        "oplog_lost": int(st.get("accepted", 0)) - int(st.get("written", 0)) + int(st.get("dropped_full", 0)),
    }


Task = Callable[[ModuleType, Dict[str, Any], TaskCounters], Dict[str, Any]]
TASKS: Dict[str, Task] = {
    "check": task_check,
    "create_bucket": task_create_bucket,
    "put_objects": task_put_objects,
    "delete": task_delete,
    "delete_keys": task_delete_keys,
    "list": task_list,
    "point": task_point,
}


def _dataset_tasks() -> Dict[str, Task]:
    from dlio.storage.s3 import worker_data, worker_files, worker_kv, worker_train

    return {
        "upload_tree": worker_data.task_upload_tree,
        "upload_stream": worker_data.task_upload_stream,
        "fetch": worker_data.task_fetch,
        "list_all": worker_data.task_list_all,
        "ckpt": worker_data.task_ckpt,
        "ranges": worker_data.task_ranges,
        "train": worker_train.task_train,
        "put_files": worker_files.task_put_files,
        "get_files": worker_files.task_get_files,
        "kv_relay": worker_kv.task_kv_relay,
    }


def main() -> None:
    # everything is imported before the task is read: a spare worker (dlio.storage.s3.client) is
    # started after the previous task and waits here with its start paid
    TASKS.update(_dataset_tasks())
    # s3dlio imports its PyTorch datasets when torch is installed: 2.5 s of CPU per worker here, for
    # classes a worker never uses. A None entry makes that import fail, and s3dlio goes without them.
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]
    try:
        import s3dlio
    except ImportError as e:
        sys.stdin.readline()
        print(json.dumps({"error": f"s3dlio is not installed ({e}): pip install 'dlio-fast[s3]'", "kind": "missing"}))
        return
    from dlio import _core  # noqa: F401  (the train task's clock and compute)

    line = sys.stdin.readline()  # one line: the train task keeps stdin open for its step barrier
    if not line:  # a spare whose parent is gone (or never needed it)
        os._exit(0)
    if line.startswith("@"):  # the task in a file (dlio.storage.s3.client.Session)
        with open(line[1:].rstrip("\n")) as f:
            t = json.load(f)
    else:
        t = json.loads(line)
    c = shared.Counters(t["counters"], write=True) if t.get("counters") else NoCounters()
    c.start_cpu()
    try:
        # the connections of the requests in flight: the parent checked the hard limit allows them
        limits.raise_soft_limit(int(t.get("files") or 0))
        out = TASKS[t["task"]](s3dlio, t, c)
    except Exception as e:
        out = {"error": short(str(e)), "kind": classify(str(e))}
    print(json.dumps(out))
    sys.stdout.flush()
    os._exit(0)  # the client's runtime threads are not joined at exit: leave now


if __name__ == "__main__":
    main()
