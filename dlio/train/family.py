"""Training (with its evaluations and checkpoints) and checkpoint-only runs as a workload family
(dlio.family): the run DLIO makes, with the dataset generated when missing, DLIO's result files
and dlio-fast.json."""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Tuple, cast

from dlio import _core
from dlio.base.errors import DlioError, DlioRunError
from dlio.base.units import dlio_line, fmt_bytes
from dlio.checkpoint.only_mode import run_checkpoint_only
from dlio.config import Config
from dlio.config.engines import check_qd
from dlio.dataset import stored
from dlio.dataset.spec import dataset_bytes, dataset_spec
from dlio.family import Family, RunContext
from dlio.report import exact, interference, run_files
from dlio.report.dlio import files as dlio_files
from dlio.report.dlio import host as dlio_host
from dlio.report.result import RankRecord, RunResult, new_rank_record
from dlio.storage.base import FILE_ENGINES, PAGE_CACHE
from dlio.storage.places import Place
from dlio.system.host import iso
from dlio.system.results_out import write_with_fallback
from dlio.train import loop
from dlio.train.session import (
    _result,
    balloon_warning,
    cache_warning,
    check_buffers,
    check_plan,
    describe,
    storage_places,
    stored_dataset,
)


class TrainRun:
    """One rank's training or checkpoint-only run (dlio.family.Run)."""

    def __init__(self, ctx: RunContext) -> None:
        cfg, comm = ctx.cfg, ctx.comm
        self.ctx, self.cfg, self.comm = ctx, cfg, comm
        self.spec = dataset_spec(cfg)
        self.data = stored_dataset(cfg, self.spec, ctx.backend)
        self.tracer: Any = None
        self.nbytes = 0
        self.start = ""
        self.proc_info: Any = None  # DLIO's host_cpuinfo / host_meminfo, read at the start as DLIO does
        self.rank_rec = new_rank_record(comm.rank)  # filled as it trains (so_far: a host lost mid-run)

    def check(self) -> None:
        cfg, comm, backend = self.cfg, self.comm, self.data.backend
        if backend.has(FILE_ENGINES):  # on S3, qd x read threads requests are in flight whatever the engine
            check_qd(backend.engine_spec(cfg)[0], cfg.dlio_fast.qd)
        check_buffers(cfg, self.spec)
        check_plan(cfg, self.spec, comm.size)
        ck = cfg.checkpoint
        if cfg.is_checkpoint_only() and ck.num_checkpoints_write <= 0 and ck.num_checkpoints_read <= 0:
            # it would measure nothing (issue 40); checked here, not at load, so a config can still plan a layout
            raise DlioError(
                f"checkpoint.num_checkpoints_write = {ck.num_checkpoints_write} and checkpoint.num_checkpoints_read "
                f"= {ck.num_checkpoints_read}: a checkpoint-only run (workflow.train=False) must write or read at "
                "least one checkpoint; set checkpoint.num_checkpoints_write to 1 or more"
            )
        if cfg.dlio_fast.cache == "drop-all" and os.geteuid() != 0:
            raise DlioError(
                "dlio_fast.cache = drop-all drops the whole host's page cache and needs root; use "
                "--cache drop (each file's pages, no root needed)"
            )
        if cfg.workflow.train and cfg.dlio_fast.mlperf_rules != "off":  # MLPerf Rules 3.1.2
            from dlio.mlperf.datasize import measured_hosts, shortfall

            memory = [h.bytes for h in measured_hosts(comm)]  # each host's own (the rule sums them)
            problem = comm.bcast(shortfall(cfg, comm.size, len(memory), memory) if comm.rank == 0 else None)
            if problem and cfg.dlio_fast.mlperf_rules == "enforce":
                raise DlioError(problem)
            if problem and comm.rank == 0:
                self.ctx.warn(f"warning: {problem}")

    def describe(self) -> List[str]:
        return describe(self.cfg, self.spec, self.comm.size)

    def check_access(self) -> None:
        places = storage_places(self.cfg, self.data)
        self.data.backend.check_access(places, create=self.cfg.dlio_fast.create_bucket)

    def places(self) -> List[Place]:
        """Rank 0: the dataset's and the checkpoints' folders, on a real filesystem (not locked: many runs
        read one dataset; checkpoints keep their own names: dlio.storage.file_sets.own_names)."""
        if self.comm.rank != 0:
            return []
        keys = ["dataset.data_folder"] + (["checkpoint.checkpoint_folder"] if self.cfg.workflow.checkpoint else [])
        roots = storage_places(self.cfg, self.data)
        return [Place(root, key, key.split(".")[1], lock=False) for root, key in zip(roots, keys)]

    def prepare(self, folder: str) -> None:
        """The tracer, the banner, the dataset (generated when missing) and the warnings."""
        cfg, comm, wf, ds, echo = self.cfg, self.comm, self.cfg.workflow, self.data, self.ctx.echo
        if cfg.dlio_fast.trace:
            from dlio.report.trace import Tracer

            clock = None
            if comm.size > 1:  # the traces of many hosts go onto rank 0's clock (dlio.report.trace_merge)
                from dlio.system import clock_offset

                offset = clock_offset.measure(comm)
                self.rank_rec["clock_offset_ns"] = offset["offset_ns"]
                self.rank_rec["clock_rtt_ns"] = offset["rtt_ns"]
                clock = {"host": self.rank_rec["hostname"], **offset}
            self.tracer = Tracer(folder, comm.rank, comm.size, ai_root=True, clock=clock)
        phases = [
            name
            for name, on in (
                ("Generating data", wf.generate_data),
                ("Training", wf.train),
                ("Evaluation", wf.train and wf.evaluation),
                ("Checkpointing", wf.checkpoint),
            )
            if on
        ]
        echo(f"Running dlio-fast [{' & '.join(phases)}] with {comm.size} process(es)")
        needs_data = wf.train or (wf.generate_data and not cfg.is_checkpoint_only())  # never a dataset nobody reads
        if (wf.generate_data and needs_data) or (
            needs_data and not comm.bcast(stored.present(ds) if comm.rank == 0 else None)
        ):
            from dlio.report.trace import maybe_phase

            with maybe_phase(self.tracer, "generate"):
                stored.generate(ds, comm, echo, self.ctx.progress)
        comm.barrier()
        if wf.train:
            for split in ("train", "valid"):
                stored.check_matches(ds, split)  # generated with another config: wrong figures
        self.nbytes = dataset_bytes(self.spec) if needs_data else 0
        if comm.rank == 0 and wf.train and ds.backend.has(PAGE_CACHE):
            cache_warning(cfg, self.nbytes, self.ctx.warn)
        if comm.rank == 0 and wf.checkpoint and ds.backend.has(PAGE_CACHE):
            balloon_warning(cfg, self.ctx.warn)
        self.start = iso()
        self.proc_info = dlio_host.proc_info() if comm.rank == 0 else None

    def measure(self) -> Tuple[RankRecord, Optional[BaseException]]:
        """Training (with its checkpoints) or checkpoint-only saves and loads; the trace closed."""
        try:
            return self._measure()
        finally:
            self.end = iso()
            self._close_trace()

    def _measure(self) -> Tuple[RankRecord, Optional[BaseException]]:
        cfg, comm, ctx = self.cfg, self.comm, self.ctx
        failure: Optional[BaseException] = None
        rank_rec = self.rank_rec
        if cfg.workflow.train:
            try:
                rank_rec, failure = loop.run_training(
                    cfg,
                    comm,
                    ctx.echo,
                    ctx.progress,
                    tracer=self.tracer,
                    verbose=ctx.verbose,
                    data=self.data,
                    rank_rec=rank_rec,
                )
            finally:
                if ctx.progress is not None:
                    ctx.progress.done()
        if cfg.is_checkpoint_only():
            ck = run_checkpoint_only(cfg, comm, ctx.echo, progress=ctx.progress)
            failure = ck["failure"]
            rank_rec["checkpoints"] = ck["records"]
            rank_rec["checkpoint_phase"] = {"start": ck["start"], "end": ck["end"]}  # DLIO's per_epoch_stats
            if self.tracer is not None:  # records carry wall-clock times: map them to the trace clock
                wall_to_mono = _core.now_ns() - time.time_ns()
                for c in ck["records"]:
                    self.tracer.span(
                        f"checkpoint.{c['kind']}",
                        c["wall_start_ns"] + wall_to_mono,
                        c["wall_end_ns"] - c["wall_start_ns"],
                        epoch=c["epoch"],
                        step=c["step"],
                        bytes=c["bytes"],
                    )
        return rank_rec, failure

    def so_far(self) -> RankRecord:
        """This rank's record as measured so far: the epochs done (read while it trains: a host lost)."""
        self.end = iso()
        rec = cast(RankRecord, dict(self.rank_rec))
        rec["epochs"] = list(self.rank_rec["epochs"])
        return rec

    def _merge_traces(self, folder: str) -> None:
        """Rank 0, after every rank closed its trace: the ranks' traces on one timeline (a failure costs it
        only)."""
        from dlio.report import trace_merge

        try:
            path, n, left_out = trace_merge.merge(folder, self.comm.size)
        except (OSError, ValueError) as e:
            self.ctx.warn(f"warning: the merged trace was not written ({e}); the per-rank traces are kept")
            return
        missing = f"; left out (missing or without a clock offset): {', '.join(left_out)}" if left_out else ""
        self.ctx.echo(f"Merged trace: {path} ({n} events on rank 0's clock{missing})")

    def _close_trace(self) -> None:
        t = self.tracer
        if t is None:
            return
        t.close()
        if t.failed:
            self.ctx.warn(f"warning: the trace was dropped ({t.failed}); the results are kept")
        else:
            dropped = f", {t.dropped} dropped: buffers full" if t.dropped else ""
            self.ctx.echo(f"Trace: {t.path} ({t.events} events{dropped})")

    def _result(self, records: List[RankRecord], failure: Optional[BaseException]) -> RunResult:
        reason = None if failure is None else str(failure)
        result: RunResult = _result(
            self.cfg, self.spec, self.comm.size, records, self.start, self.end, failure is None, reason, self.nbytes
        )
        return result

    def keep_partial(self, folder: str, records: RankRecord, failure: BaseException) -> None:
        partial = self._result([records], failure)
        _, lost = write_with_fallback(lambda d: run_files.write_rank_files(partial, d, self.comm.rank), folder)
        if lost:
            self.ctx.warn(f"warning: rank {self.comm.rank}: {lost}")

    def nothing_measured(self, records: List[RankRecord]) -> Optional[str]:
        cfg = self.cfg
        epochs = [e for r in records for e in r["epochs"]]
        steps = sum(e.get("steps_done", 0) for e in epochs)
        saves = sum(len(r.get("checkpoints") or []) for r in records)
        if cfg.workflow.train and not steps and not saves:
            return "no training step completed on any rank; check the dataset and reader.batch_size"
        planned = sum(int(e.get("plan_bytes") or 0) for e in epochs)
        if steps and planned and not sum(int(e.get("bytes") or 0) for e in epochs):
            # steps of skipped samples (--skip-bad-files over files all bad) time the compute alone
            skipped = sum(int(e.get("skipped_samples") or 0) for e in epochs)
            return f"the training steps read no byte of the dataset ({skipped:,} samples skipped as bad files)"
        if cfg.is_checkpoint_only() and not saves:
            return "no checkpoint was saved or loaded"
        return None

    def write(
        self, folder: str, records: List[RankRecord], failure: Optional[BaseException]
    ) -> Optional[Tuple[Dict[str, Any], str]]:
        cfg, echo = self.cfg, self.ctx.echo
        from dlio.report import verdict, verdict_lines
        from dlio.report.dlio import hydra as hydra_files

        direct = self.data.backend.engine_spec(cfg)[1]  # the verdicts' advice leaves out what is in effect
        verdicts = verdict.annotate_run(
            cast(List[Dict[str, Any]], records), verdict.run_context(cfg, direct)
        )  # sets each epoch's "verdict"
        result = self._result(records, failure)
        # + DLIO's host_cpuinfo / host_meminfo / host_processor_name, read at the start (dlio.report.dlio.host)
        result["host"].update(self.proc_info or dlio_host.proc_info())
        result["verdicts"] = verdicts
        doc = exact.dlio_fast_doc(result)  # once: dlio-fast.json, the console's table and --json's document
        where, lost = write_with_fallback(
            lambda d: run_files.write_all(
                result, d, cfg.to_yaml(), hydra_files.documents(cfg, d), hydra_files.subdir(cfg), doc
            ),
            folder,
        )
        if cfg.dlio_fast.results_dir and not lost:
            from dlio.mlperf import provenance

            provenance.write(where, provenance.provenance(cfg, result["hostnames"]))
        if cfg.dlio_fast.plots and not lost:
            from dlio.report import plots

            try:
                made = plots.make_all(result, folder, summary=dlio_files.summary(result))
                echo(f"Plots: {', '.join(os.path.basename(p) for p in made)}")
            except DlioError as e:  # a full disk costs the plots, not the results
                self.ctx.warn(f"warning: plots not written: {e}")
        lines = (
            [dlio_line(x) for x in dlio_files.metric_lines(result)]
            if any(r["epochs"] or r.get("checkpoints") for r in records)
            else []
        )
        lines += exact.exact_table(result, doc["metrics"]) if any(r["epochs"] for r in records) else []
        lines += interference.lines(dlio_files.checkpoint_records(result))  # checkpoint.async_save
        for line in lines + verdict_lines.run_lines(verdicts):
            echo(line)
        if cfg.dlio_fast.trace and self.comm.size > 1:
            self._merge_traces(folder)
        reason = "" if failure is None else f" (partial: {failure})"
        echo(f"Saved outputs in {where}{reason}")
        if lost:
            if failure is None:
                raise DlioRunError(lost)
            self.ctx.warn(f"warning: {lost}")
        return doc, where


def listing(cfg: Config) -> Dict[str, str]:
    """`dlio-fast workloads`' columns: the dataset's format, files, samples and sizes, batch, compute."""
    from dlio.dataset.spec import listed_dataset_bytes as size_of

    if cfg.is_checkpoint_only():
        return {"format": "(checkpoint only)"}
    d = cfg.dataset
    return {
        "format": d.format,
        "files": str(d.num_files_train),
        "samples/file": str(d.num_samples_per_file),
        "sample": fmt_bytes(cfg.record_bytes(), ""),
        "dataset": fmt_bytes(size_of(dataset_spec(cfg)), ""),
        "batch": str(cfg.reader.batch_size),
        "compute s": f"{cfg.train.computation_time.mean():.4g}",
    }


FAMILY = Family("train", "training", TrainRun, listing)
