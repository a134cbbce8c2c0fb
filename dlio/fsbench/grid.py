"""The io grid: its points run one after another, each printed as it finishes, and the document
(JSON) and table (CSV) written at the end even when a point fails or the run is interrupted.
`dlio-fast io` and its MPI-IO form (dlio.fsbench.ior) share it; they differ in how a point runs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence

from dlio import output
from dlio.errors import DlioError
from dlio.fsbench.table import IO_COLUMNS, flat_point


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
        if self.json_path:
            output.write_json(self.json_path, doc)
        if self.csv_path:
            rows = [flat_point({k: v for k, v in r.items() if k not in self.csv_drop}) for r in doc["points"]]
            output.write_csv(self.csv_path, rows, IO_COLUMNS + list(self.csv_extra))


def combinations(*axes: Iterable[Any]) -> Iterator[tuple]:
    """The grid's points in the order they run: the last axis varies fastest."""
    return itertools.product(*axes)


def run_grid(records: Iterable[Optional[Dict[str, Any]]], doc: Dict[str, Any], header: str,
             line: Callable[[Dict[str, Any]], str], sinks: Sinks, echo: Callable[[str], None],
             write: bool = True) -> Dict[str, Any]:
    """Consume `records` (a generator that runs one point per item; None = nothing to report),
    print each, collect them in doc["points"], and write the sinks at the end whatever happens
    (`write`: this process writes them: rank 0 under MPI)."""
    points: List[Dict[str, Any]] = doc.setdefault("points", [])
    echo(header)
    try:
        for rec in records:
            if rec is not None:
                points.append(rec)
                echo(line(rec))
        doc["complete"] = True
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
    direct: bool
    cache: str
    fixedbufs: bool
    regfiles: bool
    budget: Any  # dlio.fsbench.points.Budget


def run_local(paths: List[str], g: Grid, sinks: Sinks, file_size: int, keep: bool, trace_path: Optional[str],
              progress: Any, echo: Callable[[str], None]) -> Dict[str, Any]:
    """`dlio-fast io` on this host: check what the grid needs, prepare the test files, run the grid."""
    import os

    from dlio import _core
    from dlio.fsbench import points, testfiles
    from dlio.fsbench.table import POINT_HEADER, point_line
    from dlio.report.result import IO_SCHEMA, new_io_doc
    for e in g.engines:
        points.check_engine(e, g.direct)
    if g.direct:
        points.check_direct(paths[0])
    if any(r in ("write", "randwrite") for r in g.rws) and not (len(paths) == 1 and os.path.isdir(paths[0])):
        raise DlioError("write tests run only on files dlio-fast creates: give a folder, not files")
    fileset = testfiles.prepare(paths, max(g.threads), file_size)
    flags = (_core.ENG_REGBUFS if g.fixedbufs else 0) | (_core.ENG_REGFILES if g.regfiles else 0)
    tracer = None
    if trace_path:
        from dlio.report.trace import Tracer
        tracer = Tracer(None, path=trace_path, thread_names=lambda tid: f"worker {tid}")

    def records() -> Iterator[Dict[str, Any]]:
        for r, b, e, q, t in combinations(g.rws, g.bss, g.engines, g.qds, g.threads):
            pt = points.Point(r, b, e, q, t, g.direct)
            tick = progress.io_point(pt, g.budget) if progress else None
            rec = points.run_point(pt, fileset, g.budget, g.cache, on_tick=tick, eng_flags=flags, tracer=tracer)
            if progress:
                progress.done()
            yield rec

    doc = new_io_doc(IO_SCHEMA, paths=list(paths), files=fileset.paths)
    try:
        return run_grid(records(), doc, POINT_HEADER, point_line, sinks, echo)
    finally:
        if not keep:
            fileset.cleanup()
        if tracer is not None:
            tracer.close()
