"""hdf5: `h5py.File(libver='latest')` with datasets `records_0..k-1` and `labels`, as DLIO writes.

Each `records_i` has shape (nsamples, *record) with the sample axis first, so one sample is one
contiguous slice (contiguous layout) or the set of chunks covering its row (chunked layout, when
`hdf5.chunk_dims`, `hdf5.max_shape` or a compression asks for it). `k = num_dset_per_record`
divides the first record dimension. `labels` is int64 zeros (nsamples,). DLIO's reader opens the
file and reads `records_i[j]` for each i: `extents()` returns exactly those byte ranges.
"""

import functools
import os
import tempfile
import threading

import numpy as np

from dlio.dataset.formats import core, itemsize, mix_seed, record_elems
from dlio.errors import ConfigError

EXT = "hdf5"
WHOLE_FILE = False
SLAB = 4 << 20
SPARSE_ABOVE = 1 << 20  # data bytes above which a shape's template comes from a sparse file, not memory


def _h5py():
    import h5py

    return h5py


def record_shape(dims, spec):
    """Shape of one sample inside each records_i dataset (DLIO's division by k, and its
    dropping of a leading 1 for explicit record_dims)."""
    k = max(1, int(spec.hdf5_num_dset_per_record or 1))
    d = [int(int(dims[0]) / k), *(int(x) for x in dims[1:])]
    if spec.record_dims and len(d) > 1 and d[0] == 1:
        d = d[1:]
    return tuple(d)


def _compression(spec):
    c = spec.compression or "none"
    c = str(c).lower()
    if c in ("none", "", "null", "false"):
        return {}
    if c == "gzip":
        return {"compression": "gzip", "compression_opts": int(spec.compression_level)}
    if c == "lzf":
        return {"compression": "lzf"}
    raise ConfigError(f"hdf5 supports compression 'gzip' or 'lzf' (or none), not {spec.compression!r}")


def _dset_kwargs(shape, spec):
    kw = _compression(spec)
    if spec.hdf5_chunk_dims:
        kw["chunks"] = tuple(int(c) for c in spec.hdf5_chunk_dims)
    if spec.hdf5_max_shape:
        kw["maxshape"] = (shape[0], *(int(m) for m in spec.hdf5_max_shape))
    return kw


def _slabs(shape, isz):
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


def _contiguous(spec):
    return not _compression(spec) and not spec.hdf5_chunk_dims and not spec.hdf5_max_shape


_orders = {}  # (shape, k, dtype) -> dataset numbers in file order


def _dataset_order(shape, k, spec):
    return _orders[(shape, k, str(np.dtype(spec.record_element_type)))]


_template_lock = threading.Lock()  # one thread builds a shape's template; the others wait for it


def template(shape, k, dtype):
    """The file h5py makes for k contiguous datasets of this shape (storage allocated at creation)
    and labels, as (literal pieces, data lengths): the file is piece 0, data 0, piece 1, ... piece k.
    Built once per shape; the data regions are left to the C core."""
    with _template_lock:
        return _template(shape, k, dtype)


@functools.lru_cache(maxsize=256)
def _template(shape, k, dtype):
    n = record_elems(shape) * np.dtype(dtype).itemsize
    if n * k > SPARSE_ABOVE:
        try:
            with tempfile.TemporaryDirectory(prefix="dlio-h5-template-") as d:
                return _build(shape, k, dtype, n, os.path.join(d, "t.h5"))
        except OSError:
            pass  # no writable temporary folder: in memory
    return _build(shape, k, dtype, n, None)


def _build(shape, k, dtype, n, path):
    """The template from a real, sparse file at `path` (storage allocated, never filled: only its
    metadata pieces are read back) or, with no path, from an in-memory image (which allocates and
    copies every data byte: the cheaper way for small shapes only)."""
    h5py = _h5py()
    if path is None:
        fid = h5py.File(f"dlio-template-{id(shape)}", "w", driver="core", backing_store=False, libver="latest")
    else:
        fid = h5py.File(path, "w", libver="latest")
    try:
        for i in range(k):
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
            dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
            fid.create_dataset(f"records_{i}", shape, dtype=np.dtype(dtype), dcpl=dcpl)
        fid.create_dataset("labels", data=np.zeros(shape[0], dtype=np.int64))
        fid.flush()
        offs = [fid[f"records_{i}"].id.get_offset() for i in range(k)]
        image = fid.id.get_file_image() if path is None else None
    finally:
        fid.close()
    if image is None:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            bounds = [0] + [x for i in sorted(offs) for x in (i, i + n)] + [size]
            image = {lo: os.pread(f.fileno(), hi - lo, lo) for lo, hi in zip(bounds[::2], bounds[1::2])}
    order = sorted(range(k), key=lambda i: offs[i])
    _orders[(shape, k, dtype)] = order
    pieces, pos = [], 0
    for i in order:
        pieces.append(image[pos] if isinstance(image, dict) else image[pos : offs[i]])
        pos = offs[i] + n
    pieces.append(image[pos] if isinstance(image, dict) else image[pos:])
    return tuple(pieces), n


