"""`dlio-fast run --workload vdb_*` start to end: plan, build (or keep) the index, load it, the timed runs,
summary.json (vdbbench's statistics of the runs' batches pooled, and each run's), run_N/statistics.json
and run_N/summary.json (each timed run as mlpstorage lays one out), dlio-fast.json (everything, with the
verdicts)."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import asdict
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from dlio.base.errors import DlioError, DlioRunError, Interrupted, os_error_message
from dlio.base.units import fmt_bytes, fmt_ns, fmt_rate
from dlio.config import Config
from dlio.config.sections import VdbConfig
from dlio.family import Family, FamilyChecks, RunContext
from dlio.progress import phase_of
from dlio.report.family import FamilyReading, FamilyReport, Figure
from dlio.report.verdict_lines import line as verdict_line
from dlio.storage.places import Place
from dlio.system.host import host_info, iso
from dlio.system.output import write_json
from dlio.vdb import check, metrics, model, search
from dlio.vdb.config import VdbSpec, vdb_spec
from dlio.vdb.object_store import store_for
from dlio.vdb.store import file_sizes, io_pass

SCHEMA = "dlio-fast.vdb/1"


def expected(spec: VdbSpec, p: search.Plan) -> Dict[str, float]:
    """What a query should cost, from the plan (model or capture)."""
    reads = float(p.chains.reads().mean())
    hops = float(p.chains.hops().mean())
    seg = spec.layout.segments
    return {
        "reads_per_search": reads,
        "hops_per_search": hops,
        "reads_per_query": reads * seg,
        "hops_per_query": hops * seg,
        "bytes_per_query": reads * seg * spec.layout.read_bytes,
        "model_reads_per_search": model.reads_per_search(spec.search_list, spec.beam_width, spec.layout.nodes_in(0)),
        "model_hops_per_search": model.hops_per_search(spec.search_list, spec.beam_width, spec.layout.nodes_in(0)),
    }


def listing(cfg: Config) -> Dict[str, str]:
    """`dlio-fast workloads`' columns: the index, its vectors and segments, a node read, its size, the load."""
    vs, v = vdb_spec(cfg), cfg.section(VdbConfig)
    return {
        "index": v.index,
        "vectors": f"{v.vectors:,}",
        "dimension": str(v.dimension),
        "segments": str(vs.layout.segments),
        "node read": fmt_bytes(vs.layout.read_bytes, "") if vs.searches else "-",
        "index size": fmt_bytes(sum(n for _, n in file_sizes(vs)), ""),
        "processes x batch": f"{v.processes} x {v.batch}" if vs.searches else "-",
    }


PRESENCE = {True: "present: kept", False: "missing: built first", None: "kept if present, else built first"}


def describe(spec: VdbSpec, p: Optional[search.Plan], present: Optional[bool], where: str = "") -> List[str]:
    """The plan in words; present None: not asked (an object store is not asked before the run)."""
    lay = spec.layout
    total = sum(n for _, n in file_sizes(spec))
    raw = lay.vectors * lay.dimension * lay.dtype_bytes
    pack = (
        f"{lay.nodes_per_sector} per 4 KiB sector" if lay.nodes_per_sector else f"{lay.sectors_per_node} sectors each"
    )
    out = [
        f"index               {lay.kind}: {lay.vectors} x {lay.dimension}-d x {lay.dtype_bytes} B, R={lay.degree}"
        + (f", inline PQ {lay.inline_pq} x {lay.pq_bytes} B" if lay.kind == "aisaq_perf" else "")
        + (f", PQ {lay.pq_bytes} B/vector on storage" if lay.kind == "aisaq_scale" else ""),
        f"segments            {lay.segments} (raw {fmt_bytes(raw)})",
        f"index files         {len(file_sizes(spec))}, {fmt_bytes(total)} in {where or spec.folder} "
        f"({PRESENCE[present]})",
    ]
    if p is None:  # no searches
        return out + ["search              in memory (HNSW): the run writes the index and loads it, nothing else"]
    e = expected(spec, p)
    out += [
        f"node                {lay.node_len} B, {pack}: each read {lay.read_bytes} B (O_DIRECT)",
        f"search              L={spec.search_list}, W={p.beam_width} ({spec.beam_width_note}), chains from "
        f"{p.source}, node cache {spec.cache_ratio:g} ({p.cached_nodes} nodes per segment)",
        f"per segment search  {e['reads_per_search']:.1f} reads, {e['hops_per_search']:.1f} hops"
        + (f" + {spec.pq_reads_per_hop} PQ pages per hop" if spec.pq_reads_per_hop else ""),
        f"per query           {e['reads_per_query']:.0f} reads, {fmt_bytes(e['bytes_per_query'])} (before the cache)",
        f"load                {spec.processes} processes x batch {spec.batch}, {spec.search_threads} search threads, "
        f"cpu {spec.cpu_per_hop_ns / 1e3:g} us per hop, engine {spec.engine}",
        f"runs                {spec.runs} x "
        + (f"{spec.queries} queries" if spec.queries else f"{spec.duration_s:g} s"),
    ]
    return out


