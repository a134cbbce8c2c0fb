"""When a run's blocks, epochs and checkpoints happened, as DLIO's timestamps: the times that
{rank}_per_epoch_stats.json (dlio.report.dlio.files) and dlio.log (dlio.report.dlio.log) both write."""

from __future__ import annotations

from datetime import datetime
from typing import List, Tuple

from dlio.report.result import EpochRecord, RankRecord, RunResult
from dlio.report.run_figures import dialect, train_blocks
from dlio.system.host import iso


def wall(ts: str) -> float:
    """A DLIO timestamp (local time) as seconds since the epoch."""
    return datetime.fromisoformat(ts).timestamp()


def secs(a: str, b: str) -> str:
    """DLIO's 2-decimal duration string between two of its timestamps."""
    return f"{wall(b) - wall(a):.2f}"


def block_times(rank: RankRecord, ep: EpochRecord) -> List[Tuple[str, str, str]]:
    """[(start, end, duration)] of each training block of an epoch, DLIO timestamps."""
    blocks = train_blocks(ep)
    off = rank.get("wall_minus_mono_ns")
    if off is None:  # an older record: place block 1 at the epoch's start
        off = int(wall(ep["start"]) * 1e9) - int(blocks[0].get("start_ns", 0)) if blocks else 0
    out = []
    for b in blocks:
        t0, t1 = (b.get("start_ns", 0) + off) / 1e9, (b.get("end_ns", 0) + off) / 1e9
        out.append((iso(t0), iso(t1), f"{t1 - t0:.2f}"))
    return out


def train_end(ep: EpochRecord) -> str:
    """DLIO's end_train: after the epoch's last block and its checkpoints (step and epoch ones)."""
    ends = [ep["train_end"]] + [c["end"] for c in ep.get("checkpoints") or [] if c.get("end")]
    return max(ends, key=wall)


def trailing_empty_block(result: RunResult, ep: EpochRecord) -> bool:
    """Current DLIO opens a new block after every step checkpoint, so a checkpoint on the epoch's
    last step leaves an empty block behind (its _train always closes the current block)."""
    cks = [c for c in ep.get("checkpoints") or [] if c.get("step", 0) <= ep.get("steps_done", 0)]
    return (
        dialect(result) != "2.0.0"
        and ep.get("complete", True)
        and bool(cks)
        and max(c.get("step", 0) for c in cks) == ep.get("steps_done")
        and ep.get("steps_done", 0) > 0
    )
