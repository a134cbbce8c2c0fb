"""npy: `np.save` (format version 1.0) of one array shaped (*dims, nsamples), C order.

The sample axis is last, so one sample is strided across the whole file; DLIO's reader
(`np.load`, no mmap) reads the whole file for every sample. The header is numpy's own; the data
is streamed from the C core's deterministic fill straight to the file (no array in memory).
"""
import io
import os

import numpy as np

from dlio.dataset.formats import core, itemsize, record_elems, whole_file_extents

EXT = "npy"
WHOLE_FILE = True


def array_shape(dims, nsamples):
    return (*(int(d) for d in dims), int(nsamples))


def header_bytes(shape, dtype):
    """The exact header np.save writes for a C-ordered array of this shape and dtype."""
    buf = io.BytesIO()
    d = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": tuple(shape)}
    np.lib.format.write_array_header_1_0(buf, d)
    return buf.getvalue()


def write(path, dims, nsamples, spec, seed, final=None, index=0):
    shape = array_shape(dims, nsamples)
    head = header_bytes(shape, spec.record_element_type)
    nbytes = record_elems(shape) * itemsize(spec)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.pwrite(fd, head, 0)
        if nbytes:
            core().write_random(fd, len(head), nbytes, seed)
    finally:
        os.close(fd)
    return len(head) + nbytes


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
