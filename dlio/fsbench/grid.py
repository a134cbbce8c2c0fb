"""The io grid: its points run one after another, each printed as it finishes, and the document
(JSON) and table (CSV) written at the end even when a point fails or the run is interrupted.
`dlio-fast io` and its MPI-IO form (dlio.fsbench.ior) share it; they differ in how a point runs.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, TypeVar

from dlio.base.errors import DlioError, DlioRunError, Interrupted, os_error_message
from dlio.base.units import fmt_bytes
from dlio.fsbench.points import MIXED, writes
from dlio.report.io_table import IO_COLUMNS, MIXED_COLUMNS, flat_point
from dlio.report.result import IoPoint
from dlio.system import output
from dlio.system.execute import late_signal_note, pending, stop_signals_deferred
from dlio.system.memcheck import mem_available


@dataclass(frozen=True)
class Sinks:
    """Where a grid's results go besides the console: a JSON document and a CSV table."""

    json_path: Optional[str] = None
    csv_path: Optional[str] = None
    csv_extra: Sequence[str] = ()  # columns after IO_COLUMNS
    csv_drop: Sequence[str] = ()  # record fields left out of the CSV

    def check(self) -> None:
        """Fail before measuring when a result file could not be written."""
        for p in (self.json_path, self.csv_path):
            if p:
                output.check_output_path(p)

    def write(self, doc: Dict[str, Any]) -> None:
        """Write the document and the table. One that cannot be written where asked (a full disk) is
        written to a file of the temporary folder instead, and the error names both paths: the
        measurements are never lost with a line that does not say where."""

        def csv(p: str) -> None:
            rows = [flat_point({k: v for k, v in r.items() if k not in self.csv_drop}) for r in doc["points"]]
            output.write_csv(p, rows, IO_COLUMNS + list(self.csv_extra))

        writers = (
            (self.json_path, ".json", lambda p: output.write_json(p, doc)),
            (self.csv_path, ".csv", csv),
        )
        failed = []
        for path, ext, write in writers:
            if not path:
                continue
            try:
                write(path)
            except OSError as e:
                failed.append(f"{os_error_message(e, path, 'free some space there')}; {_fallback(write, ext)}")
        if failed:
            raise DlioRunError("; ".join(failed))


def _fallback(write: Callable[[str], None], ext: str) -> str:
    """Write with write() to a new file in the temporary folder; says where it went, or that it could not."""
    fd, path = tempfile.mkstemp(prefix="dlio-fast-io-results-", suffix=ext)
    os.close(fd)
    try:
        write(path)
    except OSError as e:
        os.unlink(path)
        return f"the results could not be written to {path} either ({e.strerror}); they are on the console only"
    return f"the results were written to {path} instead"


def combinations(*axes: Iterable[Any]) -> Iterator[tuple]:
    """The grid's points in the order they run: the last axis varies fastest."""
    return itertools.product(*axes)


# a grid's point record: an IoPoint, or one with more fields (dlio.report.result.MpiIoPoint)
P = TypeVar("P", bound=IoPoint)


def run_grid(
    records: Iterable[Optional[P]],
    doc: Dict[str, Any],
    header: str,
    line: Callable[[P], str],
    sinks: Sinks,
    echo: Callable[[str], None],
    write: bool = True,
) -> Dict[str, Any]:
    """Consume `records` (a generator that runs one point per item; None = nothing to report),
    print each, collect them in doc["points"], and write the sinks at the end whatever happens
    (`write`: this process writes them: rank 0 under MPI)."""
    points: List[P] = doc.setdefault("points", [])
    echo(header)
    try:
        with stop_signals_deferred():  # a signal between points stops the next one, loses nothing
            for rec in records:
                if rec is not None:
                    points.append(rec)
                    echo(line(rec))
        if pending() is not None:
            echo(late_signal_note())
        if write and not any(p["ops"] for p in points):  # measured nothing: no result (docs/reliability.md)
            doc["complete"] = False
            doc["reason"] = "the run measured nothing: no point completed an I/O; give a longer --runtime or --size"
            raise DlioRunError(doc["reason"])
        doc["complete"] = True
    except Interrupted as e:
        rec = getattr(e, "record", None)  # the interrupted point's measured part (points.run_point)
        if rec is not None:
            points.append(rec)
            echo(f"{line(rec)}  (interrupted by {rec['interrupted']})")
        doc["reason"] = str(e)
        raise
    finally:
        if write:
            sinks.write(doc)
    return doc


