"""parquet: real Parquet files through pyarrow, as MLPerf Storage's DLIO writes and reads them
(mlcommons/DLIO_local_changes: data_generator/parquet_generator.py, reader/parquet_reader.py).

Writing. One column per `dataset.parquet.columns` entry ({name, dtype, size, read}): `size` elements of
`dtype` per row (size 1: a plain column, more: a fixed-size list), or, with no columns, DLIO's one
column `data` of fixed-size uint8 lists of the record's size (dim1 x dim2, its drawn shape). Rows go in
write_table calls of `generation_batch_size` rows (0: row_group_size), each cut into row groups of
`row_group_size` rows, so a row group never spans two calls (DLIO's writer). Compression:
`dataset.compression` none / gzip / snappy / lz4 / zstd; pyarrow's other defaults (dictionary
encoding tried first, statistics) as DLIO leaves them. Content: the C fill's random bytes per column
and batch (a float column holds whatever those bits are).

Reading (`extents`): what a reader touches, from the file's own footer, for the columns it reads:
those with `read: true` (the default), or `storage.storage_options.columns` when it names some (DLIO's
own selection; DLIO's reader ignores the read flags and reads every column without it). Each column
chunk is [dictionary page or first data page, + total compressed size), adjacent chunks of one row
group merged into one range. The ranges come in groups, read once per reader (a PyTorch worker: the
trainer's reader thread of the step) per epoch, as DLIO's reader caches them per worker:
  * read_mode row_group: a sample's row group (its read chunks), when a reader first needs it;
  * read_mode default: the read chunks of every row group of the file, when a reader first opens it;
  * the footer, when a reader first opens the file: pyarrow reads max(64 KiB, footer + 8) bytes from
    the end (its default footer read).
In the range table a group is keyed by its first row, and the footer by `num_samples_per_file` (one
past the last row); the planner (dlio.train.planner, GROUPED) maps each sample to its group.
"""

from __future__ import annotations

import os
import struct
from types import ModuleType
from typing import TYPE_CHECKING, Any, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np
from numpy.typing import NDArray

from dlio import _core
from dlio.base.errors import ConfigError, DatasetError, DlioError
from dlio.config import Config
from dlio.dataset.formats import Dims, Extents, mix_seed, record_elems
from dlio.dataset.section import DatasetSpec, ParquetFields, read_columns
from dlio.system.memcheck import check_fits

if TYPE_CHECKING:
    import pyarrow

