"""A run's figures over all its ranks, shared by every renderer of a Result: DLIO's files
(dlio.report.dlio), dlio-fast's own figures (dlio.report.exact) and the MLPerf checks (dlio.mlperf).

Per epoch: DLIO's AU and samples/s by the dialect's formulas and the exact ones, reduced over ranks
(AU averaged, samples/s summed: docs/dlio-facts.md §3.3); which epochs, blocks and checkpoint records
a run has; the DLIO dialect it follows. Pure functions of the Result (or of a dlio-fast.json
document, which holds the same ranks).
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np

from dlio.report import metrics
from dlio.report.result import BlockFigures, CheckpointRecord, EpochRecord, RankRecord, RunResult


def dialect(result: RunResult) -> str:
    """The DLIO version whose files and formulas a result follows ("2.0.0" or "current")."""
    return (result.get("settings") or {}).get("dialect") or "current"


def trained(result: RunResult) -> bool:
    """Whether any rank ran a training epoch (a checkpoint-only run has none)."""
    return any(ep.get("train") for r in result.get("ranks", []) for ep in r.get("epochs", []))


def train_blocks(ep: EpochRecord) -> List[BlockFigures]:
    """The training blocks of an epoch record (step checkpoints split an epoch into blocks)."""
    train = ep.get("train")
    return ep.get("blocks") or ([train] if train else [])


def checkpoint_records(result: RunResult) -> List[CheckpointRecord]:
    """Every checkpoint save/load record of the run, all ranks (training and checkpoint-only)."""
    recs = [c for r in result["ranks"] for ep in r["epochs"] for c in ep.get("checkpoints") or []]
    return recs + [c for r in result["ranks"] for c in r.get("checkpoints") or []]


def _epochs(result: RunResult) -> List[int]:
    """Epoch numbers present on every rank (an interrupted run may have fewer on some)."""
    per_rank = [[e["epoch"] for e in r["epochs"] if e.get("train")] for r in result["ranks"]]
    if not per_rank:
        return []
    common = set(per_rank[0]).intersection(*per_rank[1:]) if len(per_rank) > 1 else set(per_rank[0])
    return sorted(common)


def _epoch(rank: RankRecord, e: int) -> EpochRecord:
    """The rank's epoch e (one of _epochs: every rank has it, trained)."""
    return next(rec for rec in rank["epochs"] if rec["epoch"] == e)


def _train(ep: EpochRecord) -> BlockFigures:
    train = ep["train"]
    assert train is not None, "one of _epochs: trained"
    return train


def _rank_epoch_figures(result: RunResult, ep: EpochRecord) -> Tuple[float, float]:
    """(AU, samples/s) of one rank's epoch by the dialect's formulas."""
    return metrics.dlio_epoch_figures(train_blocks(ep), result["settings"]["batch_size"], dialect(result))


def train_figures(
    result: RunResult,
) -> Tuple[List[float], List[float], List[float], List[float], List[float]]:
    """Per-epoch figures reduced over ranks: DLIO's AU and samples/s, then the exact AU, samples/s and
    bytes/s (all ranks' bytes over the slowest rank's window)."""
    au, thr, exact_au, exact_sps, exact_bps = [], [], [], [], []
    for e in _epochs(result):
        eps = [_epoch(r, e) for r in result["ranks"]]
        recs = [metrics.exact_of(_train(ep)) for ep in eps]
        figs = [_rank_epoch_figures(result, ep) for ep in eps]
        au.append(float(np.mean([f[0] for f in figs])))
        thr.append(float(np.sum([f[1] for f in figs])))
        exact_au.append(float(np.mean([x["au_percentage"] for x in recs])))
        exact_sps.append(float(np.sum([x["samples_per_second"] for x in recs])))
        nbytes = sum(x["bytes"] for x in recs)
        window = max(x["window_s"] for x in recs)
        exact_bps.append(nbytes / window if window > 0 else 0.0)
    return au, thr, exact_au, exact_sps, exact_bps


def eval_figures(result: RunResult) -> Tuple[List[float], List[float]]:
    """Per-epoch evaluation AU (averaged over ranks) and samples/s (summed), epochs every rank evaluated."""
    au, thr = [], []
    for e in _epochs(result):
        recs = [x for r in result["ranks"] if (x := _epoch(r, e).get("eval")) is not None]
        if len(recs) < len(result["ranks"]):
            continue
        au.append(float(np.mean([b["au"] for b in recs])))
        thr.append(float(np.sum([b["throughput"] for b in recs])))
    return au, thr
