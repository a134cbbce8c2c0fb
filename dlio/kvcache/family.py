"""`dlio-fast run` of a kvcache workload (workflow.kvcache), start to end, on every rank.

Each rank (a client, in the rules' words) plans its own requests, uses its own cache folder
(kvcache.cache_dir/rank_N, emptied of its entries before each trial), and runs the trials; the ranks
start each trial together. Rank 0 gathers the records and writes the run's files (results.py).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from dlio.base.errors import DlioError, DlioRunError, Interrupted
from dlio.base.units import fmt_bytes
from dlio.config import Config
from dlio.config.sections import KvcacheConfig
from dlio.family import Family, FamilyChecks, RunContext
from dlio.kvcache import attest, check, engine, metrics, oplog, results
from dlio.kvcache.check import OPTIONS
from dlio.kvcache.models import resolve_model
from dlio.kvcache.plan import Plan, client_seed, plan_lines, synthetic_plan
from dlio.kvcache.settings import KvSettings, settings
from dlio.kvcache.store import ENTRIES, OBJECTS, store_for
from dlio.kvcache.traces import trace_plan
from dlio.storage.base import DIRECT
from dlio.storage.places import Place
from dlio.system import output
from dlio.system.execute import pending
from dlio.system.host import iso
from dlio.system.stats import to_json


def plan_for(s: KvSettings, rank: int, trial: int) -> Plan:
    return trace_plan(s) if s.trace else synthetic_plan(s, rank, trial)


def _trace_path(path: str, rank: int, trial: int, ranks: int, trials: int) -> str:
    if ranks == 1 and trials == 1:
        return path
    base, ext = os.path.splitext(path)
    return f"{base}.rank{rank}.trial{trial}{ext}"


def describe(s: KvSettings, plan: Plan, folder: str, ranks: int, relayed: bool = False) -> List[str]:
    """relayed: the entries are objects the C relay store reaches (no free space to read)."""
    alloc = s.max_concurrent_allocs or "unlimited"
    free = "unlimited" if relayed else "default (below)"
    relayed = relayed and s.io_mode != "null"
    out = [
        f"kvcache: model {s.model.name} ({s.bytes_per_token:,} B/token), {s.users} users x {ranks} rank(s), "
        f"{s.workers} workers, {alloc} concurrent allocations, {s.duration_s:g} s x {s.trials} trial(s), "
        f"seed {s.seed} + rank",
        f"  tiers: RAM {fmt_bytes(s.cpu_bytes) if s.cpu_bytes else 'none'}, storage "
        + (fmt_bytes(s.storage_capacity) if s.storage_capacity else free)
        + f" in {folder.rstrip('/')}/rank_N; io_mode {s.io_mode}"
        + (", through the relay (the C engine times each PUT / GET / DELETE)" if relayed else "")
        + (f", chunks of {s.chunk_tokens} tokens" if s.chunk_tokens else ""),
    ]
    if not s.trace:
        out.append(
            f"  conversations: the {s.max_conversations:,} most recently used remembered"
            if s.multiturn and s.max_conversations
            else "  conversations: every one remembered"
        )
    if s.trial_gap_s:
        out.append(f"  idle {s.trial_gap_s:g} s before and after each trial (the reference's wrapper)")
    out.append(
        f"  a trial ends at its duration; requests in flight then finish while the workers are waited for in turn, "
        f"each up to {engine.DRAIN_S:g} s (the reference's join(timeout=2) per thread: at most "
        f"{s.workers * engine.DRAIN_S:g} s), or stop between their steps"
    )
    return out + engine.limit_lines(s, plan, folder, relayed) + plan_lines(s, plan)


def listing(cfg: Config) -> Dict[str, str]:
    """`dlio-fast workloads`' columns: the model, its users, the KV bytes per token, a trial's length."""
    kv = cfg.section(KvcacheConfig)
    return {
        "model": resolve_model(kv).name,
        "users": str(kv.users),
        "KV per token": fmt_bytes(resolve_model(kv).bytes_per_token, ""),
        "RAM tier": str(kv.cpu_bytes),
        "trial s": f"{kv.duration:g}",
        "trials": str(kv.trials),
        "MLPerf Storage rules": "v3.0 closed (KVCache)" if cfg.workload in OPTIONS else "-",
    }


class KvRun:
    """One rank's KV-cache run (dlio.family.Run): its trials, each started on every rank at once."""

    def __init__(self, ctx: RunContext) -> None:
        cfg, comm, backend = ctx.cfg, ctx.comm, ctx.backend
        backend.check_config(cfg)
        self.ctx, self.cfg, self.comm, self.backend = ctx, cfg, comm, backend
        self.s = s = settings(cfg)
        if s.io_mode == "direct" and not backend.has(DIRECT):
            backend.refuse(
                "kvcache.io_mode",
                "direct",
                "O_DIRECT bypasses a client page cache, and an object store has none: entries go as whole-object "
                "PUTs and GETs",
                "leave kvcache.io_mode out (compat)",
            )
        self.root = backend.folder_root(cfg, "kvcache.cache_dir")
        self.store = store_for(backend, self.root, comm.rank)  # makes no request
        self.plan0 = plan_for(s, comm.rank, 0)
        self.lines = describe(s, self.plan0, self.root, comm.size, self.store.relayed)
        self.started = ""
        self.clearing: Optional[Clearing] = None  # a stopped trial's entries, being removed

    def describe(self) -> List[str]:
        return self.lines

    def check(self) -> None:
        """Nothing the host limits before the folder exists: each rank's cache folder and buffers are
        claimed in prepare, where a refusal names the rank."""
        oplog.check_trace_path(self.s.io_trace_log)

    def check_access(self) -> None:
        # a cache folder has nothing to reach: each rank checks its own as it claims it (prepare)
        self.backend.check_access([self.root], create=self.cfg.dlio_fast.create_bucket)

    def places(self) -> List[Place]:
        """This rank's cache folder or prefix (rank_N, made by the run): its entries are the run's own."""
        if self.store.relayed:
            if self.s.io_mode == "null":
                return []  # the null store makes no request
            return [Place(self.store.where.rstrip("/"), "kvcache.cache_dir", "KV cache prefix", (OBJECTS,), made=True)]
        return [Place(self.store.where, "kvcache.cache_dir", "KV cache folder", (ENTRIES,), made=True)]

    def prepare(self, folder: str) -> None:
        s, comm, store = self.s, self.comm, self.store
        cache = store.where

        def claim() -> None:
            try:
                largest = int(self.plan0.entries["bytes"].max()) if len(self.plan0.entries) else 4096
                store.prepare(s, largest)
                # the staging and the RAM tier against the memory this rank may use, before any trial
                engine.check_memory(s, engine.stage_bytes(s, self.plan0, store.relayed and s.io_mode != "null"))
                engine.check_room(self.plan0, store.capacity(s), cache)
            except OSError as e:
                raise DlioError(f"{cache}: {e.strerror}; choose another kvcache.cache_dir") from None

        comm.agree_all(claim)
        for line in self.lines:
            self.ctx.echo(line)
        self.ctx.echo(f"Running dlio-fast [KV cache] with {comm.size} process(es)")
        self.started = iso()

    def measure(self) -> Tuple[List[Dict[str, Any]], Optional[BaseException]]:
        s, comm, ctx = self.s, self.comm, self.ctx
        recs: List[Dict[str, Any]] = []
        failure: Optional[BaseException] = None
        for trial in range(s.trials):
            plan = self.plan0 if trial == 0 else plan_for(s, comm.rank, trial)
            failure = idle(s.trial_gap_s)
            if failure is None:
                rec, failure = _trial(s, plan, self.store, comm, trial, ctx.echo, ctx.progress)
                if rec is not None:
                    recs.append(rec)
            if isinstance(failure, Interrupted):
                # emptied while the results are written (a stop's exit waits for both; neither waits for the other)
                self.clearing = Clearing(self.store)
            else:
                failure = self.store.clear(failure)
            failure = failure or idle(s.trial_gap_s)
            if failure is not None or pending() is not None:
                failure = failure or pending()
                break
        return recs, failure

    def keep_partial(self, folder: str, records: List[Dict[str, Any]], failure: BaseException) -> None:
        """A stopped or failed run of several ranks (no collective): each rank's records in its own file, and
        rank 0 writes the run's files from its own, marked partial (a trial in progress is not lost)."""
        try:
            if records:
                output.write_json(os.path.join(folder, f"rank_{self.comm.rank}-partial.json"), records)
            if self.comm.rank == 0:
                others = f"; the other ranks' records are in {folder}/rank_N-partial.json"
                self.write(folder, [records], failure, others)
        finally:
            self.clear_after_stop()

    def clear_after_stop(self) -> None:
        """After a stop, once the results are written: the cache folder emptied (Clearing), or a warning."""
        if self.clearing is not None:
            clearing, self.clearing = self.clearing, None
            failure = clearing.wait()
            if failure is not None:
                self.ctx.warn(f"warning: {failure}")

    def nothing_measured(self, records: List[List[Dict[str, Any]]]) -> Optional[str]:
        done = sum(r["result"]["counts"]["requests"] for rs in records for r in rs)
        if done:
            return None
        return "no request completed in any trial; give a longer kvcache.duration, or fewer users / a smaller context"

    def write(
        self, folder: str, records: List[List[Dict[str, Any]]], failure: Optional[BaseException], others: str = ""
    ) -> Optional[Tuple[Dict[str, Any], str]]:
        try:
            return self._write(folder, records, failure, others)
        finally:
            self.clear_after_stop()

    def _write(
        self, folder: str, records: List[List[Dict[str, Any]]], failure: Optional[BaseException], others: str
    ) -> Optional[Tuple[Dict[str, Any], str]]:
        reason = "" if failure is None else str(failure) + others
        all_recs = [r for rs in records for r in rs]
        hosts = len({r["host"] for r in all_recs}) or 1
        try:
            doc = results.run_doc(
                self.cfg, self.s, self.lines, all_recs, failure is None, reason, self.started, self.comm.size
            )
            results.write_all(folder, doc, self.cfg, self.s, all_recs, self.comm.size, hosts)
        except OSError as e:
            raise DlioRunError(f"{folder}: results not written ({e.strerror})") from None
        if all_recs:
            for line in results.lines(doc):
                self.ctx.echo(line)
        self.ctx.echo(f"Saved outputs in {folder}{'' if failure is None else ' (partial: ' + reason + ')'}")
        return doc, folder


