"""tfrecord: nsamples records, each a serialized `tf.train.Example`
{'image': bytes_list[d1*d2*itemsize bytes], 'size': int64_list[that byte count]} (dialect 2.0.0: 'size'
holds DLIO 2.0.0's `dimension`, int(sqrt(record_length)), as its generator writes), framed as TFRecord:

    uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)

masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32). The protobuf wire format is written by
hand (no TensorFlow). Also DLIO's DALI-style index `{data_folder}/index/{train|valid}/{basename}.idx`
with one text line "offset length" per record (offset of the record's first byte, framed length).
All records of a file have the same size (DLIO draws one shape per file), so the framing is built
once per shape and the C core writes the records (stamped random images, CRC32C combined from the
content pool's per-block checksums, see dlio.dataset.formats.program).
"""

import functools
import math
import os
import struct
from typing import List, Optional, Tuple

import numpy as np
from numpy.typing import NDArray

from dlio import _core
from dlio.dataset.formats import Dims, Extents, itemsize, record_elems
from dlio.dataset.formats import program as P
from dlio.dataset.formats.program import Program
from dlio.dataset.section import DatasetSpec

EXT = "tfrecord"
WHOLE_FILE = False
MASK_DELTA = 0xA282EAD8


def masked_crc(crc: int) -> int:
    crc &= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    out = bytearray()
    n = int(n)
    if n < 0:
        n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(field: int, payload_len: int) -> bytes:
    """tag (wire type 2) + length prefix of a length-delimited field."""
    return _varint((field << 3) | 2) + _varint(payload_len)


def size_value(nbytes: int, spec: Optional[DatasetSpec]) -> int:
    """The Example's 'size': the image's byte count (current DLIO), or 2.0.0's int(sqrt(record_length))."""
    if spec is not None and spec.dialect == "2.0.0":
        return int(math.sqrt(float(spec.record_length_bytes)))
    return nbytes


def example_parts(nbytes: int, size: Optional[int] = None) -> Tuple[bytes, bytes]:
    """(prefix, suffix) of a serialized Example whose image payload (nbytes) sits between them;
    its 'size' feature holds `size` (default nbytes)."""
    # BytesList{value: [image]}; Feature{bytes_list: BytesList}
    bl_len = len(_ld(1, nbytes)) + nbytes
    feat_img_len = len(_ld(1, bl_len)) + bl_len
    key_img = b"image"
    entry_img_len = len(_ld(1, len(key_img))) + len(key_img) + len(_ld(2, feat_img_len)) + feat_img_len
    entry_img_head = (
        _ld(1, entry_img_len) + _ld(1, len(key_img)) + key_img + _ld(2, feat_img_len) + _ld(1, bl_len) + _ld(1, nbytes)
    )
    # Int64List{value: [nbytes]} (packed); Feature{int64_list: Int64List} (field 3)
    packed = _varint(nbytes if size is None else size)
    il = _ld(1, len(packed)) + packed
    feat_size = _ld(3, len(il)) + il
    key_size = b"size"
    entry_size_body = _ld(1, len(key_size)) + key_size + _ld(2, len(feat_size)) + feat_size
    entry_size = _ld(1, len(entry_size_body)) + entry_size_body
    features_len = len(entry_img_head) + nbytes + len(entry_size)
    prefix = _ld(1, features_len) + entry_img_head  # Example{features: Features{feature: map}}
    return prefix, entry_size


def record_layout(dims: Dims, spec: DatasetSpec) -> Tuple[int, int, int]:
    """(image bytes, proto length, framed record length) of one record of this file."""
    nbytes = record_elems(dims) * itemsize(spec)
    prefix, suffix = example_parts(nbytes, size_value(nbytes, spec))
    plen = len(prefix) + nbytes + len(suffix)
    return nbytes, plen, plen + 16


def index_path(final: str, spec: DatasetSpec) -> str:
    """DLIO's index file name: {data_folder}/index/{train|valid}/{basename}.idx (the split is
    'valid' when the data file's path contains 'valid', as in DLIO)."""
    folder = "valid" if "valid" in final else "train"
    root = str(spec.data_folder).rstrip("/") or "/"
    return os.path.join(root, "index", folder, os.path.basename(final) + ".idx")


