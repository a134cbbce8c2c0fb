"""The training loop of one rank: epochs of a C run each, evaluation, checkpoints during training.

Per epoch: plan (numpy, dlio.train.planner) -> one C run with the GIL released (reader threads,
bounded prefetch, trainer spinning each step's compute, MPI barrier per step) -> per-step
timestamps -> metrics. Evaluation is a second C run on the valid split with no per-step barrier
(as DLIO). The rank's record (dlio.report.result.RankRecord) is returned with the failure that
ended it, if any: a stopped or failed run keeps the epochs and steps it measured.
"""

from __future__ import annotations

import dataclasses
import functools
import socket
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from dlio import _core
from dlio.base.errors import DlioError, DlioRunError, Interrupted
from dlio.base.units import dlio_line
from dlio.checkpoint import async_save
from dlio.checkpoint import save as ckpt_save
from dlio.checkpoint.record import counted
from dlio.checkpoint.schedule import CkptPoint, checkpoint_schedule
from dlio.config import Config
from dlio.config.sections import ReaderConfig
from dlio.dataset import stored
from dlio.dataset.spec import dataset_spec
from dlio.report import metrics
from dlio.report.dlio import host as dlio_host
from dlio.report.result import BlockFigures, CheckpointRecord, RankRecord, new_rank_record
from dlio.storage.base import C_STEP_HOOK, PAGE_CACHE, SPLIT_READS, TrainOptions
from dlio.system.execute import execute_partial, interruptible
from dlio.system.host import iso
from dlio.system.mpi import Comm
from dlio.train import planner
from dlio.train.epoch_record import (
    EpochCpu,
    benchmark_cpu,
    cpu_accounts,
    cpu_seconds,
    done_steps,
    epoch_record,
    merge_results,
    phase_cpu,
    step_lines,
)
from dlio.train.files import layout_for, listed_sizes