def assumptions(spec: VdbSpec, p: Optional[search.Plan]) -> List[str]:
    """What the plan takes on trust rather than from a measurement at this size: said in --dry-run, on the
    console and in dlio-fast.json, so a figure is read with them."""
    lay, out = spec.layout, []
    if p is not None and p.source == "model":
        nodes = lay.nodes_in(0)
        if nodes > model.FITTED_NODES:
            out.append(
                f"reads and hops per segment search from DiskANN's model fitted at <= {model.FITTED_NODES:,} nodes, "
                f"applied to {nodes:,} nodes per segment (extrapolated; vdb.trace replays a capture instead)"
            )
    if lay.kind.startswith("aisaq"):
        out.append(
            f"AISAQ's PQ code size {lay.pq_bytes} B (0.125 x the vector, Milvus's PQ budget) and so its node size "
            f"{lay.node_len} B: a guess, not read from a real AISAQ build"
        )
    if lay.kind == "aisaq_scale":
        out.append(
            f"{spec.pq_reads_per_hop} PQ-page reads per hop (vdb.pq_reads_per_hop): knowhere's default varies 1-8"
        )
    if spec.searches and spec.cpu_note == "storage-only":
        out.append(
            "storage-only chains (vdb.storage_only): no CPU per hop, the QPS is the storage's ceiling, not Milvus's"
        )
    elif spec.searches and spec.cpu_per_hop_ns == 0:
        out.append("no CPU per hop (vdb.cpu_per_hop_us 0): the chains are the storage's alone, not Milvus's search")
    elif spec.searches and spec.cpu_note != "set":
        out.append(f"CPU per hop: {spec.cpu_note}")
    return out


def _ms(ms: float) -> str:
    """vdbbench's milliseconds in the console's unit family (fmt_ns: 850ns, 73.2us, 1.25ms, 13.35s)."""
    return fmt_ns(ms * 1e6)


def _latencies(m: Dict[str, Any]) -> str:
    return ", ".join(
        f"{k} {_ms(m[f'{key}_latency_ms'])}"
        for k, key in (("mean", "mean"), ("p95", "p95"), ("p99", "p99"), ("p99.9", "p999"))
    )


def _run_line(i: int, m: Dict[str, Any]) -> str:
    return (
        f"run {i + 1}: {m['throughput_qps']:.1f} QPS, latency (vdbbench's) {_latencies(m)}; "
        f"a query's completion in its batch p99 {_ms(m['query_completion_p99_ms'])}; "
        f"{m['reads_per_query']:.1f} reads and {m['hops_per_query']:.1f} hops per query, {m['iops']:.0f} IOPS"
    )


