"""`dlio-fast run --workload vdb_*` start to end: plan, build (or keep) the index, load it, the timed runs,
summary.json (vdbbench's statistics of the runs' batches pooled, and each run's), run_N/statistics.json
and run_N/summary.json (each timed run as mlpstorage lays one out), dlio-fast.json (everything, with the
verdicts)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from dataclasses import asdict
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from dlio.base.errors import ConfigError, DlioError, DlioRunError, Interrupted, os_error_message
from dlio.base.units import fmt_bytes, fmt_ns, fmt_rate
from dlio.config import Config
from dlio.config.sections import VdbConfig
from dlio.family import Family, FamilyChecks, RunContext
from dlio.progress import phase_of
from dlio.report.family import FamilyReading, FamilyReport, Figure
from dlio.report.verdict_lines import line as verdict_line
from dlio.storage.places import Place
from dlio.system.execute import interruptible, pending
from dlio.system.host import host_info, iso
from dlio.system.mpi import Comm
from dlio.system.output import write_json
from dlio.vdb import check, metrics, model, ranks, search
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
    spec: VdbSpec,
    store: Any,
    p: Optional[search.Plan],
    doc: Dict[str, Any],
    echo: Callable,
    progress: Any,
    comm: Comm,
) -> Any:
    """Build (or keep) the index, load it, and the timed runs (HNSW: its load instead), recorded in doc
    (rank 0's: every rank's runs merged). Returns the failure (Interrupted, RunError) that ended the runs, or
    None. p is this rank's plan (its share of the query stream)."""
    if comm.size == 1:
        _build_or_keep(store, doc, echo)
    else:
        _build_once(store, doc, echo, comm)
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
        if comm.size > 1:  # the ranks start each run together (vdbbench's clients); Ctrl-C ends the wait
            stopped = interruptible(lambda stop: comm.barrier_or_stop(stop, poll_s=0.001))
            if stopped is not None:
                return stopped
        with _run_phase(spec, progress, i) as tick:
            res, failure, counters = search.timed_run(spec, p, index_paths, pq_paths, i, tick, comm.rank, comm.size)
        rec = ranks.rank_record(res, counters, comm.rank) if res is not None and res["queries"] else None
        recs = comm.gather(rec) if comm.size > 1 else [rec]
        if recs is not None and any(recs):
            fig = ranks.run_figures([r for r in recs if r is not None])
            doc["runs"].append({"run": i + 1, **fig})
            echo(_run_line(i, fig))
            for line in ranks.host_lines(fig):
                echo("  " + line)
            for phase, v, _ in ranks.run_verdicts(doc["runs"][-1]):
                echo("  " + verdict_line("verdict" + phase[len(f"run {i + 1}") :], v))
        failed = comm.allgather(failure is not None) if comm.size > 1 else [failure is not None]
        if failure is not None:
            return failure
        if any(failed):  # another rank's run failed or was stopped: this one stops too, its run kept
            return pending() or DlioRunError(f"rank {failed.index(True)} stopped in run {i + 1}")
    return None


def _build_or_keep(store: Any, doc: Dict[str, Any], echo: Callable) -> None:
    """The index kept when present, else built (doc["build"] stays None while the build is under way)."""
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


def _build_once(store: Any, doc: Dict[str, Any], echo: Callable, comm: Comm) -> None:
    """Many ranks, one index: rank 0 keeps or builds it (comm.agree: its failure is every rank's) while the
    others wait, then every rank opens it. No rank reads a file another is writing."""
    stop: List[Interrupted] = []

    def on_rank0() -> Optional[Dict[str, Any]]:
        try:
            _build_or_keep(store, doc, echo)
        except Interrupted as e:  # said to the others as no record (they stop too), raised here below
            stop.append(e)
        return doc["build"]

    built = comm.agree(on_rank0)
    if stop:
        raise stop[0]
    if built is None:
        raise pending() or DlioRunError("rank 0 was stopped while building the index")
    doc["build"] = built


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


def many_ranks(spec: VdbSpec, p: Optional[search.Plan], store: Any, rank: int, size: int) -> search.Plan:
    """This rank's plan in a run of `size` ranks on one index (dlio.vdb.ranks), or a ConfigError naming what
    cannot be shared."""
    if p is None:
        raise ConfigError(
            f"vdb.index = hnsw searches in memory: its run is the index's write and load, one process ({size} ranks "
            "here); run it without mpiexec",
            "vdb.index",
            "hnsw",
        )
    if store.remote:
        raise ConfigError(
            f"vdb.index_folder on {store.describe()}: many ranks ({size} here) search one index in a shared "
            "folder; on an object store each host would need its own downloaded copy, which is not done yet: "
            "run one process, or put the index in a shared folder",
            "vdb.index_folder",
            spec.folder,
        )
    if spec.queries and spec.queries < size:
        raise ConfigError(
            f"vdb.queries = {spec.queries} is the run's total, dealt to the ranks: give at least one per rank ({size})",
            "vdb.queries",
            spec.queries,
        )
    if p.chains.searches < size:
        raise ConfigError(
            f"the plan has {p.chains.searches} segment searches for {size} ranks (each searches a share of its "
            "own): give a trace of more searches (vdb.trace), or fewer ranks",
            "vdb.trace",
            spec.trace,
        )
    return dataclasses.replace(p, chains=ranks.share(p.chains, rank, size))


