"""dlio.progress without a terminal: figures measured from the phase start, status lines, live CSV."""

import csv
import io
import re
import time
import types

import numpy as np
import pytest

from dlio.progress import Progress, fmt_eta, pause, phase_of
from dlio.progress.figures import BAR_MIN, fit


class FakeRun:
    """What the C run's progress() returns: (ops, bytes, steps) so far."""

    def __init__(self):
        self.ops = self.bytes = self.steps = 0

    def progress(self):
        return self.ops, self.bytes, self.steps

    def started_ns(self):
        return 0  # not known: the display's clock is the phase's

    def last_end_ns(self):
        return 0  # not known: the final row's window ends at its tick


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
    assert last.eta_s is None  # the first completion: no rate to go by yet ('?'), see EtaClock
    lines = [line for line in out.getvalue().splitlines() if line.startswith("[status] epoch 1 train: 2/4 steps")]
    assert lines and "AU" in lines[-1] and "ETA" in lines[-1]
    run.steps, run.bytes = 4, 4 * 2**20
    p.training("train", 1, run, plan)  # execute's tick after the run: the phase ends at 4/4
    assert p.key is None and p.last.done == 4
    rows = list(csv.DictReader(open(live)))
    assert rows[-1]["done"] == "4" and rows[-1]["total"] == "4" and rows[-1]["phase"] == "train"
    assert float(rows[-1]["percent"]) == 100.0


def test_final_row_ends_at_the_last_steps_end():
    """The epoch's final row is drawn at a tick after the last step ended: its AU is over the window the exact
    figures use (first fetch to the last step's end), not up to the late tick (84.8 % live against 85.9 %
    recorded on S3)."""
    p = Progress(enabled=False, stream=io.StringIO(), status_interval=0)
    plan, run = FakePlan(4, batch=10, compute_s=0.05), FakeRun()
    t = time.monotonic_ns()
    run.started_ns = lambda: t
    run.last_end_ns = lambda: t + 250_000_000  # 4 x 50 ms of compute in 250 ms: AU 80 %
    run.steps = 4
    time.sleep(0.35)  # the tick comes 100 ms after the end
    p.training("train", 1, run, plan)
    assert p.last.au_pct == pytest.approx(80.0, abs=0.01)


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


# --- issue 30: one console for every phase -------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_live_csv_writes_each_row_once(tmp_path):
    """Bug 16: the end of a phase wrote its last row twice (once as the final update, once at its end)."""
    live = tmp_path / "live.csv"
    p = Progress(enabled=False, stream=io.StringIO(), status_interval=0, live_csv=str(live))
    plan, run = FakePlan(4, batch=1, compute_s=0.0), FakeRun()
    for epoch in (1, 2):
        run = FakeRun()
        p.training("train", epoch, run, plan)
        run.steps, run.bytes = 4, 4096
        p.training("train", epoch, run, plan)  # reaches 4/4: the phase ends here
        p.training("train", epoch, run, plan)  # execute's last tick after the run: nothing more
        p.done()
    with phase_of(p, "save", "saving global_epoch1_step4", 100, "B") as ph:
        ph.update(100, nbytes=100)
    p.close()
    rows = list(csv.DictReader(open(live)))
    keys = [(r["label"], r["done"], r["elapsed_s"]) for r in rows]
    assert len(keys) == len(set(keys)), rows
    assert [(r["label"], r["done"]) for r in rows] == [
        ("epoch 1 train", "4"),
        ("epoch 2 train", "4"),
        ("saving global_epoch1_step4", "100"),
    ]


def test_first_eta_after_a_slow_first_step_is_within_a_factor_of_the_time_left():
    """A phase whose first step is slow (0.8 s: files opened, a cold cache) and whose next 20 take 0.1 s
    each. The old ETA, elapsed x (1 - f) / f from the phase's start, said 0.8 x 20 = 16 s after step 1
    when 2 s were left. Now the ETA is '?' until a second after the first step, then the rate since it:
    every printed ETA is within 1.5x (+0.2 s) of the time that was really left, measured to the end."""
    out = io.StringIO()
    p = Progress(enabled=False, stream=out, status_interval=0.01)
    n, plan, run = 21, FakePlan(21, batch=1, compute_s=0.0), FakeRun()
    p.training("train", 1, run, plan)
    seen = []  # (time, ETA) after each step
    time.sleep(0.8)
    for step in range(1, n):
        run.steps = step
        p.training("train", 1, run, plan)
        seen.append((time.monotonic(), p.last.eta_s, p.last.done))
        time.sleep(0.1)
    run.steps = n
    p.training("train", 1, run, plan)
    end = time.monotonic()
    assert seen[0][1] is None and "ETA ?" in out.getvalue().splitlines()[0]
    etas = [(end - t, e) for t, e, _ in seen if e is not None]
    assert etas, seen  # a second after the first step, an estimate
    for left, e in etas:
        assert left / 1.5 - 0.2 <= e <= 1.5 * left + 0.2, (left, e, seen)
    printed = [line for line in out.getvalue().splitlines() if "ETA ?" not in line]
    assert printed and all(re.search(r"ETA \d+s", line) for line in printed)