def _phases(
    spec: VdbSpec, store: Any, p: Optional[search.Plan], doc: Dict[str, Any], echo: Callable, progress: Any = None
) -> Any:
    """Build (or keep) the index, load it, and the timed runs (HNSW: its load instead), recorded in doc.
    Returns the failure (Interrupted, RunError) that ended the runs, or None."""
    if store.present():
        echo(f"index present in {store.describe()}: kept")
        doc["build"] = {"phase": "build", "kept": True}
    else:
        echo(f"building the index in {store.describe()} ...")
        doc["build"] = store.write()
        echo(
            f"build: {fmt_bytes(doc['build']['bytes'])} in {doc['build']['seconds']:.1f} s "
            f"({fmt_rate(doc['build']['mb_per_s'] * 1e6)}); {verdict_line('build', doc['build']['verdict'])}"
        )
    index_paths, pq_paths, doc["load"] = _fetch(store, progress)
    if not doc["load"].get("in_place"):
        ld = doc["load"]
        echo(
            f"load: {ld['objects']} objects, {fmt_bytes(ld['bytes'])} downloaded in {ld['seconds']:.2f} s "
            f"({fmt_rate(ld['mb_per_s'] * 1e6)}, the object store's figure; fsync of the copy {ld['fsync_s']:.2f} s); "
            f"{verdict_line('load', ld['verdict'])}"
        )
        if not spec.searches:  # HNSW: the query node's load is the download (then read into memory)
            return None
        doc["search_reads"] = store.search_note()
        echo(doc["search_reads"])
    elif not spec.searches:
        doc["load"] = io_pass(spec, file_sizes(spec), False)
        echo(
            f"load: {fmt_bytes(doc['load']['bytes'])} in {doc['load']['seconds']:.2f} s "
            f"({fmt_rate(doc['load']['mb_per_s'] * 1e6)}); {verdict_line('load', doc['load']['verdict'])}"
        )
        return None
    assert p is not None  # a run with searches has a plan (VdbRun)
    if progress is not None:
        progress.run_begin("vdb", "run", spec.runs)
    for i in range(spec.runs):
        if progress is not None:
            progress.run_at(i + 1)
        with _run_phase(spec, progress, i) as tick:
            res, failure, counters = search.timed_run(spec, p, index_paths, pq_paths, i, tick)
        if res is not None and res["queries"]:
            m = metrics.run_metrics(res, counters)
            v = metrics.verdict(m, counters)
            doc["runs"].append({"run": i + 1, **m, "counters": counters, "verdict": v})
            echo(_run_line(i, m))
            echo("  " + verdict_line("verdict", v))
        if failure is not None:
            return failure
    return None


def _fetch(store: Any, progress: Any) -> Any:
    """The store's load phase (index paths, PQ paths, record), a phase of the live display when it moves bytes."""
    total = store.fetch_bytes
    if not total:
        return store.fetch()
    with phase_of(progress, "load", "downloading the index", total, "B", counts=False) as ph:
        return store.fetch(on_bytes=lambda n: ph.update(min(n, total), nbytes=n))


@contextlib.contextmanager
def _run_phase(spec: VdbSpec, progress: Any, i: int) -> Iterator[Optional[Callable[[Any], None]]]:
    """A timed run as a phase of the live display (dlio.progress): queries of the run's count, or seconds
    of its duration; reads/s as IOPS."""
    by_queries = bool(spec.queries)
    total = spec.queries if by_queries else spec.duration_s
    with phase_of(progress, "search", f"run {i + 1}/{spec.runs}", total, "queries" if by_queries else "s") as ph:
        t0 = time.monotonic()

        def tick(run: Any) -> None:
            reads, nbytes, queries = run.progress()
            ph.update(queries if by_queries else min(total, time.monotonic() - t0), nbytes=nbytes, ops=reads)

        yield tick if progress is not None else None


def _stopped(e: BaseException, store: Any, doc: Dict[str, Any], echo: Callable) -> BaseException:
    """A stop or failure outside the timed runs (the build, the load): what was measured stays in doc, and
    the console says what became of the index."""
    # the C core's RunError (an OSError): its path and errno in one line
    failure = DlioRunError(os_error_message(e)) if isinstance(e, OSError) else e
    if doc["build"] is None:  # the build was under way: its files are not an index (no manifest)
        doc["build"] = {"phase": "build", "complete": False, "reason": str(failure)}
        echo(
            f"build stopped ({failure}): the index in {store.describe()} is incomplete (no manifest); the next run "
            "builds it again"
        )
    return failure


