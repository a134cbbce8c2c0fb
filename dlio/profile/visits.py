"""A job's logical access to its files: visits, not read calls.

A visit is what a loader does to take one sample from a file: one reader's (pid, tid) consecutive
reads of one file, ended by a read of another file or a new open of the same file. What a visit
takes is the union of the byte ranges it read: np.load reads a small npz's first 4 KiB twice (the
zip directory, then the member), h5py re-reads object headers, a buffered reader rounds its calls
to its buffer, and none of that is a second pass over the data. Counting read calls' bytes would
double the epochs of a 4.5 KB npz; counting each visit's distinct bytes does not.

Known limit: a job that reads one file twice in a row without reopening it and without reading
another file in between (a one-file dataset per reader, held open) is one visit: its second pass
is not seen. A job reading ranges of a file (several samples per file) is counted by its read
calls instead (analyze.py), where this limit would matter.
"""

from typing import Dict, Optional, Tuple

import numpy as np

VISIT_DTYPE = np.dtype(
    [
        ("file", "<i4"),  # index into the trace's paths
        ("key", "<i8"),  # the reader: pid << 32 | tid
        ("start", "<i8"),  # ns, its first read's start
        ("end", "<i8"),  # ns, its last read's end
        ("bytes", "<i8"),  # distinct bytes read (union of the ranges)
        ("raw", "<i8"),  # bytes of its read calls
        ("reads", "<i8"),  # read calls
        ("io", "<i8"),  # ns inside read calls (the rest of end - start is the loader's own work)
    ]
)


def reader_key(ev: np.ndarray) -> np.ndarray:
    """One id per reader: pid << 32 | tid."""
    return ev["pid"].astype(np.int64) * (1 << 32) + (ev["tid"].astype(np.int64) & 0xFFFFFFFF)


def union_segments(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The union of the ranges [start, end) of each group, as disjoint segments: returns
    (group of each segment, segment start, segment end), sorted by group then start. Vectorised:
    shifting each group's offsets past the previous group's lets one running maximum cover all."""
    if not len(group):
        z = np.zeros(0, np.int64)
        return z, z, z
    o = np.lexsort((start, group))
    g, s, e = group[o].astype(np.int64), start[o].astype(np.int64), end[o].astype(np.int64)
    span = int(max(e.max(), 0)) + 1
    # groups are renumbered 0..k-1 so that the shift stays within int64 when possible
    _, gi = np.unique(g, return_inverse=True)
    if (int(gi.max()) + 1) * span < 2**62:
        shift = gi * span
        run_end = np.maximum.accumulate(e + shift) - shift
    else:  # huge files and many groups: one group at a time
        run_end = np.empty_like(e)
        cut = np.flatnonzero(np.diff(gi)) + 1
        for a, b in zip(np.r_[0, cut], np.r_[cut, len(gi)]):
            run_end[a:b] = np.maximum.accumulate(e[a:b])
    new = np.ones(len(g), bool)
    new[1:] = (gi[1:] != gi[:-1]) | (s[1:] > run_end[:-1])
    sid = np.cumsum(new) - 1
    seg_end = np.zeros(int(sid[-1]) + 1, np.int64)
    np.maximum.at(seg_end, sid, e)
    return g[new], s[new], seg_end


def visits(rd: np.ndarray, opens: Optional[np.ndarray] = None) -> Dict[str, np.ndarray]:
    """The visits of dataset reads rd (EVENT_DTYPE, size > 0), in reader then time order, and the
    union segments of each ('seg_visit', 'seg_len'). opens: OP_OPEN events of the same files; an
    open starts a new visit of that file by that reader."""
    n = len(rd)
    if not n:
        return {
            "visits": np.zeros(0, VISIT_DTYPE),
            "seg_visit": np.zeros(0, np.int64),
            "seg_len": np.zeros(0, np.int64),
        }
    key = reader_key(rd)
    is_open = np.zeros(n, bool)
    t, f = rd["t"], rd["file"]
    if opens is not None and len(opens):
        key = np.concatenate((key, reader_key(opens)))
        t = np.concatenate((t, opens["t"]))
        f = np.concatenate((f, opens["file"]))
        is_open = np.concatenate((is_open, np.ones(len(opens), bool)))
    o = np.lexsort((~is_open, t, key))  # at equal times an open goes first
    k, ff, op = key[o], f[o], is_open[o]
    new = np.ones(len(o), bool)
    new[1:] = (k[1:] != k[:-1]) | (ff[1:] != ff[:-1]) | op[1:]
    vid_all = np.cumsum(new) - 1
    keep = ~op
    ridx = o[keep]  # indices into rd, in reader/time order
    vid = vid_all[keep]
    _, vid = np.unique(vid, return_inverse=True)  # visits holding only an open are dropped
    r = rd[ridx]
    nv = int(vid[-1]) + 1
    first = np.ones(len(vid), bool)
    first[1:] = vid[1:] != vid[:-1]
    v = np.zeros(nv, VISIT_DTYPE)
    v["file"] = r["file"][first]
    v["key"] = reader_key(r)[first]
    v["start"] = r["t"][first]
    end = np.zeros(nv, np.int64)
    np.maximum.at(end, vid, r["t"] + r["dur"])
    v["end"] = end
    v["raw"] = np.bincount(vid, weights=r["size"], minlength=nv)
    v["reads"] = np.bincount(vid, minlength=nv)
    v["io"] = np.bincount(vid, weights=r["dur"], minlength=nv)
    off = np.maximum(r["offset"], 0)  # an unknown offset (-1) counts from 0
    sg, ss, se = union_segments(vid, off, off + r["size"])
    v["bytes"] = np.bincount(sg, weights=se - ss, minlength=nv)
    return {"visits": v, "seg_visit": sg, "seg_len": se - ss}