def batches_in_flight(reader: ReaderConfig) -> int:
    """How many finished batches may wait for the trainer. PyTorch's loader (DLIO's pytorch and dali
    loaders) gives each of its W workers prefetch_factor = ceil(prefetch_size / W) batches, so W x
    that many are in flight; tf.data's .prefetch(n) keeps n."""
    n = max(1, reader.prefetch_size)
    w = reader.read_threads
    if reader.data_loader in ("pytorch", "dali") and w > 0:
        return w * -(-n // w)
    return n


class Trainer:
    """Runs the epochs of one rank. echo / progress (dlio.progress.Progress) are rank 0's console; ``data`` is the
    dataset where its storage backend keeps it (dlio.dataset.stored)."""

    def __init__(
        self,
        cfg: Config,
        comm: Any,
        echo: Callable[..., None],
        progress: Any = None,
        tracer: Any = None,
        data: Optional[stored.StoredDataset] = None,
    ) -> None:
        self.cfg = cfg
        self.tracer = tracer  # dlio.report.trace.Tracer, or None
        self.comm = comm
        self.echo = echo if comm.rank == 0 else (lambda *a, **k: None)
        self.progress = progress
        self.spec = dataset_spec(cfg)
        self.data = data if data is not None else stored.stored(cfg, self.spec)
        self.backend = self.data.backend
        self.engine, self.direct = self.backend.engine_spec(cfg)
        self.node_leader: Optional[bool] = None  # this rank drops the node's page cache (drop-all); found on first use
        self.sizes: Dict[str, Any] = {}  # split -> the planned files' sizes (the manifest's)
        self.saver: Optional[async_save.AsyncSaver] = None  # with checkpoint.async_save

    def settings(self, split: str) -> planner.Settings:
        r, t = self.cfg.reader, self.cfg.train
        return planner.Settings(
            batch=r.batch_size if split == "train" else r.batch_size_eval,
            file_shuffle=r.file_shuffle,
            sample_shuffle=r.sample_shuffle,
            seed=t.seed,
            seed_change_epoch=t.seed_change_epoch,
            max_steps=t.total_training_steps if split == "train" else -1,
            compat_dlio_order=self.cfg.dlio_fast.compat_dlio_order,
            path_folders=self.spec.num_subfolders(split) if self.cfg.dlio_fast.file_order == "path" else 0,
            transfer_size=r.transfer_size or planner.TF_BUFFER,
            # an object store gets one GET per object or per sample range: no splitting into 4 MiB reads
            max_transfer=planner.MAX_TRANSFER if self.backend.has(SPLIT_READS) else 1 << 62,
            readers=max(1, r.read_threads),
        )

    def plan_split(
        self, split: str, layout: planner.Layout, epoch: int, random_seed: Optional[int]
    ) -> Tuple[planner.EpochPlan, planner.Settings]:
        st = self.settings(split)
        spec_time = self.cfg.train.computation_time if split == "train" else self.cfg.evaluation.eval_time
        return planner.epoch_plan(layout, st, spec_time, self.comm.rank, self.comm.size, epoch, random_seed), st

    def run_split(
        self, split: str, layout: planner.Layout, paths: List[str], epoch: int, random_seed: Optional[int]
    ) -> Tuple[Any, planner.EpochPlan, planner.Settings, Optional[BaseException]]:
        """One C run over one epoch of a split. Returns (raw result, plan, settings, failure)."""
        plan, st = self.plan_split(split, layout, epoch, random_seed)
        res, failure = self.execute_plan(split, plan, st, paths, epoch)
        return res, plan, st, failure

    def execute_plan(
        self,
        split: str,
        plan: planner.EpochPlan,
        st: planner.Settings,
        paths: List[str],
        epoch: int,
        first_step: int = 0,
        end_step: Optional[int] = None,
    ) -> Tuple[Any, Optional[BaseException]]:
        """One C run over steps [first_step, end_step) of a plan (a block between checkpoints).
        Returns (C result, failure): a run ended by a signal or an I/O error returns what it measured."""
        cfg = self.cfg
        steps = plan.steps[first_step:end_step]
        hook = c_hook = barrier = None
        if split == "train" and self.comm.size > 1:
            # DLIO's per-step allreduce stand-in: a C MPI barrier called by the trainer thread without
            # the GIL (dlio._mpiio) where the backend runs C hooks, else the Python Ibarrier that
            # watches the stop event.
            barrier = self.comm.step_barrier() if self.backend.has(C_STEP_HOOK) else None
            if barrier is not None:
                c_hook = barrier.capsule()
            else:
                hook = self._step_barrier
        pre = cfg.reader.preprocess_time.mean() if cfg.reader.preprocess_time is not None else 0.0
        run = self.backend.train_run(
            paths,
            self.sizes[split],
            plan.ops,
            steps,
            TrainOptions(
                engine=self.engine,
                direct=self.direct,
                threads=cfg.reader.read_threads,
                qd=cfg.dlio_fast.qd,
                prefetch=batches_in_flight(cfg.reader),
                compute_mode=1 if cfg.dlio_fast.compute_mode == "hybrid" else 0,
                preprocess_ns=int(pre * 1e9),
                step_hook=hook,
                c_step_hook=c_hook,
                trace=self.tracer is not None,
                delay_ns=cfg.dlio_fast.null_delay_ns,
                skip_bad_files=cfg.dlio_fast.skip_bad_files,
            ),
        )
        tick = (lambda run: self.progress.training(split, epoch, run, plan)) if self.progress else None
        if barrier is not None:
            tick = self._stop_barrier_tick(barrier, tick)
        res, failure = execute_partial(run, on_tick=tick)
        if res is not None:  # the set compute of each step, next to the measured one
            res["step_times"]["set_compute_ns"] = np.asarray(
                steps["compute_ns"][: len(res["step_times"]["compute_ns"])]
            )
        if self.tracer is not None and res is not None:
            self.tracer.add_run(res, paths, "train" if split == "train" else "eval", epoch=epoch)
        return res, failure

    @staticmethod
    def _stop_barrier_tick(barrier: Any, tick: Optional[Callable[[Any], None]]) -> Callable[[Any], None]:
        """On Ctrl-C / SIGTERM, also release the C barrier (another rank may never arrive)."""
        from dlio.system.execute import STOP

        def on_tick(run: Any) -> None:
            if STOP.is_set():
                barrier.stop()
            if tick is not None:
                tick(run)

        return on_tick

    def _step_barrier(self, step: int) -> None:
        from dlio.system.execute import STOP

        if not self.comm.barrier_or_stop(STOP):
            raise InterruptedError("stopped while waiting for the other ranks")

    def drop_cache(self, paths: List[str]) -> Any:
        """dlio_fast.cache before an epoch: each file's pages on every rank (so on every node), or the
        whole page cache once per node. Returns what was done, for the epoch's record."""
        mode = self.cfg.dlio_fast.cache
        if mode == "drop-all" and self.backend.has(PAGE_CACHE):
            if self.node_leader is None:
                hosts = self.comm.allgather(socket.gethostname())
                self.node_leader = hosts.index(hosts[self.comm.rank]) == self.comm.rank
            note = self.backend.drop_cache(paths, mode) if self.node_leader else "dropped by this node's first rank"
            self.comm.barrier()
            return note
        return self.backend.drop_cache(paths, mode)


def save_checkpoint(tr: Trainer, cfg: Config, comm: Comm, point: CkptPoint) -> Any:
    """A checkpoint during training, timed as DLIO does (no barrier around it); with
    checkpoint.async_save the snapshot, the write going on in the background (dlio.checkpoint.async_save)."""
    if tr.saver is not None:
        return tr.saver.start(point)
    tr.echo(f"Starting saving checkpoint {point.block} after total step {point.after_step} for epoch {point.epoch}")
    t0 = _core.now_ns()
    at = (cfg, comm, point.epoch, point.step)
    save = functools.partial(ckpt_save.save, *at, backend=tr.backend, progress=tr.progress)
    rec = counted(cfg, tr.backend, "save", save)  # its verdict beside the epochs'
    rec["block"] = point.block
    if tr.tracer is not None:
        tr.tracer.span("checkpoint.save", t0, _core.now_ns() - t0, epoch=point.epoch, step=point.step)
    tr.echo(
        dlio_line(
            f"Finished saving checkpoint {point.block} for epoch {point.epoch} in {rec['duration_s']:.4f} s; "
            f"Throughput: {rec['dlio_throughput_GB_per_second']:.4f} GB/s"
        )
    )
    return rec


def train_blocks(
    tr: Trainer,
    plan: planner.EpochPlan,
    st: planner.Settings,
    paths: List[str],
    epoch: int,
    points: Sequence[CkptPoint],
    excl: Tuple[int, int],
) -> Tuple[Any, List[BlockFigures], List[Any], Optional[BaseException]]:
    """Train one epoch; step checkpoints split it into blocks (DLIO closes a block at each).

    Returns (merged C result, metrics of each complete block, checkpoint records, failure); after a
    failure the result holds the steps measured, the unfinished block's included."""
    n = len(plan.steps)
    cuts = [p for p in points if p.mode == "step" and 0 < p.after_step <= n]
    results: List[Dict[str, Any]] = []
    blocks: List[BlockFigures] = []
    saves: List[CheckpointRecord] = []
    a = 0
    for p in cuts + [None]:
        b = p.after_step if p is not None else n
        if b > a or (p is None and not results):
            res, failure = tr.execute_plan("train", plan, st, paths, epoch, a, b)
            if res is not None:
                results.append(res)
            if failure is not None:
                return (merge_results(results) if results else None), blocks, saves, failure
            blocks.append(metrics.block_metrics(done_steps(res), st.batch, *excl))
            a = b
        if p is not None:
            try:
                saves.append(save_checkpoint(tr, tr.cfg, tr.comm, p))
            except (DlioRunError, Interrupted) as e:  # a failed (a full disk) or stopped save ends the run;
                return merge_results(results), blocks, saves, e  # the steps measured stay
    return merge_results(results), blocks, saves, None


@dataclasses.dataclass
class _Splits:
    """What every epoch of a rank reads: the train (and eval) layouts and paths, and the settings
    that stay fixed over the run."""

    layout: Any
    paths: List[str]
    layout_eval: Any
    paths_eval: List[str]
    excl: Tuple[int, int]
    random_seed: int
    compute_mode: int


def _prepare(tr: Trainer, rank_rec: RankRecord) -> _Splits:
    cfg, comm, data = tr.cfg, tr.comm, tr.data
    no_io = cfg.reader.data_loader == "synthetic"  # DLIO's synthetic loader reads nothing
    skip = cfg.dlio_fast.skip_bad_files
    # the manifests in a local view (the data folder itself on files); names are the backend's
    spec = stored.planning_spec(data)
    paths = stored.names(data, spec, "train")
    layout, bad = layout_for(spec, "train", no_io, skip, listed=listed_sizes(tr.backend, tr.comm, paths))
    layout_eval, paths_eval = None, []
    if cfg.workflow.evaluation and spec.num_files_eval > 0:
        paths_eval = stored.names(data, spec, "valid")
        layout_eval, _ = layout_for(spec, "valid", no_io, skip, listed=listed_sizes(tr.backend, tr.comm, paths_eval))
    tr.sizes = {"train": layout.file_size, "valid": layout_eval.file_size if layout_eval else None}
    rank_rec["bad_files"] = [paths[i] for i in np.flatnonzero(bad)]
    if bad.any():
        tr.echo(f"Skipping {int(bad.sum())} bad file(s) (--skip-bad-files), e.g. {rank_rec['bad_files'][0]}")
        layout = dataclasses.replace(layout, bad=bad)
    return _Splits(
        layout,
        paths,
        layout_eval,
        paths_eval,
        (cfg.output.metric.exclude_start_steps, cfg.output.metric.exclude_end_steps),
        # a SeedSequence made without entropy draws an int (numpy types it int | Sequence[int] | None)
        comm.bcast(int(np.random.SeedSequence().entropy % (2**63))),  # type: ignore[operator]
        1 if cfg.dlio_fast.compute_mode == "hybrid" else 0,
    )


def _check_steps(tr: Trainer, nsteps: int, st: planner.Settings) -> None:
    """Zero steps is a configuration error; else DLIO's "Max steps per epoch" line."""
    spec, comm = tr.spec, tr.comm
    if nsteps == 0:
        raise DlioError(
            f"0 training steps per epoch: {spec.num_files_train} files x {spec.num_samples_per_file} "
            f"samples on {comm.size} rank(s) do not fill one batch of {st.batch}; raise "
            "dataset.num_files_train (or --scale), or lower reader.batch_size"
        )
    tr.echo(
        f"Max steps per epoch: {nsteps} = {spec.num_samples_per_file} * "
        f"{spec.num_files_train} / {st.batch} / {comm.size} (samples per file * num files / "
        "batch size / comm size)"
    )


def _train_epoch(tr: Trainer, sp: _Splits, epoch: int) -> Tuple[Any, Optional[BaseException]]:
    """One training epoch with its step checkpoints. Returns (epoch record or None, failure)."""
    cfg = tr.cfg
    start_iso = iso()
    meminfo = dlio_host.meminfo()  # DLIO's per-epoch host_meminfo, taken at start_train
    cpu = EpochCpu.start(tr.saver)
    plan, st = tr.plan_split("train", sp.layout, epoch, sp.random_seed)
    if epoch == 1:
        _check_steps(tr, len(plan.steps), st)
    tr.echo(f"Starting epoch {epoch}: {len(plan.steps)} steps expected")
    points = checkpoint_schedule(cfg, epoch, len(plan.steps))
    res, blocks, saves, failure = train_blocks(tr, plan, st, sp.paths, epoch, points, sp.excl)
    if failure is not None:
        if res is None or not int(res["steps_done"]):
            return None, failure
        rec = epoch_record(epoch, res, plan, st, sp.excl, None, start_iso, blocks)
        rec.update({"checkpoints": saves, "complete": False, "end": iso()})
        if tr.saver is not None:
            rec["steps"] = async_save.step_arrays(res)
        return rec, failure
    cpu_s = cpu.benchmark_s(tr.saver, res, saves, cfg.reader.read_threads)
    rec = epoch_record(
        epoch,
        res,
        plan,
        st,
        sp.excl,
        cpu_accounts(cpu_s, res, sp.compute_mode, cfg.reader.read_threads, plan.steps["compute_ns"]),
        start_iso,
        blocks,
    )
    rec["checkpoints"] = saves
    if tr.saver is not None:  # the steps' timestamps split them by the writes' windows (dlio.report.interference)
        rec["steps"] = async_save.step_arrays(res)
    if meminfo is not None:
        rec["host_meminfo"] = meminfo
    _note_skipped(tr, rec, res, sp.paths)
    return rec, None


def _note_skipped(tr: Trainer, rec: Any, res: Any, paths: List[str]) -> None:
    """Samples left out because their file failed during the epoch (--skip-bad-files): counted in the
    epoch's record, the files added to the rank's bad files, and said."""
    skipped = int(res.get("skipped", 0))
    if not skipped:
        return
    bad = [paths[i] for i in res.get("bad_files", ())]
    rec["skipped_samples"] = skipped
    rec["bad_files_during"] = bad
    tr.echo(
        f"Skipped {skipped} sample(s) of {len(bad)} file(s) that failed during epoch {rec['epoch']} "
        f"(truncated, removed or replaced; --skip-bad-files), e.g. {bad[0] if bad else '?'}"
    )


def too_few_steps(n: int, excl: Tuple[int, int]) -> Optional[str]:
    """Why DLIO's figures of a block of n steps measure nothing, or None: the exclusions leave no step
    (then every step counts, the first one's start-up included), or DLIO's throughput formula, (n - 2)
    x batch / time, gives 0 below 3 steps."""
    if n <= sum(excl):
        return (
            f"{n} step(s) and output.metric.exclude_start_steps={excl[0]} / exclude_end_steps={excl[1]} leave "
            "none measured (every step is counted instead, its start-up included)"
        )
    if n <= 2:
        return f"{n} step(s): DLIO's throughput, (steps - 2) x batch / time, is 0 below 3 steps"
    return None


def _warn_few_steps(tr: Trainer, what: str, n: int, excl: Tuple[int, int]) -> None:
    why = too_few_steps(n, excl)
    if why:
        tr.echo(
            f"warning: {what}: {why}; run more steps: more files, a smaller batch, or fewer ranks "
            "(dataset.num_files_*, reader.batch_size*)"
        )


def _epoch_lines(tr: Trainer, epoch: int, rec: Any, batch: int, verbose: bool) -> None:
    if verbose and rec["train"]:
        print("\n".join(step_lines(tr.comm.rank, rec["train"], batch)), flush=True)
    _warn_few_steps(tr, f"epoch {epoch}", int(rec["steps_done"]), _exclusions(tr.cfg))
    if rec["train"]:
        b = rec["train"]
        # the figures of the config's DLIO version (2.0.0 and current differ in throughput)
        au, thr = metrics.dlio_epoch_figures(rec.get("blocks") or [b], batch, tr.cfg.dlio_fast.dialect)
        tr.echo(f"Ending epoch {epoch} - {rec['steps_done']} steps completed in {b['duration_s']:.2f} s")
        tr.echo(dlio_line(f"Epoch {epoch} - Block 1 [Training] Accelerator Utilization [AU] (%): {au:.4f}"))
        tr.echo(dlio_line(f"Epoch {epoch} - Block 1 [Training] Throughput (samples/second): {thr * tr.comm.size:.4f}"))
        tr.echo(
            f"Epoch {epoch} - Block 1 [Training] Computation time per step (second): {np.mean(b['compute']):.4f}"
            f"+/-{np.std(b['compute']):.4f} (set value: {tr.cfg.train.computation_time.to_yaml()})"
        )


def _evaluate(tr: Trainer, sp: _Splits, epoch: int, rec: Any) -> Optional[BaseException]:
    """Evaluation after an epoch, added to its record. Returns the failure that stopped it, if any."""
    cfg = tr.cfg
    rec["eval_start"] = iso()
    cpu0 = cpu_seconds()
    eres, eplan, est, failure = tr.run_split("valid", sp.layout_eval, sp.paths_eval, epoch, sp.random_seed)
    if failure is not None:
        rec["complete"] = False
        return failure
    rec["eval"] = metrics.eval_metrics(eres["step_times"], est.batch) if len(eplan.steps) else None
    if not len(eplan.steps):
        spec = tr.spec
        tr.echo(
            f"warning: evaluation after epoch {epoch}: 0 steps: {spec.num_files_eval} eval files x "
            f"{spec.num_samples_per_file} samples on {tr.comm.size} rank(s) do not fill one batch of "
            f"reader.batch_size_eval {est.batch}; nothing was measured (more eval files or a smaller batch)"
        )
    else:
        _warn_few_steps(tr, f"evaluation after epoch {epoch}", len(eplan.steps), _exclusions(cfg))
    rec["cpu_s"] += benchmark_cpu(cpu_seconds() - cpu0, eres, sp.compute_mode, cfg.reader.read_threads)
    rec["bytes"] += int(eres["bytes"])
    if rec["eval"]:
        tr.echo(dlio_line(f"Epoch {epoch} [Eval] Accelerator Utilization [AU] (%): {rec['eval']['au']:.4f}"))
        tr.echo(
            dlio_line(
                f"Epoch {epoch} [Eval] Throughput (samples/second): {rec['eval']['throughput'] * tr.comm.size:.4f}"
            )
        )
    return None


def _exclusions(cfg: Config) -> Tuple[int, int]:
    return cfg.output.metric.exclude_start_steps, cfg.output.metric.exclude_end_steps


def run_training(
    cfg: Config,
    comm: Comm,
    echo: Callable[..., None],
    progress: Any = None,
    tracer: Any = None,
    verbose: bool = False,
    data: Optional[stored.StoredDataset] = None,
    rank_rec: Optional[RankRecord] = None,
) -> Tuple[RankRecord, Optional[BaseException]]:
    """Train (and evaluate) on an existing dataset. Returns (this rank's record, failure).

    failure is None, Interrupted (Ctrl-C / SIGTERM) or DlioRunError (an I/O error); the record then
    holds the epochs measured so far, the interrupted one marked incomplete. rank_rec: the record to fill
    (its epochs appended as each ends, for a reader beside the run), a new one by default."""
    tr = Trainer(cfg, comm, echo, progress, tracer, data)
    rank_rec = new_rank_record(comm.rank) if rank_rec is None else rank_rec
    sp = _prepare(tr, rank_rec)
    if cfg.checkpoint.async_save and cfg.workflow.checkpoint:
        tr.saver = saver = async_save.AsyncSaver(cfg, comm, tr.backend, tr.echo, tracer)
        rank_rec, failure = _epochs(tr, sp, rank_rec, tracer, verbose)
        return rank_rec, saver.finish(rank_rec, failure)
    return _epochs(tr, sp, rank_rec, tracer, verbose)


def _epochs(
    tr: Trainer, sp: _Splits, rank_rec: RankRecord, tracer: Any, verbose: bool
) -> Tuple[RankRecord, Optional[BaseException]]:
    """The epochs of run_training (with their evaluations and checkpoints). Returns (record, failure)."""
    cfg, comm, progress = tr.cfg, tr.comm, tr.progress
    next_eval = cfg.evaluation.eval_after_epoch
    if progress is not None:  # the run line beside each phase: epoch k of N, the whole run's ETA
        progress.run_begin("run", "epoch", cfg.train.epochs)
    for epoch in range(1, cfg.train.epochs + 1):
        if progress is not None:
            progress.run_at(epoch)
        cache = tr.drop_cache(sp.paths)
        stopped = _epoch_barrier(comm)
        if stopped is not None:
            return rank_rec, stopped
        t_epoch = _core.now_ns()
        phase = tr.backend.phase(sp.paths, tr.engine)  # kernel counters, page-cache residency (dlio.system.counters)
        rec, failure = _train_epoch(tr, sp, epoch)
        if rec is not None:
            rec["cache"] = cache
            rec["counters"] = phase.end(
                rec["bytes"],
                rec["ops"],
                reader_threads=cfg.reader.read_threads,
                samples=rec["samples"],
                **phase_cpu(rec),
            )
            rank_rec["epochs"].append(rec)
        if failure is not None:
            return rank_rec, _as_failure(failure)
        _epoch_lines(tr, epoch, rec, tr.settings("train").batch, verbose)
        stopped = _epoch_barrier(comm)
        if stopped is not None:
            return rank_rec, stopped
        for point in checkpoint_schedule(cfg, epoch, rec["steps_planned"]):
            if point.mode == "epoch":
                try:
                    rec["checkpoints"].append(save_checkpoint(tr, cfg, comm, point))
                except (DlioRunError, Interrupted) as e:  # a failed (a full disk) or stopped save: the epochs stay
                    rec["end"] = iso()
                    return rank_rec, e
        if sp.layout_eval is not None and epoch >= next_eval:
            next_eval += cfg.evaluation.epochs_between_evals
            failure = _evaluate(tr, sp, epoch, rec)
            if failure is not None:
                rec["end"] = iso()
                return rank_rec, _as_failure(failure)
        rec["end"] = iso()
        if tracer is not None:
            tracer.span("epoch", t_epoch, _core.now_ns() - t_epoch, epoch=epoch)
    return rank_rec, None


def _epoch_barrier(comm: Comm) -> Optional[Interrupted]:
    """The ranks meet between epochs; Ctrl-C / SIGTERM ends the wait (another rank may be stopped or
    frozen). Returns the Interrupted, or None."""
    return interruptible(lambda stop: comm.barrier_or_stop(stop, poll_s=0.001))


def _as_failure(e: Any) -> BaseException:
    """An I/O error becomes a DlioRunError (the CLI names the rank when there are several); a stop, or a
    failure that says what happened already (a checkpoint save's DlioRunError, raised in a step when
    saves are asynchronous), stays as it is."""
    if isinstance(e, (Interrupted, DlioError)):
        return e
    return DlioRunError(getattr(e, "strerror", None) or str(e))
