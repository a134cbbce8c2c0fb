"""What a checkpoint plan costs, in words: DLIO's rank-0 size lines, and the run's checkpoint summary
(files, bytes, ranks needed, memory per node) as a dict for the results and as --dry-run's lines."""

from __future__ import annotations

from typing import Any, Dict, List

from dlio.base.units import GiB, fmt_bytes
from dlio.checkpoint.layout import CheckpointPlan, dlio_model_GiB, model_of, plan_checkpoint
from dlio.config import Config


def size_lines(plan: CheckpointPlan, cfg: Config) -> List[str]:
    """DLIO's rank-0 init lines (``Model size: ... GB`` etc.), its numbers, plus the exact total."""
    sub = " (subset)" if cfg.checkpoint.mode == "subset" else ""
    out = []
    if plan.num_parameters:
        out.append(f"Total number of parameters in the model: {plan.num_parameters}")
    model_gib = dlio_model_GiB(model_of(cfg), plan.model_bytes)
    kinds = {f.kind for f in plan.files}
    if kinds & {"model_state", "layers", "layer"} or model_gib:
        out.append(f"Model size: {model_gib:.6f} GB {sub}")
    if "optimizer" in kinds or plan.optimizer_bytes:
        out.append(f"Optimizer state size: {plan.optimizer_bytes / GiB:.6f} GB {sub}")
    out.append(f"Total checkpoint size: {plan.dlio_size_GiB:.6f} GB {sub}")
    out.append(
        f"Checkpoint on storage: {fmt_bytes(plan.total_bytes)} ({plan.total_bytes:,} bytes) in "
        f"{plan.total_files} files written by {len(plan.writers)} of {plan.comm_size} ranks"
    )
    return out


def plan_summary(cfg: Config, comm_size: int, ranks_per_node: int) -> Dict[str, Any]:
    """What one checkpoint of the run costs: files and bytes per rank and in total, the ranks the
    model's parallelism needs, and the memory per node (DLIO holds each rank's state in memory; a
    buffered write also passes through the page cache). For --dry-run and the run's results."""
    plan = plan_checkpoint(cfg, 0, comm_size)
    per_rank = list(plan.per_rank_bytes)
    node = sorted(per_rank, reverse=True)[: max(1, ranks_per_node)]
    return {
        "ranks": comm_size,
        "ranks_needed": plan.layout.mp,
        "writers": len(plan.writers),
        "files_total": plan.total_files,
        "bytes_total": plan.total_bytes,
        "bytes_per_rank_max": max(per_rank),
        "bytes_per_rank_min": min(per_rank),
        "files_rank0": len(plan.files),
        "dlio_size_GiB": plan.dlio_size_GiB,
        "ranks_per_node": ranks_per_node,
        "state_bytes_per_node": sum(node),
        "writes": int(cfg.checkpoint.num_checkpoints_write),
        "reads": int(cfg.checkpoint.num_checkpoints_read),
    }


def summary_lines(s: Dict[str, Any]) -> List[str]:
    """The --dry-run lines of plan_summary, sizes in binary units (dlio.base.units.fmt_bytes)."""

    def both(n: float) -> str:
        return fmt_bytes(n)

    return [
        f"checkpoint          {both(s['bytes_total'])} in {s['files_total']} files, written by {s['writers']} "
        f"of {s['ranks']} ranks; {s['writes']} writes, {s['reads']} reads",
        f"per rank            {both(s['bytes_per_rank_max'])} at most"
        + (f", {both(s['bytes_per_rank_min'])} at least" if s["bytes_per_rank_min"] != s["bytes_per_rank_max"] else "")
        + f"; rank 0 writes {s['files_rank0']} files",
        f"ranks needed        >= {s['ranks_needed']} (tensor x pipeline parallelism)"
        + ("" if s["ranks"] >= s["ranks_needed"] else f": this run has {s['ranks']}, run under mpiexec -n N"),
        f"memory per node     {both(s['state_bytes_per_node'])} for {s['ranks_per_node']} rank(s): the model "
        "and optimizer state DLIO holds in memory; a buffered save also passes it through the page cache",
    ]
