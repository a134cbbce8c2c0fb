"""The byte ranges of the samples of a split's files, in O(files) memory when they are regular.

A format that reads part of a file per sample (tfrecord, indexed_binary, hdf5) gives, per file,
(samples, offsets, lengths): one or more ranges per sample. Kept flat, that is 24 bytes per range
for the whole split: 3.7 GB for BERT's 500 x 313,532 records, 6.6 GB for Megatron's 277 M. Files
of fixed-size records (tfrecord, indexed_binary with record_length_bytes_stdev 0) are regular,
though: sample s of every file is one range of the same length at first + s * stride. `Uniform`
is such a file in four numbers; a split whose files
are all uniform with the same stride, length and sample count is stored as one first offset per
file (`Table.first`) and planned by arithmetic (dlio.train.planner). Anything else stays flat.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np
from numpy.typing import NDArray

Ints = NDArray[np.integer[Any]]  # int64 mostly; an index file's uint64 (mapped), a table's uint32/uint64
Arrays = Tuple[Ints, Ints, Ints]  # samples (or group keys), offsets, lengths of one file
# a flat table's columns: file, sample, offset, length
Columns = Tuple[NDArray[np.uint32], NDArray[np.uint32], NDArray[np.uint64], NDArray[np.uint64]]


@dataclass(frozen=True)
class Uniform:
    """One file whose sample s (0 <= s < count) is the single range [first + s * stride, + length)."""

    first: int
    stride: int
    length: int
    count: int

    def arrays(self) -> Arrays:
        s = np.arange(self.count, dtype=np.int64)
        return s, self.first + s * self.stride, np.full(self.count, self.length, np.int64)


FileRanges = Union[Uniform, Arrays]


CHECK_CHUNK = 1 << 22  # ranges compared at a time: bounded temporaries for 277 M-range files


def _int64(a: Ints) -> NDArray[np.int64]:
    return np.asarray(a).astype(np.int64)


def compact(samples: Ints, offsets: Ints, lengths: Ints) -> FileRanges:
    """A file's ranges as Uniform when they are regular (one equal-length range per sample, samples
    0..n-1 in order, a constant stride >= length), else as int64 arrays. The inputs may be
    memory-mapped: they are compared in chunks, never copied whole unless irregular."""
    n = len(samples)

    def irregular() -> Arrays:
        return _int64(samples), _int64(offsets), _int64(lengths)

    if n == 0 or len(offsets) != n or len(lengths) != n:
        return irregular()
    first, length = int(offsets[0]), int(lengths[0])
    stride = int(offsets[1]) - first if n > 1 else length
    if length <= 0 or stride < length:
        return irregular()
    for a in range(0, n, CHECK_CHUNK):
        b = min(n, a + CHECK_CHUNK)
        k = np.arange(a, b, dtype=np.int64)
        if (
            (np.asarray(lengths[a:b]).astype(np.int64) != length).any()
            or (np.asarray(samples[a:b]).astype(np.int64) != k).any()
            or (np.asarray(offsets[a:b]).astype(np.int64) != first + k * stride).any()
        ):
            return irregular()
    return Uniform(first, stride, length, n)


def as_arrays(r: FileRanges) -> Arrays:
    return r.arrays() if isinstance(r, Uniform) else r


@dataclass
class Table:
    """A split's ranges: `first` (uint64 per file) with `stride`, `length`, `count` when every file
    is Uniform alike, else flat arrays sorted by (file, sample)."""

    first: Optional[NDArray[np.uint64]] = None
    stride: int = 0
    length: int = 0
    count: int = 0
    file: Optional[NDArray[np.uint32]] = None
    sample: Optional[NDArray[np.uint32]] = None
    offset: Optional[NDArray[np.uint64]] = None
    size: Optional[NDArray[np.uint64]] = None  # range lengths

    @property
    def uniform(self) -> bool:
        return self.first is not None

    def of_file(self, j: int) -> Arrays:
        """(samples, offsets, lengths) of file j."""
        if self.first is not None:
            return Uniform(int(self.first[j]), self.stride, self.length, self.count).arrays()
        file, sample, offset, size = self.columns()
        a, b = np.searchsorted(file, [j, j + 1])
        return sample[a:b], offset[a:b], size[a:b]

    def columns(self) -> Columns:
        """A flat table's (file, sample, offset, length) columns."""
        if self.file is None or self.sample is None or self.offset is None or self.size is None:
            raise ValueError("a uniform range table has no columns (flat() makes them)")
        return self.file, self.sample, self.offset, self.size

    def flat(self, nfiles: int) -> Columns:
        """(file, sample, offset, length) of every range: O(ranges), for checks and small splits."""
        if self.first is None:
            return self.columns()
        n, c = int(nfiles), self.count
        s = np.tile(np.arange(c, dtype=np.uint64), n)
        off = np.repeat(self.first.astype(np.uint64), c) + s * np.uint64(self.stride)
        return (
            np.repeat(np.arange(n, dtype=np.uint32), c),
            s.astype(np.uint32),
            off,
            np.full(n * c, self.length, np.uint64),
        )


def build(per: Sequence[FileRanges], files: Union[None, Sequence[int], Ints] = None) -> Table:
    """The Table of files given in order: uniform when every file is Uniform with the same stride,
    length and count (first[k] is per[k]'s), else flat with file numbers `files` (default 0..n-1)."""
    idx = np.arange(len(per), dtype=np.int64) if files is None else np.asarray(files, np.int64)
    uniform = [r for r in per if isinstance(r, Uniform)]
    shapes = {(r.stride, r.length, r.count) for r in uniform}
    if per and len(shapes) == 1 and len(uniform) == len(per):
        stride, length, count = shapes.pop()
        return Table(first=np.array([r.first for r in uniform], np.uint64), stride=stride, length=length, count=count)
    arrays = [as_arrays(r) for r in per]
    counts = np.array([a[0].size for a in arrays], dtype=np.int64)
    return Table(
        file=np.repeat(idx.astype(np.uint32), counts),
        sample=np.concatenate([a[0] for a in arrays] or [np.zeros(0, np.int64)]).astype(np.uint32),
        offset=np.concatenate([a[1] for a in arrays] or [np.zeros(0, np.int64)]).astype(np.uint64),
        size=np.concatenate([a[2] for a in arrays] or [np.zeros(0, np.int64)]).astype(np.uint64),
    )
