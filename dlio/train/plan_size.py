"""What a rank's plan of one epoch costs in memory, known before it is built.

The planner (dlio.train.planner) builds a rank's plan for the samples the rank reads in the steps it
runs, never for the dataset's sample count (DLIO 2.0.0's dlrm.yaml: one file of 4,195,198,976 samples,
of which 100 steps of batch 2048 read 204,800). So what must fit in memory is the steps x batch samples
of a rank and their reads, and that is what is checked here, in one line naming the steps, not the
dataset size, when it does not fit.
"""

from __future__ import annotations

from dlio.config import Config
from dlio.dataset.formats import get_format
from dlio.dataset.spec import DatasetSpec
from dlio.system.memcheck import check_fits
from dlio.train.planner import MAX_TRANSFER, TF_BUFFER

# Peak bytes of planning per sample and per read (bench/planning.py measures 90 B per one-read sample
# and 266 B per four-read sample with tracemalloc: the order's temporaries, the read arrays, the plan)
PLAN_BYTES_PER_SAMPLE = 48
PLAN_BYTES_PER_READ = 64


def reads_per_sample(spec: DatasetSpec) -> int:
    """Reads the planner makes per sample: its bytes (the whole file for whole-file formats) in
    pieces of at most MAX_TRANSFER (tfrecord: TF_BUFFER, TFRecordDataset's buffered reads)."""
    sample = float(spec.record_length_bytes) + 3 * float(spec.record_length_bytes_stdev or 0)
    if get_format(spec.format).WHOLE_FILE:
        sample *= spec.num_samples_per_file
    piece = TF_BUFFER if spec.format == "tfrecord" else MAX_TRANSFER
    return max(1, int(-(-sample // piece)))


def plan_bytes(samples: int, spec: DatasetSpec, io: bool = True) -> float:
    """Peak memory of planning `samples` samples of spec's dataset for one rank (io False: a synthetic
    loader, whose plan has the samples and no reads)."""
    return float(samples) * (PLAN_BYTES_PER_SAMPLE + (PLAN_BYTES_PER_READ * reads_per_sample(spec) if io else 0))


def check_plan_fits(cfg: Config, spec: DatasetSpec, comm_size: int) -> None:
    """Refuse (DlioError, one line) a run whose per-rank plan of one epoch cannot fit in memory."""
    if not cfg.workflow.train:
        return
    steps, batch = cfg.steps_per_epoch(comm_size), cfg.reader.batch_size
    samples = steps * batch
    what = f"{steps:,} steps of batch {batch}"
    files = f"dataset.num_files_train {spec.num_files_train}"
    if cfg.workflow.evaluation and spec.num_files_eval:
        eval_steps, eval_batch = cfg.eval_steps_per_epoch(comm_size), cfg.reader.batch_size_eval
        samples += eval_steps * eval_batch
        what += f" and {eval_steps:,} evaluation steps of batch {eval_batch}"
        files += f" (dataset.num_files_eval {spec.num_files_eval})"
    check_fits(
        plan_bytes(samples, spec, io=spec.format != "synthetic" and cfg.reader.data_loader != "synthetic"),
        f"the plan of each rank: {samples:,} samples an epoch ({what}; {files} x dataset.num_samples_per_file "
        f"{spec.num_samples_per_file} over {comm_size} rank(s))",
        "set train.total_training_steps (the steps a rank runs), or use fewer files or samples per file",
    )
