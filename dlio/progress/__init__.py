"""Live progress on rank 0, the same for every long phase: a bar on a terminal, a plain status line every
`--status-interval` seconds off one, and a `--live-csv` row per interval (and one, once, when a phase ends).

A *phase* is one long piece of work: a generation, an epoch's training or evaluation, an io point, a
ceiling probe, a checkpoint save or load, a pause the workload asks for, a workload family's step. Its
figures (rates, AU, ETA) are measured from the phase's start, and its last state is drawn when it ends.
Beside it, the *run line* gives the whole job: which unit of how many (epoch 3/8, point 5/12), the time
since the job began and the whole job's ETA. Each line says whose clock it reads (dlio.progress.figures).

The generic phase API, for any job (checkpoints, the workload families, S3 points):

    from dlio.progress import phase_of, pause

    progress.run_begin("run", "epoch", total=8)           # the job's units (optional)
    progress.run_at(3)                                     # unit 3 begins
    with phase_of(progress, "save", "checkpoint 2 save", total=nbytes, unit="B", counts=False) as ph:
        ...
        ph.update(bytes_so_far, nbytes=bytes_so_far)       # any thread, as often as you like
    pause(progress, 5.0, "before checkpoint 2", "checkpoint.time_between_checkpoints")  # an announced sleep

`progress` may be None (ranks other than 0, or -q without --live-csv): `phase_of` then returns a phase
that does nothing, and `pause` still sleeps. `update(done, nbytes=, ops=, samples=, au_pct=)` gives what is
done so far in the phase's unit ("steps", "files", "B" for bytes, "s", "%", any noun) and the totals for
the rates (MiB/s, IOPS, samples/s); the ETA is the rate since the phase's first completion x what is
left ('?' until a second, figures.EtaClock: the start-up is not spread over the rest). A phase with `counts=True`
(the default) moves the run line: the run's ETA is the rate of f since the run's first completion
(EtaClock again: the first unit's start-up is not spread over the run) x what is left, with
f = (unit - 1 + the counting phase's fraction) / units (without a counting phase: the units done so far,
each as long as their mean). `transient=True` erases the phase's bar at its end
(an io point's result row takes its place). `Progress.io_point` and `Progress.training` are this API fed
by a C run's live counters (`run.progress()` = ops, bytes, steps).

Outputs never block the run: the live CSV and status lines to a pipe are written non-blocking, lines a
missing or stalled reader cannot take are dropped and counted (dlio.progress.sink). The display fits the
terminal's width: it drops figures before it shrinks the bar below BAR_MIN, and keeps the ETA.
"""

from __future__ import annotations

import csv
import io
import sys
import threading
import time
from typing import Any, Callable, Optional, TextIO, Tuple

import click

from dlio.base.units import fmt_size
from dlio.progress.figures import CSV_COLUMNS, EtaClock, Figures, RunFigures, fmt_eta
from dlio.progress.sink import CsvSink, LineSink

__all__ = ["CSV_COLUMNS", "Figures", "Phase", "Progress", "fmt_eta", "pause", "phase_of"]

REFRESH_S = 0.1  # the live display is redrawn at most this often (generation reports once per file)
LONG_PAUSE_S = 2.0  # a pause the workload asks for is announced with a line from this long


class Phase:
    """One phase of a Progress (made by Progress.phase / phase_of). `update` reports, `end` ends it
    (leaving a `with` block does too). Reports after its end, or after another phase began, are ignored."""

    def __init__(self, progress: Optional["Progress"], key: Any, kind: str, label: str, total: float, unit: str):
        self.progress = progress
        self.key = key
        self.kind = kind
        self.label = label
        self.total = total
        self.unit = unit

    def update(
        self,
        done: float,
        nbytes: Optional[float] = None,
        ops: Optional[float] = None,
        samples: Optional[float] = None,
        au_pct: Optional[float] = None,
        total: Optional[float] = None,
    ) -> None:
        if self.progress is None:
            return
        if total is not None:
            self.total = total
        self.progress._report(self, done, nbytes, ops, samples, au_pct)

    def end(self) -> None:
        if self.progress is not None:
            self.progress._end(self.key)

    def __enter__(self) -> "Phase":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.end()


NULL_PHASE = Phase(None, None, "", "", 0, "")


def phase_of(
    progress: Optional["Progress"],
    kind: str,
    label: str,
    total: float,
    unit: str,
    transient: bool = False,
    counts: bool = True,
) -> Phase:
    """progress.phase(...), or a phase that does nothing when there is no progress (rank > 0, -q)."""
    if progress is None:
        return NULL_PHASE
    return progress.phase(kind, label, total, unit, transient=transient, counts=counts)


