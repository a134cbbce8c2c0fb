"""PNG plots of io / ceiling results and comparisons of several runs (matplotlib's Agg backend).

io / ceiling plots:
  {stem}_vs_bs.png  bandwidth and IOPS against transfer size, one line per engine / threads (/ qd)
  {stem}_vs_qd.png  bandwidth and IOPS against queue depth, one line per engine / threads (/ bs)
Comparisons of several runs: compare_latency_cdf.png, compare_throughput.png.
"""

import os

import numpy as np
from matplotlib.ticker import FuncFormatter

from dlio.report.plots import (
    headroom,
    hist,
    latency_panels,
    make_all,
    merged_hist,
    minor_log_formatter,
    plt,
    save_figure,
    title,
)

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
        out[g] = (
            np.array(xs, dtype=np.float64),
            np.array([np.mean([v[0] for v in byx[x]]) for x in xs]),
            np.array([np.mean([v[1] for v in byx[x]]) for x in xs]),
        )
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
            ax.yaxis.set_minor_formatter(minor_log_formatter())
            ax.tick_params(axis="y", which="minor", labelsize=7)
            ylab += " (log scale)"
        else:
            headroom(ax)
        ax.margins(x=0.06)  # the first and last markers whole, not cut by the frame
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.set_ylabel(ylab)
        ax.grid(which="both", alpha=0.3)
        ax.legend(fontsize=8)
    kind, where, date = _io_meta(doc)
    what = "bandwidth and IOPS vs " + ("transfer size" if xkey == "bs" else "queue depth")
    mode = "O_DIRECT" if any(p.get("direct") for p in pts) else "buffered"
    fig.suptitle(title(f"{what} ({mode})", kind, where, date), fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path)


# ---------------------------------------------------------------------------------------------
# several runs


def compare_latency(sources, path):
    """Read-latency CDFs of several runs on one axis."""
    from dlio import stats
    from dlio.units import fmt_ns

    series = []
    for s in sources:
        m = s.doc["metrics"]
        h = hist(m["read_latency_hist"]) if isinstance(m.get("read_latency_hist"), dict) else merged_hist(s.doc, "lat")
        if not h["count"]:
            continue  # a DLIO run records no read latency
        series.append(
            (h, f"{s.label}: p50 {fmt_ns(stats.percentile(h, 50))}, p99 {fmt_ns(stats.percentile(h, 99))}", None, False)
        )
    if not series:
        return None
    return latency_panels(series, _compared_title("read latency", sources), path)


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
        a2.plot(np.arange(1, len(bps) + 1), np.asarray(bps) / 2**20, marker="o", label=s.label)
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


def _compared_title(what, sources):
    return title(
        f"{what}, runs compared",
        _common_workload(sources),
        _common(lambda s: (s.doc.get("dataset") or {}).get("folder"), sources),
        _common(lambda s: str(s.doc.get("start") or "")[:10], sources),
    )


def _common(fn, sources):
    """The one value fn gives for all sources, or the first few joined with ' / '."""
    vals = sorted({str(fn(s) or "") for s in sources} - {""})
    if len(vals) <= 1:
        return vals[0] if vals else ""
    return " / ".join(vals[:3]) + (" ..." if len(vals) > 3 else "")


def _common_workload(sources):
    return _common(lambda s: s.doc.get("workload") or s.doc.get("model"), sources) or "runs"


def make_for_sources(sources, plots_dir=None):
    """Plots for loaded source.Sources: each run's into its folder (or plots_dir, prefixed with the
    run's label when there are several), io / ceiling plots beside the JSON file (or in plots_dir),
    and comparison plots when there are several runs. Returns the paths written."""
    paths = []
    runs = [s for s in sources if s.kind == "run"]
    several = len(sources) > 1
    for s in sources:
        if s.doc.get("tool") == "DLIO":
            continue  # a DLIO folder has no per-step timestamps to draw: it appears in the comparison plots
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


def _safe(label):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
