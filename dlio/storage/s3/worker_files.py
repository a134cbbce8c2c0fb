"""Worker tasks that move local files to and from objects whole (run inside `python -m dlio.storage.s3.worker`):
files made on this host PUT as objects, and objects downloaded into local files by range GETs. This is how a
service that keeps its files in an object store and works on a local copy moves them (Milvus's index node
uploads an index it built; its query node downloads a segment's index files before it searches them).

Both are timed here from the first request to the last completion. A download writes each range where it
belongs in its file as it arrives (the page cache), then fsyncs every file after the window, timed apart: the
window is the object store's figure, the fsync the local disk's."""

from __future__ import annotations

import os
import threading
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any, Dict, List

from dlio.storage.s3.shared import MULTIPART_MIN, PART_SIZE, put_multipart, ranges_in_a_window, threads_in_a_window

if TYPE_CHECKING:
    from dlio.storage.s3.shared import TaskCounters


def _put_file(s3: ModuleType, uri: str, path: str, size: int, part_inflight: int) -> None:
    if size < MULTIPART_MIN:
        with open(path, "rb") as f:
            s3.put_bytes(uri, f.read())
        return
    put_multipart(s3, uri, path, part_inflight)


def task_put_files(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    """PUT each local file t['paths'][i] as t['uris'][i] (multipart from MULTIPART_MIN bytes, part_inflight
    parts in flight), up to t['threads'] files at once."""
    uris, paths = t["uris"], t["paths"]
    sizes = [os.path.getsize(p) for p in paths]
    if uris:
        s3.list(uris[0].rsplit("/", 1)[0] + "/.dlio-fast-probe/")  # client built, connection open
    errors: list[str] = []
    lock = threading.Lock()
    done = [0]

    def worker(k: int) -> None:
        try:
            for i in range(k, len(uris), t["threads"]):
                if errors:
                    return
                _put_file(s3, uris[i], paths[i], sizes[i], t["part_inflight"])
                with lock:
                    done[0] += sizes[i]
                c.add(1, sizes[i])
        except Exception as e:
            errors.append(str(e))

    wall0, window = threads_in_a_window(worker, max(1, t["threads"]), errors)
    return {"bytes": done[0], "window_ns": window, "start_wall_ns": wall0, "part_size": PART_SIZE}


def task_get_files(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    """Download object t['uris'][i] of t['sizes'][i] bytes into the local file t['paths'][i]: range GETs of
    t['transfer'] bytes, t['inflight'] at once, each written at its offset as it arrives; every file then
    fsynced (timed apart: fsync_ns)."""
    uris, sizes, paths = t["uris"], [int(n) for n in t["sizes"]], t["paths"]
    step, inflight = max(1, int(t["transfer"])), max(1, int(t["inflight"]))
    ops = [(f, off, min(step, n - off)) for f, n in enumerate(sizes) for off in range(0, n, step)]
    fds: List[int] = []
    try:
        for p, n in zip(paths, sizes):
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            fds.append(fd)
            os.ftruncate(fd, n)

        def keep(f: int, off: int, data: memoryview) -> None:
            asked = min(step, sizes[f] - off)
            if len(data) != asked:
                raise RuntimeError(f"{uris[f]}: {len(data)} bytes at offset {off}, {asked} asked (object changed?)")
            os.pwrite(fds[f], data, off)

        got, wall0, window = ranges_in_a_window(s3, uris, ops, inflight, c, keep)
        f0 = time.monotonic_ns()
        for fd in fds:
            os.fsync(fd)
        fsync = time.monotonic_ns() - f0
    finally:
        for fd in fds:
            os.close(fd)
    return {"bytes": got, "requests": len(ops), "window_ns": window, "fsync_ns": fsync, "start_wall_ns": wall0}