@functools.lru_cache(maxsize=4096)
def framing(nbytes: int, size: Optional[int] = None) -> Tuple[bytes, bytes, bytes]:
    """(12-byte record header, Example prefix, Example suffix) of a record holding nbytes of image
    (and `size` in its 'size' feature, default nbytes)."""
    prefix, suffix = example_parts(nbytes, size)
    plen = len(prefix) + nbytes + len(suffix)
    head = struct.pack("<Q", plen)
    return head + struct.pack("<I", masked_crc(_crc32c(head))), prefix, suffix


def _crc32c(data: bytes) -> int:
    return _core.crc32c(data)


def program(prog: Program, dims: Dims, nsamples: int, spec: DatasetSpec, seed: int, final: str) -> None:
    """The index first (its own temp + rename), then nsamples records whose data CRCs the C core
    computes: header | CRC32C( prefix | image | suffix ) masked."""
    nsamples = int(nsamples)
    nbytes = record_elems(dims) * itemsize(spec)
    head, prefix, suffix = framing(nbytes, size_value(nbytes, spec))
    rlen = len(head) + len(prefix) + nbytes + len(suffix) + 4
    prog.begin(index_path(final, spec), seed)
    prog.lit(
        lambda: _index_text(np.arange(nsamples, dtype=np.int64) * rlen, rlen) if nsamples else b"",
        key=("tfidx", nsamples, rlen),
    )
    prog.begin(final, seed)

    def record(mult: int) -> None:
        prog.lit(head, mult=mult)
        prog.crc_begin(P.CRC32C)
        prog.lit(prefix, mult=mult)
        prog.rand(nbytes, mult=mult)
        prog.lit(suffix, mult=mult)
        prog.crc_end()
        prog.put(P.MASKED_LE, mult=mult)

    if nsamples:
        prog.repeat(nsamples, record)


def _index_text(offs: NDArray[np.int64], rlen: int) -> bytes:
    tail = f" {rlen}\n"
    return (tail.join(map(str, offs.tolist())) + tail).encode()


def layout_extents(dims: Dims, nsamples: int, spec: DatasetSpec) -> Extents:
    """What extents() reads back from a file this module wrote, from the shape alone."""
    rlen = record_layout(dims, spec)[2]
    idx = np.arange(int(nsamples), dtype=np.int64)
    return idx, idx * rlen, np.full(idx.size, rlen, np.int64)


def expected_size(dims: Dims, nsamples: int, spec: DatasetSpec) -> int:
    return record_layout(dims, spec)[2] * int(nsamples)


def estimate_sizes(dims: NDArray[np.int64], nsamples: int, spec: DatasetSpec) -> NDArray[np.int64]:
    dims = np.asarray(dims, dtype=np.int64)
    nbytes = np.prod(dims, axis=1) * itemsize(spec)
    return (nbytes + 48) * int(nsamples)


def companions(final: str, spec: DatasetSpec) -> List[str]:
    return [index_path(final, spec)]


def valid(path: str, dims: Dims, nsamples: int, spec: DatasetSpec) -> bool:
    try:
        if os.stat(path).st_size != expected_size(dims, nsamples, spec):
            return False
        return os.path.exists(index_path(path, spec))
    except OSError:
        return False


def read_index(idx_path: str) -> Tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(offsets, framed lengths) from DLIO's .idx text."""
    with open(idx_path, "rb") as f:
        data = f.read()
    if not data.strip():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    a = np.array(data.split(), dtype=np.int64).reshape(-1, 2)
    return a[:, 0].copy(), a[:, 1].copy()


def scan_records(path: str) -> Tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(offsets, framed lengths) by walking the file's length fields (when no .idx exists)."""
    offs: List[int] = []
    lens: List[int] = []
    size = os.stat(path).st_size
    with open(path, "rb") as f:
        pos = 0
        while pos + 12 <= size:
            f.seek(pos)
            (n,) = struct.unpack("<Q", f.read(8))
            rl = n + 16
            if rl > size - pos:  # a length field past the end: malformed (the check after names it)
                offs.append(pos)
                lens.append(min(rl, 1 << 62))
                break
            offs.append(pos)
            lens.append(rl)
            pos += rl
    return np.array(offs, np.int64), np.array(lens, np.int64)


def extents(path: str, nsamples: int, spec: DatasetSpec) -> Extents:
    """Record j's framed extent (12-byte header + data + 4-byte CRC), from DLIO's .idx file
    (or, without one, from the length fields in the file)."""
    idx = index_path(path, spec)
    if os.path.exists(idx):
        offs, lens = read_index(idx)
    else:
        offs, lens = scan_records(path)
    return np.arange(offs.size, dtype=np.int64), offs, lens
