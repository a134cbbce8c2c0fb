"""The Result of a run and of the microbenchmarks: their types, schema ids, and how they are built.

A run's Result is what `dlio-fast.json` holds (plus the computed metrics): the settings, the host,
the dataset and one RankRecord per rank, each with its EpochRecords and CheckpointRecords. io and
ceiling documents hold IoPoints. These are TypedDicts: the JSON files are these dicts as they are
(json.dumps/loads is the serialisation; dlio.report.source.load checks the schema id), and
renderers read the same keys that runs write.

DLIO's result files (dlio.report.dlio.files renders them from a RunResult) follow the DLIO version
of the config, ``settings.dialect`` ("2.0.0" or "current"), field by field:

- summary.json: DLIO's keys in DLIO's order. ``host_cpuinfo`` / ``host_meminfo``: DLIO's
  ``lines_to_dict`` of /proc/cpuinfo (the last CPU's fields, no ``processor``) and /proc/meminfo
  (``host.cpuinfo`` / ``host.meminfo``); ``host_processor_name``: ``platform.processor()``;
  ``host_memory_GB``: GiB; ``data_size_per_host_GB``: DLIO's ranks-per-host * samples per file *
  train files // ranks * record length, in GiB (what the host's ranks consume in one epoch, not the
  bytes on disk: those are ``dataset.bytes_on_disk`` in dlio-fast.json); ``potential_caching``: per
  host, 1 when that is below the host's memory. ``train_*`` by the dialect's formulas (2.0.0:
  throughput n * batch / T; current: (n - 2) * batch / (T - excluded steps), named in
  ``metrics.dlio_compat.throughput_formula`` of dlio-fast.json). A checkpoint-only run (current)
  has no ``train_*`` and ``epochs`` 0; the checkpoint fields exist in the current dialect only.
- per epoch stats: 2.0.0 writes ``per_epoch_stats.json`` (rank 0), current ``{rank}_per_epoch_stats.json``
  (each rank). An epoch's ``start`` is its training start; ``duration`` runs to the end of training
  *including* its checkpoints (DLIO's end_train is after them); ``end`` is that same time in 2.0.0,
  and after the evaluation in current (its end_epoch). Each ``block{i}`` has its own real start, end and
  duration; checkpoints are ``ckpt{i}`` (2.0.0: start, end, duration as a 2-decimal string) or
  ``save_ckpt{i}`` (current: duration in float seconds, throughput GB/s); current DLIO closes an empty
  block after a checkpoint on the epoch's last step, and so do we.
- {rank}_output.json: per epoch load/proc/compute lists, au/throughput per block (dialect formulas),
  ``host_meminfo`` at the epoch's start, and in current an ``end``.
- .hydra/config.yaml (``workload:`` and the resolved keys the workload file and the command line set,
  in the dialect's spellings, plus ``output.log_file``), .hydra/overrides.yaml (the command line as
  Hydra lists it), dlio.log (DLIO's run, epoch, block, checkpoint and [METRIC] lines).
"""

from __future__ import annotations

import os
import socket
from typing import Any, Dict, List, Optional, Sequence

try:  # Python >= 3.11
    from typing import NotRequired, TypedDict
except ImportError:  # pragma: no cover - older Pythons
    from typing_extensions import NotRequired, TypedDict

from dlio.base.limits import usable_cpus
from dlio.config import Config
from dlio.system import clock_offset, output
from dlio.system.host import usable_memory

# Schema ids, declared once. Bump the number when a field changes meaning.
RUN_SCHEMA = "dlio-fast.run/1"
IO_SCHEMA = "dlio-fast.io/1"
CEILING_SCHEMA = "dlio-fast.ceiling/1"
REPORT_SCHEMA = "dlio-fast.report/1"


class BlockFigures(TypedDict, total=False):
    """DLIO's figures of a block of training steps (dlio.report.metrics.block_metrics)."""

    steps: int
    start_ns: int  # the block on the monotonic clock: the first fetch to the end of the last step
    end_ns: int
    duration_s: float
    load: List[float]  # per step (s): waiting for the batch, the measured compute, and their sum
    compute: List[float]
    proc: List[float]
    au: float
    throughput: float
    exact: Optional[Dict[str, Any]]  # dlio-fast's figures over the block's one window; None with no steps


# "async" (an asynchronous save) is a Python keyword: the key is declared in the functional syntax
_AsyncFlag = TypedDict("_AsyncFlag", {"async": bool}, total=False)