def program(prog, dims, nsamples, spec, seed, final):
    """Contiguous, uncompressed datasets: h5py's file for the shape, copied, with stamped random
    records; other layouts go through h5py (write)."""
    if not _contiguous(spec):
        return False
    shape = (int(nsamples), *record_shape(dims, spec))
    k = max(1, int(spec.hdf5_num_dset_per_record or 1))
    pieces, n = template(shape, k, str(np.dtype(spec.record_element_type)))
    key = ("hdf5", shape, k, spec.record_element_type)
    prog.begin(final, seed)
    for j, piece in enumerate(pieces):
        prog.lit(piece, key=key + (j,))
        if j < k:
            prog.rand(n)
    return True


def layout_extents(dims, nsamples, spec):
    """What extents() reads back from a contiguous file this module wrote (None for other layouts):
    sample j of records_i is one slice of its dataset; ordered by sample, then dataset."""
    if not _contiguous(spec):
        return None
    shape = (int(nsamples), *record_shape(dims, spec))
    k = max(1, int(spec.hdf5_num_dset_per_record or 1))
    pieces, n = template(shape, k, str(np.dtype(spec.record_element_type)))
    starts = np.cumsum([len(p) for p in pieces[:-1]]) + n * np.arange(k)  # data offsets in file order
    base = starts[np.argsort(_dataset_order(shape, k, spec))]
    per = n // max(shape[0], 1)
    s = np.repeat(np.arange(shape[0], dtype=np.int64), k)
    d = np.tile(np.arange(k, dtype=np.int64), shape[0])
    return s, base[d] + s * per, np.full(s.size, per, np.int64)


def write(path, dims, nsamples, spec, seed, final=None, index=0):
    h5py = _h5py()
    dtype = np.dtype(spec.record_element_type)
    shape = (int(nsamples), *record_shape(dims, spec))
    k = max(1, int(spec.hdf5_num_dset_per_record or 1))
    kw = _dset_kwargs(shape, spec)
    fill = core().fill_random
    with h5py.File(path, "w", libver="latest") as hf:
        for i in range(k):
            ds = hf.create_dataset(f"records_{i}", shape, dtype=dtype, **kw)
            for s, sl in enumerate(_slabs(shape, dtype.itemsize)):
                sub = np.empty(_slab_shape(shape, sl), dtype=dtype)
                fill(sub.view(np.uint8).reshape(-1), mix_seed(seed, i, s))
                ds[sl] = sub
        hf.create_dataset("labels", data=np.zeros(int(nsamples), dtype=np.int64))
    return os.stat(path).st_size


def _slab_shape(shape, sl):
    out = []
    for ax, s in enumerate(sl):
        if isinstance(s, slice):
            out.append(s.stop - s.start)
        # an integer index drops the axis
    return (*out, *shape[len(sl) :])


def expected_size(dims, nsamples, spec):
    return None


def estimate_sizes(dims, nsamples, spec):
    dims = np.asarray(dims, dtype=np.int64)
    k = max(1, int(spec.hdf5_num_dset_per_record or 1))
    d0 = (dims[:, 0] / k).astype(np.int64)
    per = d0 * np.prod(dims[:, 1:], axis=1)
    return k * per * int(nsamples) * itemsize(spec) + 8 * int(nsamples) + 2048


def companions(final, spec):
    return []


def valid(path, dims, nsamples, spec):
    """Complete when it opens and every records_i and labels has the expected shape."""
    try:
        h5py = _h5py()
        shape = (int(nsamples), *record_shape(dims, spec))
        k = max(1, int(spec.hdf5_num_dset_per_record or 1))
        with h5py.File(path, "r") as hf:
            for i in range(k):
                ds = hf[f"records_{i}"]
                if ds.shape != shape or ds.dtype != np.dtype(spec.record_element_type):
                    return False
                if ds.chunks is None and ds.id.get_offset() is None:
                    return False
            return hf["labels"].shape == (int(nsamples),)
    except Exception:
        return False


def _chunk_table(ds):
    """(row start along axis 0, byte offset, size) of every stored chunk."""
    rows, offs, sizes = [], [], []
    dsid = ds.id
    if hasattr(dsid, "chunk_iter"):
        try:

            def cb(info):
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


def _dataset_extents(ds):
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


def extents(path, nsamples, spec):
    """Per sample, the bytes h5py's `records_i[j]` reads for each i (the contiguous slice, or the
    stored chunks covering row j); ordered by sample, then dataset."""
    h5py = _h5py()
    k = max(1, int(spec.hdf5_num_dset_per_record or 1))
    parts = []
    with h5py.File(path, "r") as hf:
        for i in range(k):
            name = f"records_{i}"
            if name not in hf:
                break
            s, o, ln = _dataset_extents(hf[name])
            parts.append((s, o, ln, np.full(s.size, i, np.int64)))
    if not parts:
        return (np.zeros(0, np.int64),) * 3
    s = np.concatenate([p[0] for p in parts])
    o = np.concatenate([p[1] for p in parts])
    ln = np.concatenate([p[2] for p in parts])
    d = np.concatenate([p[3] for p in parts])
    order = np.lexsort((o, d, s))
    return s[order], o[order], ln[order]