@dataclass(frozen=True)
class Grid:
    """The axes of a local io grid and what every point shares."""

    rws: Sequence[str]
    bss: Sequence[int]
    engines: Sequence[str]
    qds: Sequence[int]
    threads: Sequence[int]
    direct: Optional[bool]  # None: buffered, as fio's default (the cache mode keeps the page cache out)
    cache: Optional[str]  # keep | drop | drop-all; None: drop for buffered points
    fixedbufs: bool
    regfiles: bool
    budget: Any  # dlio.fsbench.points.Budget
    rwmixread: int = 50  # mixed patterns: % reads


def io_modes(g: Grid, path: str) -> Dict[str, Tuple[bool, str]]:
    """{engine: (O_DIRECT, cache mode)} of the grid. By default a point measures the storage as fio's
    defaults do (buffered, invalidate=1): buffered reads, with the files' pages dropped before each
    point, so the kernel's readahead is part of the figure and the page cache is not; --direct
    bypasses the cache; --cache keep is the explicit way to measure the page cache."""
    from dlio.fsbench import points

    for e in g.engines:
        points.check_engine(e, bool(g.direct))
    if g.direct:
        points.check_direct(path)
    return {e: (bool(g.direct), "keep" if g.direct else (g.cache or "drop")) for e in g.engines}


def runnable(g: Grid, warn: Callable[[str], None]) -> List[tuple]:
    """The grid's (rw, bs, engine, qd, threads) points, without the points of a synchronous engine
    at qd > 1 (they would repeat its qd 1 point): said once, and an error when nothing is left."""
    from dlio.config.engines import is_async

    sync = [e for e in g.engines if not is_async(e)]
    deep = [q for q in g.qds if q > 1]
    pts = [p for p in combinations(g.rws, g.bss, g.engines, g.qds, g.threads) if p[3] == 1 or p[2] not in sync]
    if sync and deep:
        if not pts:
            raise DlioError(
                f"--qd {','.join(map(str, deep))} with engine {', '.join(sync)}: a synchronous engine "
                "runs one request at a time per thread; use --qd 1, or --engine io_uring"
            )
        warn(
            f"note: engine {', '.join(sync)} runs one request at a time per thread: its points at qd "
            f"{','.join(map(str, deep))} are left out (they would repeat qd 1)"
        )
    return pts


def check_direct_sizes(modes: Dict[str, Tuple[bool, str]], bss: Sequence[int], file_size: int, path: str) -> None:
    """O_DIRECT requests must be multiples of the device's alignment: refused before the run (with the
    alignment needed) rather than failing with EINVAL at the first request."""
    if not any(direct for direct, _ in modes.values()):
        return
    from dlio import _core

    try:
        _, off, known = _core.dio_align(path)
    except OSError:
        return
    if not known:
        off = 512  # no statx answer: the smallest logical block any device has (a 4K device may want more)
    bad = [b for b in bss if off > 1 and b % off]
    if bad:
        raise DlioError(
            f"--bs {bad[0]}: O_DIRECT on {path} needs sizes that are multiples of {off} bytes; use e.g. "
            f"--bs {max(off, bad[0] // off * off)}, or --buffered"
        )
    if off > 1 and file_size % off:
        raise DlioError(
            f"--file-size {file_size}: O_DIRECT on {path} needs a multiple of {off} bytes; use e.g. "
            f"--file-size {max(off, file_size // off * off)}, or --buffered"
        )


def fits_in_ram_warning(
    modes: Dict[str, Tuple[bool, str]], nbytes: int, warn: Callable[[str], None], looping: bool = True
) -> None:
    """Buffered points that read a file set fitting in free memory more than once (--runtime, --size
    beyond the files) may be served by the page cache after their first pass, dropped or not: say so."""
    if looping and any(not d for d, _ in modes.values()):
        avail = mem_available()
        if avail is not None and nbytes < avail:
            warn(
                f"warning: the buffered points read {fmt_bytes(nbytes)} of files, which fit in free memory "
                f"({fmt_bytes(avail)}): after a first pass their reads may come from the page cache, not "
                "storage; use O_DIRECT (--direct), or files larger than memory (--file-size)"
            )


def memory_note(path: str, warn: Callable[[str], None]) -> None:
    """Say once, before the figures, that a memory-backed filesystem's figures are RAM's."""
    from dlio.system.host import memory_filesystem

    fs = memory_filesystem(path)
    if fs:
        warn(
            f"note: {path} is on {fs}, a memory-backed filesystem: its figures are RAM's, not storage's "
            "(verdict cache, 'memory' in the table)"
        )