class Clearing:
    """A stopped trial's cache folder emptied in a thread of its own, beside the writing of the results."""

    def __init__(self, store: Any) -> None:
        self.failure: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._clear, args=(store,), name="dlio-fast-kv-clear", daemon=True)
        self.thread.start()

    def _clear(self, store: Any) -> None:
        try:
            self.failure = store.clear(None)
        except Exception as e:  # handed to wait(), said as a warning
            self.failure = e

    def wait(self) -> Optional[BaseException]:
        self.thread.join()
        return self.failure


def idle(seconds: float) -> Optional[BaseException]:
    """The reference's wrapper sleeps TEST_DELAY before and after each trial, so that the storage
    settles (garbage collection, discards of the last trial's deletes) outside the measurement. A stop
    signal ends the wait: its Interrupted, else None."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pending() is not None:
            return pending()
        time.sleep(min(0.5, end - time.monotonic()))
    return None


STATUS_S = 5.0  # off a terminal, a trial's status line this often at least (--status-interval may ask for less)


Ticker = Tuple[Optional[Callable[[Any], None]], Callable[[], None]]


def status_ticker(s: KvSettings, trial: int, progress: Any) -> Ticker:
    """(on_tick, end) of a trial's progress on rank 0: on a terminal a live bar (trial time of the duration,
    requests done, bytes moved); else a status line every STATUS_S seconds (or --status-interval, if shorter;
    none with -q or --status-interval 0)."""
    if progress is None:
        return None, lambda: None
    live = bool(getattr(progress, "live", False))
    interval = getattr(progress, "status_interval", 0)
    every = min(interval, STATUS_S) if interval and getattr(progress, "status_out", None) is not None else 0
    if not live and not every:
        return None, lambda: None
    ph = progress.phase("kvcache", f"trial {trial}", s.duration_s, "s") if live else None
    t0, last = time.monotonic(), [time.monotonic()]

    def tick(run: Any) -> None:
        now = time.monotonic()
        p, dt = run.progress(), max(1e-9, now - t0)
        moved = p["storage_read_bytes"] + p["storage_write_bytes"]
        if ph is not None:
            ph.label = f"trial {trial}: {p['requests_done']:,} requests"
            ph.update(min(dt, s.duration_s), nbytes=moved)
            return
        if now - last[0] < every:
            return
        last[0] = now
        over = f" (draining requests in flight, +{dt - s.duration_s:.1f} s)" if dt > s.duration_s else ""
        progress.echo(
            f"[status] kvcache trial {trial}: {dt:.0f} s of {s.duration_s:g}{over}, {p['requests_done']:,} requests "
            f"done of {p['queued']:,} queued, storage read {fmt_bytes(p['storage_read_bytes'])} "
            f"({p['storage_read_bytes'] / 2**30 / dt:.2f} GiB/s), write {fmt_bytes(p['storage_write_bytes'])} "
            f"({p['storage_write_bytes'] / 2**30 / dt:.2f} GiB/s)",
            err=True,
        )

    return tick, (ph.end if ph is not None else lambda: None)


def _trial(
    s: KvSettings, plan: Plan, store: Any, comm: Any, trial: int, echo: Callable[[str], None], progress: Any
) -> Tuple[Optional[Dict[str, Any]], Optional[BaseException]]:
    cache = store.where
    capacity = store.capacity(s)
    relay = store.relay(s, plan)
    comm.barrier()  # the ranks start each trial together (the rules' clients)
    window = attest.Window(cache, store.target())
    tick, tick_end = status_ticker(s, trial, progress) if comm.rank == 0 else (None, lambda: None)
    try:
        result, failure, log = engine.run_trial(s, plan, cache, capacity, tick, log=bool(s.io_trace_log), relay=relay)
    finally:
        tick_end()
        tally = relay.finish() if relay is not None else None
    win = window.end(tally.get("cpu_s", 0.0) if tally else 0.0)
    if relay is not None and failure is not None:
        failure = relay.failure(failure)
    if result is None:
        return None, failure
    if s.io_trace_log and log is not None:
        t0 = time.time() - (result["end_ns"] - result["start_ns"]) / 1e9
        ops = oplog.from_log(log, result["oplog_n"], t0)
        problem = oplog.write_trace(
            _trace_path(s.io_trace_log, comm.rank, trial, comm.size, s.trials), ops, plan.key_of
        )
        failure = failure or (DlioRunError(problem) if problem else None)
    result = dict(result, hists={k: to_json(h) for k, h in result["hists"].items()})
    rec: Dict[str, Any] = {
        "rank": comm.rank,
        "host": socket.gethostname(),
        "trial": trial,
        "io_mode": s.io_mode,
        "storage": store.backend.name,
        "relay": tally,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "capacity": capacity,
        # stopped before its end (a signal, another rank's stop, an error): its figures are partial
        "complete": failure is None,
        "result": result,
        "window": win,
    }
    rec["reference"] = metrics.reference_results(rec, client_seed(s, comm.rank))
    rec["exact"] = metrics.exact(rec)
    c = result["counts"]
    written = c["storage_write_bytes"] + c["demote_bytes"]
    rec["attestation"] = store.attestation(s, win, result, written)
    x = rec["exact"]
    echo(
        f"trial {trial}: {x['requests']:,} requests, storage read {x['storage_read_gibps']:.3f} GiB/s, write "
        f"{x['storage_write_gibps']:.3f} GiB/s (rank 0)"
    )
    return rec, failure


FAMILY = Family(
    "kvcache",
    "KV cache",
    KvRun,
    listing,
    results.REPORT,
    FamilyChecks(results.SCHEMA, check.checks),
    sections=("model", "workflow", "storage", "dlio_fast", "kvcache"),
)
