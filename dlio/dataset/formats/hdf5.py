"""hdf5: datasets `records_0..k-1` and `labels` in `h5py.File(libver='latest')`, as current DLIO writes,
or (dialect 2.0.0) one dataset `records` and `labels` in h5py's default file, as DLIO 2.0.0 writes.

The reader side (extents) takes either layout whatever the dialect: `records_0..k-1` when the file has
them, else `records`; a file with neither is named with the datasets it holds. Each `records_i` has
shape (nsamples, *record) with the sample axis first, so one sample is one contiguous slice
(contiguous layout) or the set of chunks covering its row (chunked layout, when `hdf5.chunk_dims`,
`hdf5.max_shape` or a compression asks for it). `k = num_dset_per_record` divides the first record
dimension. `labels` is int64 zeros (nsamples,). DLIO's reader opens the
file and reads `records_i[j]` for each i: `extents()` returns exactly those byte ranges.
"""

import functools
import os
import tempfile
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np
from numpy.typing import NDArray

from dlio import _core
from dlio.base.errors import ConfigError, DatasetError
from dlio.dataset.formats import Dims, Extents, itemsize, mix_seed, record_elems
from dlio.dataset.formats.program import Program
from dlio.dataset.section import DatasetSpec

if TYPE_CHECKING:
    import h5py

EXT = "hdf5"
WHOLE_FILE = False
SLAB = 4 << 20
SPARSE_ABOVE = 1 << 20  # data bytes above which a shape's template comes from a sparse file, not memory

Slab = Tuple[Union[int, slice], ...]  # an index of part of a dataset
Template = Tuple[Tuple[bytes, ...], int]  # a file's literal pieces, and the data bytes between two of them


def _h5py() -> ModuleType:
    import h5py  # only for hdf5 datasets: h5py takes ~0.15 s to import

    return h5py


def dataset_names(spec: DatasetSpec) -> Tuple[str, ...]:
    """The record datasets the spec's dialect writes: DLIO 2.0.0 `records`; current `records_0..k-1`."""
    if spec.dialect == "2.0.0":
        return ("records",)
    return tuple(f"records_{i}" for i in range(max(1, int(spec.hdf5_num_dset_per_record or 1))))


def _libver(spec: DatasetSpec) -> Optional[str]:
    return None if spec.dialect == "2.0.0" else "latest"  # 2.0.0: h5py.File(path, 'w'), its default


def record_shape(dims: Dims, spec: DatasetSpec) -> Tuple[int, ...]:
    """Shape of one sample inside each records_i dataset (DLIO's division by k, and its
    dropping of a leading 1 for explicit record_dims)."""
    k = len(dataset_names(spec))
    d = [int(int(dims[0]) / k), *(int(x) for x in dims[1:])]
    if spec.record_dims and len(d) > 1 and d[0] == 1:
        d = d[1:]
    return tuple(d)


def _compression(spec: DatasetSpec) -> Dict[str, object]:
    c = spec.compression or "none"
    c = str(c).lower()
    if c in ("none", "", "null", "false"):
        return {}
    if c == "gzip":
        return {"compression": "gzip", "compression_opts": int(spec.compression_level)}
    if c == "lzf":
        return {"compression": "lzf"}
    raise ConfigError(f"hdf5 supports compression 'gzip' or 'lzf' (or none), not {spec.compression!r}")


def _dset_kwargs(shape: Tuple[int, ...], spec: DatasetSpec) -> Dict[str, object]:
    kw = _compression(spec)
    if spec.hdf5_chunk_dims:
        kw["chunks"] = tuple(int(c) for c in spec.hdf5_chunk_dims)
    if spec.hdf5_max_shape:
        kw["maxshape"] = (shape[0], *(int(m) for m in spec.hdf5_max_shape))
    return kw


