"""The Result of a run and of the microbenchmarks: their types, schema ids, and how they are built.

A run's Result is what `dlio-fast.json` holds (plus the computed metrics): the settings, the host,
the dataset and one RankRecord per rank, each with its EpochRecords and CheckpointRecords. io and
ceiling documents hold IoPoints. These are TypedDicts: the JSON files are these dicts as they are
(json.dumps/loads is the serialisation; dlio.report.compare.load checks the schema id), and
renderers read the same keys that runs write.
"""

from __future__ import annotations

import socket
from typing import Any, Dict, List, Optional, Sequence

try:  # Python >= 3.11
    from typing import NotRequired, TypedDict
except ImportError:  # pragma: no cover - older Pythons
    from typing_extensions import NotRequired, TypedDict  # type: ignore[assignment]

from dlio import output

# Schema ids, declared once. Bump the number when a field changes meaning.
RUN_SCHEMA = "dlio-fast.run/1"
IO_SCHEMA = "dlio-fast.io/1"
CEILING_SCHEMA = "dlio-fast.ceiling/1"
REPORT_SCHEMA = "dlio-fast.report/1"
SCHEMAS = (RUN_SCHEMA, IO_SCHEMA, CEILING_SCHEMA, REPORT_SCHEMA)


class BlockFigures(TypedDict, total=False):
    """DLIO's figures of a block of training steps (dlio.report.metrics.block_metrics)."""

    steps: int
    duration_s: float
    au: float
    throughput: float


class CheckpointRecord(TypedDict, total=False):
    """One rank's save or load of one checkpoint (dlio.checkpoint.io)."""

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
    lat: Dict[str, Any]  # dlio.stats histogram, read latency
    sample_lat: Dict[str, Any]
    bytes: int
    ops: int
    samples: int
    steps_planned: int
    steps_done: int
    plan_bytes: float
    cpu_s: float
    complete: bool
    checkpoints: List[CheckpointRecord]


class RankRecord(TypedDict):
    rank: int
    hostname: str
    epochs: List[EpochRecord]
    bad_files: NotRequired[List[str]]
    checkpoints: NotRequired[List[CheckpointRecord]]  # checkpoint-only runs


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
    checkpoint_plan: NotRequired[Dict[str, Any]]  # dlio.checkpoint.layout.plan_summary, when it checkpoints
    config_warnings: NotRequired[List[str]]  # the config's warnings (dlio.config.emulation), when there are any


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


def new_rank_record(rank: int) -> RankRecord:
    return {"rank": rank, "hostname": socket.gethostname(), "epochs": []}


def build_result(
    cfg: Any,
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
