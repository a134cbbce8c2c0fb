"""What one report of a phase says, and the text of it: the live line fitted to the terminal's width,
the status line, the live CSV row. Pure functions of the figures, no I/O.

Every line says whose clock it reads: the phase line's `elapsed` and `ETA` are the phase's (an epoch, an
io point, a save); the run line's are the whole job's (`run`, `grid`, `search`, `checkpoints`), so an
ETA is never set beside an elapsed time of another scope.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List, Optional, Tuple

from dlio.base.units import fmt_bytes, fmt_figure

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
    # the whole job beside the phase: "run epoch 3/8", its elapsed time and ETA
    "run",
    "run_elapsed_s",
    "run_eta_s",
]

BAR_MAX, BAR_MIN = 24, 10  # the bar's width on a terminal: shrunk to BAR_MIN before a figure is dropped
LABEL_MIN = 12  # a label is cut (with an ellipsis) to no less than this, after the figures are dropped


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


class EtaClock:
    """The time left of one phase, from its rate since its first completion: the phase's start-up (files
    opened, threads started, a cold cache, a slow first step) is not spread over the rest, which took
    elapsed x (1 - f) / f from the phase's start far off at the first report. None ('?') until the
    phase has moved on from its first completion for at least MIN_S seconds."""

    MIN_S = 1.0

    def __init__(self) -> None:
        self.first: Optional[Tuple[float, float]] = None  # (time, fraction) of the first completion

    def __call__(self, now: float, fraction: float) -> Optional[float]:
        if fraction >= 1.0:
            return 0.0
        if fraction <= 0.0:
            return None
        if self.first is None:
            self.first = (now, fraction)
            return None
        t1, f1 = self.first
        if fraction <= f1 or now - t1 < self.MIN_S:
            return None
        return (now - t1) / (fraction - f1) * (1.0 - fraction)


@dataclass
class RunFigures:
    """The whole job's line: which unit of how many, since when, and when it should end."""

    scope: str  # run / grid / search / checkpoints
    noun: str  # epoch / point / target / op
    index: int
    total: Optional[int]
    elapsed_s: float
    eta_s: Optional[float]
    note: str = ""  # what the unit is, e.g. "seq_write" or "load 2 of 3"

    def unit_text(self) -> str:
        of = f"/{self.total}" if self.total else ""
        note = f" ({self.note})" if self.note else ""
        return f"{self.noun} {self.index}{of}{note}"

    def parts(self) -> List[Tuple[int, str]]:
        """(priority, text): the lowest priority goes first when the line must shrink; ETA never."""
        return [(1, f"elapsed {fmt_eta(self.elapsed_s)}"), (99, f"ETA {fmt_eta(self.eta_s)}")]

    def text(self) -> str:
        return f"{self.scope}: {self.unit_text()}  " + "  ".join(t for _, t in self.parts())