class VdbRun:
    """The vector-search run (dlio.family.Run): each rank's query processes are threads; many ranks (on many
    hosts) search one index, rank 0 builds it and writes the one result (dlio.vdb.ranks)."""

    def __init__(self, ctx: RunContext) -> None:
        cfg, comm = ctx.cfg, ctx.comm
        self.ctx, self.cfg = ctx, cfg
        self.spec = spec = vdb_spec(cfg)
        self.comm = comm
        self.plan = p = search.plan(spec) if spec.searches else None
        self.store = store_for(cfg, spec, p.chains.medoid if p else 0)
        self.mine = p  # this rank's share of the query stream
        if comm.size > 1:
            self.mine = many_ranks(spec, p, self.store, comm.rank, comm.size)

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
        """Rank 0's: it builds the index, the other ranks only read it."""
        return self.store.places() if self.comm.rank == 0 else []

    def check_access(self) -> None:
        self.store.check()  # a missing bucket or a wrong endpoint: one line before anything else

    def prepare(self, folder: str) -> None:
        if self.spec.engine == "posix":
            self.ctx.warn(
                "note: engine posix reads a hop's nodes one after another (DiskANN submits them together): "
                "use io_uring for DiskANN's beam"
            )
        if self.comm.rank == 0:  # the plan asks for the manifest: only rank 0 looks at the index before the build
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
            failure = _phases(spec, self.store, self.mine, doc, self.ctx.echo, self.ctx.progress, self.comm)
        except (Interrupted, DlioError, OSError) as e:  # OSError: the C core's RunError (a full disk)
            failure = _stopped(e, self.store, doc, self.ctx.echo)
        doc["complete"] = failure is None
        doc["reason"] = None if failure is None else str(failure)
        doc["end"] = iso()
        return doc, failure

    def keep_partial(self, folder: str, records: Dict[str, Any], failure: BaseException) -> None:
        """A rank failed or was stopped (no gather): rank 0's document holds every run the ranks finished
        (gathered run by run), written marked partial; the other ranks have nothing of their own to keep."""
        if self.comm.rank == 0:
            self.write(folder, [records], failure)

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

    def mib_s(mb_s: Optional[float]) -> Optional[float]:
        """The document's decimal MB/s in MiB/s, the unit of every other family's report."""
        return None if mb_s is None else mb_s * 1e6 / 2**20

    figs = {
        "workload": doc.get("workload") or "-",
        "start": doc.get("start") or "-",
        "runs": len(runs),
        **{k: s.get(k) for k in metrics.RULE_FIELDS},
        "query_completion_p99_ms": max((r.get("query_completion_p99_ms") or 0.0 for r in runs), default=None),
        **{k: mean(k) for k in ("iops", "reads_per_query", "device_bytes_per_query")},
        "read_MiB_s": mib_s(mean("read_mb_per_s")),
        "client_cpu_per_query_us": mean("client_cpu_per_query_us"),
        "build_MiB_s": mib_s((doc.get("build") or {}).get("mb_per_s")),
        "load_MiB_s": mib_s((doc.get("load") or {}).get("mb_per_s")),
        "per_host": ranks.hosts_text(runs),
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
    verdicts += [v for r in runs for v in ranks.run_verdicts(r)]
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
    ("runs", "timed runs", "", 0),
    ("throughput_qps", "throughput (all runs)", "QPS", 1),
    ("mean_latency_ms", "latency mean (vdbbench: batch time / batch size)", "ms", 3),
    ("p95_latency_ms", "latency p95 (vdbbench)", "ms", 3),
    ("p99_latency_ms", "latency p99 (vdbbench)", "ms", 3),
    ("p999_latency_ms", "latency p99.9 (vdbbench)", "ms", 3),
    ("query_completion_p99_ms", "a query's completion in its batch, p99 (worst run)", "ms", 3),
    ("iops", "read IOPS", "1/s", 0),
    ("read_MiB_s", "read MiB/s", "MiB/s", 1),
    ("reads_per_query", "reads per query", "", 1),
    ("device_bytes_per_query", "device bytes per query", "B", 0),
    ("client_cpu_per_query_us", "client CPU per query", "us", 1),
    ("build_MiB_s", "index build write MiB/s", "MiB/s", 1),
    ("load_MiB_s", "index load MiB/s", "MiB/s", 1),
    ("per_host", "per host (all runs): QPS, mean latency (vdbbench), MiB read", "", None),
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
