"""Vectorised measures shared by the inference and the replay score: pause bursts (for checkpoint
writes), the steady state of a series of gaps, reads in flight, the Kolmogorov-Smirnov distance
(numpy; scipy is not a dependency) and a rank correlation. Steps are found in steps.py."""

from typing import Dict, Optional

import numpy as np


def split_log_gaps(gaps: np.ndarray) -> float:
    """The pause (ns) that separates the short gaps inside a burst from the long ones between
    bursts: Otsu's threshold on log gaps (the split with the largest between-class variance).
    +inf when there are too few gaps or no clear second class (one burst)."""
    g = np.log(np.maximum(gaps.astype(np.float64), 1.0))
    if len(g) < 3:
        return float("inf")
    s = np.sort(g)
    n = len(s)
    k = np.arange(1, n)
    c = np.cumsum(s)[:-1]
    m0, m1 = c / k, (s.sum() - c) / (n - k)
    between = k * (n - k) * (m0 - m1) ** 2
    i = int(np.argmax(between))
    if m1[i] - m0[i] < np.log(20.0):  # classes less than 20x apart: no bursts
        return float("inf")
    return float(np.exp((s[i] + s[i + 1]) / 2))


def pause_bursts(rd: np.ndarray, threshold: Optional[float] = None) -> Dict[str, np.ndarray]:
    """Per reader (pid, tid), runs of reads separated by pauses > threshold (default: from the
    gaps themselves). When the reads span several files, a burst only ends where a reader moves to
    another file (a loader's parsing pauses inside one file are not steps). Returns starts, ends
    (ns), bytes, reads and distinct files per burst."""
    order = np.lexsort((rd["t"], rd["tid"], rd["pid"]))
    r = rd[order]
    same = (r["pid"][1:] == r["pid"][:-1]) & (r["tid"][1:] == r["tid"][:-1])
    gap = r["t"][1:] - (r["t"][:-1] + r["dur"][:-1])
    can_split = same & (r["file"][1:] != r["file"][:-1]) if len(np.unique(rd["file"])) > 1 else same
    if threshold is None:
        threshold = split_log_gaps(gap[can_split])
    new = np.concatenate(([True], ~same | (can_split & (gap > threshold))))
    bid = np.cumsum(new) - 1
    nb = int(bid[-1]) + 1 if len(bid) else 0
    starts = r["t"][new]
    ends = np.zeros(nb, np.int64)
    np.maximum.at(ends, bid, r["t"] + r["dur"])
    vol = np.bincount(bid, weights=r["size"], minlength=nb)
    nreads = np.bincount(bid, minlength=nb)
    pairs = np.unique(np.stack([bid, r["file"].astype(np.int64)]), axis=1)
    nfiles = np.bincount(pairs[0], minlength=nb)
    o = np.argsort(starts, kind="stable")
    return {
        "start": starts[o],
        "end": ends[o],
        "bytes": vol[o],
        "reads": nreads[o],
        "files": nfiles[o],
        "threshold": threshold,
        "id": np.argsort(o)[bid],
        "order": order,
    }


def steady_period(gaps: np.ndarray) -> np.ndarray:
    """The gaps of the steady state: those within a factor 2 of their own median (found by
    iterating from the median of all gaps), which leaves out the back-to-back batch reads of a
    prefetch filling up at an epoch's start and the long pauses between epochs, whatever their
    share, as long as most steps are steady."""
    if not len(gaps):
        return gaps
    sel = gaps
    for _ in range(10):
        m = np.median(sel)
        nxt = gaps[(gaps > m / 2) & (gaps < 2 * m)]
        if not len(nxt) or (len(nxt) == len(sel) and np.all(nxt == sel)):
            break
        sel = nxt
    return sel


def max_overlap(first: np.ndarray, last: np.ndarray) -> int:
    """The most intervals [first, last] open at once."""
    if not len(first):
        return 0
    t = np.concatenate((first, last))
    d = np.concatenate((np.ones(len(first)), -np.ones(len(last))))
    o = np.lexsort((-d, t))  # at equal times, an opening before a closing
    return int(np.cumsum(d[o]).max())


def in_flight(rd: np.ndarray) -> np.ndarray:
    """At each read's start, how many reads are in flight (itself included)."""
    s = np.sort(rd["t"])
    e = np.sort(rd["t"] + np.maximum(rd["dur"], 1))
    return (np.searchsorted(s, rd["t"], side="right") - np.searchsorted(e, rd["t"], side="right")).astype(float)


def _ecdf(x: np.ndarray, w: np.ndarray, at: np.ndarray) -> np.ndarray:
    o = np.argsort(x)
    cw = np.concatenate(([0.0], np.cumsum(w[o]))) / max(w.sum(), 1e-300)
    return cw[np.searchsorted(x[o], at, side="right")]


def ks_distance(
    a: np.ndarray, b: np.ndarray, wa: Optional[np.ndarray] = None, wb: Optional[np.ndarray] = None, rel_tol: float = 0.0
) -> float:
    """Two-sample Kolmogorov-Smirnov distance sup |Fa - Fb|, optionally weighted, and with a
    relative tolerance: Fa(x) is compared with Fb over [x/(1+tol), x*(1+tol)] (the Levy-style
    distance on a log scale), so two point masses 3 % apart are at distance 0 with tol 0.05.
    1.0 when one sample is empty and the other is not."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if not len(a) or not len(b):
        return 0.0 if len(a) == len(b) else 1.0
    wa = np.ones(len(a)) if wa is None else np.asarray(wa, np.float64)
    wb = np.ones(len(b)) if wb is None else np.asarray(wb, np.float64)
    x = np.concatenate((a, b))
    lo, hi = x / (1 + rel_tol), x * (1 + rel_tol)
    lo, hi = np.where(x < 0, hi, lo), np.where(x < 0, lo, hi)
    fa, fb = _ecdf(a, wa, x), _ecdf(b, wb, x)
    d1 = fa - _ecdf(b, wb, hi)  # Fa ahead of Fb even after shifting Fb left by the tolerance
    d2 = fb - _ecdf(a, wa, hi)
    return float(max(0.0, d1.max(), d2.max()))


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Rank correlation (no tie correction: the ranks here are positions, distinct by nature)."""
    if len(x) < 2:
        return 1.0
    rx = np.argsort(np.argsort(x)).astype(np.float64)
    ry = np.argsort(np.argsort(y)).astype(np.float64)
    rx -= rx.mean()
    ry -= ry.mean()
    den = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    return float((rx * ry).sum() / den) if den else 1.0


def order_correlation(rd: np.ndarray, names: np.ndarray) -> float:
    """Rank correlation of the order in which files are first read with their names' order:
    about 1 for a sorted walk, about 0 for a shuffled one."""
    if not len(rd):
        return 1.0
    files, first = np.unique(rd["file"], return_index=True)
    t = rd["t"][first]
    name_rank = np.argsort(np.argsort(names[files].astype(str)))
    return spearman(t, name_rank)
