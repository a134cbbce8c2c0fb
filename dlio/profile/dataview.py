"""One trace's dataset, as the inference and the replay score both see it: the files, their
sizes, the reads, whether samples are whole files or ranges, the units a loader takes per sample
(visits for whole files, read calls for ranges), the bytes they take, and the pass of each."""

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from dlio.profile import order
from dlio.profile.dataset import dataset_files, file_sizes
from dlio.profile.events import OP_OPEN, OP_READ, Trace
from dlio.profile.visits import VISIT_DTYPE, reader_key, union_segments, visits


@dataclass
class DataView:
    files: np.ndarray  # trace file indices of the dataset, sorted by path
    ext: str
    evidence: str  # why these files
    sizes: np.ndarray  # bytes per file (files' order)
    sizes_how: str
    rd: np.ndarray  # dataset reads (EVENT_DTYPE)
    units: np.ndarray  # VISIT_DTYPE: what a loader takes per sample
    extents: np.ndarray  # contiguous byte runs the units take (transfer sizes a replay must match)
    cover: np.ndarray  # per trace file index: bytes of one pass (union of every range read)
    epoch: np.ndarray  # per unit: its pass over the dataset
    whole: bool  # samples are whole files
    seq_frac: float  # share of a reader's reads within a file that start where the previous ended
    median_cover: float  # median share of a file's bytes the job ever read
    big_read: float  # median over files of the largest read / file size

    @property
    def logical_bytes(self) -> int:
        return int(self.units["bytes"].sum())

    def passes(self) -> np.ndarray:
        """Per file (files' order): bytes the units took / one pass's bytes."""
        per = np.bincount(self.units["file"], weights=self.units["bytes"], minlength=len(self.cover))
        return per[self.files] / np.maximum(self.cover[self.files], 1)

    def pass_spans(self) -> Tuple[np.ndarray, np.ndarray]:
        """(start, end) ns of each pass over the dataset: its first read's start, its last read's end."""
        u = self.units
        if not len(u):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        _, ep = np.unique(self.epoch, return_inverse=True)
        first = np.full(ep.max() + 1, np.iinfo(np.int64).max)
        last = np.zeros(ep.max() + 1, np.int64)
        np.minimum.at(first, ep, u["start"])
        np.maximum.at(last, ep, u["end"])
        return first, last


def dataset_reads(tr: Trace, files: np.ndarray) -> np.ndarray:
    ev = tr.events
    return ev[(ev["op"] == OP_READ) & (ev["size"] > 0) & np.isin(ev["file"], files)]


def _read_units(rd: np.ndarray) -> np.ndarray:
    u = np.zeros(len(rd), VISIT_DTYPE)
    u["file"], u["key"], u["start"] = rd["file"], reader_key(rd), rd["t"]
    u["end"] = rd["t"] + rd["dur"]
    u["bytes"] = u["raw"] = rd["size"]
    u["reads"] = 1
    u["io"] = rd["dur"]
    return u


def data_view(tr: Trace) -> DataView:
    ds = dataset_files(tr)
    files = ds["files"]
    empty = np.zeros(0, np.int64)
    if not len(files):
        return DataView(
            files, ds["ext"], ds["evidence"], empty, "", dataset_reads(tr, files), np.zeros(0, VISIT_DTYPE), empty,
            np.zeros(len(tr.paths), np.int64), empty, True, 1.0, 0.0, 0.0,
        )  # fmt: skip
    sizes, how = file_sizes(tr, files)
    rd = dataset_reads(tr, files)
    ev = tr.events
    opens = ev[(ev["op"] == OP_OPEN) & np.isin(ev["file"], files)]
    vis = visits(rd, opens)
    v = vis["visits"]
    # one pass's bytes per file: the union of every range ever read
    off = np.maximum(rd["offset"], 0)
    cg, cs, ce = union_segments(rd["file"].astype(np.int64), off, off + rd["size"])
    cover = np.bincount(cg, weights=ce - cs, minlength=len(tr.paths)).astype(np.int64)
    # how a reader walks a file: sequential, or jumping
    o = np.lexsort((rd["t"], rd["tid"], rd["pid"], rd["file"]))
    r = rd[o]
    same = (r["file"][1:] == r["file"][:-1]) & (r["tid"][1:] == r["tid"][:-1]) & (r["pid"][1:] == r["pid"][:-1])
    seq = (r["offset"][1:] == r["offset"][:-1] + r["size"][:-1]) | (r["offset"][1:] == 0)
    seq_frac = float(seq[same].mean()) if same.any() else 1.0
    frac = cover[files] / np.maximum(sizes, 1)
    largest = np.zeros(len(tr.paths), np.int64)
    np.maximum.at(largest, rd["file"], rd["size"])
    big_read = float(np.median(largest[files] / np.maximum(sizes, 1)))
    # A sample is its whole file when the reads walk the file (sequential, or large) and take all of
    # it, or take at each visit all the job ever reads of it (h5py reads a small HDF5 file's
    # metadata and data, not its free space: 78 % of a 6 KB file).
    per_visit = np.median(v["bytes"] / np.maximum(cover[v["file"]], 1)) if len(v) else 0.0
    walks = seq_frac >= 0.5 or big_read >= 0.5
    whole = bool(walks and (np.median(frac) >= 0.9 or (np.median(frac) >= 0.5 and per_visit >= 0.9)))
    if whole:
        units, extents, ep = v, vis["seg_len"], order.epoch_of(v, cover)
    else:  # ranges: a read call is a sample, and passes are not told apart
        units, extents = _read_units(rd), rd["size"].astype(np.int64)
        ep = np.zeros(len(units), np.int64)
    return DataView(
        files, ds["ext"], ds["evidence"], sizes, how, rd, units, extents, cover, ep, whole, seq_frac,
        float(np.median(frac)), big_read,
    )  # fmt: skip
