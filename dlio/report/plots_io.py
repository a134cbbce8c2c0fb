"""PNG plots of io / ceiling results (matplotlib's Agg backend, dlio.report.plotting):
{stem}_vs_bs.png  bandwidth and IOPS against transfer size, one line per engine / threads (/ qd)
{stem}_vs_qd.png  bandwidth and IOPS against queue depth, one line per engine / threads (/ bs)
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from matplotlib.ticker import FuncFormatter

from dlio.base.units import fmt_size
from dlio.report.plotting import (
    CACHE_COLOR,
    CACHE_HATCH,
    CACHE_LABEL,
    cache_note,
    headroom,
    incomplete_mark,
    minor_log_formatter,
    plt,
    save_figure,
    title,
)


def _io_meta(doc: Mapping[str, Any]) -> Tuple[str, str, str]:
    kind = ("ceiling" if doc.get("schema", "").startswith("dlio-fast.ceiling") else "io") + incomplete_mark(doc)
    where = doc.get("path") or ", ".join(doc.get("paths") or [])
    return kind, where, str((doc.get("environment") or {}).get("created") or "")[:10]


def _io_points(doc: Mapping[str, Any]) -> List[Dict[str, Any]]:
    if isinstance(doc.get("points"), list):
        return doc["points"]
    if isinstance(doc.get("probes"), list) and doc["probes"]:
        return doc["probes"]
    return [p for p in (doc.get("best") or {}).values() if isinstance(p, dict)]


def _qd(p: Mapping[str, Any]) -> int:
    """The depth a point ran at (a sync engine runs at 1 whatever was asked)."""
    return p.get("qd_used") or p["qd"]


def _series(
    pts: Sequence[Mapping[str, Any]], xkey: str, group_keys: Sequence[str]
) -> Dict[tuple, Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """{group tuple: (xs, bw, iops)} with duplicate x values averaged, xs sorted."""
    groups: Dict[tuple, Dict[Any, List[Tuple[float, float]]]] = {}
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


def _group_label(keys: Sequence[str], g: Sequence[Any]) -> str:
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


def _size_formatter() -> FuncFormatter:
    return FuncFormatter(lambda v, _: fmt_size(int(v)) if v >= 1 and float(v).is_integer() else f"{v:g}")


def io_vs(doc: Mapping[str, Any], path: str, xkey: str) -> Optional[str]:
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
    cached = [p for p in pts if (p.get("verdict") or {}).get("verdict") == "cache"]
    if cached:  # each page-cache point ringed and hatched, in the legend as such
        cx = [_qd(p) if xkey == "qd" else p[xkey] for p in cached]
        for ax, key in ((a1, "bw_MiB_s"), (a2, "iops")):
            ax.scatter(
                cx,
                [p[key] for p in cached],
                s=160,
                facecolors="none",
                edgecolors=CACHE_COLOR,
                hatch=CACHE_HATCH,
                linewidths=1.2,
                zorder=3,
                label=CACHE_LABEL,
            )
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
    memory = next(
        (str(p["verdict"]["part"]) for p in cached if str(p["verdict"].get("part") or "").startswith("memory")), ""
    )
    mark = f" [{memory}: RAM, not storage]" if memory else cache_note(len(cached), len(pts), "points")
    colour = {"color": CACHE_COLOR} if cached else {}
    fig.suptitle(title(f"{what} ({mode}){mark}", kind, where, date), fontsize=11, **colour)
    fig.tight_layout()
    return save_figure(fig, path)
