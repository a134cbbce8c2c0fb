"""The trainer's steps, seen from the readers, whatever the loader's shape.

What every loader shares is the trainer's consumption: each step takes `batch` samples, and the
readers replace them. Where readers wait for the trainer (a job bound by its compute), the pauses
of the readers show the steps. Two views find them:

  per reader   a reader's visits (one per sample, visits.py) pause every b-th one: PyTorch's
               batch-per-worker loaders, where worker k reads all of batch k (and a loop without
               reader threads, whose one reader is the trainer)
  merged       the visits of all readers in time order pause every b-th one: sample-parallel
               loaders, where one batch is spread over the readers (a thread pool or tf.data's
               parallel map, reader threads feeding a bounded queue); which reader takes which
               sample varies, so no single reader's pauses are periodic

Each view scores every b by the share of the variance of log gaps that splitting at every b-th
position explains (the correlation ratio; Otsu's criterion with classes fixed by position): b/2
puts short gaps among the boundaries and 2b long ones among the rest. Positions, not a gap
threshold, decide, so a loaded machine that stretches every gap does not move them. The merged
view lets each pass start at any phase: a queue's fill at an epoch's start (queue size plus one
sample per reader) need not be a whole number of batches. The view that explains more wins.

From the steps: the step period (the trainer's compute when readers are not the bottleneck: the
time between step starts in the steady state; for a loop without readers, its time from a batch's
last sample to the next batch less its time per sample), a reader's own time per sample (opening,
parsing, decoding: one sample's start to the next's within a step, less the time in read calls),
and how many batches the readers hold ahead of the trainer once the prefetch is full (depth).

With the job's thread timeline (timeline.py), every gap of a reader is taken less the time that
reader waited for a CPU in it: a busy host stretches a reader's work between two samples of a step
(runnable, off the CPU), not its waits for the trainer (blocked), so the pauses stand out again."""

from typing import Any, Dict, Optional, Tuple

import numpy as np

from dlio.profile.signals import steady_period
from dlio.profile.timeline import Timeline

MIN_ETA = 0.3  # below this, no split by position explains enough of the gaps to call it batches
MAX_B = 512


def _log_gaps(gaps: np.ndarray) -> np.ndarray:
    """Log gaps, each at least the median gap: a step boundary is at most every second gap, so
    the boundaries are among the longer half, and below the median the spread only says how the
    readers' own work overlapped (merged readers give many gaps of zero or less), not where the
    trainer made them wait. At least 1 us."""
    floor = max(1000.0, float(np.median(gaps))) if len(gaps) else 1000.0
    return np.log(np.maximum(gaps, floor).astype(np.float64))


def _eta(lg: np.ndarray, bnd: np.ndarray, tot: float) -> float:
    ns = int(bnd.sum())
    if ns == 0 or ns == len(lg) or tot <= 0:
        return 0.0
    ms, mi = lg[bnd].mean(), lg[~bnd].mean()
    if ms <= mi:  # boundaries must be the longer gaps
        return 0.0
    return float(ns * (len(lg) - ns) * (ms - mi) ** 2 / len(lg) / tot)