@dataclass
class Figures:
    """What one report of a phase says; every rate is over the time since the phase started."""

    phase: str  # the kind: generate / train / eval / io / save / load / sleep / any job's own word
    label: str  # e.g. "epoch 2 train", "point 3/8 read 4KiB posix qd1 t1"
    done: float
    total: float
    unit: str  # files / steps / % / B (bytes, shown in binary units) / s / any count's noun
    elapsed_s: float
    mib_s: Optional[float] = None
    samples_s: Optional[float] = None
    iops: Optional[float] = None
    au_pct: Optional[float] = None
    eta_s: Optional[float] = None
    run: Optional[RunFigures] = None

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 100.0

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 1.0

    def count(self) -> str:
        """done/total in the phase's unit: '14/16 steps', ' 41.0 %', '1.5/3.0 GiB', '3/5 s'."""
        if self.unit == "%":
            return f"{self.percent:5.1f} %"
        if self.unit == "B":
            total = fmt_bytes(self.total)
            unit = total.split(" ")[-1]
            scale = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}[unit]
            return f"{self.done / scale:.1f}/{total}" if unit != "B" else f"{int(self.done)}/{total}"
        return f"{_num(self.done)}/{_num(self.total)} {self.unit}"

    def parts(self) -> List[Tuple[int, str]]:
        """(priority, text) of the figures after the count; the lowest priority is dropped first when
        the line does not fit, the ETA never."""
        out = []
        if self.samples_s is not None:
            out.append((3, f"{self.samples_s:,.1f} samples/s"))
        if self.mib_s is not None:
            out.append((5, f"{fmt_figure(self.mib_s)} MiB/s"))  # a slow phase is 0.432, not 0.0
        if self.iops is not None:
            out.append((4, f"{self.iops:,.0f} IOPS"))
        if self.au_pct is not None:
            out.append((6, f"exact AU {self.au_pct:.1f} %"))  # the set compute over the time so far
        out.append((2, f"elapsed {fmt_eta(self.elapsed_s)}"))
        out.append((99, f"ETA {fmt_eta(self.eta_s)}"))
        return out

    def text(self) -> str:
        """The figures after the count, all of them."""
        return "  ".join(t for _, t in self.parts())

    def status_line(self) -> str:
        """Off a terminal: the phase, then the whole job's line after a bar."""
        run = f"  | {self.run.text()}" if self.run is not None else ""
        return f"[status] {self.label}: {self.count()}  {self.text()}{run}"

    def csv_row(self) -> list:
        def r(x: Optional[float], nd: int = 1) -> str:
            return "" if x is None else f"{x:.{nd}f}"

        run = self.run
        return [
            time.strftime("%Y-%m-%dT%H:%M:%S"),
            r(self.elapsed_s, 2),
            self.phase,
            self.label,
            _num(self.done),
            _num(self.total),
            self.unit,
            r(self.percent),
            r(self.mib_s),
            r(self.samples_s),
            r(self.iops, 0),
            r(self.au_pct),
            r(self.eta_s),
            f"{run.scope} {run.unit_text()}" if run is not None else "",
            r(run.elapsed_s, 2) if run is not None else "",
            r(run.eta_s) if run is not None else "",
        ]


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


@dataclass(frozen=True)
class Fitted:
    """A line laid out for a width: the label (maybe cut), the bar's width (0: no bar) and the figures kept."""

    label: str
    bar: int
    count: str
    figures: str

    def plain(self, fraction: float = 0.0) -> str:
        """The line as text, the bar drawn with plain characters (what the terminal shows, colours aside)."""
        bar = bar_text(fraction, self.bar)
        return " ".join(x for x in (self.label, bar, self.count) if x) + ("  " + self.figures if self.figures else "")


def bar_text(fraction: float, width: int) -> str:
    """A bar of `width` characters, `fraction` of it drawn heavy."""
    if width <= 0:
        return ""
    filled = int(round(max(0.0, min(1.0, fraction)) * width))
    return "━" * filled + ("╺" + "━" * (width - filled - 1) if filled < width else "")


def fit(label: str, count: str, parts: List[Tuple[int, str]], width: int, bar: bool = True) -> Fitted:
    """Lay a line out in `width` columns (one column is left free: a line that fills the last column
    wraps on some terminals). In order, until it fits: the bar shrinks to BAR_MIN, the figures of lowest
    priority are dropped (never the ETA, priority 99), the label is cut with an ellipsis. The bar, the
    count and the ETA stay."""
    room = max(20, width - 1)
    kept = list(parts)
    bar_w = BAR_MAX if bar else 0

    def length(lbl: str, bw: int) -> int:
        figs = "  ".join(t for _, t in kept)
        return len(lbl) + (bw + 1 if bw else 0) + (len(count) + 1 if count else 0) + (2 + len(figs) if figs else 0)

    while bar and bar_w > BAR_MIN and length(label, bar_w) > room:
        bar_w -= 1
    while length(label, bar_w) > room and any(p < 99 for p, _ in kept):
        lowest = min(p for p, _ in kept)
        kept = [(p, t) for p, t in kept if p != lowest]
    while bar and bar_w < BAR_MAX and length(label, bar_w + 1) <= room:  # room left by a dropped figure
        bar_w += 1
    over = length(label, bar_w) - room
    if over > 0 and len(label) > LABEL_MIN:
        label = label[: max(LABEL_MIN, len(label) - over) - 1] + "…"
    return Fitted(label, bar_w, count, "  ".join(t for _, t in kept))