def pause(
    progress: Optional["Progress"],
    seconds: float,
    what: str,
    why: str,
    echo: Optional[Callable[[str], None]] = None,
    stop: Any = None,
) -> bool:
    """Sleep `seconds` because the workload asks for it (`why`: its config key), shown as a phase
    ("sleeping before checkpoint 2 save", 3/5 s) on every output, and said with `echo` from LONG_PAUSE_S
    ("sleeping 5 s before checkpoint 2 save (checkpoint.time_between_checkpoints)"). A stop signal noted
    during the measured phase (dlio.system.execute.pending; or `stop.is_set()`) ends it early: returns False then,
    True after the whole sleep. (Outside a measured phase Ctrl-C interrupts the sleep as usual.)"""
    from dlio.system import execute

    stop = stop if stop is not None else _PendingStop(execute)
    if seconds <= 0:
        return not stop.is_set()
    if echo is not None and seconds >= LONG_PAUSE_S:
        echo(f"sleeping {seconds:g} s {what} ({why})")
    end = time.monotonic() + seconds
    with phase_of(progress, "sleep", f"sleeping {what}", seconds, "s", transient=True, counts=False) as ph:
        while True:
            left = end - time.monotonic()
            ph.update(min(seconds, seconds - max(0.0, left)))
            if left <= 0:
                return True
            if stop.is_set():
                return False
            time.sleep(min(0.25, left))


class _PendingStop:
    """is_set() when a stop signal arrived in the measured phase (dlio.system.execute's record of it)."""

    def __init__(self, execute: Any) -> None:
        self.execute = execute

    def is_set(self) -> bool:
        return self.execute.pending() is not None


class _Run:
    """The whole job's units (epochs, points, targets, checkpoint ops) and its clock."""

    def __init__(self, scope: str, noun: str, total: Optional[int]) -> None:
        self.scope, self.noun, self.total = scope, noun, total
        self.t0 = self.t_unit = time.monotonic()
        self.index = 0
        self.note = ""
        self.unit_fraction = 0.0  # of the current unit, from its counting phase
        self.clock = EtaClock()  # the run's time left from its rate since its first completion

    def figures(self, now: float) -> RunFigures:
        elapsed = now - self.t0
        done = max(0, self.index - 1)
        left: Optional[float] = None
        if self.total and self.unit_fraction > 0:  # a counting phase says how far the unit is
            left = self.clock(now, (done + self.unit_fraction) / self.total)
        elif self.total and done:  # else the units done so far, each as long as their mean
            left = max(0.0, (self.t_unit - self.t0) / done * (self.total - done) - (now - self.t_unit))
        return RunFigures(self.scope, self.noun, self.index, self.total, elapsed, left, self.note)


