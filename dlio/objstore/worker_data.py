"""Worker tasks for workload datasets on S3 (run inside `python -m dlio.objstore.worker`): upload a
generated folder, fetch small objects (manifests), and list every key under a prefix."""

from __future__ import annotations

import os

MULTIPART_MIN = 64 << 20  # objects this large go up as multipart uploads (parts in parallel)
PART_SIZE = 16 << 20
BATCH_BYTES = 256 << 20  # small objects are read and PUT in batches of about this much
PUT_INFLIGHT = 32


def _files(folder: str):
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


def _multipart(s3, bucket: str, key: str, path: str) -> None:
    w = s3.MultipartUploadWriter(bucket, key, part_size=PART_SIZE, max_in_flight=8)
    try:
        with open(path, "rb") as f:
            while True:
                chunk = f.read(PART_SIZE)
                if not chunk:
                    break
                w.write(chunk)
        w.close()
    except BaseException:
        w.abort()
        raise


def task_upload_tree(s3, t: dict) -> dict:
    """PUT every file of t['folder'] as s3://bucket/prefix<relative name>: small ones with put_many
    (PUT_INFLIGHT in flight), large ones as multipart uploads. The manifest folder goes last, so
    that a dataset whose upload was cut short has no manifest and counts as missing."""
    files = _files(t["folder"])
    files.sort(key=lambda f: f[0].startswith(".dlio-fast"))
    bucket, prefix = t["bucket"], t["prefix"]
    nbytes = 0
    batch, batch_bytes = [], 0

    def flush():
        if batch:
            s3.put_many([(f"s3://{bucket}/{prefix}{rel}", _read(p)) for rel, p in batch], max_in_flight=PUT_INFLIGHT)
            batch.clear()

    for i, (rel, path, size) in enumerate(files):
        if rel.startswith(".dlio-fast") and (i == 0 or not files[i - 1][0].startswith(".dlio-fast")):
            flush()
            batch_bytes = 0
        if size >= t.get("multipart_min", MULTIPART_MIN):
            _multipart(s3, bucket, prefix + rel, path)
        else:
            batch.append((rel, path))
            batch_bytes += size
            if batch_bytes >= BATCH_BYTES:
                flush()
                batch_bytes = 0
        nbytes += size
    flush()
    return {"objects": len(files), "bytes": nbytes}


def task_fetch(s3, t: dict) -> dict:
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
    return {"found": found}


def task_list_all(s3, t: dict) -> dict:
    """Every object URI under the prefix (paged by the client: any number of keys)."""
    return {"uris": s3.list(f"s3://{t['bucket']}/{t['prefix']}", recursive=True)}


def _content(size: int, pattern) -> bytes:
    """A part's bytes: random, or an 8-byte pattern repeated (tensors of ones)."""
    import numpy as np

    if pattern is None:
        return np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    return np.full(-(-size // 8), int(pattern), dtype=np.uint64).tobytes()[:size]


def task_ckpt(s3, t: dict) -> dict:
    """A checkpoint save (PUT every item [uri, size]) or load (GET them whole), timed here from the
    first request to the last completion. Saves: objects of MULTIPART_MIN bytes or more as multipart
    uploads (PART_SIZE parts, part_inflight in flight), smaller ones with one PUT; up to t['threads']
    objects at once. Content is made before the window."""
    import threading
    import time

    items, kind = t["items"], t["kind"]
    fills = t.get("fills") or [None] * len(items)
    parts = {}
    if kind == "save":
        for (_, size), fill in zip(items, fills):
            n = min(size, PART_SIZE) if size >= MULTIPART_MIN else size
            parts.setdefault((n, fill), _content(n, fill))
    s3.list(items[0][0].rsplit("/", 1)[0] + "/.dlio-fast-probe/")  # client built, connection open
    errors, nbytes = [], [0]
    lock = threading.Lock()

    def one(i):
        uri, size = items[i]
        if kind == "load":
            got = len(memoryview(s3.get(uri)))
        elif size < MULTIPART_MIN:
            s3.put_bytes(uri, parts[(size, fills[i])])
            got = size
        else:
            bucket, key = uri[5:].split("/", 1)
            w = s3.MultipartUploadWriter(bucket, key, part_size=PART_SIZE, max_in_flight=t["part_inflight"])
            buf, left = parts[(PART_SIZE, fills[i])], size
            try:
                while left:
                    n = min(left, PART_SIZE)
                    w.write(buf if n == PART_SIZE else buf[:n])
                    left -= n
                w.close()
            except BaseException:
                w.abort()
                raise
            got = size
        with lock:
            nbytes[0] += got

    def worker(k):
        try:
            for i in range(k, len(items), t["threads"]):
                if errors:
                    return
                one(i)
        except Exception as e:
            errors.append(str(e))

    wall0 = time.time_ns()
    m0 = time.monotonic_ns()
    th = [threading.Thread(target=worker, args=(k,)) for k in range(t["threads"])]
    for x in th:
        x.start()
    for x in th:
        x.join()
    window = time.monotonic_ns() - m0
    if errors:
        raise RuntimeError(errors[0])
    return {"bytes": nbytes[0], "window_ns": window, "start_wall_ns": wall0, "part_size": PART_SIZE}
