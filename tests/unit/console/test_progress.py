"""dlio.progress without a terminal: figures measured from the phase start, status lines, live CSV."""

import csv
import io
import time

import numpy as np

from dlio.progress import Progress, fmt_eta


class FakeRun:
    """What the C run's progress() returns: (ops, bytes, steps) so far."""

    def __init__(self):
        self.ops = self.bytes = self.steps = 0

    def progress(self):
        return self.ops, self.bytes, self.steps


class FakePlan:
    def __init__(self, n, batch, compute_s):
        self.steps = np.zeros(n, dtype=[("nsamples", "i8"), ("compute_ns", "i8")])
        self.steps["nsamples"] = batch
        self.steps["compute_ns"] = int(compute_s * 1e9)


def test_fmt_eta():
    assert [fmt_eta(x) for x in (None, 5, 185, 7620)] == ["?", "5s", "3m05s", "2h07m"]


def test_training_rates_from_phase_start_and_last_state_drawn(tmp_path):
    """The first report comes 0.2 s after the phase started: the rates still divide by the whole
    0.2 s (the old display started its clock at the first report: AU 179 %, MiB/s in the millions)."""
    out, live = io.StringIO(), tmp_path / "live.csv"
    p = Progress(enabled=False, stream=out, status_interval=0.01, live_csv=str(live))
    plan, run = FakePlan(4, batch=10, compute_s=0.05), FakeRun()
    t0 = time.monotonic()
    p.training("train", 1, run, plan)  # execute's tick before the run starts
    time.sleep(0.2)
    run.ops, run.bytes, run.steps = 8, 2 * 2**20, 2
    p.training("train", 1, run, plan)
    dt = time.monotonic() - t0
    last = p.last
    assert 2 * 2**20 / 2**20 / dt <= last.mib_s <= 2 / 0.2 + 1e-9
    assert 100 * 0.1 / dt <= last.au_pct <= 100 * 0.1 / 0.2 + 1e-9  # 2 steps x 50 ms of compute
    assert 20 / dt <= last.samples_s <= 20 / 0.2 + 1e-9
    assert last.eta_s is not None and 0.15 <= last.eta_s <= dt + 0.01  # half done: as long again
    lines = [line for line in out.getvalue().splitlines() if line.startswith("[status] epoch 1 train: 2/4 steps")]
    assert lines and "AU" in lines[-1] and "ETA" in lines[-1]
    run.steps, run.bytes = 4, 4 * 2**20
    p.training("train", 1, run, plan)  # execute's tick after the run: the phase ends at 4/4
    assert p.key is None and p.last.done == 4
    rows = list(csv.DictReader(open(live)))
    assert rows[-1]["done"] == "4" and rows[-1]["total"] == "4" and rows[-1]["phase"] == "train"
    assert float(rows[-1]["percent"]) == 100.0


def test_blocks_of_one_epoch_add_up():
    """Step checkpoints split an epoch into runs: the display counts the epoch's steps, not the block's."""
    p = Progress(enabled=False, stream=io.StringIO(), status_interval=0)
    plan = FakePlan(6, batch=1, compute_s=0.0)
    a, b = FakeRun(), FakeRun()
    a.steps, a.bytes = 3, 300
    p.training("train", 1, a, plan)
    b.steps, b.bytes = 1, 100
    p.training("train", 1, b, plan)
    assert p.last.done == 4


def test_status_interval_zero_prints_nothing():
    out = io.StringIO()
    p = Progress(enabled=False, stream=out, status_interval=0)
    p.generation(0, 0, 100, 2)
    p.generation(50, 1, 100, 2)
    p.done()
    assert out.getvalue() == ""


def test_generation_status_line():
    out = io.StringIO()
    p = Progress(enabled=False, stream=out, status_interval=0.01)
    p.generation(0, 0, 4 * 2**20, 4)
    time.sleep(0.05)
    p.generation(2 * 2**20, 2, 4 * 2**20, 4)
    p.done()
    line = out.getvalue().splitlines()[-1]
    assert line.startswith("[status] generating: 2/4 files") and "MiB/s" in line and "ETA" in line
    assert p.last.mib_s <= 2 / 0.05
