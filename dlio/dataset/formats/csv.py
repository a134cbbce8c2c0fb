"""csv: nsamples rows, each the flattened record as comma-separated decimal text.

Current DLIO writes pandas `to_csv(header=False, index=False)` and reads `read_csv(header=None)`: rows
only. DLIO 2.0.0 (dialect 2.0.0) writes `to_csv()` and reads `read_csv()`: a header row of column
numbers `,0,1,...,N-1` and each row led by its row number `i,`; without the header 2.0.0 takes the first
row as one and is a sample short. Every row of a file is the same record, as in DLIO.
Integer dtypes take the random bytes as values; float dtypes get values in [0, 1). Integer rows
are rendered by the C core (dc_csv_row: the bytes ",".join(map(str, values)) gives, at a few ns a
value); float rows by Python's repr, which C would have to reproduce digit for digit. DLIO's reader
(pandas `read_csv`) parses the whole file for every sample. Compression is not applied (DLIO's
raw-string comparison never applies it either, and never appends a suffix).
"""

import os
from typing import Any, List, Optional, Tuple

import numpy as np
from numpy.typing import NDArray

from dlio import _core
from dlio.base.errors import ConfigError
from dlio.dataset.formats import Dims, Extents, mix_seed, record_elems, whole_file_extents
from dlio.dataset.formats import program as P
from dlio.dataset.formats.program import Program
from dlio.dataset.section import DatasetSpec

EXT = "csv"
WHOLE_FILE = True

BLOCK = 64 << 10  # bytes of repeated rows held per file while a batch of files is written


def record_values(n: int, dtype_name: str, seed: int) -> NDArray[Any]:
    """A record's n values of this dtype (integers: the random bytes; floats: in [0, 1))."""
    dtype = np.dtype(dtype_name)
    raw = np.empty(n * max(dtype.itemsize, 4), np.uint8)
    _core.fill_random(raw, seed)
    if dtype.kind in "iub":
        if dtype.kind == "b":
            return raw[:n] & 1
        return raw[: n * dtype.itemsize].view(dtype)
    if dtype.kind == "f":
        u = raw[: n * 4].view(np.uint32)
        return (u >> 8).astype(np.float64) / float(1 << 24)
    raise ConfigError(f"csv cannot hold element type {dtype}")


def row_bytes(values: NDArray[Any]) -> bytes:
    """The row's bytes: the values comma-separated, then a newline (an empty uint8 row is empty)."""
    if values.size == 0:
        return b"" if values.dtype == np.uint8 else b"\n"
    if values.dtype.kind in "iu" and values.dtype.isnative:
        return _core.csv_row(values)
    return (",".join(map(str, values.tolist())) + "\n").encode()


def _numbers(n: int, sep: str) -> Tuple[bytes, NDArray[np.int64], NDArray[np.int64]]:
    """ "0<sep>1<sep>...(n-1)<sep>" and each number's (offset, length) in it, without the separator."""
    text = np.arange(n).astype(str)
    lens = np.char.str_len(text).astype(np.int64)
    offs = np.concatenate(([0], np.cumsum(lens + len(sep))[:-1])).astype(np.int64)
    return (sep.join(text.tolist()) + sep).encode(), offs, lens


def _program_200(prog: Program, row: bytes, nsamples: int, nelems: int, final: str, seed: int) -> None:
    """DLIO 2.0.0's file: header `,0,1,...,N-1`, then row i as `i,` + the record (numpy segments)."""
    prog.begin(final, seed)
    prog.lit(lambda: b"," + _numbers(nelems, ",")[0][:-1] + b"\n", key=("csv-header", nelems))
    text, offs, lens = _numbers(nsamples, ",")
    base, _ = prog.lit_ref(text, key=("csv-index", nsamples))
    row_at, _ = prog.lit_ref(row, key=("csv", final))
    segs = np.zeros(2 * nsamples, P.SEG_DTYPE)
    segs["kind"] = P.LIT
    segs["a"][0::2] = base + offs
    segs["b"][0::2] = lens + 1  # the number and its comma
    segs["a"][1::2] = row_at
    segs["b"][1::2] = len(row)
    prog.block(segs, int(segs["b"].sum()))


def program(prog: Program, dims: Dims, nsamples: int, spec: DatasetSpec, seed: int, final: str) -> None:
    """nsamples copies of the file's row: a block of rows (<= BLOCK bytes) repeated, then the rest
    (dialect 2.0.0: a header, and each row numbered)."""
    row = row_bytes(record_values(record_elems(dims), spec.record_element_type, mix_seed(seed, 0)))
    nsamples = int(nsamples)
    if spec.dialect == "2.0.0":
        return _program_200(prog, row, nsamples, record_elems(dims), final, seed)
    per = max(1, min(nsamples, BLOCK // max(len(row), 1)))
    prog.begin(final, seed)
    if nsamples >= per:
        block = row * per
        prog.repeat(nsamples // per, lambda mult: prog.lit(block, key=("csv", prog.paths[-1]), mult=mult))
    if nsamples % per:
        prog.lit(row * (nsamples % per), key=("csv-rest", prog.paths[-1]))


def expected_size(dims: Dims, nsamples: int, spec: DatasetSpec) -> Optional[int]:
    return None


def estimate_sizes(dims: NDArray[np.int64], nsamples: int, spec: DatasetSpec) -> NDArray[np.int64]:
    dims = np.asarray(dims, dtype=np.int64)
    dt = np.dtype(spec.record_element_type)
    per_value = {1: 3.6, 2: 6.0, 4: 11.0, 8: 20.0}.get(dt.itemsize, 10.0) if dt.kind in "iu" else 20.0
    n = np.prod(dims, axis=1)
    est = (n * per_value * int(nsamples)).astype(np.int64) + 1
    if spec.dialect == "2.0.0":  # the header of column numbers, a row number per row
        digits = np.floor(np.log10(np.maximum(n, 1))).astype(np.int64) + 1
        est += n * (digits + 1) + int(nsamples) * (len(str(nsamples)) + 1)
    return est


def companions(final: str, spec: DatasetSpec) -> List[str]:
    return []


def valid(path: str, dims: Dims, nsamples: int, spec: DatasetSpec) -> bool:
    """Complete when the file has nsamples lines (dialect 2.0.0: a header line starting with ',' and
    nsamples lines) and ends with a newline."""
    header = spec.dialect == "2.0.0"
    try:
        size = os.stat(path).st_size
        if size == 0:
            return int(nsamples) == 0 and not header
        with open(path, "rb") as f:
            if (f.read(1) == b",") != header:
                return False
            f.seek(size - 1)
            if f.read(1) != b"\n":
                return False
            f.seek(0)
            lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 22), b""))
        return lines == int(nsamples) + header
    except OSError:
        return False


def extents(path: str, nsamples: int, spec: DatasetSpec) -> Extents:
    return whole_file_extents(path, nsamples)
