"""Score a replay against the original: one row per figure, pass/fail against a documented bound.

  figure              measure                                              pass when
  transfer sizes      KS distance of read sizes weighted by bytes, 5 % tol  <= 0.10
  per-step volume     KS distance of bytes per batch read (signals.batches:
                      a reader's b consecutive samples), 10 % tol           <= 0.20
  inter-burst gaps    KS distance of time between batch-read starts in the
                      steady state (signals.steady_period: not the prefetch
                      fill at an epoch start, not epoch ends), 10 % tol     <= 0.25
  concurrency         KS distance of reads in flight at each read start      <= 0.25
  file order          |difference| of the first-read order's rank correlation
                      with name order (sorted walk ~1, shuffled ~0)          <= 0.30
  total bytes         replay / original                                      0.90 .. 1.10
  duration            replay / original (first to last dataset read)         0.80 .. 1.25
KS distances take a relative tolerance (signals.ks_distance): values within it count as equal, so
a burst of 4 files plus the loader's 4 KiB header reads matches a burst of the 4 files alone.
The inter-burst gaps leave out an epoch's start because there the loaders, not the workload,
decide: dlio-fast's replay reads two batches per reader back to back, PyTorch one per worker and
prefetch slot; with a few dozen steps those transients would be a quarter of the sample.
Bytes weight the transfer sizes because they say where the bytes come from; a loader's many tiny
metadata reads would otherwise outvote the data reads."""

from typing import Dict, List

import numpy as np

from dlio.profile import analyze, signals
from dlio.profile.analyze import dataset_reads
from dlio.profile.dataset import dataset_files, file_sizes
from dlio.profile.parsers import Trace

KS_LIMITS = {
    "transfer sizes": (0.05, 0.10),
    "per-step volume": (0.10, 0.20),
    "inter-burst gaps": (0.10, 0.25),
    "concurrency": (0.0, 0.25),
}
ORDER_LIMIT = 0.30
BYTES_RANGE = (0.90, 1.10)
DURATION_RANGE = (0.80, 1.25)


def _reads(tr: Trace) -> np.ndarray:
    return dataset_reads(tr, dataset_files(tr)["files"])


def compare(orig: Trace, replay: Trace) -> List[Dict]:
    """Rows {figure, original, replay, score, limit, ok}."""
    a, b = _reads(orig), _reads(replay)
    ba, bb = signals.batches(a, _whole(orig, a)), signals.batches(b, _whole(replay, b))
    ga, gb = signals.steady_period(signals.start_gaps(ba)), signals.steady_period(signals.start_gaps(bb))
    rows = []

    def ks(name, xa, xb, wa=None, wb=None, unit=1.0, fmt="{:.3g}"):
        tol, lim = KS_LIMITS[name]
        d = signals.ks_distance(xa, xb, wa, wb, rel_tol=tol)
        med = lambda x: fmt.format(np.median(x) / unit) if len(x) else "-"  # noqa: E731
        rows.append(
            {
                "figure": name,
                "original": f"median {med(xa)}",
                "replay": f"median {med(xb)}",
                "score": f"KS {d:.3f}",
                "limit": f"<= {lim}",
                "ok": d <= lim,
            }
        )

    ks("transfer sizes", a["size"], b["size"], a["size"], b["size"], 1024, "{:.1f} KiB")
    ks("per-step volume", ba["bytes"], bb["bytes"], unit=1024, fmt="{:.1f} KiB")
    ks("inter-burst gaps", ga, gb, unit=1e6, fmt="{:.2f} ms")
    ks("concurrency", signals.in_flight(a), signals.in_flight(b))
    ra = signals.order_correlation(a, orig.paths)
    rb = signals.order_correlation(b, replay.paths)
    rows.append(
        {
            "figure": "file order",
            "original": f"rho {ra:.2f}",
            "replay": f"rho {rb:.2f}",
            "score": f"diff {abs(ra - rb):.2f}",
            "limit": f"<= {ORDER_LIMIT}",
            "ok": abs(ra - rb) <= ORDER_LIMIT,
        }
    )
    for name, xa, xb, rng, unit, u in (
        ("total bytes", a["size"].sum(), b["size"].sum(), BYTES_RANGE, 2**20, "MiB"),
        ("duration", _span(a), _span(b), DURATION_RANGE, 1e9, "s"),
    ):
        r = xb / xa if xa else float("inf")
        rows.append(
            {
                "figure": name,
                "original": f"{xa / unit:.3f} {u}",
                "replay": f"{xb / unit:.3f} {u}",
                "score": f"ratio {r:.3f}",
                "limit": f"{rng[0]}..{rng[1]}",
                "ok": rng[0] <= r <= rng[1],
            }
        )
    return rows


def _whole(tr: Trace, rd: np.ndarray) -> bool:
    """Whole-file reads (a batch is b file visits) or ranges (b reads), as the inference decides."""
    files = dataset_files(tr)["files"]
    if not len(files):
        return True
    sizes, _ = file_sizes(tr, files)
    return analyze.access(rd, files, sizes)["pattern"].value == "whole-file"


def _span(rd: np.ndarray) -> float:
    return float((rd["t"] + rd["dur"]).max() - rd["t"].min()) if len(rd) else 0.0


def table(rows: List[Dict]) -> str:
    cols = ("figure", "original", "replay", "score", "limit")
    w = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    line = lambda vals: "  ".join(f"{v:<{w[c]}}" for c, v in zip(cols, vals))  # noqa: E731
    out = [line(cols) + "  result", line(["-" * w[c] for c in cols]) + "  ------"]
    out += [line([str(r[c]) for c in cols]) + ("  pass" if r["ok"] else "  FAIL") for r in rows]
    n = sum(r["ok"] for r in rows)
    out.append(f"{n}/{len(rows)} figures within bounds: " + ("the replay matches" if n == len(rows) else "no match"))
    return "\n".join(out) + "\n"
