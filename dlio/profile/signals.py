"""Vectorised measures on dataset reads, shared by the inference and the replay score: batches
(a reader's runs of b consecutive file visits, b found from where the reader pauses), pause
bursts (for checkpoint writes), burst starts and volumes, reads in flight, the Kolmogorov-Smirnov
distance (numpy; scipy is not a dependency) and a rank correlation."""

from typing import Dict, Optional, Tuple

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


def units(rd: np.ndarray, whole: bool) -> Dict[str, np.ndarray]:
    """What a loader reads per sample, per reader (pid, tid), in the reader's time order: with
    whole-file reads a visit (the reader's consecutive reads of one file: an npz's header and
    payload reads are one sample), else each read. Returns key (reader), start, end (ns), bytes,
    reads and pos (index of the unit within its reader)."""
    order = np.lexsort((rd["t"], rd["tid"], rd["pid"]))
    r = rd[order]
    key = r["pid"].astype(np.int64) * (1 << 32) + r["tid"]
    new = np.ones(len(r), bool)
    if whole:
        new[1:] = (key[1:] != key[:-1]) | (r["file"][1:] != r["file"][:-1])
    uid = np.cumsum(new) - 1
    n = int(uid[-1]) + 1 if len(uid) else 0
    end = np.zeros(n, np.int64)
    np.maximum.at(end, uid, r["t"] + r["dur"])
    k = key[new]
    first = np.concatenate(([True], k[1:] != k[:-1])) if n else np.zeros(0, bool)
    pos = np.arange(n) - np.maximum.accumulate(np.where(first, np.arange(n), 0)) if n else np.zeros(0, np.int64)
    return {
        "key": k,
        "start": r["t"][new],
        "end": end,
        "bytes": np.bincount(uid, weights=r["size"], minlength=n),
        "reads": np.bincount(uid, minlength=n),
        "pos": pos,
    }


def batch_size(u: Dict[str, np.ndarray], max_b: int = 512) -> Tuple[int, float, int]:
    """The batch size b of a loader whose readers each read whole batches: every b-th gap of a
    reader (between the last sample of one batch and the first of its next) holds the reader's
    wait for the trainer, the others only the time to read and decode one sample. For each b,
    the gaps are split by position (gap before unit p is a batch boundary when p % b == 0) and
    scored by the share of the variance of log gaps the split explains (the correlation ratio,
    Otsu's criterion with the classes fixed by position): b/2 puts short gaps among the
    boundaries and 2b long ones among the rest, so both explain less. Positions, not a gap
    threshold, decide: a loaded machine stretches every gap but does not move the boundaries.
    Returns (b, the explained share 0..1, gaps used)."""
    same = np.zeros(len(u["key"]), bool)
    same[1:] = u["key"][1:] == u["key"][:-1]
    if same.sum() < 3:
        return 1, 0.0, int(same.sum())
    gap = (u["start"][1:] - u["end"][:-1])[same[1:]]
    lg = np.log(np.maximum(gap, 1000).astype(np.float64))  # below 1 us a gap is no gap
    pos = u["pos"][same]
    tot = ((lg - lg.mean()) ** 2).sum()
    if tot <= 0:
        return 1, 0.0, len(lg)
    best, best_eta = 1, 0.0
    for b in range(2, min(max_b, int(pos.max())) + 1):
        bnd = pos % b == 0
        ns = int(bnd.sum())
        if ns == 0 or ns == len(lg):
            continue
        ms, mi = lg[bnd].mean(), lg[~bnd].mean()
        if ms <= mi:  # boundaries must be the longer gaps
            continue
        eta = ns * (len(lg) - ns) * (ms - mi) ** 2 / len(lg) / tot
        if eta > best_eta:
            best, best_eta = b, float(eta)
    return best, best_eta, len(lg)


def batches(rd: np.ndarray, whole: bool) -> Dict[str, np.ndarray]:
    """The read bursts of one batch each: per reader, runs of b consecutive units (b from
    batch_size, 1 when no structure explains at least MIN_ETA of the gaps). Returns start, end
    (ns), bytes, units per burst, sorted by start, and b, eta."""
    u = units(rd, whole)
    b, eta, ngaps = batch_size(u)
    if eta < MIN_ETA:
        b = 1
    bid = np.cumsum(u["pos"] % b == 0) - 1  # units are in reader order, pos 0 starts a reader
    nb = int(bid[-1]) + 1 if len(bid) else 0
    start = np.zeros(nb, np.int64)
    start[bid[::-1]] = u["start"][::-1]  # the first unit's start
    end = np.zeros(nb, np.int64)
    np.maximum.at(end, bid, u["end"])
    vol = np.bincount(bid, weights=u["bytes"], minlength=nb)
    cnt = np.bincount(bid, minlength=nb)
    o = np.argsort(start, kind="stable")
    return {"start": start[o], "end": end[o], "bytes": vol[o], "units": cnt[o], "b": b, "eta": eta, "gaps": ngaps}


MIN_ETA = 0.3  # below this, the position split explains too little of the gaps to call it batches


def start_gaps(b: Dict[str, np.ndarray]) -> np.ndarray:
    """Time between consecutive burst starts, over all readers (ns)."""
    return np.diff(b["start"]).astype(np.float64)


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