class Progress:
    """Rank 0's progress. On a terminal (or enabled=True) a live display on `stream`; else a status line
    every status_interval seconds (0: none). With quiet, neither (the live CSV only). `width`: the
    display's columns (default: the terminal's). Methods may be called from several threads."""

    def __init__(
        self,
        enabled: Optional[bool] = None,
        stream: Optional[TextIO] = None,
        status_interval: float = 30.0,
        live_csv: Optional[str] = None,
        quiet: bool = False,
        width: Optional[int] = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet  # -q: no display and no status lines (only the live CSV, when asked for)
        self.live = (_isatty(self.stream) if enabled is None else enabled) and not quiet
        self.width = width
        self.status_interval = max(0.0, float(status_interval))
        self.live_csv = live_csv
        self.csv_interval = self.status_interval or 30.0
        self.lock = threading.RLock()
        self.key: Any = None  # the current phase's key
        self.counts = True
        self.t0 = 0.0
        self.t_run: Optional[float] = None  # a training phase: when its first step began fetching
        self.eta = EtaClock()  # the current phase's time left
        self.last: Optional[Figures] = None
        self.csv_last: Optional[Figures] = None  # the report last written to the live CSV (each once)
        self.last_status = self.last_csv = self.last_draw = 0.0
        self.view: Any = None  # dlio.progress.live.LiveView of the current phase (on a terminal)
        self.runs: Optional[_Run] = None
        self.run: Any = None  # training: the C run of the current block ...
        self.base: Tuple[int, ...] = (0, 0, 0)  # ... and what the phase's earlier blocks did (ops, bytes, steps)
        self.last_counts: Tuple[int, ...] = (0, 0, 0)  # the current block's counters, never going back
        self.finished_key: Any = None
        self._serial = 0
        quiet_status = self.live or quiet or not self.status_interval
        self.status_out = None if quiet_status else LineSink(self.stream)
        self.csv_out = CsvSink(live_csv, _csv_text(CSV_COLUMNS), self._note) if live_csv else None

    # --- the console: log lines go above the live display, never into it ---------------------

    def echo(self, message: str = "", err: bool = False) -> None:
        """click.echo, printed above the live bar while one is shown (a line for stdout only when stdout
        is the terminal too: `run > log` keeps its lines in the log)."""
        with self.lock:
            if self.view is not None and (err or _isatty(sys.stdout)):
                self.view.print(message)
                return
        click.echo(message, err=err)

    def _note(self, message: str) -> None:
        """What an output says about itself (lines dropped): on stderr, above the display."""
        self.echo(message, err=True)

    # --- the run line --------------------------------------------------------------------------

    def run_begin(self, scope: str, noun: str, total: Optional[int]) -> None:
        """The job's units begin (scope: run / grid / search / checkpoints; noun: epoch / point ...)."""
        with self.lock:
            self.runs = _Run(scope, noun, total)

    def run_at(self, index: int, note: str = "") -> None:
        """Unit `index` (1-based) of the job begins."""
        with self.lock:
            if self.runs is not None:
                self.runs.index, self.runs.note, self.runs.unit_fraction = index, note, 0.0
                self.runs.t_unit = time.monotonic()

    def run_end(self) -> None:
        with self.lock:
            self.runs = None

    # --- phases --------------------------------------------------------------------------------

    def phase(
        self, kind: str, label: str, total: float, unit: str, transient: bool = False, counts: bool = True
    ) -> Phase:
        """Begin a phase (ending the current one); see the module's docstring."""
        with self.lock:
            self._serial += 1
            ph = Phase(self, ("phase", self._serial), kind, label, total, unit)
            self._begin(ph.key, label, transient, counts)
            return ph

    def _report(
        self,
        ph: Phase,
        done: float,
        nbytes: Optional[float],
        ops: Optional[float],
        samples: Optional[float],
        au_pct: Optional[float],
    ) -> None:
        with self.lock:
            if self.key != ph.key:
                return
            now = time.monotonic()
            dt = max(1e-6, now - self.t0)
            frac = min(1.0, done / ph.total) if ph.total else 1.0
            fig = Figures(
                ph.kind,
                ph.label,
                done,
                ph.total,
                ph.unit,
                dt,
                mib_s=None if nbytes is None else nbytes / 2**20 / dt,
                samples_s=None if samples is None else samples / dt,
                iops=None if ops is None else ops / dt,
                au_pct=au_pct,
                eta_s=self.eta(now, frac),
            )
            self._update(fig)

    def _end(self, key: Any) -> None:
        with self.lock:
            if self.key == key:
                self._finish()

    def _begin(self, key: Any, label: str, transient: bool = False, counts: bool = True) -> None:
        """Start a phase (ending the previous one) if `key` is new. A transient phase's bar is erased
        at its end (an io point's result row takes its place)."""
        if key == self.key:
            return
        self._finish()
        self.key, self.t0, self.last, self.run, self.base = key, time.monotonic(), None, None, (0, 0, 0)
        self.t_run = None
        self.eta = EtaClock()
        self.counts = counts
        self.last_status = self.last_csv = self.last_draw = self.t0
        if self.live:  # rich only on a terminal: it takes ~0.3 s to import
            from dlio.progress.live import LiveView

            self.view = LiveView(self.stream, self.width, transient)

    def _update(self, fig: Figures, final: bool = False) -> None:
        now = time.monotonic()
        if self.runs is not None:
            if self.counts:
                self.runs.unit_fraction = fig.fraction
            fig.run = self.runs.figures(now)
        self.last = fig
        if self.view is not None and (final or now - self.last_draw >= REFRESH_S):
            self.view.show(fig)
            self.last_draw = now
        if self.status_out is not None and now - self.last_status >= self.status_interval:
            self.last_status = now
            self.status_out.write(fig.status_line() + "\n")
        if self.csv_out is not None and (final or now - self.last_csv >= self.csv_interval):
            self._csv(fig)

    def _csv(self, fig: Figures) -> None:
        if fig is self.csv_last:
            return
        self.last_csv = time.monotonic()
        self.csv_last = fig
        if self.csv_out is not None:
            self.csv_out.write_row(_csv_text(fig.csv_row()))

    def _finish(self) -> None:
        """End the current phase: its last state is drawn (and written to the live CSV, once)."""
        if self.key is None:
            return
        if self.last is not None and self.csv_out is not None:
            self._csv(self.last)
        if self.view is not None:
            self.view.stop(self.last)  # the last report, even if it came sooner than REFRESH_S after the one drawn
            self.view = None
        self.key = None

    def done(self) -> None:
        """The current phase is over (generation, training, an io point)."""
        with self.lock:
            self._finish()

    def close(self) -> None:
        """The command is over: the current phase ends, the outputs are closed (and say what they dropped)."""
        with self.lock:
            self._finish()
            for out in (self.csv_out, self.status_out):
                if out is not None:
                    out.close()
            self.csv_out = self.status_out = None

    # --- what the call sites report ----------------------------------------------------------

    def generation(self, nbytes: int, nfiles: int, total_bytes: int, total_files: int) -> None:
        """Generation's callback (from the writer threads): bytes and files so far, of the totals."""
        with self.lock:
            self._begin("gen", "generating")
            now = time.monotonic()
            dt = max(1e-6, now - self.t0)
            frac = nbytes / total_bytes if total_bytes else 1.0
            self._update(
                Figures(
                    "generate",
                    "generating",
                    min(nfiles, total_files),
                    total_files,
                    "files",
                    dt,
                    nbytes / 2**20 / dt,
                    eta_s=self.eta(now, frac),
                )
            )

    def training(self, split: str, epoch: int, run: Any, plan: Any) -> None:
        """on_tick of a training run (one epoch, or one block of it between step checkpoints):
        steps, samples/s, MiB/s, and the AU of the steps done so far. The counters never go back within
        an epoch (a run whose counters read 0 once it ended keeps the epoch's last figures)."""
        with self.lock:
            key = (split, epoch)
            if key == self.finished_key:
                return
            label = f"epoch {epoch} {'train' if split == 'train' else 'eval '}"
            n = len(plan.steps)
            self._begin(key, label, counts=split == "train")
            if run is not self.run:
                if self.run is not None:  # a new block of the same epoch: add what the last one did
                    self.base = tuple(b + x for b, x in zip(self.base, self.last_counts))
                self.run = run
                self.last_counts = (0, 0, 0)
            started = run.started_ns()
            if started and self.t_run is None:  # the window of the exact figures: from the first fetch
                self.t_run = started / 1e9
            now_counts = tuple(int(x) for x in run.progress())
            self.last_counts = tuple(max(a, b) for a, b in zip(self.last_counts, now_counts))
            ops, nbytes, steps = (b + x for b, x in zip(self.base, self.last_counts))
            steps = min(int(steps), n)
            now = time.monotonic()
            ended = run.last_end_ns() / 1e9 if steps >= n else 0.0
            # the last step's end, not this later tick, closes the window of the epoch's final row
            dt = max(1e-6, (ended if ended > (self.t_run or 0) else now) - (self.t_run or self.t0))
            batch = int(plan.steps["nsamples"][0]) if n else 0
            compute = float(plan.steps["compute_ns"][:steps].sum()) / 1e9 if steps else 0.0
            fig = Figures(
                "train" if split == "train" else "eval",
                label,
                steps,
                n,
                "steps",
                dt,
                nbytes / 2**20 / dt,
                samples_s=steps * batch / dt,
                au_pct=min(100.0, 100.0 * compute / dt),
                eta_s=self.eta(now, steps / n if n else 1.0),
            )
            self._update(fig, final=steps >= n)
            if steps >= n:  # the last step is drawn now, before the epoch's log lines
                self._finish()
                self.finished_key = key

    def io_point(
        self, point: Any, budget: Any, index: Optional[int] = None, count: Optional[int] = None, pass_bytes: int = 0
    ) -> Callable[[Any], None]:
        """on_tick for one `io` point (point `index` of `count` in the grid): MiB/s and IOPS so far, how
        much of its budget is spent (bytes, time, or of one pass over the files: `pass_bytes`). The
        point's ETA is on its line; the grid's (from its first point) on the run line."""
        with self.lock:
            if index and count:
                if index == 1 or self.runs is None or self.runs.scope != "grid":
                    self.run_begin("grid", "point", count)
                self.run_at(index)
            name = f"{point.rw} {_size(point.bs)} {point.engine} qd{point.qd} t{point.threads}"
            label = f"point {index}/{count} {name}" if index and count else name
            ph = self.phase("io", label, 100, "%", transient=True)

        def tick(run: Any) -> None:
            ops, nbytes, _ = run.progress()
            with self.lock:
                if self.key != ph.key:
                    return
                dt = max(1e-6, time.monotonic() - self.t0)
                if budget.size:
                    pct = 100.0 * nbytes / budget.size
                elif budget.runtime_ns:
                    pct = 100.0 * dt * 1e9 / (budget.runtime_ns + budget.ramp_ns)
                elif pass_bytes:
                    pct = 100.0 * nbytes / pass_bytes
                else:
                    pct = 0.0
                ph.update(int(min(pct, 100.0)), nbytes=nbytes, ops=ops)

        return tick


def _csv_text(row: list) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerow(row)
    return buf.getvalue()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _size(bs: Any) -> str:
    try:
        return fmt_size(int(bs))
    except (TypeError, ValueError):
        return str(bs)
