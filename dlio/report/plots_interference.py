"""interference.png: what asynchronous checkpoints (checkpoint.async_save) cost training, over time.

Two panels on one time axis (seconds since rank 0's first step), in time bins: training's read MiB/s
(each batch's bytes spread over its step) and its AU (the compute spun in the bin / the bin), with
every checkpoint write's window shaded red, the time training was blocked by each checkpoint hatched
grey (the wait for the previous save, then the copy), each snapshot's start dashed: blocked, the AU is
0. A storage that
serves the write without hurting the reads shows the same levels inside the shaded windows as
outside; the figures of dlio.report.interference are in the title.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np

from dlio.report import interference
from dlio.report.plotting import incomplete_mark, plt, save_figure, title

C_READ = "#2a6fb0"
C_AU = "#4878a8"
C_WRITE = "#d8493b"
BINS = 300  # time bins at most


def binned(starts: np.ndarray, ends: np.ndarray, amounts: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per time bin, the amount spread evenly over each interval [starts, ends) that falls in it, per
    second (the intervals in order, not overlapping: one step after another)."""
    before = np.concatenate([[0.0], np.cumsum(amounts, dtype=np.float64)[:-1]])
    xs = np.stack([starts, ends], axis=1).ravel().astype(np.float64)
    ys = np.stack([before, before + amounts], axis=1).ravel()
    cum = np.interp(edges, xs, ys)
    return np.diff(cum) / np.diff(edges)


def interference_plot(result: Mapping[str, Any], path: str) -> Optional[str]:
    """The plot of rank 0's steps and saves, or None when the run has no asynchronous save."""
    ranks = result.get("ranks") or []
    if not ranks:
        return None
    rank = ranks[0]
    saves = interference.async_saves(rank)
    st = interference.steps_of(rank)
    if not saves or not len(st["t_fetch_ns"]):
        return None
    t0 = int(st["t_fetch_ns"][0])
    rel = {k: (st[k] - t0) / 1e9 for k in ("t_fetch_ns", "t_end_ns")}
    span = max(float(rel["t_end_ns"][-1]), 1e-9)
    edges = np.linspace(0.0, span, min(BINS, 4 * len(rel["t_end_ns"])) + 1)
    # compute is the end of each step, the batch's bytes are consumed over the whole step
    comp = np.minimum(st["compute_ns"], st["set_compute_ns"]) / 1e9
    au = 100.0 * binned(rel["t_end_ns"] - st["compute_ns"] / 1e9, rel["t_end_ns"], comp, edges)
    mib = binned(rel["t_fetch_ns"], rel["t_end_ns"], st["bytes"] / interference.MiB, edges)
    width = edges[1] - edges[0]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(11, 6.4), sharex=True)
    for ax, y, color, label in ((a1, mib, C_READ, "read MiB/s"), (a2, au, C_AU, "AU %")):
        ax.stairs(y, edges, color=color, linewidth=1.4, label=f"{label} (bins of {width * 1e3:.3g} ms)")
        for i, c in enumerate(saves):
            ax.axvspan(
                (c["write_start_ns"] - t0) / 1e9,
                (c["write_end_ns"] - t0) / 1e9,
                color=C_WRITE,
                alpha=0.13,
                linewidth=0,
                label="checkpoint write in flight" if i == 0 else None,
            )
            b0 = (c.get("blocked_start_ns", c["snapshot_start_ns"]) - t0) / 1e9
            ax.axvspan(
                b0,
                b0 + c["blocked_s"],
                color="black",
                alpha=0.12,
                hatch="//",
                linewidth=0,
                label="training blocked (waiting for the previous save, copying the state)" if i == 0 else None,
            )
            ax.axvline(
                (c["snapshot_start_ns"] - t0) / 1e9,
                color="black",
                linewidth=0.9,
                linestyle="--",
                label="snapshot" if i == 0 else None,
            )
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0, top=max(1e-9, float(np.nanmax(y))) * 1.35)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right", ncol=2)
    a2.set_xlabel("seconds since the first step (rank 0)")
    s = interference.summary(saves) or {}
    d, o = s.get("during"), s.get("outside")
    what = "training during asynchronous checkpoint writes"
    if d and o:
        what += (
            f": AU {d['au_percentage']:.1f} % during vs {o['au_percentage']:.1f} % outside, read "
            f"{d['read_MiB_per_second']:.1f} vs {o['read_MiB_per_second']:.1f} MiB/s; blocked "
            f"{s['blocked_s_mean']:.3f} s per save"
        )
    wl = (result.get("workload") or result.get("model") or "run") + incomplete_mark(result)
    fig.suptitle(
        title(what, wl, (result.get("dataset") or {}).get("folder") or "", str(result.get("start") or "")[:10]),
        fontsize=10,
    )
    fig.tight_layout()
    return save_figure(fig, path)
