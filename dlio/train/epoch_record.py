"""An epoch's C results -> its record (dlio.report.result.EpochRecord): blocks merged, step metrics,
the benchmark's own CPU, DLIO's per-step lines."""

import resource
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from dlio import _core
from dlio.report import metrics
from dlio.report.result import BlockFigures, EpochRecord
from dlio.system import stats
from dlio.system.host import iso


def cpu_accounts(
    process_cpu_s: float,
    res: Dict[str, Any],
    compute_mode: int,
    read_threads: int,
    set_compute_ns: Optional[np.ndarray] = None,
) -> Dict[str, Any]:
    """How a C train result's CPU splits (seconds): the benchmark's own (the readers and the harness: what
    `benchmark CPU per sample` shows), the readers' part of it, the CPU of the benchmark's worker
    processes (S3: their reading and their spin; /proc/stat counts them as other processes), and the
    emulated accelerator's spin, which stands for a GPU and is not the client's CPU; with the time the
    accelerator computed and the steps' I/O wait (dlio.system.counters.Phase.end).

    The spin is what the trainer spun (spin mode: all of each step's compute; hybrid: the last
    COMPUTE_SPIN_NS of it), no more than the trainer thread's CPU time (the C core measures it: a
    preempted spin takes less CPU than its wall time). A result without the trainer's CPU came from
    worker processes (dlio.storage.s3.trainrun.S3Run): the spin ran there (taken as what it spun), and
    their reading CPU (threads' cpu_ns, their spin left out) is the benchmark's. set_compute_ns: the
    plan's compute per step (what the accelerator was set to compute; its first steps_done are done)."""
    st = done_steps(res)
    comp = np.asarray(st["compute_ns"], dtype=np.float64)
    wait = np.asarray(st["t_ready"], dtype=np.float64) - np.asarray(st["t_fetch"], dtype=np.float64)
    spun = comp if compute_mode == 0 else np.minimum(comp, float(_core.COMPUTE_SPIN_NS))
    threads_s = sum(t["cpu_ns"] for t in res["threads"]) / 1e9
    trainer = res.get("trainer_cpu_ns")
    if trainer is None:  # the worker spun (its CPU for it not measured apart) and read (threads_s)
        accel = spun.sum() / 1e9
        workers, readers, benchmark = threads_s + accel, threads_s, process_cpu_s + threads_s
    else:
        accel = min(spun.sum() / 1e9, trainer / 1e9, max(0.0, process_cpu_s))
        workers, benchmark = 0.0, max(0.0, process_cpu_s - accel)
        # no reader threads: the trainer read (its CPU is threads_s), and its CPU less the spin is the reading's
        readers = threads_s if read_threads > 0 else max(0.0, threads_s - accel)
    return {
        "benchmark_s": benchmark,
        "readers_s": readers,
        "workers_s": workers,
        "accelerator_s": accel,
        "compute_s": float(comp.sum()) / 1e9,
        "compute_set_s": (
            float(np.asarray(set_compute_ns[: len(comp)], dtype=np.float64).sum()) / 1e9
            if set_compute_ns is not None
            else float(comp.sum()) / 1e9
        ),
        "io_wait_s": float(np.maximum(wait, 0.0).sum()) / 1e9,
    }


def benchmark_cpu(process_cpu_s: float, res: Dict[str, Any], compute_mode: int, read_threads: int) -> float:
    """CPU seconds the benchmark itself spent (the readers and the harness, not the emulated
    accelerator's spin): cpu_accounts' benchmark_s."""
    return cpu_accounts(process_cpu_s, res, compute_mode, read_threads)["benchmark_s"]


def phase_cpu(rec: EpochRecord) -> Dict[str, Any]:
    """The CPU arguments of dlio.system.counters.Phase.end for an epoch record: the readers', the workers',
    the emulated accelerator's compute, spin and the steps' I/O wait."""
    a = rec.get("cpu_accounts") or {}
    return {
        "reader_cpu_s": a.get("readers_s", rec.get("cpu_s", 0.0)),
        "worker_cpu_s": a.get("workers_s", 0.0),
        "compute_s": a.get("compute_s", 0.0),
        "compute_set_s": a.get("compute_set_s", 0.0),
        "compute_cpu_s": a.get("accelerator_s", 0.0),
        "io_wait_s": a.get("io_wait_s"),
    }


