"""synthetic: a tiny text file holding the file's global index, as DLIO writes; nothing of it
is read (a synthetic loader does no I/O), so there are no sample extents."""

import os

import numpy as np

EXT = "synthetic"
WHOLE_FILE = False


def write(path, dims, nsamples, spec, seed, final=None, index=0):
    data = str(int(index)).encode()
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def expected_size(dims, nsamples, spec, index=None):
    return None if index is None else len(str(int(index)))


def estimate_sizes(dims, nsamples, spec):
    return np.full(len(dims), 8, np.int64)


def companions(final, spec):
    return []


def valid(path, dims, nsamples, spec):
    try:
        return os.stat(path).st_size > 0
    except OSError:
        return False


def extents(path, nsamples, spec):
    z = np.zeros(0, np.int64)
    return z, z.copy(), z.copy()
