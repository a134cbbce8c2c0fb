"""csv: nsamples rows, each the flattened record as comma-separated decimal text, no header.

Like DLIO (pandas `to_csv(header=False, index=False)`), every row of a file is the same record.
Integer dtypes take the random bytes as values; float dtypes get values in [0, 1). Integer rows
are rendered by the C core (dc_csv_row: the bytes ",".join(map(str, values)) gives, at a few ns a
value); float rows by Python's repr, which C would have to reproduce digit for digit. DLIO's reader
(pandas `read_csv`) parses the whole file for every sample. Compression is not applied (DLIO's
raw-string comparison never applies it either, and never appends a suffix).
"""

import os

import numpy as np

from dlio.dataset.formats import core, mix_seed, record_elems, whole_file_extents
from dlio.errors import ConfigError

EXT = "csv"
WHOLE_FILE = True

BLOCK = 64 << 10  # bytes of repeated rows held per file while a batch of files is written


def record_values(n, dtype, seed):
    dtype = np.dtype(dtype)
    raw = np.empty(n * max(dtype.itemsize, 4), np.uint8)
    core().fill_random(raw, seed)
    if dtype.kind in "iub":
        if dtype.kind == "b":
            return raw[:n] & 1
        return raw[: n * dtype.itemsize].view(dtype)
    if dtype.kind == "f":
        u = raw[: n * 4].view(np.uint32)
        return (u >> 8).astype(np.float64) / float(1 << 24)
    raise ConfigError(f"csv cannot hold element type {dtype}")


def row_bytes(values):
    """The row's bytes: the values comma-separated, then a newline (an empty uint8 row is empty)."""
    if values.size == 0:
        return b"" if values.dtype == np.uint8 else b"\n"
    if values.dtype.kind in "iu" and values.dtype.isnative:
        return core().csv_row(values)
    return (",".join(map(str, values.tolist())) + "\n").encode()


def program(prog, dims, nsamples, spec, seed, final):
    """nsamples copies of the file's row: a block of rows (<= BLOCK bytes) repeated, then the rest."""
    row = row_bytes(record_values(record_elems(dims), spec.record_element_type, mix_seed(seed, 0)))
    nsamples = int(nsamples)
    per = max(1, min(nsamples, BLOCK // max(len(row), 1)))
    prog.begin(final, seed)
    if nsamples >= per:
        block = row * per
        prog.repeat(nsamples // per, lambda mult: prog.lit(block, key=("csv", prog.paths[-1]), mult=mult))
    if nsamples % per:
        prog.lit(row * (nsamples % per), key=("csv-rest", prog.paths[-1]))


def expected_size(dims, nsamples, spec):
    return None


def estimate_sizes(dims, nsamples, spec):
    dims = np.asarray(dims, dtype=np.int64)
    dt = np.dtype(spec.record_element_type)
    per_value = {1: 3.6, 2: 6.0, 4: 11.0, 8: 20.0}.get(dt.itemsize, 10.0) if dt.kind in "iu" else 20.0
    return (np.prod(dims, axis=1) * per_value * int(nsamples)).astype(np.int64) + 1


def companions(final, spec):
    return []


def valid(path, dims, nsamples, spec):
    """Complete when the file has nsamples lines and ends with a newline."""
    try:
        size = os.stat(path).st_size
        if size == 0:
            return int(nsamples) == 0
        with open(path, "rb") as f:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                return False
            f.seek(0)
            lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 22), b""))
        return lines == int(nsamples)
    except OSError:
        return False


def extents(path, nsamples, spec):
    return whole_file_extents(path, nsamples)
