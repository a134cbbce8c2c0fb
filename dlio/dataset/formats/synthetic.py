"""synthetic: a tiny text file holding the file's global index, as DLIO writes; nothing of it
is read (a synthetic loader does no I/O), so there are no sample extents."""

import os
from typing import List, Optional

import numpy as np
from numpy.typing import NDArray

from dlio.dataset.formats import Dims, Extents
from dlio.dataset.section import DatasetSpec

EXT = "synthetic"
WHOLE_FILE = False


def write(
    path: str, dims: Dims, nsamples: int, spec: DatasetSpec, seed: int, final: Optional[str] = None, index: int = 0
) -> int:
    data = str(int(index)).encode()
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def expected_size(dims: Dims, nsamples: int, spec: DatasetSpec) -> Optional[int]:
    return None  # the file holds its index: known once written


def estimate_sizes(dims: NDArray[np.int64], nsamples: int, spec: DatasetSpec) -> NDArray[np.int64]:
    return np.full(len(dims), 8, np.int64)


def companions(final: str, spec: DatasetSpec) -> List[str]:
    return []


def valid(path: str, dims: Dims, nsamples: int, spec: DatasetSpec) -> bool:
    try:
        return os.stat(path).st_size > 0
    except OSError:
        return False


def extents(path: str, nsamples: int, spec: DatasetSpec) -> Extents:
    z = np.zeros(0, np.int64)
    return z, z.copy(), z.copy()
