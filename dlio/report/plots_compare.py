"""PNG plots of several runs compared (matplotlib's Agg backend, dlio.report.plotting), and every plot
of `dlio-fast report`'s sources (make_for_sources): compare_latency_cdf.png, compare_throughput.png.
"""

from __future__ import annotations

import os
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from dlio.base.units import fmt_ns
from dlio.report.plots import make_all
from dlio.report.plotting import (
    cache_epochs,
    headroom,
    hist,
    incomplete_mark,
    latency_panels,
    merged_hist,
    plt,
    save_figure,
    title,
)
from dlio.report.source import Source
from dlio.system import stats


def compare_latency(sources: Sequence[Source], path: str) -> Optional[str]:
    """Read-latency CDFs of several runs on one axis."""
    series: List[Tuple[stats.Hist, str, Optional[str], bool]] = []
    for s in sources:
        m = s.doc["metrics"]
        h = hist(m["read_latency_hist"]) if isinstance(m.get("read_latency_hist"), dict) else merged_hist(s.doc, "lat")
        if not h["count"]:
            continue  # a DLIO run records no read latency
        series.append(
            (
                h,
                f"{_label(s)}: p50 {fmt_ns(stats.percentile(h, 50))}, p99 {fmt_ns(stats.percentile(h, 99))}",
                None,
                False,
            )
        )
    if not series:
        return None
    return latency_panels(series, _compared_title("read latency", sources), path)


def compare_throughput(sources: Sequence[Source], path: str) -> Optional[str]:
    """samples/s and MiB/s per epoch (all ranks), one line per run."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.6))
    drawn = 0
    for s in sources:
        m = s.doc["metrics"]
        sps = m.get("samples_per_second") or []
        bps = m.get("bytes_per_second") or []
        if not sps:
            continue
        a1.plot(np.arange(1, len(sps) + 1), sps, marker="o", label=_label(s))
        a2.plot(np.arange(1, len(bps) + 1), np.asarray(bps) / 2**20, marker="o", label=_label(s))
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    for ax, unit in ((a1, "samples/s"), (a2, "MiB/s")):
        ax.set_xlabel("epoch")
        ax.set_ylabel(f"{unit} (all ranks)")
        headroom(ax)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"training {unit} per epoch", fontsize=10)
    fig.suptitle(_compared_title("throughput", sources), fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path)


def _label(s: Source) -> str:
    """A run's legend label, marked when it is incomplete and when some of its epochs read from the page cache."""
    n = len(cache_epochs(s.doc))
    label = s.label + incomplete_mark(s.doc)
    return f"{label} [{n} epoch{'s' if n > 1 else ''}: page cache, not storage]" if n else label


def _compared_title(what: str, sources: Sequence[Source]) -> str:
    return title(
        f"{what}, runs compared",
        _common_workload(sources),
        _common(lambda s: (s.doc.get("dataset") or {}).get("folder"), sources),
        _common(lambda s: str(s.doc.get("start") or "")[:10], sources),
    )


def _common(fn: Callable[[Source], Any], sources: Sequence[Source]) -> str:
    """The one value fn gives for all sources, or the first few joined with ' / '."""
    vals = sorted({str(fn(s) or "") for s in sources} - {""})
    if len(vals) <= 1:
        return vals[0] if vals else ""
    return " / ".join(vals[:3]) + (" ..." if len(vals) > 3 else "")


def _common_workload(sources: Sequence[Source]) -> str:
    return _common(lambda s: s.doc.get("workload") or s.doc.get("model"), sources) or "runs"


def make_for_sources(sources: Sequence[Source], plots_dir: Optional[str] = None) -> List[str]:
    """Plots for loaded source.Sources: each run's into its folder (or plots_dir, prefixed with the
    run's label when there are several), io / ceiling plots beside the JSON file (or in plots_dir),
    and comparison plots when there are several runs. Returns the paths written."""
    paths: List[str] = []
    runs = [s for s in sources if s.kind == "run"]
    several = len(sources) > 1
    for s in sources:
        if s.doc.get("tool") == "DLIO":
            continue  # a DLIO folder has no per-step timestamps to draw: it appears in the comparison plots
        if s.kind == "family":
            continue  # a workload family's run is tables only (its console lines say the same)
        if s.kind == "run":
            folder = s.path if os.path.isdir(s.path) else os.path.dirname(os.path.abspath(s.path))
            prefix = ""
        else:
            folder = os.path.dirname(os.path.abspath(s.path))
            prefix = os.path.splitext(os.path.basename(s.path))[0] + "_"
        if plots_dir:
            folder = plots_dir
            if several and s.kind == "run":
                prefix = _safe(s.label) + "_"
        paths += make_all(s.doc, folder, prefix=prefix, summary=s.summary)
    if len(runs) > 1:
        folder = plots_dir or (
            runs[0].path if os.path.isdir(runs[0].path) else os.path.dirname(os.path.abspath(runs[0].path))
        )
        for fn, name in ((compare_latency, "compare_latency_cdf.png"), (compare_throughput, "compare_throughput.png")):
            r = fn(runs, os.path.join(folder, name))
            if r:
                paths.append(r)
    return paths


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
