"""npy: `np.save` (format version 1.0) of one array shaped (*dims, nsamples), C order.

The sample axis is last, so one sample is strided across the whole file; DLIO's reader
(`np.load`, no mmap) reads the whole file for every sample. The header is numpy's own; the data
is the C core's stamped random content (dlio.dataset.formats.program), written straight to the file.
"""

import functools
import io
import os

import numpy as np

from dlio.dataset.formats import itemsize, record_elems, whole_file_extents

EXT = "npy"
WHOLE_FILE = True


def array_shape(dims, nsamples):
    return (*(int(d) for d in dims), int(nsamples))


@functools.lru_cache(maxsize=4096)
def header_bytes(shape, dtype):
    """The exact header np.save writes for a C-ordered array of this shape and dtype."""
    buf = io.BytesIO()
    d = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": tuple(shape)}
    np.lib.format.write_array_header_1_0(buf, d)
    return buf.getvalue()


def program(prog, dims, nsamples, spec, seed, final):
    shape = array_shape(dims, nsamples)
    prog.begin(final, seed)
    prog.lit(header_bytes(shape, spec.record_element_type))
    prog.rand(record_elems(shape) * itemsize(spec))


def expected_size(dims, nsamples, spec):
    shape = array_shape(dims, nsamples)
    return len(header_bytes(shape, spec.record_element_type)) + record_elems(shape) * itemsize(spec)


def estimate_sizes(dims, nsamples, spec):
    dims = np.asarray(dims, dtype=np.int64)
    return np.prod(dims, axis=1) * int(nsamples) * itemsize(spec) + 128


def companions(final, spec):
    return []


def valid(path, dims, nsamples, spec):
    try:
        return os.stat(path).st_size == expected_size(dims, nsamples, spec)
    except OSError:
        return False


def extents(path, nsamples, spec):
    return whole_file_extents(path, nsamples)
