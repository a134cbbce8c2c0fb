"""`dlio-fast run` of a model-load workload (workflow.model_load: true): how long until a model is
ready to serve, on every rank of the job.

Start to end on every rank: the model's tensors and shards (dlio.modelload.models, shards), the shards
where the storage backend keeps them, written when missing (dlio.modelload.store), this rank's
requests (dlio.modelload.plan) in the read mode set or chosen by ``auto`` as vLLM chooses
(dlio.modelload.strategy); then the loads: with model_load.cache cold each one after the shards'
pages were dropped (and checked with mincore: dlio.system.host.drop_cache), with warm a first, untimed
load fills the page cache; every load starts on all ranks at once (a barrier) and is one C run through
the backend's ``read_ranges`` (prefetch: two at once, dlio.modelload.prefetch); the kernel's counters
around it give its verdict (dlio.system.counters, dlio.report.verdict). Rank 0 gathers the records,
writes ``dlio-fast.json`` (schema ``dlio-fast.modelload/1``) in the output folder and prints the
figures (dlio.modelload.figures).
A load stopped by Ctrl-C / SIGTERM keeps the loads measured (``complete: false``).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from dlio import _core
from dlio.base.errors import ConfigError, DlioRunError, Interrupted
from dlio.base.units import fmt_bytes
from dlio.config import Config
from dlio.config.sections import ModelLoadConfig
from dlio.family import Family, RunContext
from dlio.modelload import figures, prefetch
from dlio.modelload.models import Model, model_of
from dlio.modelload.plan import RankPlan, prefetch_plan, rank_plan
from dlio.modelload.shards import INDEX, MODEL_NAMES, Shard, index_text, layout
from dlio.modelload.store import StoredModel
from dlio.modelload.strategy import Choice, choose
from dlio.report.family import FamilyReport
from dlio.storage.base import FILE_ENGINES, Backend, SetOptions
from dlio.storage.places import Place
from dlio.system.execute import interruptible
from dlio.system.host import host_info, iso
from dlio.system.output import environment, write_json
from dlio.system.results_out import write_with_fallback

SCHEMA = "dlio-fast.modelload/1"

# read mode -> (C engine, O_DIRECT, uses model_load.qd); prefetch's is its mmap pass's (its reads: prefetch)
MODES: Dict[str, Tuple[str, bool, bool]] = {
    "mmap": ("mmap", False, False),
    "prefetch": ("mmap", False, False),
    "read": ("posix", False, False),
    "odirect": ("posix", True, False),
    "io_uring": ("io_uring", True, True),
}


def engine_of(cfg: Config, backend: Backend, mode: str) -> Tuple[str, bool, int]:
    """(engine, O_DIRECT, queue depth) of read mode ``mode`` on this backend."""
    ml = cfg.section(ModelLoadConfig)
    wanted, direct, deep = MODES[mode]
    engine, direct = backend.engine_for(wanted, direct)
    return engine, direct, ml.qd if deep and engine == wanted else 1  # the backend's own client: one at a time


def check(cfg: Config, comm_size: int, backend: Backend, mode: str) -> int:
    """Refuse what cannot be honoured; the tensor-parallel group size."""
    ml = cfg.section(ModelLoadConfig)
    # the training's keys that a load does not take: refused rather than ignored
    for key, fix in (
        ("dlio_fast.engine", "model_load.read_mode"),
        ("dlio_fast.qd", "model_load.qd"),
        ("dlio_fast.cache", "model_load.cache"),
        ("dlio_fast.trace", None),
        ("dlio_fast.plots", None),
    ):
        if cfg.origin(key) != "default":
            then = f"set {fix} instead" if fix else "a model load has none yet: leave it out"
            raise ConfigError(f"{key} ({cfg.origin(key)}) is a training setting; {then}", key, cfg.get(key))
    if not backend.has(FILE_ENGINES) and mode != "read":
        backend.refuse(
            "model_load.read_mode",
            mode,
            "objects have no mapping, page cache or O_DIRECT: each range is a GET"
            + (" (vLLM's prefetch fills the page cache its mmap pass then hits)" if mode == "prefetch" else ""),
            "use model_load.read_mode=read (or auto, which picks it on an object store)",
        )
    if backend.has(FILE_ENGINES):
        engines = {MODES[mode][0]} | ({prefetch.ENGINE} if mode == "prefetch" else set())
        why = next((w for name, _, ok, w in _core.engines() if name in engines and not ok), None)
        if why is not None:
            raise ConfigError(f"model_load.read_mode = {mode}: {why}", "model_load.read_mode", mode)
    tp = ml.tensor_parallel or comm_size
    if tp > comm_size or comm_size % tp:
        raise ConfigError(
            f"model_load.tensor_parallel = {tp} with {comm_size} rank(s): the job must hold whole groups "
            f"(a multiple of {tp} ranks: mpiexec -n {tp} ...), or set model_load.tensor_parallel to a divisor "
            f"of {comm_size} (0: all ranks)",
            "model_load.tensor_parallel",
            tp,
        )
    return tp


def plan_lines(
    cfg: Config,
    model: Model,
    shards: List[Shard],
    root: str,
    tp: int,
    size: int,
    p: RankPlan,
    choice: Choice,
    pre: Optional[RankPlan] = None,
) -> List[str]:
    """What the run loads, in words (the banner, and --dry-run)."""
    ml = cfg.section(ModelLoadConfig)
    big = max(s.size for s in shards)
    mode = choice.mode
    lines = [
        f"model               {model.name}: {model.parameters / 1e9:.3f} B parameters, {ml.dtype}, "
        f"{fmt_bytes(model.nbytes)} in {len(model.tensors)} tensors",
        f"shards              {len(shards)} safetensors file(s) (at most {fmt_bytes(ml.shard_size)} each, the "
        f"largest {fmt_bytes(big)}) + {INDEX} at {root}",
        f"ranks               {size}: tensor-parallel groups of {tp} ({size // tp} replica(s)), spread {ml.spread}",
        f"per rank            tensor-parallel rank 0 reads {fmt_bytes(p.bytes)} of {len(p.files)} file(s) in "
        f"{len(p.ops):,} request(s) ({fmt_bytes(p.wanted_bytes)} wanted"
        + (f", {p.pages:,} pages touched)" if MODES[mode][0] == "mmap" else ")"),
        f"read mode           {mode}" + (f" (auto: {choice.why})" if choice.configured == "auto" else ""),
    ]
    if pre is not None:
        lines.append(prefetch.plan_line(pre, len(shards), size, ml.prefetch_threads, ml.prefetch_block_size))
    lines.append(
        f"loads               {ml.repeats} timed, {ml.cache}, read mode {mode}, {ml.threads} thread(s)"
        + (f", qd {ml.qd}" if mode == "io_uring" else "")
        + (", after one untimed load (warm)" if ml.cache == "warm" else ", pages dropped before each")
    )
    return lines


def choice_line(choice: Choice) -> str:
    """The console's line on which loader path ran, and why."""
    if choice.configured != "auto":
        return f"Read mode: {choice.mode} (set in model_load.read_mode)"
    return f"Read mode: {choice.mode}, chosen as vLLM chooses (auto): {choice.why}"