class VdbRun:
    """The vector-search run (dlio.family.Run): one process, its query processes threads."""

    def __init__(self, ctx: RunContext) -> None:
        cfg, comm = ctx.cfg, ctx.comm
        self.ctx, self.cfg = ctx, cfg
        self.spec = spec = vdb_spec(cfg)
        if comm.size > 1:
            raise DlioError(
                f"vdb workloads run as one process ({comm.size} ranks here): its query processes are threads "
                "(vdb.processes); run without mpiexec"
            )
        self.plan = p = search.plan(spec) if spec.searches else None
        self.store = store_for(cfg, spec, p.chains.medoid if p else 0)

    def describe(self) -> List[str]:
        present = None if self.store.remote else self.store.present()
        lines = describe(self.spec, self.plan, present, self.store.describe())
        if self.cfg.scale != 1.0:  # what --scale changed: the collection
            lines.insert(
                0,
                f"scale               {self.cfg.scale:g}: vdb.vectors {self.cfg.section(VdbConfig).vectors:,} "
                f"({self.cfg.origin('vdb.vectors')})",
            )
        return lines + [f"assumed             {a}" for a in assumptions(self.spec, self.plan)]

    def check(self) -> None:
        """Nothing of the host's to check before the folder exists: the plan's checks are the config's."""

    def places(self) -> List[Place]:
        return self.store.places()

    def check_access(self) -> None:
        self.store.check()  # a missing bucket or a wrong endpoint: one line before anything else

    def prepare(self, folder: str) -> None:
        if self.spec.engine == "posix":
            self.ctx.warn(
                "note: engine posix reads a hop's nodes one after another (DiskANN submits them together): "
                "use io_uring for DiskANN's beam"
            )
        for text in self.describe():
            self.ctx.echo(text)

    def measure(self) -> Tuple[Dict[str, Any], Optional[BaseException]]:
        spec, p, cfg = self.spec, self.plan, self.cfg
        doc: Dict[str, Any] = {
            "schema": SCHEMA,
            "workload": cfg.workload,
            "start": iso(),
            "host": host_info(),
            "config": cfg.to_dict(),
            "layout": asdict(spec.layout) | {"node_len": spec.layout.node_len, "read_bytes": spec.layout.read_bytes},
            "plan": None
            if p is None
            else {
                "source": p.source,
                "beam_width": p.beam_width,
                "search_list": spec.search_list,
                "cache_ratio": spec.cache_ratio,
                "search_threads": spec.search_threads,  # as resolved (0 in the config: Milvus's pool)
                "cpu_per_hop_us": spec.cpu_per_hop_ns / 1e3,
                "medoid": p.chains.medoid,
                **expected(spec, p),
            },
            "assumptions": assumptions(spec, p),
            "build": None,
            "load": None,
            "runs": [],
            "complete": False,
            "reason": None,  # why it is not complete (a stop, a failure), for the report
        }
        try:
            failure = _phases(spec, self.store, p, doc, self.ctx.echo, self.ctx.progress)
        except (Interrupted, DlioError, OSError) as e:  # OSError: the C core's RunError (a full disk)
            failure = _stopped(e, self.store, doc, self.ctx.echo)
        doc["complete"] = failure is None
        doc["reason"] = None if failure is None else str(failure)
        doc["end"] = iso()
        return doc, failure

    def keep_partial(self, folder: str, records: Dict[str, Any], failure: BaseException) -> None:
        raise AssertionError("a vdb run is one process")  # refused in __init__ under mpiexec

    def nothing_measured(self, records: List[Dict[str, Any]]) -> Optional[str]:
        doc = records[0]
        if doc["plan"] is None:
            return None  # no searches planned: the build or load phase is the figure
        if not doc["runs"]:
            return "no timed run completed a query; give a longer vdb.duration or more vdb.queries"
        if not sum(r["iops"] * r["seconds"] for r in doc["runs"]):
            return (
                "no search read the index from storage (every node read was served by the node cache: the QPS is "
                "the CPU's); give a smaller vdb.cache_ratio or a trace of more varied searches"
            )
        return None

    def write(
        self, folder: str, records: List[Dict[str, Any]], failure: Optional[BaseException]
    ) -> Optional[Tuple[Dict[str, Any], str]]:
        doc, echo = records[0], self.ctx.echo
        if failure is not None:  # the driver's too (nothing measured): the document says why
            doc["complete"], doc["reason"] = False, str(failure)
        if doc["runs"]:
            s = metrics.summary(doc["runs"])
            for run in doc["runs"]:  # each run as mlpstorage lays one out: its statistics.json and summary.json
                run_folder = os.path.join(folder, f"run_{run['run']}")
                os.makedirs(run_folder, exist_ok=True)
                for name in ("statistics.json", "summary.json"):
                    write_json(os.path.join(run_folder, name), metrics.statistics_of(run))
            write_json(os.path.join(folder, "summary.json"), s | {"complete": doc["complete"]})
        write_json(os.path.join(folder, "dlio-fast.json"), doc)
        if doc["runs"]:
            echo(
                f"summary ({len(doc['runs'])} runs' batches): {s['throughput_qps']:.1f} QPS, latency (vdbbench's) "
                + _latencies(s)
            )
        echo(f"results in {folder}" + ("" if failure is None else f" (partial: {failure})"))
        return doc, folder