class CheckpointRecord(_AsyncFlag, total=False):
    """One rank's save or load of one checkpoint (dlio.checkpoint.record, dlio.checkpoint.async_save)."""

    kind: str  # "save" or "load"
    rank: int
    comm_size: int
    epoch: int
    step: int
    folder: str
    files: List[Dict[str, Any]]
    nfiles: int
    bytes: int
    checkpoint_size_GB: float
    start: str
    end: str
    wall_start_ns: int
    wall_end_ns: int
    duration_s: float
    GiB_per_second: float
    dlio_throughput_GB_per_second: float
    block: int
    # the timed window's parts and how it was moved (dlio.checkpoint.record)
    source_rank: int
    prepare_s: float
    io_s: float
    fsync_s: float
    sync_s: float
    engine: str
    direct: bool
    threads: int
    qd: int
    transfer_size: int
    fsync: bool
    cache: str
    randomize_tensor: bool
    writer: Optional[str]
    # an asynchronous save (dlio.checkpoint.async_save): the blocking part, the write under training,
    # its interference with the training's steps (dlio.report.interference), a write that failed
    failed: str
    note: str
    durable_note: str
    state_bytes: int
    host_buffer_bytes: int
    staged: bool
    copy_chunks: int
    wait_s: float
    copy_s: float
    copy_GiB_per_second: float
    # checkpoint-only mode: the kernel's counters around the op and its verdict (dlio.report.verdict.annotate_run)
    counters: Dict[str, Any]
    verdict: Dict[str, Any]
    blocked_start_ns: int
    blocked_s: float
    snapshot_start_ns: int
    snapshot_end_ns: int
    write_start_ns: int
    write_end_ns: int
    write_s: float
    write_GiB_per_second: float
    snapshot_to_durable_s: Optional[float]
    interference: Dict[str, Any]


class EpochRecord(TypedDict, total=False):
    """One epoch of one rank: training (and evaluation) figures and what was read."""

    epoch: int
    start: str
    train_end: str
    end: Optional[str]
    eval_start: str
    duration_s: float
    train: Optional[BlockFigures]
    eval: Optional[Dict[str, Any]]
    blocks: Optional[List[BlockFigures]]
    lat: Dict[str, Any]  # dlio.system.stats histogram, read latency
    sample_lat: Dict[str, Any]
    bytes: int
    ops: int
    samples: int
    steps_planned: int
    steps_done: int
    plan_bytes: float
    cpu_s: float  # the benchmark's own CPU (readers and harness, not the compute spin), evaluation included
    cpu_accounts: Optional[Dict[str, float]]  # dlio.train.epoch_record.cpu_accounts: the split of the training's CPU
    complete: bool
    checkpoints: List[CheckpointRecord]
    host_meminfo: Dict[str, str]  # /proc/meminfo at the epoch's start (DLIO's per-epoch host_meminfo)
    skipped_samples: int  # --skip-bad-files: samples left out because their file failed during the epoch
    bad_files_during: List[str]  # and those files
    # checkpoint.async_save: the steps' timestamps (dlio.checkpoint.async_save.step_arrays), for interference
    steps: Dict[str, List[int]]


class RankRecord(TypedDict):
    rank: int
    hostname: str
    epochs: List[EpochRecord]
    # wall clock - monotonic clock (ns) on this rank: turns the blocks' start_ns/end_ns into the
    # wall-clock times of DLIO's per_epoch_stats
    wall_minus_mono_ns: NotRequired[int]
    # this rank's host (DLIO's per-host lists host_cpu_count / host_memory_GB in summary.json)
    host_cpu_count: NotRequired[int]
    host_memory_GiB: NotRequired[float]
    host_cpus_usable: NotRequired[float]
    host_memory_usable_bytes: NotRequired[int]
    bad_files: NotRequired[List[str]]
    checkpoints: NotRequired[List[CheckpointRecord]]  # checkpoint-only runs
    checkpoint_phase: NotRequired[Dict[str, str]]  # checkpoint-only runs: {"start", "end"} of the phase
    # a traced run of many ranks: this rank's wall clock's offset against rank 0's (add it to be on rank 0's
    # clock) and the round trip of that estimate (the true offset is within half of it: dlio.system.clock_offset)
    clock_offset_ns: NotRequired[int]
    clock_rtt_ns: NotRequired[int]


class RunResult(TypedDict):
    schema: str
    complete: bool
    reason: Optional[str]
    workload: Optional[str]
    config_file: Optional[str]
    scale: Optional[float]
    model: Optional[str]
    start: str
    end: str
    comm_size: int
    hostnames: List[str]
    host: Dict[str, Any]
    settings: Dict[str, Any]
    dataset: Dict[str, Any]
    environment: Dict[str, Any]
    ranks: List[RankRecord]
    checkpoint_plan: NotRequired[Dict[str, Any]]  # dlio.checkpoint.summary.plan_summary, when it checkpoints
    config_warnings: NotRequired[List[str]]  # the config's warnings (dlio.config.emulation), when there are any
    verdicts: NotRequired[List[Dict[str, Any]]]  # dlio.report.verdict.annotate_run: the run's verdicts