def listing(cfg: Config) -> Dict[str, str]:
    """`dlio-fast workloads`' columns: the model, its dtype, shards and size, what a rank reads and how."""
    model, ml = model_of(cfg), cfg.section(ModelLoadConfig)
    return {
        "model": ml.model,
        "dtype": ml.dtype,
        "shards": str(len(layout(model, ml.shard_size))),
        "size": fmt_bytes(model.nbytes, ""),
        "spread": ml.spread,
        "read mode": ml.read_mode,
    }


class LoadRun:
    """One rank's model-load run (dlio.family.Run): the shards written when missing, then the loads."""

    def __init__(self, ctx: RunContext) -> None:
        cfg, comm, backend = ctx.cfg, ctx.comm, ctx.backend
        backend.check_config(cfg)
        self.ctx, self.cfg, self.comm = ctx, cfg, comm
        self.model = model = model_of(cfg)
        ml = cfg.section(ModelLoadConfig)
        shards = layout(model, ml.shard_size)
        self.root = backend.checkpoint_root(cfg)
        # vLLM decides on every rank from the same facts (the folder's mount, the host's RAM)
        self.choice = choose(ml.read_mode, backend.has(FILE_ENGINES), sum(s.size for s in shards), self.root)
        self.tp = tp = check(cfg, comm.size, backend, self.choice.mode)
        self.stored = StoredModel(backend, self.root, shards, index_text(model, shards))
        mode = "mmap" if self.choice.mode == "prefetch" else self.choice.mode
        self.mine = rank_plan(shards, ml.spread, tp, comm.rank % tp, model.itemsize, mode, ml.transfer_size)
        self.prefetch: Optional[RankPlan] = None
        if self.choice.mode == "prefetch":
            self.prefetch = prefetch_plan(shards, comm.rank, comm.size, ml.prefetch_block_size)
        self.start = ""

    def describe(self) -> List[str]:
        shards = self.stored.shards
        return plan_lines(
            self.cfg, self.model, shards, self.root, self.tp, self.comm.size, self.mine, self.choice, self.prefetch
        )

    def check(self) -> None:
        """Nothing the host limits before the folder exists: a shard's buffer is one transfer."""

    def check_access(self) -> None:
        self.stored.backend.check_access([self.root])

    def places(self) -> List[Place]:
        """Rank 0: the model's folder, where the shards are written when missing; a model already there is
        only read (a user's own Hugging Face model may be loaded, never overwritten)."""
        if self.comm.rank != 0:
            return []
        names = () if self.stored.present() else MODEL_NAMES
        return [Place(self.root, "checkpoint.checkpoint_folder", "model folder", names)]

    def prepare(self, folder: str) -> None:
        for line in self.describe():
            self.ctx.echo(line)
        self.start = iso()

    def measure(self) -> Tuple[Tuple[List[Dict[str, Any]], Dict[str, Any]], Optional[BaseException]]:
        comm, mine = self.comm, self.mine
        passes: List[Dict[str, Any]] = []
        failure: Optional[BaseException] = None
        try:
            if not comm.bcast(self.stored.present() if comm.rank == 0 else None):
                self.stored.write(comm, self.ctx.echo)
            _loads(self.cfg, comm, self.ctx.echo, self.stored, (mine, self.prefetch, self.choice.mode), self.tp, passes)
        except (Interrupted, DlioRunError) as e:
            failure = e
        plan = {"rank": comm.rank, "files": len(mine.files), "bytes": mine.bytes, "wanted_bytes": mine.wanted_bytes}
        if self.prefetch is not None:
            plan["prefetch"] = prefetch.plan_record(self.prefetch, self.stored.shards)
        return (passes, plan), failure

    def _document(self, records: List[Any], failure: Optional[BaseException]) -> Dict[str, Any]:
        passes, plans = [r[0] for r in records], [r[1] for r in records]
        doc = _document(self.cfg, self.comm.size, self.model, self.stored, self.tp, self.start, passes, plans, failure)
        doc["settings"]["read_mode"] = self.choice.mode
        doc["settings"]["read_mode_set"] = self.choice.configured
        doc["read_mode_choice"] = self.choice.to_json()
        return doc

    def keep_partial(self, folder: str, records: Any, failure: BaseException) -> None:
        doc = self._document([records], failure)
        name = f"dlio-fast-rank{self.comm.rank}.json"
        write_with_fallback(lambda d: write_json(os.path.join(d, name), doc), folder)

    def nothing_measured(self, records: List[Any]) -> Optional[str]:
        timed = [p for passes, _ in records for p in passes if p["kind"] == "timed"]
        if not timed:
            return "no timed load completed"
        if not sum(p["bytes"] for p in timed):
            return "the timed loads read no byte of the model's shards"
        return None

    def write(
        self, folder: str, records: List[Any], failure: Optional[BaseException]
    ) -> Optional[Tuple[Dict[str, Any], str]]:
        doc = self._document(records, failure)
        doc["environment"] = environment()
        where, lost = write_with_fallback(lambda d: write_json(os.path.join(d, "dlio-fast.json"), doc), folder)
        for line in [choice_line(self.choice), prefetch.summary_line(doc["ranks"])] + figures.summary_lines(doc):
            if line:
                self.ctx.echo(line)
        self.ctx.echo(f"Saved outputs in {where}{'' if failure is None else ' (partial: ' + str(failure) + ')'}")
        if lost:
            self.ctx.warn(f"warning: {lost}")
        return doc, where


