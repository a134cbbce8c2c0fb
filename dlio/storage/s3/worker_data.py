"""Worker tasks for workload datasets on S3 (run inside `python -m dlio.storage.s3.worker`): upload a
generated folder, fetch small objects (manifests), and list every key under a prefix."""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING, Any, Dict, List, Tuple

from dlio.storage.s3 import content
from dlio.storage.s3.shared import MULTIPART_MIN, PART_SIZE, put_multipart, ranges_in_a_window

if TYPE_CHECKING:
    from dlio.storage.s3.shared import TaskCounters

BATCH_BYTES = 256 << 20  # small objects are read and PUT in batches of about this much
PUT_INFLIGHT = 32


def _files(folder: str) -> List[Tuple[str, str, int]]:
    """(relative name, path, size) of every file under folder, sorted."""
    out = []
    for root, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(root, n)
            out.append((os.path.relpath(p, folder), p, os.path.getsize(p)))
    return sorted(out)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _upload(
    s3: ModuleType,
    bucket: str,
    prefix: str,
    files: List[Tuple[str, str, int]],
    c: TaskCounters,
    multipart_min: int = MULTIPART_MIN,
) -> int:
    """PUT (relative name, path, size) files as s3://bucket/prefix<relative name>: small ones with
    put_many (PUT_INFLIGHT in flight, read in batches of about BATCH_BYTES), large ones as multipart
    uploads. Returns the bytes."""
    nbytes = 0
    batch: list[tuple[str, str]] = []
    batch_bytes = 0

    def flush() -> None:
        if batch:
            s3.put_many([(f"s3://{bucket}/{prefix}{rel}", _read(p)) for rel, p in batch], max_in_flight=PUT_INFLIGHT)
            c.add(len(batch), batch_bytes)
            batch.clear()

    for rel, path, size in files:
        if size >= multipart_min:
            put_multipart(s3, f"s3://{bucket}/{prefix}{rel}", path, in_flight=8)
            c.add(1, size)
        else:
            batch.append((rel, path))
            batch_bytes += size
            if batch_bytes >= BATCH_BYTES:
                flush()
                batch_bytes = 0
        nbytes += size
    flush()
    return nbytes


