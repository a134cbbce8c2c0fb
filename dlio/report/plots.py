"""PNG plots of a run (or of io / ceiling results), drawn with matplotlib's Agg backend.

Run plots (from one Result dict, or the dlio-fast.json document that holds it):
  timeline.png      per epoch, per step: I/O wait (accelerator starved) stacked on compute, seconds
  latency_cdf.png   CDF of read and sample latency from the merged histograms, log x, us
  throughput.png    samples/s and MiB/s per epoch, one line per rank (and all ranks together)
  checkpoint.png    checkpoint save / load GB/s, when the run has checkpoints
io / ceiling plots:
  {stem}_vs_bs.png  bandwidth and IOPS against transfer size, one line per engine / threads (/ qd)
  {stem}_vs_qd.png  bandwidth and IOPS against queue depth, one line per engine / threads (/ bs)
Comparisons of several runs: compare_latency_cdf.png, compare_throughput.png.

Every figure is titled with the workload (or 'io' / 'ceiling'), the storage path and the date, is
saved with savefig(dpi=110) and closed.
"""
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from dlio.errors import DlioError  # noqa: E402

DPI = 110
MAX_EPOCH_PANELS = 6
MAX_RANK_LINES = 8
BAR_STEPS = 200          # bars up to this many steps per epoch, filled step curves beyond
C_COMPUTE = "#4878a8"
C_WAIT = "#d8493b"


# ---------------------------------------------------------------------------------------------
# helpers

def _short(path, n=48):
    path = str(path)
    return path if len(path) <= n else "..." + path[-(n - 3):]


def _title(what, workload, where, date):
    bits = [str(workload or "-"), what]
    tail = ", ".join(x for x in (_short(where) if where else "", date) if x)
    return f"{' - '.join(bits)}\n{tail}" if tail else " - ".join(bits)


def _save(fig, path):
    try:
        fig.savefig(path, dpi=DPI)
    except OSError as e:
        raise DlioError(f"{path}: cannot write the plot ({e.strerror or e})") from None
    finally:
        plt.close(fig)
    return path


def _metrics(result):
    m = result.get("metrics")
    if isinstance(m, dict):
        return m
    from dlio.report import dlio_files
    return dlio_files.exact(result)


def _run_meta(result):
    return (result.get("workload") or result.get("model") or "run",
            (result.get("dataset") or {}).get("folder") or "",
            str(result.get("start") or "")[:10])


def _epochs_of(rank):
    return [ep for ep in rank.get("epochs", []) if ep.get("train")]


def _hist(h):
    from dlio import stats
    return stats.from_json(h) if isinstance(h, dict) and isinstance(h.get("buckets"), list) else h


def _merged(result, field):
    from dlio import stats
    return stats.merge([_hist(ep[field]) for r in result.get("ranks", []) for ep in r.get("epochs", [])
                        if isinstance(ep.get(field), dict)])


def _cdf(h):
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


def _us_formatter():
    return FuncFormatter(lambda v, _: f"{v:g}")


def _minor_log_formatter():
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
            ax.bar(x, wait, width=1.0, bottom=comp, color=C_WAIT, label="I/O wait (accelerator starved)",
                   linewidth=0)
        else:
            ax.fill_between(x, 0, comp, step="mid", color=C_COMPUTE, label="compute (accelerator busy)",
                            linewidth=0)
            ax.fill_between(x, comp, comp + wait, step="mid", color=C_WAIT,
                            label="I/O wait (accelerator starved)", linewidth=0)
        if len(ranks) > 1:
            others = [_epoch_train(r, ep["epoch"]) for r in ranks]
            waits = [np.asarray(o["load"]) for o in others if o is not None]
            m = min(len(w) for w in waits)
            slow = np.max(np.stack([w[:m] for w in waits]), axis=0)
            ax.plot(np.arange(m), comp[:m] + slow, color="black", linewidth=0.8,
                    label=f"compute + slowest rank's wait ({len(ranks)} ranks)")
        if skip:
            ax.axvspan(-0.5, skip - 0.5, color="grey", alpha=0.15, label="excluded from AU")
        total = wait.sum() + comp.sum()
        share = 100.0 * wait.sum() / total if total > 0 else 0.0
        worst = int(np.argmax(wait)) if len(wait) else 0
        ax.set_title(f"epoch {ep['epoch']}: I/O wait {share:.1f} % of step time, "
                     f"max {wait[worst] * 1e3:.3f} ms at step {worst}", fontsize=9, loc="left")
        ax.set_ylabel("seconds")
        ax.set_xlim(-0.5, len(x) - 0.5)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(axis="y", alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    wl, where, date = _run_meta(result)
    note = "rank 0" + (f", {n} of {len(eps)} epochs" if n < len(eps) else "")
    fig.suptitle(_title(f"per-step I/O wait vs compute ({note})", wl, where, date), fontsize=11,
                 y=1 - 0.08 / height)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 1 - 0.62 / height))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.30 / height))
    return _save(fig, path)


