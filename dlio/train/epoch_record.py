"""An epoch's C results -> its record (dlio.report.result.EpochRecord): blocks merged, step metrics,
the benchmark's own CPU, DLIO's per-step lines."""

import resource

import numpy as np

from dlio import _core, stats
from dlio.host import iso
from dlio.report import metrics


def benchmark_cpu(process_cpu_s, res, compute_mode, read_threads):
    """CPU seconds the benchmark itself spent reading (not the emulated accelerator's spin).

    With reader threads: their thread CPU time, measured by the C core (CLOCK_THREAD_CPUTIME_ID).
    Without (read_threads 0, the trainer reads): the process CPU minus the compute spun (spin mode
    spins all of it, hybrid the last 100 us of each step)."""
    if read_threads > 0:
        return sum(t["cpu_ns"] for t in res["threads"]) / 1e9
    done = int(res["steps_done"])
    comp = np.asarray(res["step_times"]["compute_ns"][:done], dtype=np.float64)
    spun = comp if compute_mode == 0 else np.minimum(comp, float(_core.COMPUTE_SPIN_NS))
    return max(0.0, process_cpu_s - spun.sum() / 1e9)


def merge_results(results):
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
        "step_times": {
            k: np.concatenate([r["step_times"][k][: int(r["steps_done"])] for r in results])
            for k in results[0]["step_times"]
        },
    }
    return out


def done_steps(res):
    done = int(res["steps_done"])
    return {k: v[:done] for k, v in res["step_times"].items()}


def epoch_record(epoch, res, plan, settings, excl, cpu_s, start_iso, blocks=None):
    """The record of one epoch from its merged C result (blocks: the metrics of each complete block)."""
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
        "cpu_s": cpu_s,
        "complete": not res["stopped"],
    }


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def step_lines(rank, block, batch):
    """DLIO's per-step INFO lines for one block (printed with --verbose)."""
    for i, (ld, pr) in enumerate(zip(block["load"], block["proc"]), start=1):
        yield f"Rank {rank} step {i}: loaded {batch} samples in {ld:.6f} s"
        yield f"Rank {rank} step {i}: processed {batch} samples in {pr:.6f} s"