def merge_results(results: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The C results of an epoch's blocks as one (step arrays joined, histograms and counts added)."""
    if len(results) == 1:
        return results[0]
    out = {
        "steps_done": sum(int(r["steps_done"]) for r in results),
        "bytes": sum(int(r["bytes"]) for r in results),
        "ops": sum(int(r["ops"]) for r in results),
        "stopped": any(r["stopped"] for r in results),
        "lat": stats.merge([r["lat"] for r in results]),
        "sample_lat": stats.merge([r["sample_lat"] for r in results]),
        "threads": [t for r in results for t in r["threads"]],
        "skipped": sum(int(r.get("skipped", 0)) for r in results),
        "bad_files": sorted({i for r in results for i in r.get("bad_files", ())}),
        "trainer_cpu_ns": (
            sum(int(r["trainer_cpu_ns"]) for r in results) if all("trainer_cpu_ns" in r for r in results) else None
        ),
        "step_times": {
            k: np.concatenate([r["step_times"][k][: int(r["steps_done"])] for r in results])
            for k in results[0]["step_times"]
        },
    }
    return out


def done_steps(res: Dict[str, Any]) -> Dict[str, Any]:
    done = int(res["steps_done"])
    return {k: v[:done] for k, v in res["step_times"].items()}


def epoch_record(
    epoch: int,
    res: Dict[str, Any],
    plan: Any,
    settings: Any,
    excl: Tuple[int, int],
    cpu: Optional[Dict[str, float]],
    start_iso: str,
    blocks: Optional[Sequence[BlockFigures]] = None,
) -> EpochRecord:
    """The record of one epoch from its merged C result (blocks: the metrics of each complete block;
    cpu: cpu_accounts(), or None for an epoch stopped early)."""
    if blocks:
        block = metrics.combine_blocks(blocks, settings.batch)
    else:  # an interrupted epoch: the steps done
        block = metrics.block_metrics(done_steps(res), settings.batch, *excl)
    return {
        "epoch": epoch,
        "start": start_iso,
        "train_end": iso(),
        "end": None,
        "duration_s": block.get("duration_s", 0.0),
        "train": block if block["steps"] else None,
        "eval": None,
        "blocks": [b for b in (blocks or []) if b["steps"]] if blocks and len(blocks) > 1 else None,
        "lat": stats.to_json(res["lat"]),
        "sample_lat": stats.to_json(res["sample_lat"]),
        "bytes": int(res["bytes"]),
        "ops": int(res["ops"]),
        "samples": int(res["steps_done"]) * settings.batch,
        "steps_planned": len(plan.steps),
        "steps_done": int(res["steps_done"]),
        "plan_bytes": plan.nominal_bytes,
        "cpu_s": cpu["benchmark_s"] if cpu else 0.0,  # the readers and the harness, not the spin
        "cpu_accounts": cpu,
        "complete": not res["stopped"],
    }


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass
class EpochCpu:
    """The benchmark's CPU over an epoch, the checkpoints' left out. A synchronous save's window is left
    out of the process's CPU; asynchronous saves write from their own threads during the steps (the
    process's CPU counts them, and their blocked time is mostly waiting), so the benchmark's is then its own
    threads': this one (the harness, less the snapshots), the C trainer's and the C readers' (cpu_accounts
    takes the spin off)."""

    process0: float
    thread0: float
    snapshot0: float

    @classmethod
    def start(cls, saver: Any) -> "EpochCpu":
        return cls(cpu_seconds(), time.thread_time(), saver.snapshot_cpu_s if saver is not None else 0.0)

    def benchmark_s(self, saver: Any, res: Dict[str, Any], saves: Sequence[Dict[str, Any]], read_threads: int) -> float:
        if saver is None:
            return cpu_seconds() - self.process0 - sum(c["duration_s"] for c in saves)
        cpu = time.thread_time() - self.thread0 - (saver.snapshot_cpu_s - self.snapshot0)
        if res.get("trainer_cpu_ns") is not None:  # else S3 workers: cpu_accounts adds their reading CPU
            cpu += res["trainer_cpu_ns"] / 1e9
            if read_threads > 0:  # without reader threads the trainer read: counted above
                cpu += sum(t["cpu_ns"] for t in res["threads"]) / 1e9
        return float(cpu)


def step_lines(rank: int, block: BlockFigures, batch: int) -> Iterator[str]:
    """DLIO's per-step INFO lines for one block (printed with --verbose)."""
    for i, (ld, pr) in enumerate(zip(block["load"], block["proc"]), start=1):
        yield f"Rank {rank} step {i}: loaded {batch} samples in {ld:.6f} s"
        yield f"Rank {rank} step {i}: processed {batch} samples in {pr:.6f} s"
