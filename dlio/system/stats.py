"""Latency histograms on the Python side: percentiles, merging, summaries.

The C core fills log-linear histograms (src/dlio_core/hist.c, fio's scheme, <1% error); here they
are numpy arrays so that threads, ranks and epochs merge by addition. Percentiles follow the C
code exactly: the first bucket whose cumulative count reaches ceil(p/100 * count), reported as its
midpoint clamped to [min, max].
"""

import math
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence

import numpy as np

from dlio import _core

# A histogram as the binding returns it: count, min, max (ns), sum, sumsq and buckets (HIST_NR counts).
Hist = Dict[str, Any]

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
_VALUES: Optional[np.ndarray] = None


def bucket_values() -> np.ndarray:
    global _VALUES
    if _VALUES is None:
        _VALUES = _core.hist_bucket_values()
    return _VALUES


def empty() -> Hist:
    return {
        "count": 0,
        "min": 0,
        "max": 0,
        "sum": 0.0,
        "sumsq": 0.0,
        "buckets": np.zeros(_core.HIST_NR, dtype=np.uint64),
    }


def merge(hists: Iterable[Mapping[str, Any]]) -> Hist:
    """Sum of histograms (dicts as the binding returns them)."""
    out = empty()
    mins = []
    for h in hists:
        if not h["count"]:
            continue
        out["count"] += h["count"]
        out["sum"] += h["sum"]
        out["sumsq"] += h["sumsq"]
        out["max"] = max(out["max"], h["max"])
        mins.append(h["min"])
        out["buckets"] = out["buckets"] + np.asarray(h["buckets"], dtype=np.uint64)
    out["min"] = min(mins) if mins else 0
    return out


def percentile(h: Mapping[str, Any], p: float) -> int:
    n = h["count"]
    if not n:
        return 0
    rank = max(1, math.ceil(p / 100.0 * n))
    idx = int(np.searchsorted(np.cumsum(h["buckets"]), rank))
    idx = min(idx, len(h["buckets"]) - 1)
    return int(min(max(int(bucket_values()[idx]), h["min"]), h["max"]))


def summary(h: Mapping[str, Any], percentiles: Sequence[float] = PERCENTILES) -> Dict[str, Any]:
    """{'count', 'min', 'mean', 'stdev', 'max', 'p50', ...} in ns."""
    n = h["count"]
    mean = h["sum"] / n if n else 0.0
    var = max(0.0, h["sumsq"] / n - mean * mean) if n else 0.0
    out: Dict[str, Any] = {
        "count": int(n),
        "min": int(h["min"]),
        "mean": mean,
        "stdev": math.sqrt(var),
        "max": int(h["max"]),
    }
    for p in percentiles:
        out[pname(p)] = percentile(h, p)
    return out


def pname(p: float) -> str:
    """50.0 -> 'p50', 99.9 -> 'p99.9'."""
    return "p" + (f"{p:g}")


def to_json(h: Mapping[str, Any]) -> Dict[str, Any]:
    """A histogram as JSON: sparse buckets [[index, count], ...] plus the moments."""
    b = np.asarray(h["buckets"])
    nz = np.nonzero(b)[0]
    return {
        "count": int(h["count"]),
        "min": int(h["min"]),
        "max": int(h["max"]),
        "sum": float(h["sum"]),
        "sumsq": float(h["sumsq"]),
        "buckets": [[int(i), int(b[i])] for i in nz],
    }


def from_json(d: Mapping[str, Any]) -> Hist:
    b = np.zeros(_core.HIST_NR, dtype=np.uint64)
    for i, c in d["buckets"]:
        b[i] = c
    return {"count": d["count"], "min": d["min"], "max": d["max"], "sum": d["sum"], "sumsq": d["sumsq"], "buckets": b}
