"""When checkpoints happen in training (DLIO main.py, docs/dlio-facts.md §3.1 / §3.8): the epoch's
checkpoints as ``CkptPoint``s, with their folders and DLIO's per_epoch_stats keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from dlio.checkpoint.layout import step_folder
from dlio.config import Config


@dataclass(frozen=True)
class CkptPoint:
    """A checkpoint in a training epoch: save after ``after_step`` steps of the epoch (the epoch's
    step count for an epoch-mode checkpoint, taken after the epoch's closing barrier) into
    ``global_epoch{epoch}_step{step}``; DLIO's per_epoch_stats key is ``save_ckpt{block}``."""

    epoch: int
    after_step: int
    step: int
    block: int
    mode: str  # "epoch" or "step"

    @property
    def folder(self) -> str:
        return step_folder(self.epoch, self.step)

    @property
    def stats_key(self) -> str:
        return f"save_ckpt{self.block}"


def checkpoint_schedule(cfg: Config, epoch: int, steps_in_epoch: int) -> List[CkptPoint]:
    """The checkpoints DLIO takes in training epoch ``epoch`` (1-based) of ``steps_in_epoch`` steps.

    Step mode (``steps_between_checkpoints >= 0``): after every step s with s % k == 0 (k > 0; DLIO's
    counter restarts every epoch and k = 0 never fires), folder step = s, block = i-th checkpoint.
    Epoch mode: epochs ``checkpoint_after_epoch + j * epochs_between_checkpoints`` (j >= 0; an
    ``after`` of 0 never fires, as in DLIO), after the last step, folder step = ``steps + 1``
    (DLIO passes its step counter, already advanced past the last step), block = 1 (+ the step
    checkpoints before it, which cannot happen in epoch mode)."""
    c = cfg.checkpoint
    if not cfg.workflow.checkpoint or not cfg.workflow.train:
        return []
    out: List[CkptPoint] = []
    k = c.steps_between_checkpoints
    if k >= 0:
        if k > 0:
            for i, s in enumerate(range(k, steps_in_epoch + 1, k), start=1):
                out.append(CkptPoint(epoch, s, s, i, "step"))
        return out
    after, between = c.checkpoint_after_epoch, c.epochs_between_checkpoints
    if after >= 1 and epoch >= after and (epoch - after) % between == 0:
        out.append(CkptPoint(epoch, steps_in_epoch, steps_in_epoch + 1, 1, "epoch"))
    return out