def task_upload_tree(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    """PUT every file of t['folder'] as s3://bucket/prefix<relative name>. The manifest folder goes
    last, so that a dataset whose upload was cut short has no manifest and counts as missing."""
    files = _files(t["folder"])
    mine = [f for f in files if not f[0].startswith(".dlio-fast")]
    last = [f for f in files if f[0].startswith(".dlio-fast")]
    mm = t.get("multipart_min", MULTIPART_MIN)
    nbytes = _upload(s3, t["bucket"], t["prefix"], mine, c, mm) + _upload(s3, t["bucket"], t["prefix"], last, c, mm)
    return {"objects": len(files), "bytes": nbytes}


def task_upload_stream(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    """Batches of files as the generator stages them: each further line on stdin is a JSON list of
    [relative name, path, size]; the batch is PUT and one line '{"done": bytes}' answers it (the
    parent then removes the files). Ends at end of input with the totals."""
    import json
    import sys

    objects = nbytes = 0
    for line in sys.stdin:
        files = json.loads(line)
        n = _upload(s3, t["bucket"], t["prefix"], files, c, t.get("multipart_min", MULTIPART_MIN))
        objects, nbytes = objects + len(files), nbytes + n
        print(json.dumps({"done": n}), flush=True)
    return {"objects": objects, "bytes": nbytes}


def task_fetch(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    """Download small objects to local files; found[i] False where the object does not exist."""
    found = []
    for uri, dest in zip(t["uris"], t["dests"]):
        try:
            data = s3.get(uri)
        except Exception as e:
            if "NoSuchKey" in str(e) or "not found" in str(e).lower() or "404" in str(e):
                found.append(False)
                continue
            raise
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(memoryview(data))
        found.append(True)
        c.add(1, len(memoryview(data)))
    return {"found": found}


def task_list_all(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    """Every object URI under the prefix (paged by the client: any number of keys)."""
    return {"uris": s3.list(f"s3://{t['bucket']}/{t['prefix']}", recursive=True)}


def task_ckpt(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    """A checkpoint save (PUT every item [uri, size]) or load (GET them whole), timed here from the
    first request to the last completion. Saves: objects of MULTIPART_MIN bytes or more as multipart
    uploads (PART_SIZE parts, part_inflight in flight), smaller ones with one PUT; up to t['threads']
    objects at once. Each object's bytes are unique (dlio.storage.s3.content: every 4 KiB block
    stamped with its object and offset); an item with a container (t['overlay_of'][i], an index into
    t['overlays']: the (offset, base64 bytes) literal ranges of torch.save's zip records,
    dlio.checkpoint.torchzip) holds the very bytes the file would: the literals laid over them."""
    import base64
    import threading

    from dlio.storage.s3.shared import threads_in_a_window

    items, kind = t["items"], t["kind"]
    fills = t.get("fills") or [None] * len(items)
    tables = [[(int(o), base64.b64decode(b)) for o, b in segs] for segs in t.get("overlays") or []]
    which = t.get("overlay_of") or [None] * len(items)
    bases: Dict[Any, Any] = {}
    if kind == "save":  # the base bytes of a part (and of a whole small object), per content, before the window
        small = max([size for _, size in items if size < MULTIPART_MIN] or [0])
        large = any(size >= MULTIPART_MIN for _, size in items)
        for fill in set(fills):
            c.beat()  # making the payloads: busy, no request outstanding
            bases[fill] = content.content(max(small, PART_SIZE if large else 0), fill)
    s3.list(items[0][0].rsplit("/", 1)[0] + "/.dlio-fast-probe/")  # client built, connection open
    errors: list[str] = []
    nbytes = [0]
    lock = threading.Lock()

    def one(i: int, stampers: Dict[Any, content.Stamper]) -> None:
        uri, size = items[i]
        if kind == "load":
            got = len(memoryview(s3.get(uri)))
        else:
            fill, segs = fills[i], tables[which[i]] if which[i] is not None else []
            st = stampers.get(fill)
            if st is None:  # this thread's copy of the base, stamped piece by piece
                st = stampers[fill] = content.Stamper(bases[fill], stamped=fill is None)
            uid = content.object_id(uri)
            if size < MULTIPART_MIN:
                s3.put_bytes(uri, bytes(st.piece(uid, 0, size, segs)))
            else:
                bucket, key = uri[5:].split("/", 1)
                w = s3.MultipartUploadWriter(bucket, key, part_size=PART_SIZE, max_in_flight=t["part_inflight"])
                try:
                    for off in range(0, size, PART_SIZE):
                        # the writer copies the piece before returning: the one buffer is stamped anew for the next
                        w.write(st.piece(uid, off, min(size - off, PART_SIZE), segs), copy=True)
                    w.close()
                except BaseException:
                    w.abort()
                    raise
            got = size
        with lock:
            nbytes[0] += got
        c.add(1, got)

    def worker(k: int) -> None:
        stampers: Dict[Any, content.Stamper] = {}
        try:
            for i in range(k, len(items), t["threads"]):
                if errors:
                    return
                one(i, stampers)
        except Exception as e:
            errors.append(str(e))

    wall0, window = threads_in_a_window(worker, t["threads"], errors)
    return {"bytes": nbytes[0], "window_ns": window, "start_wall_ns": wall0, "part_size": PART_SIZE}


def task_ranges(s3: ModuleType, t: Dict[str, Any], c: TaskCounters) -> Dict[str, Any]:
    """Range GETs of t['ops'] ([object index, offset, length] into t['uris']), t['inflight'] at once,
    timed here from the first request to the last completion (a model's shards: dlio.modelload)."""
    nbytes, wall0, window = ranges_in_a_window(s3, t["uris"], t["ops"], max(1, int(t["inflight"])), c)
    return {"bytes": nbytes, "window_ns": window, "start_wall_ns": wall0}
