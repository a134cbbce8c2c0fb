"""What every PNG plot shares: matplotlib set up once (the Agg backend: no display), titles (the
workload or 'io' / 'ceiling', the storage path, the date), saving (savefig(dpi=110), atomically, then
closed), axes (headroom, log time and size axes) and latency histograms drawn as CDF and tail panels.
The plots themselves: dlio.report.plots (a run), plots_io (io / ceiling results), plots_compare (runs
side by side).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence, Set, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from dlio.base.errors import DlioError  # noqa: E402
from dlio.base.units import fmt_ns  # noqa: E402
from dlio.report import incomplete  # noqa: E402
from dlio.system import stats  # noqa: E402
from dlio.system.output import result_path  # noqa: E402

DPI = 110


def _short(path: Any, n: int = 48) -> str:
    path = str(path)
    return path if len(path) <= n else "..." + path[-(n - 3) :]


def incomplete_mark(doc: Mapping[str, Any]) -> str:
    """What a plot's title says after the workload of a result that is not complete:
    ' [incomplete: interrupted by SIGINT]' (dlio.report.incomplete); '' for a complete one."""
    reason = incomplete.reason_of(doc)
    return f" [{incomplete.mark(reason)}]" if reason else ""


def title(what: str, workload: Optional[str], where: Optional[str], date: str) -> str:
    bits = [str(workload or "-"), what]
    tail = ", ".join(x for x in (_short(where) if where else "", date) if x)
    return f"{' - '.join(bits)}\n{tail}" if tail else " - ".join(bits)


# A page-cache result, marked wherever a plot shows one: its figures are the page cache's (or RAM's), not
# the storage's (dlio.report.verdict).
CACHE_LABEL = "page cache: not storage (verdict cache)"
CACHE_COLOR = "#c62828"
CACHE_HATCH = "////"


def cache_epochs(result: Mapping[str, Any]) -> Set[int]:
    """The epochs of a run whose verdict is cache (dlio.report.verdict), from its verdicts or its
    epochs' records."""
    out = {v.get("epoch") for v in result.get("verdicts") or [] if isinstance(v, dict) and v.get("verdict") == "cache"}
    for r in result.get("ranks") or []:
        for ep in r.get("epochs") or []:
            if isinstance(ep.get("verdict"), dict) and ep["verdict"].get("verdict") == "cache":
                out.add(ep.get("epoch"))
    return {e for e in out if e is not None}


def cache_note(n: int, total: int, what: str = "epochs") -> str:
    """The title's mark of page-cache results: ' [3 of 5 epochs: page cache, not storage]'."""
    return f" [{n} of {total} {what}: page cache, not storage]" if n else ""


def save_figure(fig: Figure, path: str) -> str:
    try:
        with result_path(path) as tmp:  # atomic for a file, written through for /dev/stdout
            fig.savefig(tmp, dpi=DPI, format=os.path.splitext(str(path))[1][1:] or None)
    except OSError as e:
        raise DlioError(f"{path}: cannot write the plot ({e.strerror or e})") from None
    finally:
        plt.close(fig)
    return path


def headroom(ax: Axes, frac: float = 0.25) -> None:
    """y from 0 to the highest point plus room, so that no line sits on the frame (its markers cut
    in half) and the legend has space above the data."""
    ys = [np.asarray(line.get_ydata(), dtype=np.float64) for line in ax.get_lines()]
    tops = [t for t in (np.nanmax(y) for y in ys if len(y)) if np.isfinite(t)]
    if tops and max(tops) > 0:
        ax.set_ylim(0, max(tops) * (1 + frac))
    else:
        ax.set_ylim(bottom=0)
    ax.margins(x=0.04)


def hist(h: Any) -> Any:
    return stats.from_json(h) if isinstance(h, dict) and isinstance(h.get("buckets"), list) else h


def merged_hist(result: Mapping[str, Any], field: str) -> stats.Hist:
    return stats.merge(
        [
            hist(ep[field])
            for r in result.get("ranks", [])
            for ep in r.get("epochs", [])
            if isinstance(ep.get(field), dict)
        ]
    )


def cdf(h: Optional[Mapping[str, Any]]) -> Tuple[np.ndarray, np.ndarray]:
    """(x in us, cumulative fraction) of a histogram; empty arrays when it has no samples."""
    if not h or not h["count"]:
        return np.array([]), np.array([])
    b = np.asarray(h["buckets"], dtype=np.float64)
    nz = np.nonzero(b)[0]
    vals = np.asarray(stats.bucket_values(), dtype=np.float64)[nz]
    vals = np.clip(vals, h["min"], h["max"])
    cum = np.cumsum(b[nz]) / b.sum()
    # start the curve at the minimum with 0
    x = np.concatenate([[max(h["min"], 1)], vals]) / 1e3
    y = np.concatenate([[0.0], cum])
    return x, y