def _epoch_train(rank, e):
    for ep in rank.get("epochs", []):
        if ep.get("epoch") == e and ep.get("train"):
            return ep["train"]
    return None


def latency_cdf(result, path):
    """CDF of read latency (and per-sample latency) over the whole run, log x in us."""
    m = _metrics(result)
    read = _hist(m["read_latency_hist"]) if isinstance(m.get("read_latency_hist"), dict) \
        else _merged(result, "lat")
    sample = _merged(result, "sample_lat")
    if not read["count"]:
        return None
    fig, ax = plt.subplots(figsize=(8, 5))
    _cdf_line(ax, read, f"read ({read['count']:,} reads)", "#2a6fb0", marks=True)
    if sample["count"]:
        _cdf_line(ax, sample, f"sample ({sample['count']:,} samples)", "#e08a1e", marks=False)
    _cdf_axes(ax)
    wl, where, date = _run_meta(result)
    ax.set_title(_title("read latency distribution", wl, where, date), fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def _cdf_line(ax, h, label, color, marks):
    from dlio import stats
    x, y = _cdf(h)
    ax.step(x, y, where="post", color=color, label=label, linewidth=1.6)
    if marks:
        for p, ls in ((50.0, ":"), (99.0, "--"), (99.9, "-.")):
            v = stats.percentile(h, p) / 1e3
            ax.axvline(v, color=color, linestyle=ls, linewidth=0.9, alpha=0.8,
                       label=f"p{p:g} = {v:.1f} us")


def _cdf_axes(ax):
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(_us_formatter())
    ax.xaxis.set_minor_formatter(_minor_log_formatter())
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_xlabel("latency (us, log scale)")
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
            (a2, "bytes_per_second", 2 ** -20, "MiB/s", "bytes_per_second")):
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
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"training {unit} per epoch", fontsize=10)
    wl, where, date = _run_meta(result)
    fig.suptitle(_title("throughput per epoch", wl, where, date), fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


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
            ax.plot(np.arange(1, len(vals) + 1), vals, marker="o", color=color,
                    label=f"{kind}, all ranks (mean {np.mean(vals):.3f} GiB/s)")
            drawn = True
        if ck[f"{kind}_GB_s"] is not None:
            ax.axhline(ck[f"{kind}_GB_s"], color=color, linestyle="--", linewidth=1,
                       label=f"{kind}, DLIO formula (rank 0 mean {ck[f'{kind}_GB_s']:.3f} GB/s)")
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel("checkpoint number")
    ax.set_ylabel("GiB/s (DLIO's GB are GiB)")
    ax.set_ylim(bottom=0)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    wl, where, date = _run_meta(result)
    ax.set_title(_title("checkpoint write / read throughput", wl, where, date), fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


# ---------------------------------------------------------------------------------------------
# io / ceiling plots

def _io_meta(doc):
    kind = "ceiling" if doc.get("schema", "").startswith("dlio-fast.ceiling") else "io"
    where = doc.get("path") or ", ".join(doc.get("paths") or [])
    return kind, where, str((doc.get("environment") or {}).get("created") or "")[:10]


def _io_points(doc):
    if isinstance(doc.get("points"), list):
        return doc["points"]
    if isinstance(doc.get("probes"), list) and doc["probes"]:
        return doc["probes"]
    return [p for p in (doc.get("best") or {}).values() if isinstance(p, dict)]


def _qd(p):
    """The depth a point ran at (a sync engine runs at 1 whatever was asked)."""
    return p.get("qd_used") or p["qd"]


def _series(pts, xkey, group_keys):
    """{group tuple: (xs, bw, iops)} with duplicate x values averaged, xs sorted."""
    groups = {}
    for p in pts:
        x = _qd(p) if xkey == "qd" else p[xkey]
        g = tuple(_qd(p) if k == "qd" else p[k] for k in group_keys)
        groups.setdefault(g, {}).setdefault(x, []).append((p["bw_MiB_s"], p["iops"]))
    out = {}
    for g, byx in groups.items():
        xs = sorted(byx)
        out[g] = (np.array(xs, dtype=np.float64),
                  np.array([np.mean([v[0] for v in byx[x]]) for x in xs]),
                  np.array([np.mean([v[1] for v in byx[x]]) for x in xs]))
    return out


def _group_label(keys, g):
    from dlio.units import fmt_size
    parts = []
    for k, v in zip(keys, g):
        if k == "engine":
            parts.append(str(v))
        elif k == "threads":
            parts.append(f"{v} thr")
        elif k == "qd":
            parts.append(f"qd {v}")
        elif k == "bs":
            parts.append(fmt_size(v))
        elif k == "rw":
            parts.append(str(v))
    return " ".join(parts)


def _size_formatter():
    from dlio.units import fmt_size
    return FuncFormatter(lambda v, _: fmt_size(int(v)) if v >= 1 and float(v).is_integer() else f"{v:g}")


def io_vs(doc, path, xkey):
    """Bandwidth and IOPS against transfer size (xkey 'bs') or queue depth ('qd')."""
    pts = [p for p in _io_points(doc) if "bw_MiB_s" in p]
    if not pts:
        return None
    other = "qd" if xkey == "bs" else "bs"
    group = ["engine", "threads"]
    for k in ("rw", other):
        if len({_qd(p) if k == "qd" else p[k] for p in pts}) > 1:
            group.append(k)
    series = _series(pts, xkey, group)
    if xkey == "qd" and all(len(s[0]) < 2 for s in series.values()):
        return None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11.5, 4.8))
    for g in sorted(series, key=lambda g: tuple(str(v) for v in g)):
        xs, bw, iops = series[g]
        lab = _group_label(group, g)
        a1.plot(xs, bw, marker="o", label=lab)
        a2.plot(xs, iops, marker="o", label=lab)
    for ax, ylab in ((a1, "bandwidth (MiB/s)"), (a2, "IOPS")):
        ax.set_xscale("log", base=2)
        if xkey == "bs":
            ax.xaxis.set_major_formatter(_size_formatter())
            ax.set_xlabel("transfer size (bytes, log scale)")
        else:
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.set_xlabel("queue depth per thread (as run, log scale)")
        if xkey == "bs" and ax is a2:
            # IOPS falls by orders of magnitude as the transfer size grows
            ax.set_yscale("log")
            ax.yaxis.set_minor_formatter(_minor_log_formatter())
            ax.tick_params(axis="y", which="minor", labelsize=7)
            ylab += " (log scale)"
        else:
            ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.set_ylabel(ylab)
        ax.grid(which="both", alpha=0.3)
        ax.legend(fontsize=8)
    kind, where, date = _io_meta(doc)
    what = "bandwidth and IOPS vs " + ("transfer size" if xkey == "bs" else "queue depth")
    mode = "O_DIRECT" if any(p.get("direct") for p in pts) else "buffered"
    fig.suptitle(_title(f"{what} ({mode})", kind, where, date), fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


# ---------------------------------------------------------------------------------------------
# several runs

def compare_latency(sources, path):
    """Read-latency CDFs of several runs on one axis."""
    fig, ax = plt.subplots(figsize=(8, 5))
    drawn = 0
    for s in sources:
        m = s.doc["metrics"]
        h = _hist(m["read_latency_hist"]) if isinstance(m.get("read_latency_hist"), dict) \
            else _merged(s.doc, "lat")
        if not h["count"]:
            continue
        x, y = _cdf(h)
        from dlio import stats
        ax.step(x, y, where="post", linewidth=1.6,
                label=f"{s.label}: p50 {stats.percentile(h, 50) / 1e3:.1f}, p99 {stats.percentile(h, 99) / 1e3:.1f} us")
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    _cdf_axes(ax)
    ax.set_title(_title("read latency, runs compared", _common_workload(sources),
                        _common(lambda s: (s.doc.get("dataset") or {}).get("folder"), sources),
                        _common(lambda s: str(s.doc.get("start") or "")[:10], sources)), fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def compare_throughput(sources, path):
    """samples/s and MiB/s per epoch (all ranks), one line per run."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.6))
    drawn = 0
    for s in sources:
        m = s.doc["metrics"]
        sps = m.get("samples_per_second") or []
        bps = m.get("bytes_per_second") or []
        if not sps:
            continue
        a1.plot(np.arange(1, len(sps) + 1), sps, marker="o", label=s.label)
        a2.plot(np.arange(1, len(bps) + 1), np.asarray(bps) / 2 ** 20, marker="o", label=s.label)
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    for ax, unit in ((a1, "samples/s"), (a2, "MiB/s")):
        ax.set_xlabel("epoch")
        ax.set_ylabel(f"{unit} (all ranks)")
        ax.set_ylim(bottom=0)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"training {unit} per epoch", fontsize=10)
    fig.suptitle(_title("throughput, runs compared", _common_workload(sources),
                        _common(lambda s: (s.doc.get("dataset") or {}).get("folder"), sources),
                        _common(lambda s: str(s.doc.get("start") or "")[:10], sources)), fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def _common(fn, sources):
    """The one value fn gives for all sources, or the first few joined with ' / '."""
    vals = sorted({str(fn(s) or "") for s in sources} - {""})
    if len(vals) <= 1:
        return vals[0] if vals else ""
    return " / ".join(vals[:3]) + (" ..." if len(vals) > 3 else "")


def _common_workload(sources):
    return _common(lambda s: s.doc.get("workload") or s.doc.get("model"), sources) or "runs"


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

    if schema.startswith("dlio-fast.io") or schema.startswith("dlio-fast.ceiling"):
        for xkey in ("bs", "qd"):
            out.append(io_vs(result, p(f"vs_{xkey}.png"), xkey))
        return [x for x in out if x]
    if "metrics" not in result:
        result = dict(result)
        result["metrics"] = _metrics(result)
    out.append(timeline(result, p("timeline.png")))
    out.append(latency_cdf(result, p("latency_cdf.png")))
    out.append(throughput(result, p("throughput.png")))
    out.append(checkpoint(result, p("checkpoint.png"), summary))
    return [x for x in out if x]


def make_for_sources(sources, plots_dir=None):
    """Plots for loaded compare.Sources: each run's into its folder (or plots_dir, prefixed with the
    run's label when there are several), io / ceiling plots beside the JSON file (or in plots_dir),
    and comparison plots when there are several runs. Returns the paths written."""
    paths = []
    runs = [s for s in sources if s.kind == "run"]
    several = len(sources) > 1
    for s in sources:
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
        folder = plots_dir or (runs[0].path if os.path.isdir(runs[0].path)
                               else os.path.dirname(os.path.abspath(runs[0].path)))
        for fn, name in ((compare_latency, "compare_latency_cdf.png"),
                         (compare_throughput, "compare_throughput.png")):
            r = fn(runs, os.path.join(folder, name))
            if r:
                paths.append(r)
    return paths


def _safe(label):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
