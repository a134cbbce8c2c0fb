"""PNG plots of a run (or of io / ceiling results), drawn with matplotlib's Agg backend.

Run plots (from one Result dict, or the dlio-fast.json document that holds it):
  timeline.png      per epoch, per step: I/O wait (accelerator starved) stacked on compute, seconds
  latency_cdf.png   CDF of read and sample latency from the merged histograms, log x, us
  throughput.png    samples/s and MiB/s per epoch, one line per rank (and all ranks together)
  checkpoint.png    checkpoint save / load GB/s, when the run has checkpoints
  interference.png  read MiB/s and AU over time with the asynchronous checkpoint writes marked
                    (checkpoint.async_save: dlio.report.plots_interference)
io / ceiling plots: dlio.report.plots_io; comparisons of several runs: dlio.report.plots_compare.

Every figure is titled with the workload (or 'io' / 'ceiling'), the storage path and the date, is
saved with savefig(dpi=110) and closed (dlio.report.plotting).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from dlio.base.errors import DlioError
from dlio.base.units import fmt_ns
from dlio.report import checkpoint as ckpt_figures
from dlio.report.exact import metrics_of
from dlio.report.plots_interference import interference_plot
from dlio.report.plots_io import io_vs
from dlio.report.plotting import (
    CACHE_COLOR,
    CACHE_HATCH,
    CACHE_LABEL,
    cache_epochs,
    cache_note,
    headroom,
    hist,
    incomplete_mark,
    latency_panels,
    merged_hist,
    plt,
    save_figure,
    title,
)
from dlio.report.result import CEILING_SCHEMA, IO_SCHEMA

MAX_EPOCH_PANELS = 6
MAX_RANK_LINES = 8
BAR_STEPS = 200  # bars up to this many steps per epoch, filled step curves beyond
C_COMPUTE = "#4878a8"
C_WAIT = "#d8493b"


def _run_meta(result: Mapping[str, Any]) -> tuple[str, str, str]:
    return (
        (result.get("workload") or result.get("model") or "run") + incomplete_mark(result),
        (result.get("dataset") or {}).get("folder") or "",
        str(result.get("start") or "")[:10],
    )


def _epochs_of(rank: Mapping[str, Any]) -> List[Dict[str, Any]]:
    return [ep for ep in rank.get("epochs", []) if ep.get("train")]


def timeline(result: Mapping[str, Any], path: str) -> Optional[str]:
    """Per-step I/O wait stacked on compute, one panel per epoch (rank 0; the slowest rank's wait
    as a line when there are several)."""
    ranks = result.get("ranks") or []
    if not ranks or not _epochs_of(ranks[0]):
        return None
    eps = _epochs_of(ranks[0])
    if len(eps) > MAX_EPOCH_PANELS:
        idx = np.unique(np.linspace(0, len(eps) - 1, MAX_EPOCH_PANELS).round().astype(int))
        shown = [eps[i] for i in idx]
    else:
        shown = eps
    skip = int((result.get("settings") or {}).get("exclude_start_steps", 0) or 0)
    cached = cache_epochs(result)
    n = len(shown)
    height = 1.6 + 2.3 * n
    fig, axes = plt.subplots(n, 1, figsize=(10, height), squeeze=False, sharey=True)
    for ax, ep in zip(axes[:, 0], shown):
        t = ep["train"]
        wait = np.asarray(t["load"], dtype=np.float64)
        comp = np.asarray(t["compute"], dtype=np.float64)
        x = np.arange(len(wait))
        if len(x) <= BAR_STEPS:
            ax.bar(x, comp, width=1.0, color=C_COMPUTE, label="compute (accelerator busy)", linewidth=0)
            ax.bar(x, wait, width=1.0, bottom=comp, color=C_WAIT, label="I/O wait (accelerator starved)", linewidth=0)
        else:
            ax.fill_between(x, 0, comp, step="mid", color=C_COMPUTE, label="compute (accelerator busy)", linewidth=0)
            ax.fill_between(
                x, comp, comp + wait, step="mid", color=C_WAIT, label="I/O wait (accelerator starved)", linewidth=0
            )
        if len(ranks) > 1:
            others = [_epoch_train(r, ep["epoch"]) for r in ranks]
            waits = [np.asarray(o["load"]) for o in others if o is not None]
            m = min(len(w) for w in waits)
            slow = np.max(np.stack([w[:m] for w in waits]), axis=0)
            ax.plot(
                np.arange(m),
                comp[:m] + slow,
                color="black",
                linewidth=0.8,
                label=f"compute + slowest rank's wait ({len(ranks)} ranks)",
            )
        if skip:
            ax.axvspan(-0.5, skip - 0.5, color="grey", alpha=0.15, label="excluded from AU")
        total = wait.sum() + comp.sum()
        share = 100.0 * wait.sum() / total if total > 0 else 0.0
        worst = int(np.argmax(wait)) if len(wait) else 0
        if ep["epoch"] in cached:  # the whole panel hatched: these reads came from the page cache
            ax.axvspan(-0.5, len(x) - 0.5, facecolor="none", edgecolor=CACHE_COLOR, hatch=CACHE_HATCH, alpha=0.35)
        ax.set_title(
            f"epoch {ep['epoch']}: I/O wait {share:.1f} % of step time, max {fmt_ms(wait[worst])} at step {worst}"
            + (f" [{CACHE_LABEL}]" if ep["epoch"] in cached else ""),
            fontsize=9,
            loc="left",
            **({"color": CACHE_COLOR} if ep["epoch"] in cached else {}),
        )
        ax.set_ylabel("seconds")
        ax.set_xlim(-0.5, len(x) - 0.5)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(axis="y", alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    wl, where, date = _run_meta(result)
    note = "rank 0" + (f", {n} of {len(eps)} epochs" if n < len(eps) else "")
    mark = cache_note(len(cached), len(eps))
    fig.suptitle(
        title(f"per-step I/O wait vs compute ({note}){mark}", wl, where, date), fontsize=11, y=1 - 0.08 / height
    )
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="upper center",
        ncol=len(labels),
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5, 1 - 0.62 / height),
    )
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.30 / height))
    return save_figure(fig, path)


def fmt_ms(seconds: float) -> str:
    """A wait in the plots' titles, in the console's units (dlio.base.units.fmt_ns)."""
    return fmt_ns(float(seconds) * 1e9)


def _epoch_train(rank: Mapping[str, Any], e: int) -> Optional[Dict[str, Any]]:
    for ep in rank.get("epochs", []):
        if ep.get("epoch") == e and ep.get("train"):
            return ep["train"]
    return None


def latency_cdf(result: Mapping[str, Any], path: str) -> Optional[str]:
    """Read latency (and per-sample latency) over the whole run: the CDF, and the tail (1 - p, log)."""
    m = metrics_of(result)
    read = hist(m["read_latency_hist"]) if isinstance(m.get("read_latency_hist"), dict) else merged_hist(result, "lat")
    sample = merged_hist(result, "sample_lat")
    if not read["count"]:
        return None
    mark = cache_note(len(cache_epochs(result)), len(_epochs_of((result.get("ranks") or [{}])[0])))
    series = [(read, f"read ({read['count']:,} reads){' incl. page-cache epochs' if mark else ''}", "#2a6fb0", True)]
    if sample["count"]:
        series.append((sample, f"sample ({sample['count']:,} samples)", "#e08a1e", False))
    wl, where, date = _run_meta(result)
    return latency_panels(series, title(f"read latency distribution{mark}", wl, where, date), path)


def throughput(result: Mapping[str, Any], path: str) -> Optional[str]:
    """samples/s and MiB/s per epoch: each rank (min/median/max over many ranks) and all ranks."""
    m = metrics_of(result)
    per_rank = m.get("per_rank") or []
    if not per_rank or not any(pr.get("samples_per_second") for pr in per_rank):
        return None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.6))
    for ax, key, scale, unit, total_key in (
        (a1, "samples_per_second", 1.0, "samples/s", "samples_per_second"),
        (a2, "bytes_per_second", 2**-20, "MiB/s", "bytes_per_second"),
    ):
        n = min(len(pr[key]) for pr in per_rank)
        if n == 0:
            continue
        epochs = np.arange(1, n + 1)
        vals = np.array([np.asarray(pr[key][:n], dtype=np.float64) * scale for pr in per_rank])
        if len(per_rank) <= MAX_RANK_LINES:
            for pr, v in zip(per_rank, vals):
                ax.plot(epochs, v, marker="o", linewidth=1.2, label=f"rank {pr['rank']}")
        else:
            ax.fill_between(epochs, vals.min(0), vals.max(0), alpha=0.25, label="ranks min..max")
            ax.plot(epochs, np.median(vals, 0), marker="o", label="rank median")
        tot = np.asarray(m.get(total_key) or [], dtype=np.float64)[:n] * scale
        if len(per_rank) > 1 and len(tot) == n:
            ax.plot(epochs, tot, marker="s", color="black", linewidth=1.6, label="all ranks")
        for i, e in enumerate(sorted(cache_epochs(result) & set(epochs.tolist()))):  # page-cache epochs hatched
            ax.axvspan(
                e - 0.45,
                e + 0.45,
                facecolor="none",
                edgecolor=CACHE_COLOR,
                hatch=CACHE_HATCH,
                alpha=0.5,
                label=CACHE_LABEL if i == 0 else None,
            )
        ax.set_xlabel("epoch")
        ax.set_ylabel(unit)
        ax.set_xticks(epochs)
        headroom(ax)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper right", ncol=2)
        ax.set_title(f"training {unit} per epoch", fontsize=10)
    wl, where, date = _run_meta(result)
    mark = cache_note(
        len(cache_epochs(result)), len(m.get("samples_per_second") or []) or len(per_rank[0]["samples_per_second"])
    )
    fig.suptitle(title(f"throughput per epoch{mark}", wl, where, date), fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path)


def checkpoint(result: Mapping[str, Any], path: str, summary: Optional[Dict[str, Any]] = None) -> Optional[str]:
    """Checkpoint save / load GB/s per checkpoint (or the means), when the run has checkpoints."""
    ck = ckpt_figures.checkpoint_figures(summary, result)
    if ck is None:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.6))
    drawn = False
    for kind, color in (("save", "#c0504d"), ("load", "#4f81bd")):
        vals = ck[kind]
        if vals:
            ax.plot(
                np.arange(1, len(vals) + 1),
                vals,
                marker="o",
                color=color,
                label=f"{kind}, all ranks (mean {np.mean(vals):.3f} GiB/s)",
            )
            drawn = True
        if ck[f"{kind}_GB_s"] is not None:
            ax.axhline(
                ck[f"{kind}_GB_s"],
                color=color,
                linestyle="--",
                linewidth=1,
                label=f"{kind}, DLIO formula: rank 0 mean {ck[f'{kind}_GB_s']:.3f} GiB/s (DLIO prints 'GB/s')",
            )
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel("checkpoint number")
    ax.set_ylabel("GiB/s")
    ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.25)  # room for the legend above the lines
    # the default locator is a MaxNLocator (AutoLocator), which takes integer=; the stubs say Locator
    ax.xaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]
    ax.margins(x=0.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    wl, where, date = _run_meta(result)
    folders: List[Any] = [r.get("folder") for r in ckpt_figures.checkpoint_records_of(result) if r.get("folder")]
    if folders:  # the checkpoint folder, not the dataset's
        where = os.path.dirname(os.path.normpath(folders[0]))
    ax.set_title(title("checkpoint write / read throughput", wl, where, date), fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path)


def make_all(
    result: Mapping[str, Any], out_dir: str, prefix: str = "", summary: Optional[Dict[str, Any]] = None
) -> List[str]:
    """Every plot that applies to one Result dict (or dlio-fast.json / io / ceiling document),
    written into out_dir as PNG files. Returns the paths written."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise DlioError(f"{out_dir}: cannot create the plots folder ({e.strerror or e})") from None
    schema = str(result.get("schema") or "")
    out: List[Optional[str]] = []

    def p(name: str) -> str:
        return os.path.join(out_dir, f"{prefix}{name}")

    if schema in (IO_SCHEMA, CEILING_SCHEMA):
        return [x for x in (io_vs(result, p(f"vs_{xkey}.png"), xkey) for xkey in ("bs", "qd")) if x]
    if "metrics" not in result:
        result = dict(result)
        result["metrics"] = metrics_of(result)
    out.append(timeline(result, p("timeline.png")))
    out.append(latency_cdf(result, p("latency_cdf.png")))
    out.append(throughput(result, p("throughput.png")))
    out.append(checkpoint(result, p("checkpoint.png"), summary))
    out.append(interference_plot(result, p("interference.png")))
    return [x for x in out if x]
