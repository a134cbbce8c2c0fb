"""`dlio-fast io s3://bucket/prefix`: the grid, the table lines and the result files."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, Mapping, Optional

from dlio.base.errors import DlioError, DlioRunError
from dlio.base.units import fmt_ns, fmt_size
from dlio.config.engines import S3_ENGINE
from dlio.fsbench.grid import Sinks, run_grid
from dlio.fsbench.points import Budget
from dlio.report.io_table import POINT_HEADER
from dlio.report.result import IO_SCHEMA, new_io_doc
from dlio.storage import backend_for_uri
from dlio.system import output

if TYPE_CHECKING:
    from dlio.fsbench.request import Console, IoRequest
    from dlio.report.result import IoPoint

S3_EXTRA = ("object_size", "requests_per_s", "errors", "retries")  # CSV columns after the file io ones
HEADER = POINT_HEADER + f" {'ttfb_p50':>8} {'errors':>6}"
TIMEOUT_MIN_S, TIMEOUT_MAX_S = 1, 86400  # --timeout's bounds (dlio_fast.storage_timeout's)


def point_line(r: Mapping[str, Any]) -> str:
    """An S3 IoPoint's line: the file io table's line (mode column 's3') plus time to first byte and errors."""
    lat = r["lat_ns"]
    cpu = f"{r['cpu_us_per_io']:.2f}" if r["cpu_us_per_io"] is not None else "-"
    ttfb = fmt_ns(r["ttfb_ns"]["p50"]) if r["ttfb_ns"] else "-"
    return (
        f"{r['rw']:<9} {fmt_size(r['bs']):>7} {r['engine']:<8} {r['qd']:>4} {r['threads']:>3} "
        f"{'s3':<6} {r['bw_MiB_s']:>10.1f} {r['iops']:>11.0f} "
        f"{fmt_ns(lat['min']):>8} {fmt_ns(lat['mean']):>8} {fmt_ns(lat['p50']):>8} "
        f"{fmt_ns(lat['p99']):>8} {fmt_ns(lat['p99.9']):>8} {fmt_ns(lat['max']):>8} {cpu:>8} "
        f"{ttfb:>8} {r['errors']:>6}"
    )


def check(req: IoRequest) -> None:
    """What S3 cannot do, refused before any request (the options it does not take already are)."""
    if len(req.paths) != 1:
        raise DlioError("io on S3 takes one s3://BUCKET/PREFIX (test objects are created under it)")
    bench = backend_for_uri(req.paths[0]).io_bench(req.paths[0])
    if req.cache in ("drop", "drop-all"):
        raise DlioError(
            f"--cache {req.cache} has no meaning on S3 (no client page cache; the server's caches are its own): "
            "leave it out"
        )
    timeout_s(req)
    bench.check(req.rws, req.bss, req.file_size)


def timeout_s(req: Any) -> Optional[float]:
    """--timeout in seconds (None: the default), refused outside its bounds."""
    if req.timeout_ns is None:
        return None
    s = req.timeout_ns / 1e9
    if not TIMEOUT_MIN_S <= s <= TIMEOUT_MAX_S:
        raise DlioError(f"--timeout {s:g}s: must be between {TIMEOUT_MIN_S} s and {TIMEOUT_MAX_S} s (one day)")
    return s


def run_io(req: IoRequest, console: Console) -> Dict[str, Any]:
    """Check everything before any request is timed, create the test objects, run the grid."""
    uris, file_size, size = list(req.paths), req.file_size, req.size
    runtime_ns = req.runtime_ns if req.runtime_ns is not None or size is not None else 5_000_000_000
    progress = console.progress
    to_err = "-" in (req.json_path, req.csv_path)  # a document on stdout: the table goes to stderr
    json_path, csv_path = req.json_path, req.csv_path
    echo = (lambda m: progress.echo(m, err=to_err)) if progress else console.table
    for p in (json_path, csv_path):
        if p:
            output.check_output_path(p)
    bench = backend_for_uri(uris[0], req.endpoint, timeout_s(req)).io_bench(uris[0])
    grid = [
        bench.point(r, b, q, t, b if r != "randread" else file_size)
        for r in req.rws
        for b in req.bss
        for q in req.qds
        for t in req.threads
    ]
    bench.check_grid(grid, size or 0)
    endpoint = bench.open(create=req.create_bucket)

    doc = new_io_doc(IO_SCHEMA, paths=list(uris), endpoint=endpoint, client=S3_ENGINE, files=[], points=[])
    sinks = Sinks(json_path, csv_path, csv_extra=S3_EXTRA)
    started = False

    budget = Budget(runtime_ns=runtime_ns or 0, ramp_ns=req.ramp_ns, size=size or 0)

    def records() -> Iterator[Optional[IoPoint]]:
        for k, pt in enumerate(grid, 1):
            tick = progress.io_point(pt, budget, k, len(grid)) if progress else None
            try:
                rec = bench.measure(pt, runtime_ns or 0, req.ramp_ns, size or 0, tick)
            finally:
                if progress:
                    progress.done()
            yield rec
            if rec.get("error"):
                raise DlioRunError(
                    f"s3://{bench.bucket}/{bench.prefix}: {pt.rw} bs={fmt_size(pt.bs)} qd={pt.qd} "
                    f"threads={pt.threads} failed: {rec['error']}; the points measured so far "
                    "were written (marked incomplete)"
                )

    try:
        bench.create(grid, size or 0, progress)
        doc["files"] = bench.names()
        started = True
        run_grid(records(), doc, HEADER, point_line, sinks, echo)  # writes the sinks whatever happens
    finally:
        if not started:
            sinks.write(doc)  # failed before the first point: still a document that says so
        bench.close(remove=not req.keep and doc["complete"])
    return doc
