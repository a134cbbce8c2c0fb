"""Live progress on rank 0: a rich display on a terminal, a plain status line every N seconds off one.

A phase is one generation, one epoch's training or evaluation, or one `io` point. Its figures
(rates, AU, ETA) are measured from the phase's start, not from its first report, and its last
state is drawn when it ends. Off a terminal (a pipe, a Slurm log) the same figures are printed as
one plain line every `status_interval` seconds, like fio's --status-interval; `live_csv` appends
one row per interval (and one when each phase ends) for plotting while the run goes on.
"""

from __future__ import annotations

import csv
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, TextIO

import click

from dlio.units import fmt_figure, fmt_size

CSV_COLUMNS = [
    "time",
    "elapsed_s",
    "phase",
    "label",
    "done",
    "total",
    "unit",
    "percent",
    "MiB_s",
    "samples_s",
    "IOPS",
    "AU_percent",
    "eta_s",
]
REFRESH_S = 0.1  # the live display is redrawn at most this often (generation reports once per file)


def fmt_eta(s: Optional[float]) -> str:
    """Seconds as 45s / 3m05s / 2h07m; '?' when not known yet."""
    if s is None or s != s or s < 0:
        return "?"
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


@dataclass
class Figures:
    """What one report of a phase says; every rate is over the time since the phase started."""

    phase: str  # generate / train / eval / io
    label: str  # e.g. "epoch 2 train", "point 3/8 read 4KiB posix qd1 t1"
    done: int
    total: int
    unit: str  # files / steps / % (io points: percent of their budget)
    elapsed_s: float
    mib_s: float
    samples_s: Optional[float] = None
    iops: Optional[float] = None
    au_pct: Optional[float] = None
    eta_s: Optional[float] = None

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 100.0

    def text(self) -> str:
        """The figures after the bar (and in the status line)."""
        parts = []
        if self.samples_s is not None:
            parts.append(f"{self.samples_s:,.1f} samples/s")
        parts.append(f"{fmt_figure(self.mib_s)} MiB/s")  # a slow phase is 0.432, not 0.0
        if self.iops is not None:
            parts.append(f"{self.iops:,.0f} IOPS")
        if self.au_pct is not None:
            parts.append(f"exact AU {self.au_pct:.1f} %")  # the set compute over the time so far, as the exact AU
        parts.append(f"elapsed {fmt_eta(self.elapsed_s)}")
        parts.append(f"ETA {fmt_eta(self.eta_s)}")
        return "  ".join(parts)

    def status_line(self) -> str:
        count = f"{self.percent:5.1f} %" if self.unit == "%" else f"{self.done}/{self.total} {self.unit}"
        return f"[status] {self.label}: {count}  {self.text()}"

    def csv_row(self) -> list:
        def r(x: Optional[float], nd: int = 1) -> str:
            return "" if x is None else f"{x:.{nd}f}"

        return [
            time.strftime("%Y-%m-%dT%H:%M:%S"),
            r(self.elapsed_s, 2),
            self.phase,
            self.label,
            self.done,
            self.total,
            self.unit,
            r(self.percent),
            r(self.mib_s),
            r(self.samples_s),
            r(self.iops, 0),
            r(self.au_pct),
            r(self.eta_s),
        ]


def _eta(elapsed: float, fraction: float) -> Optional[float]:
    if fraction <= 0:
        return None
    return max(0.0, elapsed * (1.0 - fraction) / fraction)


