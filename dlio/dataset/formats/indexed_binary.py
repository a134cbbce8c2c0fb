"""indexed_binary / mmap_indexed_binary: `FILE` holds nsamples raw samples back to back, with
`FILE.off.idx` (uint64 offset of each sample) and `FILE.sz.idx` (uint64 size of each sample).

The sample size is prod(dims) * itemsize. DLIO's readers load both index files, then read
exactly [offset, offset+size) per sample (the mmap flavour slices a memmap). The data is written
by the C core straight to the file (stamped random content); the index files are written atomically
before the data file is renamed into place, so a data file under its final name always has its indexes.
"""

import os
from typing import List

import numpy as np
from numpy.typing import NDArray

from dlio.dataset.formats import Dims, Extents, itemsize, record_elems
from dlio.dataset.formats.program import Program
from dlio.dataset.section import DatasetSpec

EXT = None  # the format name: 'indexed_binary' or 'mmap_indexed_binary'
WHOLE_FILE = False


def off_path(final: str) -> str:
    return final + ".off.idx"


def size_path(final: str) -> str:
    return final + ".sz.idx"


def sample_size(dims: Dims, spec: DatasetSpec) -> int:
    return record_elems(dims) * itemsize(spec)


def program(prog: Program, dims: Dims, nsamples: int, spec: DatasetSpec, seed: int, final: str) -> None:
    """Both index files first, then the data file (each renamed when complete, in this order)."""
    n, ss = int(nsamples), sample_size(dims, spec)
    prog.begin(off_path(final), seed)
    prog.lit(lambda: (np.arange(n, dtype=np.uint64) * np.uint64(ss)).astype("<u8").tobytes(), key=("off", n, ss))
    prog.begin(size_path(final), seed)
    prog.lit(lambda: np.full(n, ss, dtype="<u8").tobytes(), key=("sz", n, ss))
    prog.begin(final, seed)
    prog.rand(ss * n)


def layout_extents(dims: Dims, nsamples: int, spec: DatasetSpec) -> Extents:
    """What extents() reads back from a file this module wrote, from the shape alone."""
    ss = sample_size(dims, spec)
    idx = np.arange(int(nsamples), dtype=np.int64)
    return idx, idx * ss, np.full(idx.size, ss, np.int64)


def expected_size(dims: Dims, nsamples: int, spec: DatasetSpec) -> int:
    return sample_size(dims, spec) * int(nsamples)


def estimate_sizes(dims: NDArray[np.int64], nsamples: int, spec: DatasetSpec) -> NDArray[np.int64]:
    dims = np.asarray(dims, dtype=np.int64)
    return np.prod(dims, axis=1) * itemsize(spec) * int(nsamples) + 16 * int(nsamples)


def companions(final: str, spec: DatasetSpec) -> List[str]:
    return [off_path(final), size_path(final)]


def valid(path: str, dims: Dims, nsamples: int, spec: DatasetSpec) -> bool:
    try:
        n = int(nsamples)
        return (
            os.stat(path).st_size == expected_size(dims, nsamples, spec)
            and os.stat(off_path(path)).st_size == 8 * n
            and os.stat(size_path(path)).st_size == 8 * n
        )
    except OSError:
        return False


def _index(path: str) -> NDArray[np.uint64]:
    """An index file as uint64, mapped rather than read: Megatron's holds 277 M entries (2.2 GB)."""
    if os.stat(path).st_size < 8:
        return np.zeros(0, np.uint64)
    return np.memmap(path, dtype="<u8", mode="r")


def extents(path: str, nsamples: int, spec: DatasetSpec) -> Extents:
    offs = _index(off_path(path))
    sizes = _index(size_path(path))
    n = min(offs.size, sizes.size)
    return np.arange(n, dtype=np.int64), offs[:n], sizes[:n]