def reading(doc: Dict[str, Any]) -> FamilyReading:
    """What `dlio-fast report` shows of a vector-search document: vdbbench's figures over the timed runs'
    batches, the reads behind them, and the build and load passes."""
    runs = doc.get("runs") or []
    # a document written before the batches' histogram was kept has no vdbbench figures
    s = metrics.summary(runs) if runs and all("batch_time_hist" in r for r in runs) else {}

    def mean(key: str) -> Optional[float]:
        vals = [r[key] for r in runs if r.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    def pass_mb_s(name: str) -> Optional[float]:
        p = doc.get(name) or {}
        return p.get("mb_per_s")

    figs = {
        "workload": doc.get("workload") or "-",
        "start": doc.get("start") or "-",
        "runs": len(runs),
        **{k: s.get(k) for k in metrics.RULE_FIELDS},
        "query_completion_p99_ms": max((r.get("query_completion_p99_ms") or 0.0 for r in runs), default=None),
        **{k: mean(k) for k in ("iops", "read_mb_per_s", "reads_per_query", "device_bytes_per_query")},
        "client_cpu_per_query_us": mean("client_cpu_per_query_us"),
        "build_mb_per_s": pass_mb_s("build"),
        "load_mb_per_s": pass_mb_s("load"),
    }
    cfg = doc.get("config") or {}
    v = cfg.get("vdb") or {}
    plan = doc.get("plan") or {}
    settings = {
        "vectors": v.get("vectors"),
        "dimension": v.get("dimension"),
        "search_list": plan.get("search_list", v.get("search_list")),
        "beam_width": plan.get("beam_width"),
        "cache_ratio": plan.get("cache_ratio", v.get("cache_ratio")),
        "cpu_per_hop_us": plan.get("cpu_per_hop_us"),
        "processes": v.get("processes"),
        "batch": v.get("batch"),
        "search_threads": plan.get("search_threads", v.get("search_threads")),
        "engine": (cfg.get("dlio_fast") or {}).get("engine"),
        "storage_type": (cfg.get("storage") or {}).get("storage_type"),
    }
    verdicts = [
        (name, doc[name]["verdict"], doc[name].get("counters"))
        for name in ("build", "load")
        if isinstance(doc.get(name), dict) and isinstance(doc[name].get("verdict"), dict)
    ]
    verdicts += [
        (f"run {r['run']}", r["verdict"], r.get("counters")) for r in runs if isinstance(r.get("verdict"), dict)
    ]
    return FamilyReading(settings, figs, verdicts)


REPORT_SETTINGS = [
    ("vectors", "vectors"),
    ("dimension", "dimension"),
    ("search_list", "search list L"),
    ("beam_width", "beam width W"),
    ("cache_ratio", "node cache ratio"),
    ("cpu_per_hop_us", "CPU per hop (us)"),
    ("processes", "query processes"),
    ("batch", "queries per call"),
    ("search_threads", "search threads"),
    ("engine", "engine"),
    ("storage_type", "storage"),
]
REPORT_FIGURES: List[Figure] = [
    ("workload", "workload", "", None),
    ("start", "start", "", None),
    ("runs", "timed runs", "", 0),
    ("throughput_qps", "throughput (all runs)", "QPS", 1),
    ("mean_latency_ms", "latency mean (vdbbench: batch time / batch size)", "ms", 3),
    ("p95_latency_ms", "latency p95 (vdbbench)", "ms", 3),
    ("p99_latency_ms", "latency p99 (vdbbench)", "ms", 3),
    ("p999_latency_ms", "latency p99.9 (vdbbench)", "ms", 3),
    ("query_completion_p99_ms", "a query's completion in its batch, p99 (worst run)", "ms", 3),
    ("iops", "read IOPS", "1/s", 0),
    ("read_mb_per_s", "read MB/s", "MB/s", 1),
    ("reads_per_query", "reads per query", "", 1),
    ("device_bytes_per_query", "device bytes per query", "B", 0),
    ("client_cpu_per_query_us", "client CPU per query", "us", 1),
    ("build_mb_per_s", "index build write MB/s", "MB/s", 1),
    ("load_mb_per_s", "index load MB/s", "MB/s", 1),
]
REPORT = FamilyReport(SCHEMA, "vector search", REPORT_SETTINGS, REPORT_FIGURES, reading)
FAMILY = Family(
    "vdb",
    "vector search",
    VdbRun,
    listing,
    REPORT,
    FamilyChecks(SCHEMA, check.checks),
    sections=("model", "workflow", "storage", "dlio_fast", "vdb"),
)
