"""PNG plots of a run (or of io / ceiling results), drawn with matplotlib's Agg backend.

Run plots (from one Result dict, or the dlio-fast.json document that holds it):
  timeline.png      per epoch, per step: I/O wait (accelerator starved) stacked on compute, seconds
  latency_cdf.png   CDF of read and sample latency from the merged histograms, log x, us
  throughput.png    samples/s and MiB/s per epoch, one line per rank (and all ranks together)
  checkpoint.png    checkpoint save / load GB/s, when the run has checkpoints
  interference.png  read MiB/s and AU over time with the asynchronous checkpoint writes marked
                    (checkpoint.async_save: dlio.report.plots_interference)
io / ceiling plots and comparisons of several runs: dlio.report.plots_compare.

Every figure is titled with the workload (or 'io' / 'ceiling'), the storage path and the date, is
saved with savefig(dpi=110) and closed.
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from dlio.errors import DlioError  # noqa: E402
from dlio.report.result import CEILING_SCHEMA, IO_SCHEMA  # noqa: E402

DPI = 110
MAX_EPOCH_PANELS = 6
MAX_RANK_LINES = 8
BAR_STEPS = 200  # bars up to this many steps per epoch, filled step curves beyond
C_COMPUTE = "#4878a8"
C_WAIT = "#d8493b"


# ---------------------------------------------------------------------------------------------
# helpers


def _short(path, n=48):
    path = str(path)
    return path if len(path) <= n else "..." + path[-(n - 3) :]


def title(what, workload, where, date):
    bits = [str(workload or "-"), what]
    tail = ", ".join(x for x in (_short(where) if where else "", date) if x)
    return f"{' - '.join(bits)}\n{tail}" if tail else " - ".join(bits)


def save_figure(fig, path):
    try:
        from dlio.output import result_path

        with result_path(path) as tmp:  # atomic for a file, written through for /dev/stdout
            fig.savefig(tmp, dpi=DPI, format=os.path.splitext(str(path))[1][1:] or None)
    except OSError as e:
        raise DlioError(f"{path}: cannot write the plot ({e.strerror or e})") from None
    finally:
        plt.close(fig)
    return path


def headroom(ax, frac=0.25):
    """y from 0 to the highest point plus room, so that no line sits on the frame (its markers cut
    in half) and the legend has space above the data."""
    tops = [
        np.nanmax(np.asarray(line.get_ydata(), dtype=np.float64)) for line in ax.get_lines() if len(line.get_ydata())
    ]
    tops = [t for t in tops if np.isfinite(t)]
    if tops and max(tops) > 0:
        ax.set_ylim(0, max(tops) * (1 + frac))
    else:
        ax.set_ylim(bottom=0)
    ax.margins(x=0.04)


def _metrics(result):
    m = result.get("metrics")
    if isinstance(m, dict):
        return m
    from dlio.report import exact

    return exact.exact(result)


def _run_meta(result):
    return (
        result.get("workload") or result.get("model") or "run",
        (result.get("dataset") or {}).get("folder") or "",
        str(result.get("start") or "")[:10],
    )


def _epochs_of(rank):
    return [ep for ep in rank.get("epochs", []) if ep.get("train")]


def hist(h):
    from dlio import stats

    return stats.from_json(h) if isinstance(h, dict) and isinstance(h.get("buckets"), list) else h


def merged_hist(result, field):
    from dlio import stats

    return stats.merge(
        [
            hist(ep[field])
            for r in result.get("ranks", [])
            for ep in r.get("epochs", [])
            if isinstance(ep.get(field), dict)
        ]
    )


def cdf(h):
    """(x in us, cumulative fraction) of a histogram; empty arrays when it has no samples."""
    from dlio import stats

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


def short_time(us):
    """A tick label of a time in microseconds, in its own unit: 500ns, 20us, 1.5ms, 2s."""
    ns = float(us) * 1e3
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= div:
            return f"{ns / div:.3g}{unit}"
    return f"{ns:.3g}ns"


def _us_formatter():
    return FuncFormatter(lambda v, _: short_time(v) if v > 0 else "")


def minor_log_formatter():
    """Label the 2x and 5x minor ticks of a log axis plainly (matplotlib would write 2x10^0)."""

    def fmt(v, _):
        if v <= 0:
            return ""
        lead = round(v / 10 ** np.floor(np.log10(v)), 6)
        if lead not in (2.0, 5.0):
            return ""
        return f"{v:,.0f}" if v >= 1000 else f"{v:g}"

    return FuncFormatter(fmt)


# ---------------------------------------------------------------------------------------------
# run plots


def timeline(result, path):
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
        ax.set_title(
            f"epoch {ep['epoch']}: I/O wait {share:.1f} % of step time, max {wait[worst] * 1e3:.3f} ms at step {worst}",
            fontsize=9,
            loc="left",
        )
        ax.set_ylabel("seconds")
        ax.set_xlim(-0.5, len(x) - 0.5)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(axis="y", alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    wl, where, date = _run_meta(result)
    note = "rank 0" + (f", {n} of {len(eps)} epochs" if n < len(eps) else "")
    fig.suptitle(title(f"per-step I/O wait vs compute ({note})", wl, where, date), fontsize=11, y=1 - 0.08 / height)
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


def _epoch_train(rank, e):
    for ep in rank.get("epochs", []):
        if ep.get("epoch") == e and ep.get("train"):
            return ep["train"]
    return None


def latency_cdf(result, path):
    """Read latency (and per-sample latency) over the whole run: the CDF, and the tail (1 - p, log)."""
    m = _metrics(result)
    read = hist(m["read_latency_hist"]) if isinstance(m.get("read_latency_hist"), dict) else merged_hist(result, "lat")
    sample = merged_hist(result, "sample_lat")
    if not read["count"]:
        return None
    series = [(read, f"read ({read['count']:,} reads)", "#2a6fb0", True)]
    if sample["count"]:
        series.append((sample, f"sample ({sample['count']:,} samples)", "#e08a1e", False))
    wl, where, date = _run_meta(result)
    return latency_panels(series, title("read latency distribution", wl, where, date), path)


def latency_panels(series, title_text, path):
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


def _pct_label(one_minus_p):
    """1 - p as a percentile label: 1 -> p0, 0.1 -> p90, 0.001 -> p99.9."""
    if one_minus_p >= 1:
        return "p0"
    return f"p{100 * (1 - one_minus_p):.6g}"


def _percentile_marks(axes, h, color):
    from dlio import stats
    from dlio.units import fmt_ns

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


def log_time_axis(ax, lo_us, hi_us):
    """A log x axis of latency in microseconds, labelled in its own unit (500ns, 20us, 1.5ms) on the
    decades (and 2x, 5x when it spans few decades); minor ticks unlabelled so labels never collide."""
    ax.set_xscale("log")
    decades = np.log10(max(hi_us, 1e-3) / max(lo_us, 1e-3)) if np.isfinite(lo_us) else 9
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if decades <= 2.5 else (1.0,)))
    ax.xaxis.set_major_formatter(_us_formatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("latency (log scale)")


def cdf_axes(ax):
    log_time_axis(ax, np.inf, 0)
    ax.set_ylabel("fraction of operations <= latency")
    ax.set_ylim(0, 1.02)
    ax.grid(which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)


def throughput(result, path):
    """samples/s and MiB/s per epoch: each rank (min/median/max over many ranks) and all ranks."""
    m = _metrics(result)
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
        ax.set_xlabel("epoch")
        ax.set_ylabel(unit)
        ax.set_xticks(epochs)
        headroom(ax)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper right", ncol=2)
        ax.set_title(f"training {unit} per epoch", fontsize=10)
    wl, where, date = _run_meta(result)
    fig.suptitle(title("throughput per epoch", wl, where, date), fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path)


def checkpoint(result, path, summary=None):
    """Checkpoint save / load GB/s per checkpoint (or the means), when the run has checkpoints."""
    from dlio.report import compare

    ck = compare.checkpoint_figures(summary, result)
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
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.margins(x=0.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    wl, where, date = _run_meta(result)
    folders = [r.get("folder") for r in compare._ckpt_records(result) if r.get("folder")]
    if folders:  # the checkpoint folder, not the dataset's
        where = os.path.dirname(os.path.normpath(folders[0]))
    ax.set_title(title("checkpoint write / read throughput", wl, where, date), fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path)


# ---------------------------------------------------------------------------------------------
# entry points


def make_all(result, out_dir, prefix="", summary=None):
    """Every plot that applies to one Result dict (or dlio-fast.json / io / ceiling document),
    written into out_dir as PNG files. Returns the paths written."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise DlioError(f"{out_dir}: cannot create the plots folder ({e.strerror or e})") from None
    schema = str(result.get("schema") or "")
    out = []

    def p(name):
        return os.path.join(out_dir, f"{prefix}{name}")

    if schema in (IO_SCHEMA, CEILING_SCHEMA):
        from dlio.report.plots_compare import io_vs

        return [x for x in (io_vs(result, p(f"vs_{xkey}.png"), xkey) for xkey in ("bs", "qd")) if x]
    if "metrics" not in result:
        result = dict(result)
        result["metrics"] = _metrics(result)
    out.append(timeline(result, p("timeline.png")))
    out.append(latency_cdf(result, p("latency_cdf.png")))
    out.append(throughput(result, p("throughput.png")))
    out.append(checkpoint(result, p("checkpoint.png"), summary))
    from dlio.report.plots_interference import interference_plot  # checkpoint.async_save runs

    out.append(interference_plot(result, p("interference.png")))
    return [x for x in out if x]