EXT = "parquet"
WHOLE_FILE = False
GROUPED = True  # extents are groups read once per reader and epoch (planner)
FOOTER_READ = 64 << 10  # Arrow's default footer read size
NUMERIC = ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
DTYPES = NUMERIC + ("bool", "list")  # DLIO's 'list': a float32 list of `size`
COMPRESSIONS = {"none": "none", "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}
KEY = "dataset.parquet.columns"


class Column(NamedTuple):
    name: str
    dtype: str  # a numpy dtype name, or bool
    size: int  # elements per row
    read: bool


def _pa() -> Tuple[ModuleType, ModuleType]:
    """pyarrow and pyarrow.parquet, imported when a parquet dataset is used (0.3 s, and an extra)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise DlioError(
            "dataset.format = parquet needs pyarrow: pip install 'dlio-fast[parquet]' (or pip install pyarrow)"
        ) from None
    return pa, pq


# ---------------------------------------------------------------------------------------------
# the config's columns


def _column(i: int, c: Mapping[Any, Any]) -> Column:
    where = f"{KEY}[{i}]"
    name = c.get("name")
    if not isinstance(name, str) or not name or "." in name:
        raise ConfigError(f"{where}: name = {name!r}: expected a column name (no '.')", KEY, name)
    dtype = str(c.get("dtype", "float32")).lower()
    if dtype not in DTYPES:
        raise ConfigError(
            f"{where} ({name}): dtype = {dtype!r}: expected one of {', '.join(DTYPES)} (string and binary "
            "columns are not supported yet)",
            KEY,
            dtype,
        )
    size = c.get("size", 1)
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 1 << 30:
        raise ConfigError(f"{where} ({name}): size = {size!r}: expected an integer >= 1 (elements per row)", KEY, size)
    read = c.get("read", True)
    if not isinstance(read, bool):
        raise ConfigError(f"{where} ({name}): read = {read!r}: expected true or false", KEY, read)
    unknown = sorted(set(c) - {"name", "dtype", "size", "read"})
    if unknown:
        raise ConfigError(f"{where} ({name}): unknown field {unknown[0]!r} (name, dtype, size, read)", KEY, unknown[0])
    return Column(name, "float32" if dtype == "list" else dtype, int(size), read)


def spec_fields(cfg: Config) -> ParquetFields:
    """DatasetSpec's parquet fields of a config, checked: one line naming the key for a bad value."""
    p = cfg.dataset.parquet
    if p.partition_by:
        raise ConfigError(
            f"dataset.parquet.partition_by = {p.partition_by!r}: hive-partitioned datasets are not supported; "
            "remove the key",
            "dataset.parquet.partition_by",
            p.partition_by,
        )
    cols = [_column(i, c) for i, c in enumerate(p.columns)]
    names = [c.name for c in cols]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise ConfigError(f"{KEY}: column {dup!r} is listed twice", KEY, dup)
    opts = cfg.storage.storage_options or {}
    chosen = opts.get("columns")
    read: Tuple[str, ...] = ()
    if chosen:
        if isinstance(chosen, str) or not all(isinstance(x, str) for x in chosen):
            msg = "storage.storage_options.columns: expected a list of column names"
            raise ConfigError(msg, "storage.storage_options", chosen)
        known = names or ["data"]
        bad = [x for x in chosen if x not in known]
        if bad:
            msg = f"storage.storage_options.columns: no column {bad[0]!r} (columns: {', '.join(known)})"
            raise ConfigError(msg, "storage.storage_options", bad[0])
        read = tuple(chosen)
    elif cols and not any(c.read for c in cols):
        raise ConfigError(f"{KEY}: no column has read: true; a reader would read nothing", KEY, None)
    return {
        "parquet_columns": tuple((c.name, c.dtype, c.size, c.read) for c in cols),
        "parquet_row_group_size": p.row_group_size,
        "parquet_generation_batch_size": p.generation_batch_size,
        "parquet_read_mode": p.read_mode,
        "parquet_read": read,
    }


def columns(spec: DatasetSpec, dims: Dims) -> List[Column]:
    """The file's columns: the config's, or DLIO's one `data` column of the record's uint8 bytes."""
    if spec.parquet_columns:
        return [Column(*c) for c in spec.parquet_columns]
    return [Column("data", "uint8", record_elems(dims), True)]


def _nbytes(c: Column, rows: int) -> int:
    """Bytes of `rows` rows of a column's values (bools are bits in Parquet)."""
    if c.dtype == "bool":
        return -(-rows * c.size // 8)
    return rows * c.size * np.dtype(c.dtype).itemsize


def row_groups(nsamples: int, spec: DatasetSpec) -> NDArray[np.int64]:
    """Rows of each row group as DLIO's writer makes them: write_table calls of generation_batch_size
    rows (0: row_group_size), each cut into row groups of row_group_size rows."""
    rgs = max(1, spec.parquet_row_group_size)
    gbs = spec.parquet_generation_batch_size or rgs
    batches = np.full(nsamples // gbs, gbs, np.int64)
    if nsamples % gbs:
        batches = np.append(batches, nsamples % gbs)
    per = -(-batches // rgs)  # row groups of each batch
    rows = np.full(int(per.sum()), rgs, np.int64)
    last = np.cumsum(per) - 1  # the last row group of each batch holds the rest
    rows[last] = batches - (per - 1) * rgs
    return rows


# ---------------------------------------------------------------------------------------------
# writing


def _compression(spec: DatasetSpec) -> str:
    c = COMPRESSIONS.get(spec.compression)
    if c is None:
        raise ConfigError(
            f"dataset.compression = {spec.compression!r}: parquet compresses with {', '.join(COMPRESSIONS)}",
            "dataset.compression",
            spec.compression,
        )
    return c


def _array(pa: ModuleType, c: Column, rows: int, seed: int) -> pyarrow.Array:
    """One batch of a column: the C fill's random bytes seen as the column's type."""
    n = rows * c.size
    if c.dtype == "bool":
        raw = np.empty(n, np.uint8)
        _core.fill_random(raw, seed)
        flat = pa.array((raw & 1).astype(bool), type=pa.bool_())
    else:
        raw = np.empty(n * np.dtype(c.dtype).itemsize, np.uint8)
        _core.fill_random(raw, seed)
        flat = pa.array(raw.view(c.dtype))
    return flat if c.size == 1 else pa.FixedSizeListArray.from_arrays(flat, c.size)


def _field(pa: ModuleType, c: Column) -> pyarrow.Field:
    t = pa.bool_() if c.dtype == "bool" else pa.from_numpy_dtype(np.dtype(c.dtype))
    return pa.field(c.name, t if c.size == 1 else pa.list_(t, c.size))


def write(
    path: str, dims: Dims, nsamples: int, spec: DatasetSpec, seed: int, final: Optional[str] = None, index: int = 0
) -> int:
    """Write one file with pyarrow (a row group's rows in memory at a time); returns its bytes."""
    pa, pq = _pa()
    cols = columns(spec, dims)
    gbs = spec.parquet_generation_batch_size or spec.parquet_row_group_size
    batch = min(int(nsamples), gbs)
    check_fits(
        2.0 * sum(_nbytes(c, batch) for c in cols),
        f"a parquet write of {batch} rows (dataset.parquet.generation_batch_size / row_group_size)",
        "lower dataset.parquet.generation_batch_size",
    )
    schema = pa.schema([_field(pa, c) for c in cols])
    with pq.ParquetWriter(path, schema, compression=_compression(spec)) as w:
        for k, start in enumerate(range(0, int(nsamples), gbs)):
            rows = min(gbs, int(nsamples) - start)
            arrays = [_array(pa, c, rows, mix_seed(seed, k, j)) for j, c in enumerate(cols)]
            # the writer cuts the batch into row groups of row_group_size rows (row_groups() says how)
            w.write_table(pa.Table.from_arrays(arrays, schema=schema), row_group_size=spec.parquet_row_group_size)
    return os.stat(path).st_size


def estimate_sizes(dims: NDArray[np.int64], nsamples: int, spec: DatasetSpec) -> NDArray[np.int64]:
    """Values plus page and footer overhead (per column chunk about 1 %, at least 256 bytes)."""
    dims = np.asarray(dims, dtype=np.int64).reshape(len(dims), -1)
    ngroups = len(row_groups(int(nsamples), spec))
    shapes, which = np.unique(dims, axis=0, return_inverse=True)  # files of one shape have one size
    sizes = np.zeros(len(shapes), np.int64)
    for i, d in enumerate(shapes):
        cols = columns(spec, tuple(int(x) for x in d))
        values = sum(_nbytes(c, int(nsamples)) for c in cols)
        sizes[i] = int(values * 1.01) + 256 * ngroups * len(cols) + 4096
    return sizes[np.asarray(which).reshape(-1)]


def expected_size(dims: Dims, nsamples: int, spec: DatasetSpec) -> Optional[int]:
    return None  # pyarrow's encoding decides (dictionary pages, statistics, compression)


def companions(final: str, spec: DatasetSpec) -> List[str]:
    return []


def valid(path: str, dims: Dims, nsamples: int, spec: DatasetSpec) -> bool:
    """A complete file: PAR1 at both ends, the rows and columns it should have."""
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"PAR1":
                return False
        _, pq = _pa()
        md = pq.read_metadata(path)
    except (OSError, ValueError):
        return False
    names = [f.name for f in md.schema.to_arrow_schema()]
    return md.num_rows == int(nsamples) and names == [c.name for c in columns(spec, dims)]


# ---------------------------------------------------------------------------------------------
# reading


def footer_range(path: str, size: int) -> Tuple[int, int]:
    """(offset, length) of what pyarrow reads to open the file: max(64 KiB, footer + 8) at the end."""
    with open(path, "rb") as f:
        f.seek(max(0, size - 8))
        tail = f.read(8)
    if len(tail) < 8 or tail[4:] != b"PAR1":
        raise DatasetError(f"{path}: not a Parquet file (no PAR1 footer)")
    (meta_len,) = struct.unpack("<I", tail[:4])
    length = min(size, max(FOOTER_READ, meta_len + 8))
    return size - length, length


def extents(path: str, nsamples: int, spec: DatasetSpec) -> Extents:
    """(group key, offset, length) of every range a reader reads: groups keyed by their first row (a
    row group, or 0 for the whole file in read_mode default), the footer keyed by nsamples."""
    _, pq = _pa()
    md = pq.read_metadata(path)
    if md.num_rows != int(nsamples):
        raise DatasetError(
            f"{path}: holds {md.num_rows} rows but dataset.num_samples_per_file = {nsamples}; set the value "
            "the data was generated with, or regenerate with dlio-fast generate"
        )
    want = read_columns(spec)
    top = [md.schema.column(j).path.split(".")[0] for j in range(md.num_columns)]
    missing = [w for w in want if w not in top]
    if missing:
        raise DatasetError(f"{path}: no column {missing[0]!r} to read (the file has {', '.join(dict.fromkeys(top))})")
    leaves = [j for j, t in enumerate(top) if t in want]
    keys, offs, lens = [], [], []
    first_row = 0
    whole_file = spec.parquet_read_mode != "row_group"
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        for j in leaves:
            cc = rg.column(j)
            start = cc.dictionary_page_offset if cc.has_dictionary_page and cc.dictionary_page_offset else None
            start = cc.data_page_offset if start is None else min(start, cc.data_page_offset)
            keys.append(0 if whole_file else first_row)
            offs.append(start)
            lens.append(cc.total_compressed_size)
        first_row += rg.num_rows
    k, o, n = (np.asarray(a, np.int64) for a in (keys, offs, lens))
    k, o, n = _merge_adjacent(k, o, n)
    fo, fl = footer_range(path, os.stat(path).st_size)
    return np.append(k, int(nsamples)), np.append(o, fo), np.append(n, fl)


def _merge_adjacent(
    keys: NDArray[np.int64], offs: NDArray[np.int64], lens: NDArray[np.int64]
) -> Tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Ranges of one group that touch (one ends where the next begins) as one range."""
    order = np.lexsort((offs, keys))
    keys, offs, lens = keys[order], offs[order], lens[order]
    if len(keys) < 2:
        return keys, offs, lens
    starts = np.ones(len(keys), bool)
    starts[1:] = (keys[1:] != keys[:-1]) | (offs[1:] != offs[:-1] + lens[:-1])
    first = np.flatnonzero(starts)
    ends = np.append(first[1:], len(keys)) - 1
    return keys[first], offs[first], offs[ends] + lens[ends] - offs[first]