class IoPoint(TypedDict, total=False):
    """One point of `dlio-fast io` / `ceiling` (dlio.fsbench.points.run_point)."""

    rw: str
    bs: int
    engine: str
    qd: int
    qd_used: int
    threads: int
    direct: bool
    cache: str
    runtime_s: float
    ops: int
    bytes: int
    errors: int
    bw_bytes_s: float
    bw_MiB_s: float
    iops: float
    lat_ns: Dict[str, Any]
    cpu_s: float
    cpu_us_per_io: Optional[float]
    lat_hist: Dict[str, Any]
    engine_flags_used: int
    stopped: bool
    # a mixed point (rw, randrw): the share of reads (%) and a section per direction, fio's way
    rwmixread: int
    read: Dict[str, Any]
    write: Dict[str, Any]
    counters: Optional[Dict[str, Any]]  # dlio.system.counters: the kernel's view of the point
    verdict: Optional[Dict[str, Any]]  # dlio.report.verdict.classify of those counters
    interrupted: str  # the signal that stopped a point whose measured part is kept
    error: str  # an S3 point's first failed request


class MpiIoRank(TypedDict):
    """One rank's share of an MPI-IO point (dlio.fsbench.ior.run_point): its own window, bytes and latency."""

    rank: int
    host: str
    path: str
    part: int  # whose data it moved (another rank's with --reorder)
    ops: int
    bytes: int
    errors: int
    runtime_s: float
    bw_MiB_s: float
    t_open: float  # MPI_Wtime around the run
    t_close: float
    cpu_s: float
    lat_ns: Dict[str, Any]
    lat_hist: NotRequired[Dict[str, Any]]  # merged into the point's, left out of its per_rank list


class MpiIoPoint(IoPoint, total=False):
    """A point of `dlio-fast io --engine mpiio` (dlio.fsbench.ior.reduce_ranks): an IoPoint reduced over
    the ranks as IOR does, with the layout it ran in and every rank's own figures."""

    ranks: int
    layout: str  # fpp, segmented or strided
    mode: str  # collective or independent
    reorder: bool
    reorder_shift: int
    hints: Dict[str, str]  # the MPI-IO hints given (--mpiio-hint)
    bw_sum_of_ranks_MiB_s: float
    slowest_rank_s: float
    per_rank: List[MpiIoRank]


def new_rank_record(rank: int) -> RankRecord:
    return {
        "rank": rank,
        "hostname": socket.gethostname(),
        "epochs": [],
        "wall_minus_mono_ns": clock_offset.wall_minus_mono_ns(),
        "host_cpu_count": os.cpu_count() or 0,
        "host_memory_GiB": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
        "host_cpus_usable": usable_cpus(),  # its affinity capped by its control group's quota (a straggler's evidence)
        "host_memory_usable_bytes": usable_memory()[0],  # MemTotal or its control group's limit (the dataset rule)
    }


def build_result(
    cfg: Config,
    spec: Any,
    comm_size: int,
    rank_records: Sequence[RankRecord],
    start: str,
    end: str,
    complete: bool,
    reason: Optional[str],
    nbytes: int,
    host: Dict[str, Any],
    engine: str,
    direct: bool,
) -> RunResult:
    """The Result of a run from its config, dataset spec and the ranks' records."""
    return {
        "schema": RUN_SCHEMA,
        "complete": complete,
        "reason": reason,
        "workload": cfg.workload,
        "config_file": cfg.config_file,
        "scale": cfg.scale,
        "model": cfg.model.name,
        "start": start,
        "end": end,
        "comm_size": comm_size,
        "hostnames": [r["hostname"] for r in rank_records],
        "host": host,
        "settings": {
            "engine": engine,
            "direct": direct,
            "qd": cfg.dlio_fast.qd,
            "cache": cfg.dlio_fast.cache,
            "read_threads": cfg.reader.read_threads,
            "prefetch_size": cfg.reader.prefetch_size,
            "batch_size": cfg.reader.batch_size,
            "batch_size_eval": cfg.reader.batch_size_eval,
            "compute_mode": cfg.dlio_fast.compute_mode,
            "computation_time_mean_s": cfg.train.computation_time.mean(),
            "record_length_bytes": float(cfg.record_bytes()),
            "metric_au": cfg.metric.au,
            "exclude_start_steps": cfg.output.metric.exclude_start_steps,
            "exclude_end_steps": cfg.output.metric.exclude_end_steps,
            "dialect": cfg.dlio_fast.dialect,  # which DLIO's result files and formulas to follow
        },
        "dataset": {
            "folder": spec.data_folder,
            "format": spec.format,
            "num_files_train": spec.num_files_train,
            "num_files_eval": spec.num_files_eval,
            "num_samples_per_file": spec.num_samples_per_file,
            "bytes_on_disk": nbytes,
        },
        "environment": output.environment(),
        "ranks": list(rank_records),
    }


def new_io_doc(schema: str, **fields: Any) -> Dict[str, Any]:
    """The skeleton of an io or ceiling document: schema, environment, the given fields, incomplete."""
    return {"schema": schema, "environment": output.environment(), **fields, "complete": False}
