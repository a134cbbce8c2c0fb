"""`dlio-fast io`: one microbenchmark point or a grid of them, like fio jobs.

A point is (rw, bs, engine, qd, threads). With at least as many files as threads, thread t takes
files t, t+T, t+2T ... (every file of a file set is read once per pass; fio's numjobs with files
of their own); with fewer files, threads sharing a file each take a contiguous region of it. A
file whose size is not a multiple of bs ends with one shorter read, so small files (a dataset of
2.8 MB files at --bs 4m) are read whole. Sequential
points walk the blocks in order; random points visit every block once per pass in a random order
(fio's random map). The C runner cycles through the plan until the runtime or byte budget is
spent; the ramp period is run and not counted.

Mixed points (fio's readwrite / randrw with rwmixread): each request is drawn a read or a write (numpy,
rwmixread % reads), over the same blocks as the pure pattern; in readwrite the reads and the writes each
walk the blocks in order from the start, as fio keeps a position per direction. The record gives the
totals and, as fio's JSON, a `read` and a `write` section each with its ops, bytes, bandwidth, IOPS
and latency.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import resource
import signal
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple

import numpy as np

from dlio import _core
from dlio.base.errors import DlioError, Interrupted
from dlio.system import stats
from dlio.system.execute import execute_partial
from dlio.system.host import drop_cache, drop_host_cache

if TYPE_CHECKING:
    from dlio.fsbench.testfiles import FileSet
    from dlio.report.result import IoPoint
    from dlio.report.trace import Tracer
    from dlio.system.counters import Phase

MIXED = ("readwrite", "randrw")


def writes(rw: str) -> bool:
    """True when a pattern writes (the test files must be ours to write)."""
    return rw in ("write", "randwrite") or rw in MIXED


@dataclasses.dataclass(frozen=True)
class Point:
    rw: str
    bs: int
    engine: str
    qd: int
    threads: int
    direct: bool
    rwmixread: int = 50  # mixed patterns: the share of reads in %, fio's default


@dataclasses.dataclass(frozen=True)
class Budget:
    runtime_ns: int = 0
    ramp_ns: int = 0
    size: int = 0  # bytes in all (0 = time based)


def _blocks(size: int, bs: int, first_byte: int = 0, nbytes: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
    """(offsets, lengths) of the transfers covering [first_byte, first_byte + nbytes)."""
    nbytes = size - first_byte if nbytes is None else nbytes
    offs = np.arange(first_byte, first_byte + nbytes, bs, dtype=np.uint64)
    lens = np.minimum(np.uint64(bs), np.uint64(first_byte + nbytes) - offs)
    return offs, lens


def build_plan(point: Point, fileset: FileSet, seed: int = 42) -> Tuple[np.ndarray, np.ndarray]:
    """(ops, thread_first_op) for a point: numpy arrays, no per-block Python work."""
    nfiles = len(fileset.paths)
    op = _core.OP_WRITE if point.rw in ("write", "randwrite") else 0  # mixed: drawn per request below
    rng = np.random.default_rng(seed)
    per_thread: List[List[tuple]] = [[] for _ in range(point.threads)]
    if nfiles >= point.threads:
        for f in range(nfiles):
            per_thread[f % point.threads].append((f,) + _blocks(fileset.sizes[f], point.bs))
    else:
        sharers: Dict[int, List[int]] = {}
        for t in range(point.threads):
            sharers.setdefault(t % nfiles, []).append(t)
        for f, group in sharers.items():
            nblocks = fileset.sizes[f] // point.bs
            if nblocks < len(group):
                raise DlioError(
                    f"{fileset.paths[f]}: {fileset.sizes[f]} bytes is too small for --bs "
                    f"{point.bs} with {len(group)} thread(s) on it (use a larger --file-size)"
                )
            per = nblocks // len(group)
            for k, t in enumerate(group):
                per_thread[t].append((f,) + _blocks(fileset.sizes[f], point.bs, k * per * point.bs, per * point.bs))
    chunks = []
    for t in range(point.threads):
        parts = []
        for f, offs, lens in per_thread[t]:
            ops = np.zeros(len(offs), dtype=_core.OP_DTYPE)
            ops["file"] = f
            ops["op"] = op
            ops["offset"] = offs
            ops["length"] = lens
            parts.append(ops)
        ops = np.concatenate(parts) if parts else np.zeros(0, dtype=_core.OP_DTYPE)
        if point.rw.startswith("rand"):
            ops = ops[rng.permutation(len(ops))]
        if point.rw in MIXED:
            ops = mix_directions(ops, point.rw, point.rwmixread, rng)
        chunks.append(ops)
    counts = [len(c) for c in chunks]
    first_op = np.concatenate([[0], np.cumsum(counts)]).astype(np.uint64)
    return np.concatenate(chunks), first_op


def mix_directions(ops: np.ndarray, rw: str, rwmixread: int, rng: np.random.Generator) -> np.ndarray:
    """Each request drawn a write with probability 1 - rwmixread / 100; in readwrite the reads take the
    blocks in order from the first, and so do the writes (fio's position per direction)."""
    write = rng.random(len(ops)) * 100.0 >= rwmixread
    if rw == "readwrite":
        order = np.empty(len(ops), dtype=np.int64)
        order[~write] = np.arange(int((~write).sum()))
        order[write] = np.arange(int(write.sum()))
        ops = ops[order]
    else:
        ops = ops.copy()
    ops["op"] = np.where(write, _core.OP_WRITE, 0).astype(ops["op"].dtype)
    return ops


def run_point(
    point: Point,
    fileset: FileSet,
    budget: Budget,
    cache: str = "keep",
    on_tick: Optional[Callable[[Any], None]] = None,
    eng_flags: int = 0,
    delay_ns: int = 0,
    tracer: Optional[Tracer] = None,
    phase: Optional[Callable[[], Phase]] = None,
) -> IoPoint:
    """Measure one point. Returns the point's record (plain dict, JSON-ready). With a tracer
    (dlio.report.trace.Tracer), the point's requests are appended to its .pfw file as spans.

    phase: a function returning the point's dlio.system.counters.Phase, begun after the page-cache step (what
    it samples, the pages cached before, is then what the point meets) and ended with the run; the
    record carries its counters as "counters"."""
    ops, first_op = build_plan(point, fileset)
    cache_note = cache_step(point, fileset.paths, cache)
    counted = phase() if phase is not None else None
    # fio's fadvise_hint: buffered random points get no readahead (its neighbouring pages would serve
    # later random reads from memory), sequential ones the larger readahead.
    advice = _core.ENG_FADV_RANDOM if point.rw.startswith("rand") else _core.ENG_FADV_SEQ
    run = _core.Run(
        "io",
        point.engine,
        fileset.paths,
        ops,
        threads=point.threads,
        qd=point.qd,
        direct=point.direct,
        thread_first_op=first_op,
        runtime_ns=budget.runtime_ns,
        ramp_ns=budget.ramp_ns,
        bytes_limit=budget.size,
        loop=bool(budget.runtime_ns or budget.size),
        eng_flags=eng_flags | advice,
        delay_ns=delay_ns,
        trace=tracer is not None,
    )
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    w0 = time.monotonic_ns()
    res, failure = execute_partial(run, on_tick=on_tick)
    wall = max(1, time.monotonic_ns() - w0)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    if failure is not None:
        if isinstance(failure, Interrupted) and res is not None and res.get("ops"):
            # the seconds measured before Ctrl-C / SIGTERM are kept, marked as such
            failure.record = dict(
                _counted(point_record(point, res, ru0, ru1, wall, cache_note), counted, point),
                interrupted=signal.Signals(failure.signum).name,
            )
        raise failure
    assert res is not None  # no failure: the run's result
    if tracer is not None:
        tracer.add_run(
            res,
            fileset.paths,
            name="point",
            rw=point.rw,
            bs=point.bs,
            engine=point.engine,
            qd=point.qd,
            threads=point.threads,
        )
    return _counted(point_record(point, res, ru0, ru1, wall, cache_note), counted, point)


def _counted(rec: IoPoint, phase: Optional[Phase], point: Point) -> IoPoint:
    """The record with its phase's counters (none without a phase). A mixed point is judged by its reads
    (are they the storage's?), its writes shown beside them."""
    if phase is not None:
        mixed = point.rw in MIXED
        app: Tuple[int, int] = (rec["read"]["bytes"], rec["read"]["ops"]) if mixed else (rec["bytes"], rec["ops"])
        rec["counters"] = phase.end(*app, None, point.threads, write=writes(point.rw) and not mixed)
    return rec


def point_record(
    point: Point,
    res: Dict[str, Any],
    ru0: resource.struct_rusage,
    ru1: resource.struct_rusage,
    wall_ns: int,
    cache_note: str,
) -> IoPoint:
    window = max(1, res["t_end"] - res["t_start"])
    cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    # CPU is measured over the whole call (ramp included): scale to the measured window.
    cpu_window = cpu_s * min(1.0, window / wall_ns)
    ops = res["ops"]
    lat = stats.summary(res["lat"])
    return {
        "rw": point.rw,
        "bs": point.bs,
        "engine": point.engine,
        "qd": point.qd,
        "qd_used": res["qd_used"],
        "threads": point.threads,
        "direct": point.direct,
        "cache": cache_note,
        "runtime_s": window / 1e9,
        "ops": ops,
        "bytes": res["bytes"],
        "errors": res["errors"],
        "bw_bytes_s": res["bytes"] / (window / 1e9),
        "bw_MiB_s": res["bytes"] / 2**20 / (window / 1e9),
        "iops": ops / (window / 1e9),
        "lat_ns": lat,
        "cpu_s": cpu_window,
        "cpu_us_per_io": (cpu_window / ops * 1e6) if ops else None,
        "engine_flags_used": res["eng_flags_used"],
        "lat_hist": stats.to_json(res["lat"]),
        "stopped": res["stopped"],
        **(mixed_sections(point, res, window) if point.rw in MIXED else {}),
    }


def mixed_sections(point: Point, res: Dict[str, Any], window_ns: int) -> IoPoint:
    """A mixed point's read and write sections (fio's JSON has one per direction), from the C run's
    per-direction counters: every request is in exactly one of them."""
    secs = window_ns / 1e9
    out: IoPoint = {"rwmixread": point.rwmixread}
    parts: Dict[Literal["read", "write"], Tuple[Any, Any, Any]] = {
        "read": (res["ops"] - res["ops_write"], res["bytes"] - res["bytes_write"], res["lat_read"]),
        "write": (res["ops_write"], res["bytes_write"], res["lat_write"]),
    }
    for name, (ops, nbytes, lat) in parts.items():
        out[name] = {
            "ops": int(ops),
            "bytes": int(nbytes),
            "bw_bytes_s": nbytes / secs,
            "bw_MiB_s": nbytes / 2**20 / secs,
            "iops": ops / secs,
            "lat_ns": stats.summary(lat),
            "lat_hist": stats.to_json(lat),
        }
    return out


def cache_step(point: Point, paths: Sequence[str], cache: str) -> str:
    """The page cache before a point (keep, drop each file's pages, or drop-all as root); the note
    the point's record carries."""
    if point.direct:
        return "bypassed (O_DIRECT)"
    if cache == "drop":
        return drop_cache(paths)
    if cache == "drop-all":
        return drop_host_cache()
    return "kept (the page cache is measured)"


def direct_supported(path: str) -> bool:
    """True when the filesystem of path takes O_DIRECT."""
    try:
        check_direct(path)
        return True
    except DlioError:
        return False


def check_engine(name: str, direct: bool = False) -> int:
    """Raise DlioError unless engine name can run here (with the reason and the fix)."""
    known = {e[0]: e for e in _core.engines()}
    if name not in known:
        raise DlioError(f"unknown engine {name!r} (choose from {', '.join(sorted(known))})")
    _, caps, ok, why = known[name]
    if not ok:
        raise DlioError(f"engine {name} is not available: {why}")
    if direct and not caps & _core.CAP_DIRECT:
        raise DlioError(f"engine {name} cannot do O_DIRECT (use --buffered)")
    return caps


def check_direct(path: str) -> None:
    """Raise DlioError if the filesystem of path refuses O_DIRECT."""
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    probe = os.path.join(folder, f".dlio-fast-odirect-probe-{os.getpid()}")
    target = path if os.path.isfile(path) else probe
    try:
        fd = os.open(target, os.O_RDONLY | os.O_DIRECT | (os.O_CREAT if target == probe else 0), 0o600)
        os.close(fd)
    except OSError as e:
        if e.errno == errno.EINVAL:
            raise DlioError(
                f"{path}: the filesystem refuses O_DIRECT (EINVAL); use --buffered "
                "(with --cache drop to keep the page cache out of the way)"
            ) from None
        raise DlioError(f"{path}: cannot open with O_DIRECT: {e.strerror}") from None
    finally:
        if target == probe and os.path.exists(probe):
            os.unlink(probe)
