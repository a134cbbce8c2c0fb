"""The training family's nothing_measured on records built by hand: steps that read no byte of a dataset
the plan reads (every sample skipped as a bad file) measured the compute alone; steps of a loader that
reads nothing by design (no planned bytes) and steps that read something are results."""

import types

from dlio.train.family import TrainRun


def _family(train=True, checkpoint_only=False):
    cfg = types.SimpleNamespace(workflow=types.SimpleNamespace(train=train), is_checkpoint_only=lambda: checkpoint_only)
    return types.SimpleNamespace(cfg=cfg)


def _rank(*epochs):
    return {"epochs": list(epochs), "checkpoints": []}


def _epoch(steps, nbytes, planned, skipped=0):
    return {"steps_done": steps, "bytes": nbytes, "plan_bytes": planned, "skipped_samples": skipped}


def why(*ranks):
    return TrainRun.nothing_measured(_family(), list(ranks))


def test_steps_that_read_no_byte_measured_nothing():
    got = why(_rank(_epoch(4, 0, 8192, skipped=8)), _rank(_epoch(4, 0, 8192, skipped=8)))
    assert got == "the training steps read no byte of the dataset (16 samples skipped as bad files)"


def test_one_byte_read_on_any_rank_is_a_result():
    assert why(_rank(_epoch(4, 0, 8192, skipped=8)), _rank(_epoch(4, 4096, 8192, skipped=4))) is None


def test_a_loader_that_reads_nothing_by_design_is_a_result():
    assert why(_rank(_epoch(4, 0, 0))) is None  # DLIO's synthetic data_loader: no planned bytes


def test_no_step_at_all():
    assert "no training step completed" in why(_rank(_epoch(0, 0, 8192)))