def test_run_line_in_status_lines_and_csv(tmp_path):
    """The whole run beside the phase: which epoch of how many, the run's elapsed time and ETA, each
    labelled as the run's (the phase's elapsed / ETA are the phase's)."""
    out, live = io.StringIO(), tmp_path / "live.csv"
    p = Progress(enabled=False, stream=out, status_interval=0.01, live_csv=str(live))
    p.run_begin("run", "epoch", 4)
    plan = FakePlan(10, batch=2, compute_s=0.0)
    p.run_at(1)
    r1 = FakeRun()
    p.training("train", 1, r1, plan)
    time.sleep(0.1)
    r1.steps = 10
    p.training("train", 1, r1, plan)
    p.run_at(2)
    r2 = FakeRun()
    p.training("train", 2, r2, plan)
    time.sleep(0.1)
    r2.steps = 5
    p.training("train", 2, r2, plan)
    line = out.getvalue().splitlines()[-1]
    m = re.match(
        r"\[status\] epoch 2 train: 5/10 steps .* elapsed \S+  ETA \S+  \| run: epoch 2/4  elapsed (\S+)  ETA (\S+)$",
        line,
    )
    assert m, line
    # the run's first completion (epoch 1's end, 1 of 4) was 0.1 s ago: '?' until a second after it
    assert p.last.run.eta_s is None and line.endswith("ETA ?")
    time.sleep(1.0)
    r2.steps = 6
    p.training("train", 2, r2, plan)
    fig = p.last.run
    # then the rate since that completion: 0.6 of an epoch in about 1.1 s, 2.4 epochs left
    assert 2.4 / 0.6 * 1.0 <= fig.eta_s <= 2.4 / 0.6 * 1.3, fig
    p.close()
    rows = list(csv.DictReader(open(live)))
    assert rows[-1]["run"] == "run epoch 2/4" and float(rows[-1]["run_eta_s"]) > 0


def test_the_run_lines_eta_leaves_out_the_first_epochs_start_up():
    """A run of 4 epochs of 10 steps whose first step takes 0.8 s (start-up) and every other 0.05 s. The
    old run ETA, run elapsed x (1 - f) / f, spread the start-up over the 3 epochs left: 0.8 s x 39 after
    step 1, when about 2 s were left. Every printed run ETA is now within 1.5x (+0.2 s) of the time left."""
    p = Progress(enabled=False, stream=io.StringIO(), status_interval=0.01)
    p.run_begin("run", "epoch", 4)
    plan, seen = FakePlan(10, batch=1, compute_s=0.0), []
    for epoch in range(1, 5):
        p.run_at(epoch)
        run = FakeRun()
        p.training("train", epoch, run, plan)
        for step in range(1, 11):
            time.sleep(0.8 if (epoch, step) == (1, 1) else 0.05)
            run.steps = step
            p.training("train", epoch, run, plan)
            seen.append((time.monotonic(), p.last.run.eta_s))
        p.done()
    end = time.monotonic()
    assert seen[0][1] is None
    etas = [(end - t, e) for t, e in seen[:-1] if e is not None]
    assert len(etas) > 10, seen
    for left, e in etas:
        assert left / 1.5 - 0.2 <= e <= 1.5 * left + 0.2, (left, e)
    p.close()


@pytest.mark.parametrize("width", [80, 160])
def test_display_fits_the_terminal(width):
    """At 80 columns the figures of lowest priority go first; the bar and the ETA stay (the review: at
    80 columns the bar vanished and the ETA was cut). At 160 everything is shown."""
    out = io.StringIO()
    p = Progress(enabled=True, stream=out, width=width)
    p.run_begin("run", "epoch", 8)
    p.run_at(3)
    ph = p.phase("train", "epoch 3 train", 16, "steps")
    time.sleep(0.15)
    ph.update(14, nbytes=9 * 2**20, samples=14 * 16, au_pct=94.2)
    ph.end()
    lines = [s for s in re.split(r"[\r\n]+", ANSI.sub("", out.getvalue())) if s.strip()]
    bars = [s for s in lines if s.startswith("epoch 3 train")]
    assert bars and any(s.startswith("run: epoch 3/8") and "ETA" in s for s in lines), lines
    for s in lines:
        assert len(s) <= width - 1, (len(s), s)
    last = bars[-1]
    assert "━" * BAR_MIN in last and "14/16 steps" in last and re.search(r"ETA \S+$", last), last
    assert ("samples/s" in last and "elapsed" in last) == (width == 160), last