def _loads(
    cfg: Config,
    comm: Any,
    echo: Callable[[str], None],
    stored: StoredModel,
    plans: Tuple[RankPlan, Optional[RankPlan], str],
    tp: int,
    passes: List[Dict[str, Any]],
) -> None:
    """The loads of this rank: an untimed one first when warm, then model_load.repeats timed ones."""
    ml = cfg.section(ModelLoadConfig)
    kinds = (["warm-up"] if ml.cache == "warm" else []) + ["timed"] * ml.repeats
    for n, kind in enumerate(kinds, start=1):
        rec = load_once(cfg, comm, stored, plans, tp, n, kind)
        passes.append(rec)
        recs = comm.gather(rec)
        if comm.rank == 0:
            echo(figures.pass_line(figures.pass_summary(recs), ml.cache, comm.size))


def load_once(
    cfg: Config,
    comm: Any,
    stored: StoredModel,
    plans: Tuple[RankPlan, Optional[RankPlan], str],
    tp: int,
    n: int,
    kind: str,
) -> Dict[str, Any]:
    """One load of this rank's requests (``plans``: the mmap or read pass, the prefetch or None, the
    read mode), started on every rank at once; its record."""
    backend, ml = stored.backend, cfg.section(ModelLoadConfig)
    mine, pre, mode = plans
    engine, direct, qd = engine_of(cfg, backend, mode)
    names = [stored.names[i] for i in mine.files]
    sizes = [stored.sizes[i] for i in mine.files]
    # prefetch: the dealt shards are dropped too (with a slice spread they are among the mapped ones)
    touched = sorted(set(names) | ({stored.names[i] for i in pre.files} if pre is not None else set()))
    cache = "kept (warm)" if ml.cache == "warm" else backend.drop_cache(touched, "drop")
    # every rank's drop done: nobody reads a page another rank is dropping; Ctrl-C ends the wait
    stopped = interruptible(lambda stop: comm.barrier_or_stop(stop, poll_s=0.001))
    if stopped is not None:
        raise stopped
    phase = backend.phase(touched, engine)
    opts = SetOptions(engine=engine, direct=direct, qd=qd, threads=ml.threads, transfer=ml.transfer_size)
    if pre is not None:
        both = prefetch.run(stored, mine, pre, opts, ml.prefetch_threads, ml.prefetch_block_size)
        # the storage's bytes are the prefetch's (every shard once over the job); the mmap pass hits them
        counters = phase.end(both.fetched.bytes, len(pre.ops) + len(mine.ops), None, both.threads)
        rec = load_record(comm, tp, n, kind, mine, both.mapped, both.ready_s, qd, cache, counters)
        return prefetch.with_prefetch(rec, both, pre)
    t0 = time.monotonic_ns()
    res = backend.read_ranges(names, sizes, mine.ops, opts)
    ready = (time.monotonic_ns() - t0) / 1e9
    counters = phase.end(res.bytes, len(mine.ops), None, res.threads)
    return load_record(comm, tp, n, kind, mine, res, ready, qd, cache, counters)


