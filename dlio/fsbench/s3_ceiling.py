"""`dlio-fast ceiling s3://bucket/prefix`: the best an object store does for this client host.

Three figures, as warp and elbencho report them: GET and PUT bandwidth on objects of --object-size
(16 MiB by default: large enough that a request's fixed cost is small) and GETs per second of 4 KiB
objects (the request rate, where the fixed cost is all there is). The search is the file ceiling's
(dlio.fsbench.ceiling.climb): double the requests in flight per thread, then the threads, while a
doubling gains 5 %. Objects are created only for the probes the search runs (a search that stops
at 8 in flight never PUTs the objects 64 would read), and removed at the end unless --keep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List

from dlio.base.errors import DlioError, DlioRunError
from dlio.base.limits import usable_cpus
from dlio.base.units import fmt_ns, fmt_size
from dlio.config.engines import S3_ENGINE
from dlio.fsbench.ceiling import climb, kept
from dlio.fsbench.points import Budget
from dlio.fsbench.s3_io import HEADER, point_line, timeout_s
from dlio.report.result import CEILING_SCHEMA, new_io_doc
from dlio.storage import backend_for_uri
from dlio.system import output

if TYPE_CHECKING:
    from dlio.fsbench.request import CeilingRequest, Console

SMALL_OBJECT = 4096
MAX_QD = 64
MAX_OBJECT = 64 << 20


def targets(object_size: int) -> tuple:
    """(name, rw, object size, metric) searched, in order."""
    return (
        ("get", "read", object_size, "bw_MiB_s"),
        ("put", "write", object_size, "bw_MiB_s"),
        ("get_4k", "read", SMALL_OBJECT, "iops"),
    )


def run(req: CeilingRequest, console: Console) -> Dict[str, Any]:
    """Check access, search each target, write the document (also when a probe fails)."""
    uri, runtime_ns, json_path, keep, progress = req.path, req.runtime_ns, req.json_path, req.keep, console.progress
    echo = (lambda m: progress.echo(m, err=json_path == "-")) if progress else console.table
    object_size = req.object_size or 16 << 20
    max_threads, max_qd = req.max_threads or max(1, int(usable_cpus())), req.max_qd or MAX_QD
    bench = backend_for_uri(uri, req.endpoint, timeout_s(req)).io_bench(uri)
    if not SMALL_OBJECT <= object_size <= MAX_OBJECT:
        raise DlioError(f"--object-size {fmt_size(object_size)}: must be between 4 KiB and 64 MiB")
    if json_path:
        output.check_output_path(json_path)
    bench.check_limits(max_threads, max_qd)
    endpoint = bench.open(create=req.create_bucket)

    probes: List[dict] = []
    doc = new_io_doc(
        CEILING_SCHEMA, path=uri, endpoint=endpoint, client=S3_ENGINE, direct=False, best={}, probes=probes
    )

    def probe(pt: Any) -> dict:
        bench.create([pt], 0, progress)
        tick = progress.io_point(pt, Budget(runtime_ns=runtime_ns), len(probes) + 1, None) if progress else None
        try:
            rec = bench.measure(pt, runtime_ns, 0, 0, tick)
        finally:
            if progress:
                progress.done()
        probes.append(rec)
        echo(point_line(rec))
        if rec.get("error"):
            raise DlioRunError(
                f"{uri}: {pt.rw} of {fmt_size(pt.bs)} objects, {pt.qd} in flight x {pt.threads} threads failed: "
                f"{rec['error']}; the probes so far were written (marked incomplete)"
            )
        return rec

    echo(
        f"# ceiling of {uri} at {endpoint}: GET/PUT of {fmt_size(object_size)} objects, GETs of "
        f"{fmt_size(SMALL_OBJECT)} objects; up to {max_threads} threads x {max_qd} requests in flight"
    )
    echo(HEADER)
    try:
        with kept(doc, json_path):
            for name, rw, size, metric in targets(object_size):
                doc["best"][name] = search(rw, size, metric, max_qd, max_threads, lambda *a: probe(bench.point(*a)))
    finally:
        bench.close(remove=not keep and bool(doc.get("complete")))  # a server that failed a probe is not asked again
    echo("")
    for line in summary_lines(doc["best"], object_size):
        echo(line)
    return doc


def search(rw: str, size: int, metric: str, max_qd: int, max_threads: int, probe: Callable) -> dict:
    """Requests in flight first, then threads at the best depth (the file ceiling's order); ``probe(rw, bs,
    qd, threads, object_size)`` measures one point."""
    cur = probe(rw, size, 1, 1, size)
    cur = climb(cur, metric, max_qd, lambda q: probe(rw, size, q, 1, size))
    qd = cur["qd"]
    return climb(cur, metric, max_threads, lambda t: probe(rw, size, qd, t, size))


def summary_lines(best: Dict[str, dict], object_size: int) -> List[str]:
    lines = []
    for name, _, size, metric in targets(object_size):
        b = best.get(name)
        if b is None:
            continue
        fig = f"{b['bw_MiB_s']:.1f} MiB/s" if metric == "bw_MiB_s" else f"{b['iops']:.0f} req/s"
        ttfb = f", ttfb p50 {fmt_ns(b['ttfb_ns']['p50'])}" if b.get("ttfb_ns") else ""
        lines.append(
            f"{name:<7} {fmt_size(size):>7} {fig:>16}   {b['qd']} in flight x {b['threads']} threads, "
            f"p99 {fmt_ns(b['lat_ns']['p99'])}{ttfb}"
        )
    return lines
