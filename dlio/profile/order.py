"""Epochs and file order from a job's visits: which pass over the dataset each visit belongs to,
and in what order each pass takes the files (sorted by path, sorted by file name, shuffled once
for every epoch, or shuffled anew each epoch). The replay must reproduce that order, so the
emitted workload says it (emit.py): file_shuffle, seed_change_epoch, dlio_fast.file_order."""

import os
from typing import Dict, List, Sequence, Tuple, Union

import numpy as np

from dlio.profile.signals import spearman

SORTED_RHO = 0.9  # a pass whose first-visit order correlates this well with a sort is that sort
SAME_RHO = 0.9  # two passes correlating this well take the files in the same order


def epoch_of(v: np.ndarray, cover: np.ndarray) -> np.ndarray:
    """The pass (0, 1, ...) of each visit: per file, visits in time order, each counted at the
    middle of the bytes it adds to the file's running total; cover[file] is one pass's bytes (the
    union of every range the job read of that file)."""
    if not len(v):
        return np.zeros(0, np.int64)
    o = np.lexsort((v["start"], v["file"]))
    f, b = v["file"][o], v["bytes"][o].astype(np.float64)
    csum = np.cumsum(b)
    first = np.ones(len(f), bool)
    first[1:] = f[1:] != f[:-1]
    base = np.maximum.accumulate(np.where(first, csum - b, 0.0))  # the file's total before its first visit
    before = csum - b - base
    ep = np.floor((before + b / 2) / np.maximum(cover[f], 1)).astype(np.int64)
    out = np.empty(len(v), np.int64)
    out[o] = ep
    return out


def _ranks(names: Union[Sequence[str], np.ndarray]) -> np.ndarray:
    """Rank of each name in sorted order."""
    r = np.empty(len(names), np.int64)
    r[np.argsort(np.asarray(names, dtype=str), kind="stable")] = np.arange(len(names))
    return r


def pass_orders(v: np.ndarray, epoch: np.ndarray) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Per pass with at least 2 files: (files, the start of each file's first visit in that pass)."""
    out = []
    for e in np.unique(epoch):
        x = v[epoch == e]
        o = np.lexsort((x["start"], x["file"]))
        f, s = x["file"][o], x["start"][o]
        first = np.ones(len(f), bool)
        first[1:] = f[1:] != f[:-1]
        if first.sum() >= 2:
            out.append((f[first], s[first]))
    return out


def file_order(v: np.ndarray, epoch: np.ndarray, paths: np.ndarray) -> Dict:
    """How the job orders its files: {'kind': 'path' | 'name' | 'once' | 'epoch', 'rho_path',
    'rho_name', 'rho_epochs' (nan with one pass), 'confidence', 'evidence'}. 'name' is the order of
    the file names alone (DLIO's listing, which sorts by base name); with subfolders it interleaves
    the folders, where a sorted path walks one folder after another."""
    passes = pass_orders(v, epoch)
    if not passes:
        return {
            "kind": "path",
            "rho_path": 1.0,
            "rho_name": 1.0,
            "rho_epochs": float("nan"),
            "confidence": 0.2,
            "evidence": "fewer than 2 files per pass: no order to see",
        }
    path_rank = _ranks(paths.astype(str))
    name_rank = _ranks([os.path.basename(str(p)) for p in paths])
    rp = float(np.median([spearman(s, path_rank[f]) for f, s in passes]))
    rn = float(np.median([spearman(s, name_rank[f]) for f, s in passes]))
    rho_e = []
    for (fa, sa), (fb, sb) in zip(passes[:-1], passes[1:]):
        common, ia, ib = np.intersect1d(fa, fb, return_indices=True)
        if len(common) >= 2:
            rho_e.append(spearman(sa[ia], sb[ib]))
    re = float(np.median(rho_e)) if rho_e else float("nan")
    what = (
        f"over {len(passes)} pass(es), the first-visit order has rank correlation {rp:.2f} with the "
        f"sorted paths, {rn:.2f} with the sorted file names"
    )
    if len(rho_e):
        what += f", {re:.2f} between consecutive passes"
    if rp >= SORTED_RHO and rp >= rn:
        kind, conf = "path", min(1.0, (rp - 0.5) * 2)
    elif rn >= SORTED_RHO:
        kind, conf = "name", min(1.0, (rn - 0.5) * 2)
    elif rho_e and re >= SAME_RHO:
        kind, conf = "once", min(1.0, (re - 0.5) * 2)
    else:
        kind = "epoch"
        conf = min(1.0, (1 - max(rp, rn, 0.0)) * (1 - max(re, 0.0) if rho_e else 0.5))
    return {"kind": kind, "rho_path": rp, "rho_name": rn, "rho_epochs": re, "confidence": conf, "evidence": what}
