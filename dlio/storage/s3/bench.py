"""The io and ceiling commands' points on S3 (`dlio-fast io s3://bucket/prefix`): GET, PUT and range-GET
points, like warp or elbencho's S3 mode. dlio.fsbench reaches them through ``S3Backend.io_bench(uri)``
(an ``S3Bench``): the test objects, one point measured, the clean-up.

A point is (rw, bs, qd, threads): rw `read` GETs whole objects of bs bytes, `write` PUTs objects of
bs bytes, `randread` GETs bs-byte ranges at random block offsets of --file-size objects (one per
thread). Every thread keeps exactly qd requests in flight (s3dlio's max_in_flight). Each request is
timed by the client library (its op-log: start, first byte, end); the durations fill the same C
log-linear histograms as file reads. MB/s comes from the bytes the requests carried, over the
interval from the first measured request's start to the last one's end.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from dlio import _core
from dlio.base.errors import DlioError
from dlio.base.units import fmt_size
from dlio.config.engines import S3_ENGINE
from dlio.storage.s3 import client, limits, oplog, worker
from dlio.storage.s3.settings import S3Settings, check_key_length, parse_uri
from dlio.system import stats
from dlio.system.memcheck import check_fits

if TYPE_CHECKING:
    from dlio.progress import Progress

TEST_FOLDER = ".dlio-fast-io/"
CACHE_NOTE = "n/a (object store: no client cache; server-side caching unknown)"
SMALL_PUT = 1 << 20  # test objects this small go up 64 at a time (else 16)
MAX_RANGE_OBJECT = 5 << 30  # S3's largest single PUT


@dataclasses.dataclass(frozen=True)
class S3Point:
    rw: str
    bs: int
    qd: int
    threads: int
    object_size: int

    @property
    def engine(self) -> str:
        return S3_ENGINE

    def doing(self) -> str:
        """What the point's worker is doing, for the deadline's message."""
        what = {"read": "GET of {} objects", "write": "PUT of {} objects", "randread": "range GETs of {}"}
        return f"{what[self.rw].format(fmt_size(self.bs))}, {self.qd} in flight x {self.threads} threads"


def get_object_count(bs: int, threads: int, qd: int, size: int = 0) -> int:
    """Objects per size for GET points: every request in flight has its own object, and at least
    256 MiB (or 64 objects) so that a pass is not a handful of keys; a --size budget needs no more
    objects than the requests it makes (at 64 threads x qd 1024, 131,072 objects for 256 requests)."""
    n = max(2 * threads * qd, min(64, max(1, (256 << 20) // bs)))
    if size:
        n = min(n, threads * max(1, -(-size // bs // threads)))
    return n


def object_keys(prefix: str, point: S3Point, size: int = 0) -> list:
    """Keys per thread for a point; GET and range objects are shared by the points of a size."""
    base = prefix + TEST_FOLDER
    if point.rw == "read":
        n = get_object_count(point.bs, point.threads, point.qd, size)
        keys = [f"{base}get-{point.bs}/o{i}" for i in range(n)]
        return [keys[t :: point.threads] for t in range(point.threads)]
    if point.rw == "randread":
        return [[f"{base}range-{point.object_size}/o{t}"] for t in range(point.threads)]
    return [[f"{base}put-{point.bs}/t{t}/o{j}" for j in range(2 * point.qd)] for t in range(point.threads)]


def requests_per_thread(point: S3Point, size: int) -> int:
    """A --size budget's requests per thread (0: a --runtime point)."""
    return -(-size // point.bs // point.threads) if size else 0


def in_flight(point: S3Point, size: int) -> int:
    """Most requests in flight at once (each a connection): qd per thread, or fewer when a --size
    budget gives a thread fewer requests than that."""
    per_thread = requests_per_thread(point, size)
    return point.threads * (min(point.qd, per_thread) if per_thread else point.qd)


def held_bytes(prefix: str, point: S3Point, size: int) -> int:
    """The most response bytes the point's worker holds at once: a GET batch holds every response
    until it returns (dlio.storage.s3.worker), plus the chunks of the qd in flight before they are
    gathered; range GETs, those in flight."""
    if point.rw == "write":
        return point.threads * point.bs  # the payload of each thread
    if point.rw == "randread":
        return 2 * point.threads * point.qd * point.bs
    nkeys = len(object_keys(prefix, point, size)[0])
    cap = worker.get_batch_cap(point.bs, point.threads, point.qd)
    return (
        point.threads * (worker.batch_len(nkeys, point.qd, requests_per_thread(point, size), cap) + point.qd) * point.bs
    )


def objects_to_create(prefix: str, points: Sequence[S3Point], budget: int = 0) -> list:
    """[(size, [keys])] that the GET and range points read (a --size `budget` each): created once
    before the grid."""
    want: Dict[int, set] = {}
    for p in points:
        if p.rw == "write":
            continue
        size = p.bs if p.rw == "read" else p.object_size
        for keys in object_keys(prefix, p, budget):
            want.setdefault(size, set()).update(keys)
    return [(size, sorted(keys)) for size, keys in sorted(want.items())]


def put_objects(
    settings: S3Settings, bucket: str, groups: List[Tuple[int, List[str]]], progress: Optional[Progress] = None
) -> None:
    """Create the test objects of `groups` ([(size, [keys])]); the live display shows them as they
    go up (a grid at 64 threads x qd 1024 PUTs 131,072 of them first)."""
    if not groups:
        return
    count = sum(len(k) for _, k in groups)
    total = sum(size * len(k) for size, k in groups)
    small = max(size for size, _ in groups) <= SMALL_PUT
    task: Dict[str, Any] = {"task": "put_objects", "bucket": bucket, "groups": groups, "inflight": 64 if small else 16}
    task["files"] = limits.files_needed(task["inflight"])

    def tick(session: client.Session) -> None:
        ops, nbytes, _ = session.progress()
        assert progress is not None  # passed only with a display
        progress.generation(nbytes, ops, total, count)

    what = f"creating {count} test objects under s3://{bucket}/"
    try:
        client.run_task(settings, task, what, tick if progress is not None else None)
    finally:
        if progress is not None:
            progress.done()


def run_point(
    settings: S3Settings,
    bucket: str,
    prefix: str,
    point: S3Point,
    runtime_ns: int,
    ramp_ns: int,
    size: int,
    workdir: str,
    on_tick: Optional[Callable] = None,
) -> dict:
    """Measure one point in a worker process; its record (JSON-ready, the file io record's shape plus
    the S3 fields). A failure mid-point (an error, a server silent past the deadline) keeps what was
    measured and names the error in 'error'. on_tick(session): the live display's tick while it runs."""
    per_thread = requests_per_thread(point, size)
    log = os.path.join(workdir, f"oplog-{point.rw}-{point.bs}-{point.qd}-{point.threads}.tsv.zst")
    files = limits.check_open_files(
        in_flight(point, size), f"--qd {point.qd} x --threads {point.threads}", "lower --qd or --threads"
    )
    task = {
        "task": "point",
        "bucket": bucket,
        "rw": point.rw,
        "bs": point.bs,
        "qd": point.qd,
        "threads": point.threads,
        "object_size": point.object_size,
        "keys": object_keys(prefix, point, size),
        "runtime_ns": 0 if size else runtime_ns,
        "ramp_ns": ramp_ns,
        "requests_per_thread": per_thread,
        "held_bytes": held_bytes(prefix, point, size),
        "oplog": log,
        "files": files,
    }
    try:
        answer = client.run_task(settings, task, point.doing(), on_tick)
    except client.WorkerFailed as e:
        answer = {"errors": [str(e)], "measure_start": 0, "wall_ns": 0, "cpu_s": 0.0, "oplog_lost": 0}
    rows = oplog.read(log) if os.path.exists(log) else oplog.parse(b"\t".join(c.encode() for c in oplog.COLUMNS))
    return point_record(point, rows, answer)


def point_record(point: S3Point, rows: dict, answer: dict) -> dict:
    """The record of a point from the op-log rows and the worker's answer."""
    sel = rows["start"] >= answer["measure_start"]
    failed = sel & (rows["error"] != "")
    ok = sel & ~failed
    ops = int(ok.sum())
    nbytes = int(rows["bytes"][ok].sum())
    # the measured interval spans the successful requests: a failing tail (server gone) is not in it
    window = int(rows["end"][ok].max() - rows["start"][ok].min()) if ops else 0
    secs = max(window, 1) / 1e9
    lat = _core.hist_from_array(rows["duration"][ok])
    ttfb = None
    if point.rw == "read":
        ttfb = _core.hist_from_array(np.maximum(rows["first_byte"][ok] - rows["start"][ok], 0))
    cpu = answer["cpu_s"] * min(1.0, window / answer["wall_ns"]) if answer["wall_ns"] else 0.0
    errors = answer["errors"]
    rec = {
        "rw": point.rw,
        "bs": point.bs,
        "engine": S3_ENGINE,
        "qd": point.qd,
        "qd_used": point.qd,
        "threads": point.threads,
        "direct": False,
        "cache": CACHE_NOTE,
        "runtime_s": window / 1e9,
        "ops": ops,
        "bytes": nbytes,
        "errors": int(failed.sum()) + len(errors),
        "bw_bytes_s": nbytes / secs,
        "bw_MiB_s": nbytes / 2**20 / secs,
        "iops": ops / secs,
        "lat_ns": stats.summary(lat),
        "cpu_s": cpu,
        "cpu_us_per_io": (cpu / ops * 1e6) if ops else None,
        "engine_flags_used": 0,
        "lat_hist": stats.to_json(lat),
        "stopped": bool(errors),
        # S3 fields
        "object_size": point.object_size,
        "requests_per_s": ops / secs,
        "ttfb_ns": stats.summary(ttfb) if ttfb is not None else None,
        "ttfb_hist": stats.to_json(ttfb) if ttfb is not None else None,
        "retries": None,  # the AWS SDK inside s3dlio retries without telling; not counted
        "oplog_lost": answer["oplog_lost"],
    }
    if errors:
        rec["error"] = errors[0]
    return rec


def workdir() -> str:
    return tempfile.mkdtemp(prefix="dlio-fast-s3-")


class S3Bench:
    """The io grid's or the ceiling's points under one s3://BUCKET/PREFIX: its test objects (under
    PREFIX + TEST_FOLDER, created once per key), each point measured in a worker process, the clean-up.
    Made by ``S3Backend.io_bench``; the URI is checked when it is made, the store only from ``open``."""

    def __init__(self, backend: Any, uri: str) -> None:
        self.backend = backend
        self.uri = uri
        self.bucket, self.prefix = parse_uri(uri)
        self.created: Set[str] = set()
        self.made: List[str] = []  # the same keys, in the order they were created
        self.work: Optional[str] = None

    def point(self, rw: str, bs: int, qd: int, threads: int, object_size: int) -> S3Point:
        return S3Point(rw, bs, qd, threads, object_size)

    def check(self, rws: Sequence[str], bss: Sequence[int], file_size: int) -> None:
        """What S3 cannot do, refused before any request."""
        if "randwrite" in rws:
            raise DlioError("--rw randwrite: S3 objects are written whole; use --rw write (PUT)")
        for b in bss:
            if b < 1 or b > 64 << 20:
                raise DlioError(f"--bs {fmt_size(b)}: object / range size must be between 1 byte and 64 MiB")
        if "randread" in rws and file_size < max(bss):
            raise DlioError(
                f"--file-size {fmt_size(file_size)} is smaller than --bs {fmt_size(max(bss))} "
                "(range GETs read --bs bytes inside --file-size objects)"
            )
        if "randread" in rws and file_size > MAX_RANGE_OBJECT:
            raise DlioError(
                f"--file-size {fmt_size(file_size)}: range GETs read objects of at most "
                f"{fmt_size(MAX_RANGE_OBJECT)} (each is written in one PUT from memory; S3 takes at most 5 GiB in "
                "one PUT)"
            )

    def check_grid(self, grid: Sequence[S3Point], size: int) -> None:
        """Every key fits in S3's limit, every point in memory, and the one with most requests in flight in
        this host's open files."""
        longest = max((k for pt in grid for keys in object_keys(self.prefix, pt, size) for k in keys), key=len)
        check_key_length(self.bucket, self.prefix, longest)
        for pt in grid:
            check_fits(
                held_bytes(self.prefix, pt, size),
                f"{pt.rw} of {fmt_size(pt.bs)} x {pt.qd} in flight x {pt.threads} threads (the client holds a "
                "batch of responses at once)",
                "lower --bs, --qd or --threads",
            )
        most = max(grid, key=lambda p: in_flight(p, size))  # connections: this host's open files
        limits.check_open_files(
            in_flight(most, size), f"--qd {most.qd} x --threads {most.threads}", "lower --qd or --threads"
        )

    def check_limits(self, max_threads: int, max_qd: int) -> None:
        """The ceiling's largest probe in this host's open files."""
        limits.check_open_files(
            max_threads * max_qd, f"--max-qd {max_qd} x --max-threads {max_threads}", "lower --max-qd or --max-threads"
        )

    def open(self, create: bool = False) -> str:
        """The client there, the store reached (``create``: the bucket made); the endpoint."""
        client.require_client()
        self.backend.check_access([self.uri], create=create)
        self.work = workdir()
        return str(self.backend.settings.endpoint)

    def create(self, grid: Sequence[S3Point], size: int = 0, progress: Any = None) -> None:
        """The test objects the points of ``grid`` read (a --size budget ``size`` each) that are not yet there."""
        groups = [
            (n, [k for k in keys if k not in self.created]) for n, keys in objects_to_create(self.prefix, grid, size)
        ]
        groups = [(n, keys) for n, keys in groups if keys]
        put_objects(self.backend.settings, self.bucket, groups, progress)
        self.created.update(k for _, keys in groups for k in keys)
        self.made += [k for _, keys in groups for k in keys]

    def names(self) -> List[str]:
        """The test objects created, as URIs."""
        return [f"s3://{self.bucket}/{k}" for k in self.made]

    def measure(
        self, point: S3Point, runtime_ns: int, ramp_ns: int = 0, size: int = 0, on_tick: Optional[Callable] = None
    ) -> dict:
        assert self.work is not None, "open() first"
        return run_point(
            self.backend.settings, self.bucket, self.prefix, point, runtime_ns, ramp_ns, size, self.work, on_tick
        )

    def close(self, remove: bool) -> None:
        """The op-logs removed; ``remove``: the test objects too."""
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)
        if remove:
            self.backend.remove_tree(f"s3://{self.bucket}/{self.prefix}{TEST_FOLDER}")