class Progress:
    """Rank 0's progress. On a terminal (or enabled=True) a rich live display on `stream`; else a
    status line every status_interval seconds (0: none). With quiet, neither (the live CSV only).
    Methods may be called from several threads."""

    def __init__(
        self,
        enabled: Optional[bool] = None,
        stream: Optional[TextIO] = None,
        status_interval: float = 30.0,
        live_csv: Optional[str] = None,
        quiet: bool = False,
    ) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet  # -q: no display and no status lines (only the live CSV, when asked for)
        self.live = (self.stream.isatty() if enabled is None else enabled) and not quiet
        self.status_interval = max(0.0, float(status_interval))
        self.live_csv = live_csv
        self.csv_interval = self.status_interval or 30.0
        self.lock = threading.RLock()
        self.key: Any = None
        self.t0 = 0.0
        self.last: Optional[Figures] = None
        self.last_status = self.last_csv = self.last_draw = 0.0
        self.display: Any = None  # the rich Progress of the current phase (live mode)
        self.task: Any = None
        self.run: Any = None  # training: the C run of the current block ...
        self.base = (0, 0, 0)  # ... and what the phase's earlier blocks did (ops, bytes, steps)
        self.grid_t0: Optional[float] = None
        self.finished_key: Any = None

    # --- the console: log lines go above the live display, never into it ---------------------

    def echo(self, message: str = "", err: bool = False) -> None:
        """click.echo, printed above the live bar while one is shown (a line for stdout only when stdout
        is the terminal too: `run > log` keeps its lines in the log)."""
        with self.lock:
            if self.display is not None and (err or _isatty(sys.stdout)):
                self.display.console.print(message, markup=False, highlight=False, soft_wrap=True)
                return
        click.echo(message, err=err)

    # --- phases ------------------------------------------------------------------------------

    def _begin(self, key: Any, label: str, total: int, unit: str, transient: bool = False) -> None:
        """Start a phase (ending the previous one) if `key` is new. A transient phase's bar is erased
        at its end (an io point's result row takes its place)."""
        if key == self.key:
            return
        self._finish()
        self.key, self.t0, self.last, self.run, self.base = key, time.monotonic(), None, None, (0, 0, 0)
        self.last_status = self.last_csv = self.last_draw = self.t0
        if self.live:  # rich only on a terminal: it takes ~0.3 s to import
            from rich.console import Console
            from rich.progress import BarColumn, TextColumn
            from rich.progress import Progress as RichProgress

            console = Console(file=self.stream, force_terminal=True, highlight=False)
            bar = BarColumn(bar_width=24, complete_style="cyan", finished_style="green")
            self.display = RichProgress(
                TextColumn("{task.description}"),
                bar,
                TextColumn("{task.fields[count]}"),
                TextColumn("{task.fields[figures]}"),
                console=console,
                auto_refresh=False,
                transient=transient,
                redirect_stdout=_isatty(sys.stdout),
                redirect_stderr=False,
            )
            self.display.start()
            self.task = self.display.add_task(label, total=max(total, 1), count="", figures="")

    def _update(self, fig: Figures, final: bool = False) -> None:
        self.last = fig
        now = time.monotonic()
        if self.display is not None and (final or now - self.last_draw >= REFRESH_S):
            self._draw(fig)
            self.last_draw = now
        if not self.live and not self.quiet and self.status_interval and now - self.last_status >= self.status_interval:
            self.last_status = now
            self.stream.write(fig.status_line() + "\n")
            self.stream.flush()
        if self.live_csv and (final or now - self.last_csv >= self.csv_interval):
            self.last_csv = now
            self._csv(fig)

    def _draw(self, fig: Figures) -> None:
        count = f"{fig.percent:5.1f} %" if fig.unit == "%" else f"{fig.done}/{fig.total} {fig.unit}"
        self.display.update(
            self.task,
            completed=fig.done,
            total=max(fig.total, 1),
            count=count,
            figures=fig.text(),
            description=fig.label,
        )
        self.display.refresh()

    def _csv(self, fig: Figures) -> None:
        new = not os.path.exists(self.live_csv) or os.path.getsize(self.live_csv) == 0
        with open(self.live_csv, "a", newline="") as f:
            w = csv.writer(f)
            if new:
                w.writerow(CSV_COLUMNS)
            w.writerow(fig.csv_row())

    def _finish(self) -> None:
        """End the current phase: its last state is drawn (and written to the live CSV)."""
        if self.key is None:
            return
        if self.last is not None and self.live_csv:
            self._csv(self.last)
        if self.display is not None:
            if self.last is not None:
                self._draw(self.last)  # the last report, even if it came sooner than REFRESH_S after the one drawn
            self.display.stop()
            self.display = self.task = None
        self.key = None

    def done(self) -> None:
        """The current phase is over (generation, training, an io point)."""
        with self.lock:
            self._finish()

    # --- what the call sites report ----------------------------------------------------------

    def generation(self, nbytes: int, nfiles: int, total_bytes: int, total_files: int) -> None:
        """Generation's callback (from the writer threads): bytes and files so far, of the totals."""
        with self.lock:
            self._begin("gen", "generating", total_files, "files")
            dt = max(1e-6, time.monotonic() - self.t0)
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
                    eta_s=_eta(dt, frac),
                )
            )

    def training(self, split: str, epoch: int, run: Any, plan: Any) -> None:
        """on_tick of a training run (one epoch, or one block of it between step checkpoints):
        steps, samples/s, MiB/s, and the AU of the steps done so far."""
        with self.lock:
            key = (split, epoch)
            if key == self.finished_key:
                return
            label = f"epoch {epoch} {'train' if split == 'train' else 'eval '}"
            n = len(plan.steps)
            self._begin(key, label, n, "steps")
            if run is not self.run:
                if self.run is not None:  # a new block of the same epoch: add what the last one did
                    self.base = tuple(b + x for b, x in zip(self.base, self.run.progress()))
                self.run = run
            ops, nbytes, steps = (b + x for b, x in zip(self.base, run.progress()))
            steps = min(int(steps), n)
            dt = max(1e-6, time.monotonic() - self.t0)
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
                eta_s=_eta(dt, steps / n if n else 1.0),
            )
            self._update(fig, final=steps >= n)
            if steps >= n:  # the last step is drawn now, before the epoch's log lines
                self._finish()
                self.finished_key = key

    def io_point(
        self, point: Any, budget: Any, index: Optional[int] = None, count: Optional[int] = None, pass_bytes: int = 0
    ) -> Callable[[Any], None]:
        """on_tick for one `io` point (point `index` of `count` in the grid): MiB/s and IOPS so
        far, how much of its budget is spent (bytes, time, or of one pass over the files:
        `pass_bytes`), and the ETA of the whole grid."""
        with self.lock:
            now = time.monotonic()
            if self.grid_t0 is None or index == 1:
                self.grid_t0 = now
            grid_t0 = self.grid_t0
            name = f"{point.rw} {_size(point.bs)} {point.engine} qd{point.qd} t{point.threads}"
            label = f"point {index}/{count} {name}" if index and count else name
            key = ("io", id(point), now)
            self._begin(key, label, 100, "%", transient=True)
            t0 = self.t0

        def tick(run: Any) -> None:
            ops, nbytes, _ = run.progress()
            with self.lock:
                if self.key != key:
                    return
                t = time.monotonic()
                dt = max(1e-6, t - t0)
                if budget.size:
                    pct = 100.0 * nbytes / budget.size
                elif budget.runtime_ns:
                    pct = 100.0 * dt * 1e9 / (budget.runtime_ns + budget.ramp_ns)
                elif pass_bytes:
                    pct = 100.0 * nbytes / pass_bytes
                else:
                    pct = 0.0
                pct = min(pct, 100.0)
                frac = ((index - 1) + pct / 100.0) / count if index and count else pct / 100.0
                self._update(
                    Figures(
                        "io",
                        label,
                        int(pct),
                        100,
                        "%",
                        dt,
                        nbytes / 2**20 / dt,
                        iops=ops / dt,
                        eta_s=_eta(t - grid_t0, frac),
                    )
                )

        return tick


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
