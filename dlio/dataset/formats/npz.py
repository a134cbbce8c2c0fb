"""npz: what `np.savez(path, x=records, y=labels)` writes, built with the same zipfile calls.

Members `x.npy` (shape (*dims, nsamples), sample axis last) and `y.npy` (int64 zeros, nsamples),
stored uncompressed with numpy's forced zip64 local headers (DLIO never compresses: its `zip`
option is compared as a raw string and never matches). Content is streamed from the C core's
deterministic fill in 1 MiB chunks, so a file never needs its size in memory. DLIO's reader
(`np.load(...)['x']`) reads the whole file for every sample.
"""
import functools
import io
import zipfile

import numpy as np

from dlio.dataset.formats import core, itemsize, mix_seed, record_elems, whole_file_extents
from dlio.dataset.formats.npy import array_shape, header_bytes

EXT = "npz"
WHOLE_FILE = True
CHUNK = 1 << 20  # (a BufferedWriter is ~10x slower on single writes of many MiB)
ZIP64_LIMIT = (1 << 31) - 1  # zipfile's threshold for extra zip64 records


def _write_zip(fileobj, head, nbytes, nsamples, seed):
    zf = zipfile.ZipFile(fileobj, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True)
    try:
        with zf.open("x.npy", "w", force_zip64=True) as fid:
            fid.write(head)
            if nbytes:
                buf = np.empty(min(CHUNK, nbytes), np.uint8)
                done, k = 0, 0
                fill = core().fill_random
                while done < nbytes:
                    n = min(CHUNK, nbytes - done)
                    view = buf[:n]
                    fill(view, mix_seed(seed, k))
                    fid.write(view)
                    done += n
                    k += 1
        with zf.open("y.npy", "w", force_zip64=True) as fid:
            np.lib.format.write_array(fid, np.zeros(int(nsamples), dtype=np.int64))
    finally:
        zf.close()


def write(path, dims, nsamples, spec, seed, final=None, index=0):
    shape = array_shape(dims, nsamples)
    head = header_bytes(shape, spec.record_element_type)
    nbytes = record_elems(shape) * itemsize(spec)
    with open(path, "wb") as f:
        _write_zip(f, head, nbytes, nsamples, seed)
        return f.tell()


@functools.lru_cache(maxsize=256)
def _overhead(head_len, nsamples):
    """Bytes of an npz beyond x's array data (exact while the file is under zipfile's zip64
    threshold): measured by writing one with an empty x payload and a header of the same length."""
    buf = io.BytesIO()
    _write_zip(buf, b"\0" * head_len, 0, nsamples, 0)
    return len(buf.getvalue())


def expected_size(dims, nsamples, spec):
    shape = array_shape(dims, nsamples)
    head = header_bytes(shape, spec.record_element_type)
    nbytes = record_elems(shape) * itemsize(spec)
    if nbytes + len(head) + 8 * int(nsamples) + 4096 >= ZIP64_LIMIT:
        return None
    return _overhead(len(head), int(nsamples)) + nbytes


def estimate_sizes(dims, nsamples, spec):
    dims = np.asarray(dims, dtype=np.int64)
    return np.prod(dims, axis=1) * int(nsamples) * itemsize(spec) + 8 * int(nsamples) + 500


def companions(final, spec):
    return []


def valid(path, dims, nsamples, spec):
    """Complete when the zip directory lists x.npy and y.npy with the expected sizes."""
    shape = array_shape(dims, nsamples)
    xsize = len(header_bytes(shape, spec.record_element_type)) + record_elems(shape) * itemsize(spec)
    try:
        with zipfile.ZipFile(path) as zf:
            info = {i.filename: i.file_size for i in zf.infolist()}
    except (OSError, zipfile.BadZipFile, ValueError):
        return False
    return info.get("x.npy") == xsize and "y.npy" in info


def extents(path, nsamples, spec):
    return whole_file_extents(path, nsamples)
