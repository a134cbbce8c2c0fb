"""`dlio-fast io s3://bucket/prefix`: the grid, the table lines and the result files."""

from __future__ import annotations

import shutil

from dlio import output
from dlio.config.engines import S3_ENGINE
from dlio.errors import DlioError, DlioRunError
from dlio.fsbench import s3_points as points
from dlio.fsbench.grid import Sinks, run_grid
from dlio.memcheck import check_fits
from dlio.report.io_table import POINT_HEADER
from dlio.report.result import IO_SCHEMA, new_io_doc
from dlio.storage.s3 import client
from dlio.storage.s3.settings import parse_uri, resolve
from dlio.units import fmt_ns, fmt_size

S3_EXTRA = ("object_size", "requests_per_s", "errors", "retries")  # CSV columns after the file io ones
MAX_RANGE_OBJECT = 5 << 30  # S3's largest single PUT
HEADER = POINT_HEADER + f" {'ttfb_p50':>8} {'errors':>6}"


def point_line(r: dict) -> str:
    """The file io table's line (mode column 's3') plus time to first byte and errors."""
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


def run_io(req, console) -> dict:
    """Check everything before any request is timed, create the test objects, run the grid."""
    uris, file_size, size = list(req.paths), req.file_size, req.size
    bucket, prefix = parse_uri(uris[0])
    runtime_ns = req.runtime_ns if req.runtime_ns is not None or size is not None else 5_000_000_000
    json_path, csv_path, echo = req.json_path, req.csv_path, console.table
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
    client.require_client()
    settings = resolve(req.endpoint)
    client.check_access(settings, bucket, prefix)

    doc = new_io_doc(IO_SCHEMA, paths=list(uris), endpoint=settings.endpoint, client=S3_ENGINE, files=[], points=[])
    sinks = Sinks(json_path, csv_path, csv_extra=S3_EXTRA)
    work = points.workdir()
    started = False

    def records():
        for pt in grid:
            rec = points.run_point(settings, bucket, prefix, pt, runtime_ns or 0, req.ramp_ns, size or 0, work)
            yield rec
            if rec.get("error"):
                raise DlioRunError(
                    f"s3://{bucket}/{prefix}: {pt.rw} bs={fmt_size(pt.bs)} qd={pt.qd} "
                    f"threads={pt.threads} failed: {rec['error']}; the points measured so far "
                    "were written (marked incomplete)"
                )

    try:
        groups = points.objects_to_create(prefix, grid)
        if groups:
            client.run_task(settings, {"task": "put_objects", "bucket": bucket, "groups": groups})
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
