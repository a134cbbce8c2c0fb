"""`dlio-fast ceiling`: the best a filesystem can do, found by a bounded search.

Three figures: sequential read and write bandwidth (1 MiB transfers) and 4 KiB random-read IOPS.
For each engine the search doubles the queue depth (async engines) and then the thread count,
and stops a direction when two doublings in a row gain less than GAIN (5 %) over the best so
far: more depth that does not help only adds latency, and one noisy probe does not end it. The
page cache is kept out of the way with O_DIRECT where the filesystem
allows it, else by dropping the files' pages before every probe.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Literal, Mapping, Optional, Tuple, TypeVar

from dlio import _core
from dlio.base.limits import usable_cpus
from dlio.base.units import fmt_figure, fmt_ns
from dlio.fsbench import grid, points, testfiles
from dlio.report import verdict, verdict_lines
from dlio.report.io_table import VERDICT_HEADER, verdict_line
from dlio.report.result import CEILING_SCHEMA, new_io_doc
from dlio.system import counters, output

if TYPE_CHECKING:
    from dlio.fsbench.request import CeilingRequest, Console
    from dlio.report.result import IoPoint

GAIN = 1.05
Metric = Literal["bw_MiB_s", "iops"]  # the record's figure a target maximises
TARGETS: Tuple[Tuple[str, str, int, Metric], ...] = (
    ("seq_read", "read", 1 << 20, "bw_MiB_s"),
    ("seq_write", "write", 1 << 20, "bw_MiB_s"),
    ("rand_read_4k", "randread", 4096, "iops"),
)
MAX_QD = 256
Rec = TypeVar("Rec", bound=Mapping[str, Any])  # a probe's record: IoPoint here, a dict in s3_ceiling


def usable_engines() -> Tuple[List[str], Dict[str, str]]:
    """(engines the search uses, {engine: why it cannot run here})."""
    found = {n: (ok, why) for n, _, ok, why in _core.engines() if n in ("io_uring", "posix")}
    return [n for n, (ok, _) in found.items() if ok], {n: why for n, (ok, why) in found.items() if not ok}


def climb(cur: Rec, metric: str, limit: int, probe_at: Callable[[int], Rec]) -> Rec:
    """Double a setting while it pays: a doubling must gain GAIN over the best so far; one miss is
    forgiven (one noisy probe must not end the search), two in a row stop it."""
    best, value, misses = cur, 1, 0
    while value * 2 <= limit and misses < 2:
        value *= 2
        nxt = probe_at(value)
        if nxt[metric] >= best[metric] * GAIN:
            best, misses = nxt, 0
        else:
            misses += 1
    return best


def search(
    target: Tuple[str, str, int, Metric],
    fileset: testfiles.FileSet,
    runtime_ns: int,
    max_threads: int,
    direct: bool,
    engines: List[str],
    probe: Callable[[points.Point], IoPoint],
    max_qd: int = MAX_QD,
) -> Optional[IoPoint]:
    """Best record for one target over engines x qd x threads (see climb)."""
    name, rw, bs, metric = target
    caps = {n: c for n, c, _, _ in _core.engines()}
    best = None
    for eng in engines:
        cur = probe(points.Point(rw, bs, eng, 1, 1, direct))
        # Depth first (async engines only), then threads at the best depth.
        if caps[eng] & _core.CAP_ASYNC:
            cur = climb(cur, metric, max_qd, lambda q: probe(points.Point(rw, bs, eng, q, 1, direct)))
        qd = cur["qd"]
        cur = climb(cur, metric, max_threads, lambda t: probe(points.Point(rw, bs, eng, qd, t, direct)))
        if best is None or cur[metric] > best[metric]:
            best = cur
    return best


@contextmanager
def kept(doc: Dict[str, Any], json_path: Optional[str]) -> Iterator[None]:
    """A search's document, written to json_path however the search ends: complete, or with the probes so far
    and why it ended (the report shows it)."""
    try:
        yield
        doc["complete"] = True
    except BaseException as e:
        doc["reason"] = str(e)
        raise
    finally:
        if json_path:
            output.write_json(json_path, doc)


def run(req: CeilingRequest, console: Console) -> Dict[str, Any]:
    """The search on the filesystem of req.path (dlio.fsbench.request.CeilingRequest)."""
    path, runtime_ns, json_path, warn = req.path, req.runtime_ns, req.json_path, console.warn
    progress = console.progress
    to_err = json_path == "-"  # a document on stdout: the table goes to stderr
    echo = (lambda m: progress.echo(m, err=to_err)) if progress else console.table  # rows above the live bar
    file_size = req.file_size or 512 << 20
    max_threads, max_qd = req.max_threads or max(1, int(usable_cpus())), req.max_qd or MAX_QD
    if json_path:
        output.check_output_path(json_path)
    testfiles.check_writable_dir(path)
    direct = points.direct_supported(path)
    cache = "keep" if direct else "drop"
    engines, missing = usable_engines()
    deepest = max_qd if any(points.check_engine(e) & _core.CAP_ASYNC for e in engines) else 1
    echo(
        f"# ceiling of {path}: {'O_DIRECT' if direct else 'buffered, page cache dropped per probe'}; "
        f"engines {', '.join(engines)}; up to {max_threads} threads, qd up to {deepest}"
    )
    for name, why in missing.items():
        warn(
            f"warning: engine {name} is unavailable here ({why}): "
            + (
                "queue depths above 1 were not tested, so the IOPS found may be far below the storage's"
                if deepest == 1
                else "it was not tested"
            )
        )
    fileset = testfiles.prepare([path], max_threads, file_size)
    grid.memory_note(path, warn)
    if not direct:
        grid.fits_in_ram_warning({"posix": (False, cache)}, sum(fileset.sizes), warn)
    budget = points.Budget(runtime_ns=runtime_ns)
    probes = []

    ctx = verdict.Context("ceiling", direct, cache)

    def probe(pt: points.Point) -> IoPoint:
        tick = progress.io_point(pt, budget) if progress else None
        try:
            rec = points.run_point(
                pt, fileset, budget, cache, on_tick=tick, phase=lambda: counters.Phase(fileset.paths, pt.engine)
            )
        finally:
            if progress:
                progress.done()
        assert rec["counters"] is not None  # a phase was given
        rec["verdict"] = verdict.classify(rec["counters"], ctx)
        probes.append(rec)
        echo(verdict_line(rec))
        return rec

    doc = new_io_doc(CEILING_SCHEMA, path=path, direct=direct, best={}, probes=probes, engines_unavailable=missing)
    echo(VERDICT_HEADER)
    try:
        with kept(doc, json_path):
            if progress:  # the run line: which of the three figures is being searched, and the search's ETA
                progress.run_begin("search", "target", len(TARGETS))
            for k, target in enumerate(TARGETS, 1):
                if progress:
                    progress.run_at(k, target[0])
                best = search(target, fileset, runtime_ns, max_threads, direct, engines, probe, max_qd)
                doc["best"][target[0]] = best
    finally:
        if not req.keep:
            fileset.cleanup()
    echo("")
    for name, _, _, metric in TARGETS:
        b = doc["best"][name]
        fig = f"{fmt_figure(b['bw_MiB_s'])} MiB/s" if metric == "bw_MiB_s" else f"{b['iops']:,.0f} IOPS"
        echo(
            f"{name:<13} {fig:>16}   engine {b['engine']}, qd {b['qd']}, threads {b['threads']}, "
            f"p99 {fmt_ns(b['lat_ns']['p99'])}; verdict {_verdict_word(b)}"
        )
    for line in verdict_lines.point_lines([doc["best"][name] for name, _, _, _ in TARGETS]):
        echo(line)
    return doc


def _verdict_word(rec: IoPoint) -> str:
    """The best point's verdict, with what it means when its figure is not the storage's."""
    v = rec.get("verdict") or {}
    if str(v.get("part") or "").startswith("memory filesystem"):
        return f"cache ({v['summary']})"
    if v.get("verdict") == "cache":
        return "cache (the page cache's figure, not storage's)"
    return str(v.get("verdict") or "-")