def load_record(
    comm: Any, tp: int, n: int, kind: str, mine: RankPlan, res: Any, ready: float, qd: int, cache: str, counters: Any
) -> Dict[str, Any]:
    """A rank's record of one load: ``res`` the SetResult of its (mmap or read) pass, ``ready`` its time
    to ready."""
    return {
        "pass": n,
        "kind": kind,
        "rank": comm.rank,
        "hostname": socket.gethostname(),
        "tp_rank": comm.rank % tp,
        "files": len(mine.files),
        "bytes": res.bytes,
        "wanted_bytes": mine.wanted_bytes,
        "requests": len(mine.ops),
        "pages": mine.pages,
        "time_to_ready_s": ready,
        "io_s": res.io_s,
        "GiB_per_second": res.bytes / figures.GiB / ready if ready > 0 else 0.0,
        "minflt": res.minflt,
        "majflt": res.majflt,
        "pages_per_fault": (mine.pages / (res.minflt + (res.majflt or 0)) if mine.pages and res.minflt else None),
        "engine": res.engine,
        "direct": res.direct,
        "threads": res.threads,
        "qd": qd,
        "cache": cache,
        "start": iso(res.wall_start_s),
        "counters": counters,
    }


def _document(
    cfg: Config,
    size: int,
    model: Model,
    stored: StoredModel,
    tp: int,
    start: str,
    all_passes: List[List[Dict[str, Any]]],
    plans: List[Dict[str, Any]],
    failure: Optional[BaseException],
) -> Dict[str, Any]:
    ml = cfg.section(ModelLoadConfig)
    by_pass: Dict[int, List[Dict[str, Any]]] = {}
    for recs in all_passes:
        for r in recs:
            by_pass.setdefault(r["pass"], []).append(r)
    summaries = [figures.pass_summary(rs) for _, rs in sorted(by_pass.items()) if len(rs) == len(all_passes)]
    vs = [v for _, rs in sorted(by_pass.items()) for v in figures.verdicts(rs, ml.cache == "warm")]
    return {
        "schema": SCHEMA,
        "complete": failure is None,
        "reason": None if failure is None else str(failure),
        "workload": cfg.workload,
        "config_file": cfg.config_file,
        "start": start,
        "end": iso(),
        "comm_size": size,
        "host": host_info(),
        "settings": {
            "model": ml.model,
            "dtype": ml.dtype,
            "shard_size": ml.shard_size,
            "tensor_parallel": tp,
            "spread": ml.spread,
            "read_mode": ml.read_mode,
            "cache": ml.cache,
            "repeats": ml.repeats,
            "threads": ml.threads,
            "qd": ml.qd,
            "transfer_size": ml.transfer_size,
            "prefetch_threads": ml.prefetch_threads,
            "prefetch_block_size": ml.prefetch_block_size,
            "storage_type": cfg.storage.storage_type,
        },
        "model": {
            "name": model.name,
            "config": model.config,
            "parameters": model.parameters,
            "bytes": model.nbytes,
            "tensors": len(model.tensors),
            "root": stored.root,
            "shards": [{"name": s.name, "bytes": s.size} for s in stored.shards],
        },
        "plans": plans,
        "loads": summaries,
        "summary": figures.overall(summaries),
        "verdicts": vs,
        "ranks": [r for recs in all_passes for r in recs],
    }


REPORT = FamilyReport(SCHEMA, "model load", figures.REPORT_SETTINGS, figures.REPORT_FIGURES, figures.reading)
FAMILY = Family(
    "model_load",
    "model load",
    LoadRun,
    listing,
    REPORT,
    sections=("model", "workflow", "storage", "dlio_fast", "checkpoint", "model_load"),
)