def _idle(tl: Optional[Timeline], keys: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """Each thread keys[i]'s gap [t0[i], t1[i]] less the time it waited for a CPU in it (ns)."""
    g = (t1 - t0).astype(np.float64)
    return np.maximum(g - tl.waited(keys, t0, t1), 0.0) if tl else g


def per_reader(v: np.ndarray, tl: Optional[Timeline] = None) -> Dict:
    """Per-reader view: visits in (reader, time) order; a gap is between a reader's consecutive
    visits, and the gap before a reader's p-th visit is a boundary for b when p % b == 0.
    Returns {'b', 'eta', 'gaps', 'order', 'pos', 'eta_at' (the score of any b)} (order: the
    visits' indices in that order)."""
    o = np.lexsort((v["start"], v["key"]))
    k, s, e = v["key"][o], v["start"][o], v["end"][o]
    n = len(o)
    first = np.ones(n, bool)
    first[1:] = k[1:] != k[:-1]
    idx = np.arange(n)
    pos = idx - np.maximum.accumulate(np.where(first, idx, 0))
    inner = ~first[1:]
    lg = _log_gaps(_idle(tl, k[1:][inner], e[:-1][inner], s[1:][inner]))
    p = pos[~first]
    tot = float(((lg - lg.mean()) ** 2).sum()) if len(lg) else 0.0
    out: Dict[str, Any] = {"b": 1, "eta": 0.0, "gaps": len(lg), "order": o, "pos": pos}
    out["eta_at"] = lambda b: _eta(lg, p % b == 0, tot) if b > 1 and len(lg) >= 3 else 0.0
    if len(lg) < 3:
        return out
    for b in range(2, min(MAX_B, int(p.max())) + 1):
        eta = out["eta_at"](b)
        if eta > out["eta"]:
            out["b"], out["eta"] = b, eta
    return out


def merged(v: np.ndarray, epoch: np.ndarray, only_b: Optional[int] = None, tl: Optional[Timeline] = None) -> Dict:
    """Merged view: each pass's visits in time order; the gap before a visit is the time since
    every earlier visit of the pass ended (idle readers). For each b (or only_b), each pass takes
    the phase whose gaps are longest. Returns {'b', 'eta', 'gaps', 'order', 'pos', 'pass' (index
    of the visit's pass, in that order), 'phase' (per pass), 'lg' (log gaps, nan at a pass's
    first visit)}."""
    o = np.lexsort((v["start"], epoch))
    ep, s, e = epoch[o], v["start"][o], v["end"][o]
    n = len(o)
    first = np.ones(n, bool)
    first[1:] = ep[1:] != ep[:-1]
    idx = np.arange(n)
    pos = idx - np.maximum.accumulate(np.where(first, idx, 0))
    _, ep_i = np.unique(ep, return_inverse=True)
    nep = int(ep_i.max()) + 1 if n else 0
    run_end = np.empty(n, np.int64)  # the latest end so far within the pass
    starts = np.flatnonzero(first)
    for a, z in zip(starts, np.r_[starts[1:], n].astype(np.int64)):
        run_end[a:z] = np.maximum.accumulate(e[a:z])
    lg_all = np.full(n, np.nan)
    inner = ~first
    # the idle time before a visit, less what its reader waited for a CPU in it
    lg_all[inner] = _log_gaps(_idle(tl, v["key"][o][inner], np.r_[0, run_end[:-1]][inner], s[inner]))
    out: Dict[str, Any] = {
        "b": only_b or 1,
        "eta": 0.0,
        "gaps": int((~first).sum()),
        "order": o,
        "pos": pos,
        "pass": ep_i,
    }
    out["phase"], out["lg"] = np.zeros(nep, np.int64), lg_all
    if out["gaps"] < 3:
        return out
    inner = ~first
    lg, p, pe = lg_all[inner], pos[inner], ep_i[inner]
    tot = float(((lg - lg.mean()) ** 2).sum())
    for b in [only_b] if only_b else range(2, min(MAX_B, int(p.max())) + 1):
        cls = pe * b + p % b
        sums = np.bincount(cls, weights=lg, minlength=nep * b).reshape(nep, b)
        cnts = np.bincount(cls, minlength=nep * b).reshape(nep, b)
        means = np.where(cnts > 0, sums / np.maximum(cnts, 1), -np.inf)
        phase = np.argmax(means, axis=1)
        eta = _eta(lg, p % b == phase[pe], tot)
        if eta > out["eta"] or only_b:
            out["b"], out["eta"], out["phase"] = b, eta, phase
    return out


def _first_batch_end(x: np.ndarray, b: int, per_reader: bool) -> int:
    """When the trainer can take its first batch of a pass (visits x of that pass): b samples
    read by one reader (batch-per-worker), or by all of them (sample-parallel)."""
    if per_reader:
        o = np.lexsort((x["start"], x["key"]))
        k = x["key"][o]
        first = np.r_[True, k[1:] != k[:-1]]
        idx = np.arange(len(o))
        pos = idx - np.maximum.accumulate(np.where(first, idx, 0))
        ends = x["end"][o][pos == b - 1]
        if len(ends):
            return int(ends.min())
    return int(np.sort(x["end"][np.argsort(x["start"], kind="stable")][:b]).max())


def depth(m: Dict, v: np.ndarray, period_ns: float, per_reader: bool) -> np.ndarray:
    """Per pass of a merged view at its b: the batches the readers hold ahead of the trainer when
    they first wait for it (the prefetch depth). The readers' first wait is the first boundary gap
    at least half the pass's median boundary gap; by then they have read L samples, and the
    trainer has taken its first batch when one was read (by one reader: per_reader), then one
    per step period: depth = L / b - batches taken."""
    b, pos, pe, lg = m["b"], m["pos"], m["pass"], m["lg"]
    x = v[m["order"]]
    out = []
    for k, ph in enumerate(m["phase"]):
        sel = (pe == k) & (pos % b == ph) & ~np.isnan(lg)
        if sel.sum() < 2 or period_ns <= 0:
            continue
        g = lg[sel]
        long = np.flatnonzero(g >= np.median(g) - np.log(2.0))
        n_read = int(pos[sel][long[0]]) if len(long) else int(pos[sel][-1])
        this = pe == k
        t_first = _first_batch_end(x[this], b, per_reader)
        t_wait = x["end"][this & (pos < n_read)].max()
        taken = 1 + np.floor(max(0, t_wait - t_first) / period_ns)
        out.append(n_read / b - taken)
    return np.array(out, np.float64)


def _bursts(v: np.ndarray, order: np.ndarray, new: np.ndarray, epoch: np.ndarray) -> Dict[str, np.ndarray]:
    """Steps from visits in `order` with `new` marking each step's first visit."""
    x = v[order]
    sid = np.cumsum(new) - 1
    ns = int(sid[-1]) + 1 if len(sid) else 0
    start = x["start"][new]
    end = np.zeros(ns, np.int64)
    np.maximum.at(end, sid, x["end"])
    pairs = np.unique(np.stack([sid, x["key"]]), axis=1) if len(sid) else np.zeros((2, 0), np.int64)
    o = np.argsort(start, kind="stable")
    return {
        "start": start[o],
        "end": end[o],
        "bytes": np.bincount(sid, weights=x["bytes"], minlength=ns)[o],
        "units": np.bincount(sid, minlength=ns)[o],
        "readers": np.bincount(pairs[0], minlength=ns)[o],
        "pass": epoch[order][new][o],
        "sid": np.argsort(o)[sid],  # step of each visit in `order`
    }


def find_steps(v: np.ndarray, epoch: Optional[np.ndarray] = None, tl: Optional[Timeline] = None) -> Dict:
    """The steps of visits v (VISIT_DTYPE), their pass `epoch` (default: one pass). Returns
    {'b', 'eta', 'view' ('per reader' | 'merged'), 'start', 'end', 'bytes', 'units', 'readers'
    (per step, by start), 'gaps' (gaps used), 'eta_reader', 'b_reader', 'eta_merged',
    'b_merged', 'reader_eta_at_b' (the per-reader split's score at the chosen b), 'sample_gaps'
    (a reader's own work from one sample of a step to the next: start to start less the time in
    read calls, ns), 'step_gaps' (the same from a step's last sample to the reader's next step),
    'depth' (per pass, batches read ahead of the trainer when the readers first wait: depth())}.
    b is 1 when neither view explains MIN_ETA of the gaps. With a timeline tl, gaps (and the
    sample and step gaps) are taken less the time their reader waited for a CPU."""
    if epoch is None:
        epoch = np.zeros(len(v), np.int64)
    a, m = per_reader(v, tl), merged(v, epoch, tl=tl)
    view = "merged" if m["eta"] > a["eta"] else "per reader"
    best = m if view == "merged" else a
    b = best["b"] if best["eta"] >= MIN_ETA else 1
    o, pos = best["order"], best["pos"]
    if view == "merged" and b > 1:
        new = (pos - m["phase"][m["pass"]]) % b == 0
        new[pos == 0] = True
    else:
        new = pos % b == 0
    st = _bursts(v, o, new, epoch)
    # A reader's own work per sample (start to next start, less its time in read calls), split
    # by whether the next sample starts a step; not across passes.
    ro = np.lexsort((v["start"], v["key"]))
    step_of = np.empty(len(v), np.int64)
    step_of[o] = st["sid"]
    k, s, io, sp, ep = v["key"][ro], v["start"][ro], v["io"][ro], step_of[ro], epoch[ro]
    same = (k[1:] == k[:-1]) & (ep[1:] == ep[:-1])
    # its work besides the read calls, in the share of the gap it was not waiting for a CPU (the
    # calls' own time holds some of that wait: taking the whole wait out as well counts it twice)
    gap = (s[1:] - s[:-1]).astype(np.float64)
    g = (gap - io[:-1]) * (_idle(tl, k[1:], s[:-1], s[1:]) / np.maximum(gap, 1.0))
    within = same & (sp[1:] == sp[:-1])
    period = mean_period(st)
    deep = np.zeros(0)
    if b > 1 and period > 0:
        # wall-clock gaps: the depth is read at the readers' first wait, as it was measured against
        deep = depth(merged(v, epoch, only_b=b), v, period, view == "per reader")
    return {
        "b": b,
        "eta": best["eta"],
        "view": view,
        "gaps": best["gaps"],
        "eta_reader": a["eta"],
        "b_reader": a["b"],
        "eta_merged": m["eta"],
        "b_merged": m["b"],
        "reader_eta_at_b": a["eta_at"](b),
        "sample_gaps": g[within],
        "step_gaps": g[same & ~within],
        "depth": deep,
        **{x: st[x] for x in ("start", "end", "bytes", "units", "readers", "pass")},
    }


def step_period(st: Dict) -> np.ndarray:
    """The steady gaps between consecutive step starts, over all readers (ns)."""
    return steady_period(np.diff(st["start"]).astype(np.float64))


def _steady_start(s: np.ndarray) -> int:
    """Index of a pass's first steady step in its sorted step starts: after the last gap shorter
    than half the median gap in the pass's first half (the fill: steps read back to back as the
    prefetch fills, however slowly the first ones came while worker processes started)."""
    g = np.diff(s)
    if not len(g):
        return 0
    short = np.flatnonzero(g[: (len(g) + 1) // 2] < np.median(g) / 2)
    return int(short[-1]) + 1 if len(short) else 0


def steady_starts(st: Dict) -> list:
    """Per pass (in order), the index of its first steady step (see _steady_start)."""
    out = []
    for p in np.unique(st["pass"]):
        s = np.sort(st["start"][st["pass"] == p])
        out.append(_steady_start(s) if len(s) >= 3 else 0)
    return out


def steady_time(st: Dict, skip: Optional[list] = None) -> float:
    """ns from each pass's first steady step start (or its skip[i]-th step) to its last step's
    end, summed: the time the trainer's pace decides, without a pass's start, where the loader
    decides (worker processes starting, the prefetch filling)."""
    skip = steady_starts(st) if skip is None else skip
    total = 0.0
    for i, p in enumerate(np.unique(st["pass"])):
        sel = st["pass"] == p
        s = np.sort(st["start"][sel])
        # a pass of one or two steps has no fill to leave out: all of it (not nothing)
        k = min(skip[i] if i < len(skip) else 0, len(s) - 1) if len(s) >= 3 else 0
        total += float(st["end"][sel].max() - s[k])
    return total


def steady_steps(st: Dict) -> Tuple[np.ndarray, np.ndarray]:
    """(from, to) of every steady step (ns): per pass of three steps or more, each step start from
    its first steady one (after the fill, whose step starts follow one another faster than half
    the median gap) to the next step start."""
    t0, t1 = [], []
    for p in np.unique(st["pass"]):
        s = np.sort(st["start"][st["pass"] == p])
        if len(s) < 3:
            continue
        k = _steady_start(s)
        t0.append(s[k:-1])
        t1.append(s[k + 1 :])
    if not t0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(t0), np.concatenate(t1)


def mean_period(st: Dict) -> float:
    """The trainer's mean step period (ns) over the steady steps of every pass (steady_steps). A
    stall and the catch-up after it average out here, where a window around the median would keep
    one and drop the other."""
    t0, t1 = steady_steps(st)
    return float((t1 - t0).sum() / len(t0)) if len(t0) else 0.0
