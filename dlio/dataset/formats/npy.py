"""npy: `np.save` (format version 1.0) of one array shaped (*dims, nsamples), C order.

The sample axis is last, so one sample is strided across the whole file; DLIO's reader
(`np.load`, no mmap) reads the whole file for every sample. The header is numpy's own; the data
is the C core's stamped random content (dlio.dataset.formats.program), written straight to the file.
"""

import functools
import io
import os
from typing import List, Tuple

import numpy as np
from numpy.typing import NDArray

from dlio.dataset.formats import Dims, Extents, itemsize, record_elems, whole_file_extents
from dlio.dataset.formats.program import Program
from dlio.dataset.section import DatasetSpec

EXT = "npy"
WHOLE_FILE = True


def array_shape(dims: Dims, nsamples: int) -> Tuple[int, ...]:
    return (*(int(d) for d in dims), int(nsamples))


@functools.lru_cache(maxsize=4096)
def header_bytes(shape: Tuple[int, ...], dtype: str) -> bytes:
    """The exact header np.save writes for a C-ordered array of this shape and dtype."""
    buf = io.BytesIO()
    d = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": tuple(shape)}
    np.lib.format.write_array_header_1_0(buf, d)
    return buf.getvalue()


def program(prog: Program, dims: Dims, nsamples: int, spec: DatasetSpec, seed: int, final: str) -> None:
    shape = array_shape(dims, nsamples)
    prog.begin(final, seed)
    prog.lit(header_bytes(shape, spec.record_element_type))
    prog.rand(record_elems(shape) * itemsize(spec))


def expected_size(dims: Dims, nsamples: int, spec: DatasetSpec) -> int:
    shape = array_shape(dims, nsamples)
    return len(header_bytes(shape, spec.record_element_type)) + record_elems(shape) * itemsize(spec)


def estimate_sizes(dims: NDArray[np.int64], nsamples: int, spec: DatasetSpec) -> NDArray[np.int64]:
    dims = np.asarray(dims, dtype=np.int64)
    return np.prod(dims, axis=1) * int(nsamples) * itemsize(spec) + 128


def companions(final: str, spec: DatasetSpec) -> List[str]:
    return []


def valid(path: str, dims: Dims, nsamples: int, spec: DatasetSpec) -> bool:
    try:
        return os.stat(path).st_size == expected_size(dims, nsamples, spec)
    except OSError:
        return False


def extents(path: str, nsamples: int, spec: DatasetSpec) -> Extents:
    return whole_file_extents(path, nsamples)