def short_time(us: float) -> str:
    """A tick label of a time in microseconds, in its own unit: 500ns, 20us, 1.5ms, 2s."""
    ns = float(us) * 1e3
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= div:
            return f"{ns / div:.3g}{unit}"
    return f"{ns:.3g}ns"


def _us_formatter() -> FuncFormatter:
    return FuncFormatter(lambda v, _: short_time(v) if v > 0 else "")


def minor_log_formatter() -> FuncFormatter:
    """Label the 2x and 5x minor ticks of a log axis plainly (matplotlib would write 2x10^0)."""

    def fmt(v: float, _: Any) -> str:
        if v <= 0:
            return ""
        lead = round(v / 10 ** np.floor(np.log10(v)), 6)
        if lead not in (2.0, 5.0):
            return ""
        return f"{v:,.0f}" if v >= 1000 else f"{v:g}"

    return FuncFormatter(fmt)


def log_time_axis(ax: Axes, lo_us: float, hi_us: float) -> None:
    """A log x axis of latency in microseconds, labelled in its own unit (500ns, 20us, 1.5ms) on the
    decades (and 2x, 5x when it spans few decades); minor ticks unlabelled so labels never collide."""
    ax.set_xscale("log")
    decades = np.log10(max(hi_us, 1e-3) / max(lo_us, 1e-3)) if np.isfinite(lo_us) else 9
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if decades <= 2.5 else (1.0,)))
    ax.xaxis.set_major_formatter(_us_formatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("latency (log scale)")


def latency_panels(series: Sequence[Tuple[stats.Hist, str, Optional[str], bool]], title_text: str, path: str) -> str:
    """Two panels of latency distributions: the CDF (linear y, where most operations are) and the tail
    (y = 1 - p on a log scale, labelled p90 / p99 / p99.9 ..., where the slow operations are).
    series: [(histogram, label, color or None, mark p50/p99/p99.9)]."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 5))
    lo, hi, floor = np.inf, 0.0, 1.0
    for h, label, color, marks in series:
        x, y = cdf(h)
        (line,) = a1.step(x, y, where="post", color=color, label=label, linewidth=1.6)
        color = line.get_color()
        tail = 1.0 - y
        keep = tail > 0
        a2.step(x[keep], tail[keep], where="post", color=color, linewidth=1.6, label=label)
        lo, hi = min(lo, x.min()), max(hi, x.max())
        floor = min(floor, 0.5 / max(1, h["count"]))
        if marks:
            _percentile_marks((a1, a2), h, color)
    for ax in (a1, a2):
        log_time_axis(ax, lo, hi)
        ax.grid(which="major", alpha=0.35)
        ax.grid(which="minor", alpha=0.12)
    a1.set_ylabel("fraction of operations <= latency")
    a1.set_ylim(0, 1.02)
    a1.legend(loc="lower right", fontsize=8)
    a1.set_title("distribution (CDF)", fontsize=10)
    a2.set_yscale("log")
    a2.set_ylim(1.0, floor)  # inverted: the rarer (slower) operations higher up
    decades = int(np.ceil(-np.log10(floor)))
    ticks = [10.0**-k for k in range(0, decades + 1)]
    a2.yaxis.set_major_locator(FixedLocator(ticks))
    a2.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _pct_label(v)))
    a2.yaxis.set_minor_formatter(NullFormatter())
    a2.set_ylabel("percentile (1 - p, log scale)")
    a2.set_title("tail", fontsize=10)
    a2.legend(loc="lower right", fontsize=8)
    fig.suptitle(title_text, fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path)


def _pct_label(one_minus_p: float) -> str:
    """1 - p as a percentile label: 1 -> p0, 0.1 -> p90, 0.001 -> p99.9."""
    if one_minus_p >= 1:
        return "p0"
    return f"p{100 * (1 - one_minus_p):.6g}"


def _percentile_marks(axes: Tuple[Axes, Axes], h: stats.Hist, color: Any) -> None:
    for p, ls in ((50.0, ":"), (99.0, "--"), (99.9, "-.")):
        v = stats.percentile(h, p)
        for ax in axes:
            ax.axvline(
                v / 1e3,
                color=color,
                linestyle=ls,
                linewidth=0.9,
                alpha=0.8,
                label=f"p{p:g} = {fmt_ns(v)}" if ax is axes[0] else None,
            )