def grid_of(req: Any) -> Grid:
    """The local grid of an io request. Neither --runtime nor --size: one pass over the files (a Budget
    of zeros), so a buffered point reads each byte once, after its pages were dropped: no pass is served
    by the page cache."""
    from dlio.fsbench import points

    return Grid(
        req.rws,
        req.bss,
        req.engines,
        req.qds,
        req.threads,
        req.direct,
        req.cache,
        req.fixedbufs,
        req.regfiles,
        points.Budget(runtime_ns=req.runtime_ns or 0, ramp_ns=req.ramp_ns, size=req.size or 0),
        req.rwmixread,
    )


def run_local(req: Any, console: Any) -> Dict[str, Any]:
    """`dlio-fast io` on this host: check what the grid needs, prepare the test files, run the grid."""
    from dlio import _core
    from dlio.fsbench import points, testfiles
    from dlio.report import verdict, verdict_lines
    from dlio.report.io_table import VERDICT_HEADER, verdict_line
    from dlio.report.result import IO_SCHEMA, new_io_doc
    from dlio.system import counters

    g, paths, file_size, progress, warn = grid_of(req), list(req.paths), req.file_size, console.progress, console.warn
    sinks = Sinks(req.json_path, req.csv_path, csv_extra=MIXED_COLUMNS if any(r in MIXED for r in g.rws) else ())
    sinks.check()
    if req.trace_path:
        output.check_output_path(req.trace_path)
    to_err = "-" in (req.json_path, req.csv_path)  # a document on stdout: the table goes to stderr
    echo = (lambda m: progress.echo(m, err=to_err)) if progress else console.table
    modes = io_modes(g, paths[0])
    todo = runnable(g, warn)
    if any(m[1] == "drop-all" for m in modes.values()) and os.geteuid() != 0:
        raise DlioError(
            "--cache drop-all drops the whole host's page cache and needs root; use --cache drop "
            "(each file's pages, no root needed)"
        )
    if any(writes(r) for r in g.rws) and not (len(paths) == 1 and os.path.isdir(paths[0])):
        raise DlioError("write tests run only on files dlio-fast creates: give a folder, not files")
    from dlio.system.memcheck import THREAD_MARGIN, check_fits, check_threads

    _, b, _, q, t = max(todo, key=lambda p: p[4] * p[3] * p[1])  # (rw, bs, engine, qd, threads)
    check_fits(
        t * q * b,
        f"the buffers of --threads {t} x --qd {q} x --bs {b}",
        "use fewer threads, a lower qd or a smaller block size",
    )
    check_threads(max(g.threads) + THREAD_MARGIN, f"--threads {max(g.threads)}", "use fewer --threads")
    check_direct_sizes(modes, g.bss, file_size, paths[0])
    fileset = testfiles.prepare(paths, max(g.threads), file_size)
    nbytes = sum(fileset.sizes)
    fits_in_ram_warning(modes, nbytes, warn, looping=bool(g.budget.runtime_ns) or g.budget.size > nbytes)
    memory_note(paths[0], warn)  # checks passed, files made: said before the figures
    flags = (_core.ENG_REGBUFS if g.fixedbufs else 0) | (_core.ENG_REGFILES if g.regfiles else 0)
    tracer = None
    if req.trace_path:
        from dlio.report.trace import Tracer

        tracer = Tracer(None, path=req.trace_path, thread_names=lambda tid: f"worker {tid}")

    def records() -> Iterator[IoPoint]:
        for k, (r, b, e, q, t) in enumerate(todo, 1):
            direct, cache = modes[e]
            pt = points.Point(r, b, e, q, t, direct, g.rwmixread)
            tick = progress.io_point(pt, g.budget, k, len(todo), sum(fileset.sizes)) if progress else None
            rec = points.run_point(
                pt,
                fileset,
                g.budget,
                cache,
                on_tick=tick,
                eng_flags=flags,
                tracer=tracer,
                phase=lambda: counters.Phase(fileset.paths, e),  # kernel counters after the drop: dlio.system.counters
            )
            assert rec["counters"] is not None  # a phase was given
            rec["verdict"] = verdict.classify(rec["counters"], verdict.Context("io", direct, cache, e))
            if progress:
                progress.done()
            yield rec

    doc = new_io_doc(IO_SCHEMA, paths=paths, files=fileset.paths)
    try:
        run_grid(records(), doc, VERDICT_HEADER, verdict_line, sinks, echo)
        for v in verdict_lines.point_lines(doc["points"]):
            echo(v)
        return doc
    finally:
        if not req.keep:
            fileset.cleanup()
        if tracer is not None:
            tracer.close()
            if tracer.failed:
                warn(f"warning: the trace was dropped ({tracer.failed}); the results are kept")