def _slabs(shape: Tuple[int, ...], isz: int) -> Iterator[Slab]:
    """Index tuples covering the dataset in pieces of about SLAB bytes."""
    n = shape[0]
    per_sample = record_elems(shape[1:]) * isz
    if per_sample <= SLAB or len(shape) < 2:
        m = max(1, SLAB // max(per_sample, 1))
        for a in range(0, n, m):
            yield (slice(a, min(n, a + m)),)
    else:
        row = record_elems(shape[2:]) * isz
        m = max(1, SLAB // max(row, 1))
        for j in range(n):
            for a in range(0, shape[1], m):
                yield (j, slice(a, min(shape[1], a + m)))


def _contiguous(spec: DatasetSpec) -> bool:
    return not _compression(spec) and not spec.hdf5_chunk_dims and not spec.hdf5_max_shape


# (shape, dataset names, dtype) -> dataset numbers in file order
_orders: Dict[Tuple[Tuple[int, ...], Tuple[str, ...], str], List[int]] = {}


def _dataset_order(shape: Tuple[int, ...], names: Tuple[str, ...], spec: DatasetSpec) -> List[int]:
    return _orders[(shape, names, str(np.dtype(spec.record_element_type)))]


_template_lock = threading.Lock()  # one thread builds a shape's template; the others wait for it


def template(shape: Tuple[int, ...], names: Tuple[str, ...], dtype: str, libver: Optional[str] = "latest") -> Template:
    """The file h5py makes for contiguous datasets `names` of this shape (storage allocated at
    creation) and labels, as (literal pieces, data lengths): the file is piece 0, data 0, piece 1, ...
    piece k. Built once per shape; the data regions are left to the C core."""
    with _template_lock:
        return _template(shape, names, dtype, libver)


@functools.lru_cache(maxsize=256)
def _template(shape: Tuple[int, ...], names: Tuple[str, ...], dtype: str, libver: Optional[str]) -> Template:
    n = record_elems(shape) * np.dtype(dtype).itemsize
    if n * len(names) > SPARSE_ABOVE:
        try:
            with tempfile.TemporaryDirectory(prefix="dlio-h5-template-") as d:
                return _build(shape, names, dtype, libver, n, os.path.join(d, "t.h5"))
        except OSError:
            pass  # no writable temporary folder: in memory
    return _build(shape, names, dtype, libver, n, None)


def _build(
    shape: Tuple[int, ...], names: Tuple[str, ...], dtype: str, libver: Optional[str], n: int, path: Optional[str]
) -> Template:
    """The template from a real, sparse file at `path` (storage allocated, never filled: only its
    metadata pieces are read back) or, with no path, from an in-memory image (which allocates and
    copies every data byte: the cheaper way for small shapes only)."""
    h5py = _h5py()
    k = len(names)
    if path is None:
        fid = h5py.File(f"dlio-template-{id(shape)}", "w", driver="core", backing_store=False, libver=libver)
    else:
        fid = h5py.File(path, "w", libver=libver)
    try:
        for name in names:
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
            dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
            fid.create_dataset(name, shape, dtype=np.dtype(dtype), dcpl=dcpl)
        fid.create_dataset("labels", data=np.zeros(shape[0], dtype=np.int64))
        fid.flush()
        offs: List[int] = [fid[name].id.get_offset() for name in names]
        # the whole file in memory, or (a file) the pieces between the data regions by offset
        image: Union[bytes, Dict[int, bytes]] = fid.id.get_file_image() if path is None else {}
    finally:
        fid.close()
    if path is not None:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            bounds = [0] + [x for i in sorted(offs) for x in (i, i + n)] + [size]
            image = {lo: os.pread(f.fileno(), hi - lo, lo) for lo, hi in zip(bounds[::2], bounds[1::2])}
    order = sorted(range(k), key=lambda i: offs[i])
    _orders[(shape, names, dtype)] = order
    pieces: List[bytes] = []
    pos = 0
    for i in order:
        pieces.append(image[pos] if isinstance(image, dict) else image[pos : offs[i]])
        pos = offs[i] + n
    pieces.append(image[pos] if isinstance(image, dict) else image[pos:])
    return tuple(pieces), n


def _spec_template(
    dims: Dims, nsamples: int, spec: DatasetSpec
) -> Tuple[Tuple[int, ...], Tuple[str, ...], Tuple[bytes, ...], int]:
    """(shape, dataset names, template pieces, bytes per dataset) of a contiguous file of this spec."""
    shape = (int(nsamples), *record_shape(dims, spec))
    names = dataset_names(spec)
    pieces, n = template(shape, names, str(np.dtype(spec.record_element_type)), _libver(spec))
    return shape, names, pieces, n


def program(prog: Program, dims: Dims, nsamples: int, spec: DatasetSpec, seed: int, final: str) -> bool:
    """Contiguous, uncompressed datasets: h5py's file for the shape, copied, with stamped random
    records; other layouts go through h5py (write)."""
    if not _contiguous(spec):
        return False
    shape, names, pieces, n = _spec_template(dims, nsamples, spec)
    k = len(names)
    key = ("hdf5", shape, names, spec.record_element_type)
    prog.begin(final, seed)
    for j, piece in enumerate(pieces):
        prog.lit(piece, key=key + (j,))
        if j < k:
            prog.rand(n)
    return True


def layout_extents(dims: Dims, nsamples: int, spec: DatasetSpec) -> Optional[Extents]:
    """What extents() reads back from a contiguous file this module wrote (None for other layouts):
    sample j of records_i is one slice of its dataset; ordered by sample, then dataset."""
    if not _contiguous(spec):
        return None
    shape, names, pieces, n = _spec_template(dims, nsamples, spec)
    k = len(names)
    starts = np.cumsum([len(p) for p in pieces[:-1]]) + n * np.arange(k)  # data offsets in file order
    base = starts[np.argsort(_dataset_order(shape, names, spec))]
    per = n // max(shape[0], 1)
    s = np.repeat(np.arange(shape[0], dtype=np.int64), k)
    d = np.tile(np.arange(k, dtype=np.int64), shape[0])
    return s, base[d] + s * per, np.full(s.size, per, np.int64)


def write(
    path: str, dims: Dims, nsamples: int, spec: DatasetSpec, seed: int, final: Optional[str] = None, index: int = 0
) -> int:
    h5py = _h5py()
    dtype = np.dtype(spec.record_element_type)
    shape = (int(nsamples), *record_shape(dims, spec))
    kw = _dset_kwargs(shape, spec)
    fill = _core.fill_random
    with h5py.File(path, "w", libver=_libver(spec)) as hf:
        for i, name in enumerate(dataset_names(spec)):
            ds = hf.create_dataset(name, shape, dtype=dtype, **kw)
            for s, sl in enumerate(_slabs(shape, dtype.itemsize)):
                sub = np.empty(_slab_shape(shape, sl), dtype=dtype)
                fill(sub.view(np.uint8).reshape(-1), mix_seed(seed, i, s))
                ds[sl] = sub
        hf.create_dataset("labels", data=np.zeros(int(nsamples), dtype=np.int64))
    return os.stat(path).st_size


def _slab_shape(shape: Tuple[int, ...], sl: Slab) -> Tuple[int, ...]:
    out: List[int] = []
    for ax, s in enumerate(sl):
        if isinstance(s, slice):
            out.append(s.stop - s.start)
        # an integer index drops the axis
    return (*out, *shape[len(sl) :])


def expected_size(dims: Dims, nsamples: int, spec: DatasetSpec) -> Optional[int]:
    return None


def estimate_sizes(dims: NDArray[np.int64], nsamples: int, spec: DatasetSpec) -> NDArray[np.int64]:
    dims = np.asarray(dims, dtype=np.int64)
    k = len(dataset_names(spec))
    d0 = (dims[:, 0] / k).astype(np.int64)
    per = d0 * np.prod(dims[:, 1:], axis=1)
    return k * per * int(nsamples) * itemsize(spec) + 8 * int(nsamples) + 2048


def companions(final: str, spec: DatasetSpec) -> List[str]:
    return []


def valid(path: str, dims: Dims, nsamples: int, spec: DatasetSpec) -> bool:
    """Complete when it opens and every record dataset of the spec's dialect and labels has the
    expected shape."""
    try:
        h5py = _h5py()
        shape = (int(nsamples), *record_shape(dims, spec))
        with h5py.File(path, "r") as hf:
            for name in dataset_names(spec):
                ds = hf[name]
                if ds.shape != shape or ds.dtype != np.dtype(spec.record_element_type):
                    return False
                if ds.chunks is None and ds.id.get_offset() is None:
                    return False
            return hf["labels"].shape == (int(nsamples),)
    except Exception:
        return False


def _chunk_table(ds: "h5py.Dataset") -> Tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """(row start along axis 0, byte offset, size) of every stored chunk ."""
    rows: List[int] = []
    offs: List[int] = []
    sizes: List[int] = []
    dsid = ds.id
    if hasattr(dsid, "chunk_iter"):
        try:

            def cb(info: "h5py.h5d.StoreInfo") -> None:
                rows.append(info.chunk_offset[0])
                offs.append(info.byte_offset)
                sizes.append(info.size)

            dsid.chunk_iter(cb)
            return np.array(rows, np.int64), np.array(offs, np.int64), np.array(sizes, np.int64)
        except Exception:
            rows, offs, sizes = [], [], []
    for c in range(dsid.get_num_chunks()):
        info = dsid.get_chunk_info(c)
        rows.append(info.chunk_offset[0])
        offs.append(info.byte_offset)
        sizes.append(info.size)
    return np.array(rows, np.int64), np.array(offs, np.int64), np.array(sizes, np.int64)


def _dataset_extents(ds: "h5py.Dataset") -> Extents:
    """The ranges of each sample of one h5py Dataset (its slice, or its chunks)."""
    n = ds.shape[0] if ds.shape else 0
    sample_bytes = record_elems(ds.shape[1:]) * ds.dtype.itemsize
    if ds.chunks is None:
        base = ds.id.get_offset()
        if base is None or n == 0:
            return (np.zeros(0, np.int64),) * 3
        idx = np.arange(n, dtype=np.int64)
        return idx, base + idx * sample_bytes, np.full(n, sample_bytes, np.int64)
    c0 = int(ds.chunks[0])
    rows, offs, sizes = _chunk_table(ds)
    if rows.size == 0:
        return (np.zeros(0, np.int64),) * 3
    row = rows // c0
    order = np.lexsort((offs, row))
    row, offs, sizes = row[order], offs[order], sizes[order]
    nrows = -(-n // c0)
    counts = np.bincount(row, minlength=nrows)[:nrows]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    samp_row = np.arange(n, dtype=np.int64) // c0
    cnt = counts[samp_row]
    sample_idx = np.repeat(np.arange(n, dtype=np.int64), cnt)
    first = np.repeat(starts[samp_row], cnt)
    within = np.arange(cnt.sum(), dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    pos = first + within
    return sample_idx, offs[pos], sizes[pos]


def _names_in(hf: "h5py.File", path: str, spec: DatasetSpec) -> List[str]:
    """The record datasets a DLIO reader reads in this file, whichever DLIO wrote it: current's
    `records_0..k-1` (k = hdf5.num_dset_per_record) when the file has `records_0`, else 2.0.0's `records`."""
    k = max(1, int(spec.hdf5_num_dset_per_record or 1))
    if "records_0" in hf:
        names = [f"records_{i}" for i in range(k)]
        missing = [n for n in names if n not in hf]
        if not missing:
            return names
        why = f"lacks {missing[0]} (dataset.hdf5.num_dset_per_record = {k})"
    elif "records" in hf:
        return ["records"]
    else:
        why = "lacks the datasets DLIO reads"
    found = ", ".join(sorted(hf.keys())[:8]) or "none"
    raise DatasetError(
        f"{path}: HDF5 file {why}: expected 'records' (DLIO 2.0.0) or 'records_0'..'records_{k - 1}' "
        f"(current DLIO), found: {found}; set the keys it was made with, or regenerate it with dlio-fast generate"
    )


def extents(path: str, nsamples: int, spec: DatasetSpec) -> Extents:
    """Per sample, the bytes h5py's `records_i[j]` (or 2.0.0's `records[j]`) reads for each dataset
    (the contiguous slice, or the stored chunks covering row j); ordered by sample, then dataset."""
    h5py = _h5py()
    parts = []
    with h5py.File(path, "r") as hf:
        for i, name in enumerate(_names_in(hf, path, spec)):
            s, o, ln = _dataset_extents(hf[name])
            parts.append((s, o, ln, np.full(s.size, i, np.int64)))
    s = np.concatenate([p[0] for p in parts])
    o = np.concatenate([p[1] for p in parts])
    ln = np.concatenate([p[2] for p in parts])
    d = np.concatenate([p[3] for p in parts])
    order = np.lexsort((o, d, s))
    return s[order], o[order], ln[order]