def test_fit_keeps_bar_count_and_eta():
    parts = [(3, "12,345.6 samples/s"), (5, "1,234.5 MiB/s"), (6, "AU 99.1 %"), (2, "elapsed 1m02s"), (99, "ETA 3m05s")]
    label = "point 12/24 randread 4KiB io_uring qd32 t4"
    for width in (40, 60, 80, 120, 200):
        f = fit(label, "41.0 %", parts, width)
        text = f.plain(0.4)
        assert f.bar >= BAR_MIN and "41.0 %" in text and text.endswith("ETA 3m05s"), text
        if width >= 60:
            assert len(text) <= width - 1, (width, text)
        else:  # too narrow for all of it: every figure but the ETA dropped, the label cut
            assert f.figures == "ETA 3m05s" and f.label.endswith("…"), text
    assert fit(label, "41.0 %", parts, 200).plain(0.4).count("━") + 1 == 24  # the whole bar when there is room


def test_phase_api_in_bytes_and_without_progress():
    assert phase_of(None, "save", "x", 10, "B").update(5) is None  # rank > 0 / -q: a phase that does nothing
    out = io.StringIO()
    p = Progress(enabled=False, stream=out, status_interval=0.01)
    with p.phase("load", "loading global_epoch1_step1", 3 * 2**30, "B", counts=False) as ph:
        time.sleep(0.05)
        ph.update(1.5 * 2**30, nbytes=1.5 * 2**30)
    line = out.getvalue().splitlines()[-1]
    assert line.startswith("[status] loading global_epoch1_step1: 1.5/3.0 GiB ") and "MiB/s" in line, line
    assert p.key is None  # ended with the block


def test_pause_is_shown_announced_and_stops_on_a_signal():
    out, said = io.StringIO(), []
    p = Progress(enabled=False, stream=out, status_interval=0.05)
    t0 = time.monotonic()
    assert pause(p, 0.3, "before checkpoint 2 save", "checkpoint.time_between_checkpoints", echo=said.append)
    assert 0.3 <= time.monotonic() - t0 < 1.0
    assert said == []  # short pauses are only shown, long ones said
    assert "[status] sleeping before checkpoint 2 save: 0." in out.getvalue()  # n/0.3 s

    class Stop:
        def is_set(self):
            return time.monotonic() - t1 > 0.2

    t1 = time.monotonic()
    assert not pause(p, 30, "before checkpoint 3 save", "checkpoint.time_between_checkpoints", said.append, Stop())
    assert time.monotonic() - t1 < 2.0
    assert said == ["sleeping 30 s before checkpoint 3 save (checkpoint.time_between_checkpoints)"]


def test_training_figures_never_go_back():
    """A run whose counters read 0 once it ended (S3's worker, bug 4) keeps the epoch's last figures."""
    p = Progress(enabled=False, stream=io.StringIO(), status_interval=0)
    plan, run = FakePlan(6, batch=1, compute_s=0.0), FakeRun()
    p.training("train", 1, run, plan)
    run.steps, run.bytes = 4, 400
    p.training("train", 1, run, plan)
    run.steps, run.bytes = 0, 0
    p.training("train", 1, run, plan)
    assert p.last.done == 4 and p.last.mib_s > 0


def test_io_point_line_and_grid_line():
    """A point's ETA is its own; the grid's elapsed and ETA are on the grid's line."""
    out = io.StringIO()
    p = Progress(enabled=False, stream=out, status_interval=0.01)
    point = types.SimpleNamespace(rw="randread", bs=4096, engine="io_uring", qd=8, threads=1)
    budget = types.SimpleNamespace(size=0, runtime_ns=int(1e9), ramp_ns=0)
    tick = p.io_point(point, budget, 2, 4)
    time.sleep(0.2)
    tick(FakeRun())
    line = out.getvalue().splitlines()[-1]
    assert re.match(
        r"\[status\] point 2/4 randread 4KiB io_uring qd8 t1: +\d+\.\d % .*ETA \S+  "
        r"\| grid: point 2/4  elapsed \S+  ETA \S+$",
        line,
    ), line
    p.done()
