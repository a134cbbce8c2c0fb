"""`dlio-fast io s3://bucket/prefix`: the grid, the table lines and the result files."""

from __future__ import annotations

import shutil
from typing import Any, Mapping, Optional, cast

from dlio.base.errors import DlioError, DlioRunError
from dlio.base.units import fmt_ns, fmt_size
from dlio.config.engines import S3_ENGINE
from dlio.fsbench import s3_points as points
from dlio.fsbench.grid import Sinks, run_grid
from dlio.fsbench.points import Budget
from dlio.report.io_table import POINT_HEADER
from dlio.report.result import IO_SCHEMA, new_io_doc
from dlio.storage import backend_for_uri
from dlio.storage.s3 import client, limits
from dlio.storage.s3.backend import S3Backend
from dlio.storage.s3.settings import parse_uri
from dlio.system import output
from dlio.system.memcheck import check_fits

S3_EXTRA = ("object_size", "requests_per_s", "errors", "retries")  # CSV columns after the file io ones
MAX_RANGE_OBJECT = 5 << 30  # S3's largest single PUT
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


def check(req) -> None:
    """What S3 cannot do, refused before any request (the options it does not take already are)."""
    rws, bss, file_size = req.rws, req.bss, req.file_size
    if len(req.paths) != 1:
        raise DlioError("io on S3 takes one s3://BUCKET/PREFIX (test objects are created under it)")
    parse_uri(req.paths[0])
    if "randwrite" in rws:
        raise DlioError("--rw randwrite: S3 objects are written whole; use --rw write (PUT)")
    if req.cache in ("drop", "drop-all"):
        raise DlioError(
            f"--cache {req.cache} has no meaning on S3 (no client page cache; the server's caches are its own): "
            "leave it out"
        )
    timeout_s(req)
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
            f"--file-size {fmt_size(file_size)}: range GETs read objects of at most {fmt_size(MAX_RANGE_OBJECT)} "
            "(each is written in one PUT from memory; S3 takes at most 5 GiB in one PUT)"
        )


def timeout_s(req: Any) -> Optional[float]:
    """--timeout in seconds (None: the default), refused outside its bounds."""
    if req.timeout_ns is None:
        return None
    s = req.timeout_ns / 1e9
    if not TIMEOUT_MIN_S <= s <= TIMEOUT_MAX_S:
        raise DlioError(f"--timeout {s:g}s: must be between {TIMEOUT_MIN_S} s and {TIMEOUT_MAX_S} s (one day)")
    return s


def run_io(req, console) -> dict:
    """Check everything before any request is timed, create the test objects, run the grid."""
    uris, file_size, size = list(req.paths), req.file_size, req.size
    bucket, prefix = parse_uri(uris[0])
    runtime_ns = req.runtime_ns if req.runtime_ns is not None or size is not None else 5_000_000_000
    progress = console.progress
    to_err = "-" in (req.json_path, req.csv_path)  # a document on stdout: the table goes to stderr
    json_path, csv_path = req.json_path, req.csv_path
    echo = (lambda m: progress.echo(m, err=to_err)) if progress else console.table
    for p in (json_path, csv_path):
        if p:
            output.check_output_path(p)
    grid = [
        points.S3Point(r, b, q, t, b if r != "randread" else file_size)
        for r in req.rws
        for b in req.bss
        for q in req.qds
        for t in req.threads
    ]
    for pt in grid:
        check_fits(
            points.held_bytes(prefix, pt, size or 0),
            f"{pt.rw} of {fmt_size(pt.bs)} x {pt.qd} in flight x {pt.threads} threads (the client holds a batch "
            "of responses at once)",
            "lower --bs, --qd or --threads",
        )
    most = max(grid, key=lambda p: points.in_flight(p, size or 0))  # connections: this host's open files
    limits.check_open_files(
        points.in_flight(most, size or 0), f"--qd {most.qd} x --threads {most.threads}", "lower --qd or --threads"
    )
    client.require_client()
    backend = backend_for_uri(uris[0], req.endpoint, timeout_s(req))
    backend.check_access([uris[0]], create=req.create_bucket)
    settings = cast(S3Backend, backend).settings  # an s3:// URI's backend

    doc = new_io_doc(IO_SCHEMA, paths=list(uris), endpoint=settings.endpoint, client=S3_ENGINE, files=[], points=[])
    sinks = Sinks(json_path, csv_path, csv_extra=S3_EXTRA)
    work = points.workdir()
    started = False

    budget = Budget(runtime_ns=runtime_ns or 0, ramp_ns=req.ramp_ns, size=size or 0)

    def records():
        for k, pt in enumerate(grid, 1):
            tick = progress.io_point(pt, budget, k, len(grid)) if progress else None
            try:
                rec = points.run_point(
                    settings, bucket, prefix, pt, runtime_ns or 0, req.ramp_ns, size or 0, work, tick
                )
            finally:
                if progress:
                    progress.done()
            yield rec
            if rec.get("error"):
                raise DlioRunError(
                    f"s3://{bucket}/{prefix}: {pt.rw} bs={fmt_size(pt.bs)} qd={pt.qd} "
                    f"threads={pt.threads} failed: {rec['error']}; the points measured so far "
                    "were written (marked incomplete)"
                )

    try:
        groups = points.objects_to_create(prefix, grid, size or 0)
        points.put_objects(settings, bucket, groups, progress)
        doc["files"] = [f"s3://{bucket}/{k}" for _, keys in groups for k in keys]
        started = True
        run_grid(records(), doc, HEADER, point_line, sinks, echo)  # writes the sinks whatever happens
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not started:
            sinks.write(doc)  # failed before the first point: still a document that says so
        if not req.keep and doc["complete"]:
            client.run_task(settings, {"task": "delete", "bucket": bucket, "prefix": prefix + points.TEST_FOLDER})
    return doc
