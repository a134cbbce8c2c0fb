"""npz: what `np.savez(path, x=records, y=labels)` writes, byte for byte in layout and size.

Members `x.npy` (shape (*dims, nsamples), sample axis last) and `y.npy` (int64 zeros, nsamples),
stored uncompressed with numpy's forced zip64 local headers (DLIO never compresses: its `zip`
option is compared as a raw string and never matches). The zip framing is built here with
zipfile's own field choices (versions, zip64 extras only where zipfile puts them, a fixed 1980
timestamp), so the C core writes the file: x's content is stamped random data, and its CRC-32
(in the local header and the central directory) is combined from the content pool's per-block
checksums. DLIO's reader (`np.load(...)['x']`) reads the whole file for every sample.
"""

import functools
import os
import struct
import zipfile
import zlib
from typing import List, Tuple

import numpy as np
from numpy.typing import NDArray

from dlio.dataset.formats import Dims, Extents, itemsize, record_elems, whole_file_extents
from dlio.dataset.formats import program as P
from dlio.dataset.formats.npy import array_shape, header_bytes
from dlio.dataset.formats.program import Program
from dlio.dataset.section import DatasetSpec

EXT = "npz"
WHOLE_FILE = True
ZIP64_LIMIT = (1 << 31) - 1  # zipfile's threshold for zip64 records
DOSDATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01
VERSION = 45  # zipfile's ZIP64_VERSION (numpy forces zip64 local headers)
CREATE_SYSTEM = 3  # unix, as zipfile on Linux
EXTERNAL_ATTR = 0o600 << 16  # what zipfile gives a member opened for writing


def _local_header(name: bytes, crc: int, size: int) -> bytes:
    extra = struct.pack("<HHQQ", 1, 16, size, size)
    return (
        struct.pack(
            "<4s2B4HL2L2H",
            b"PK\x03\x04",
            VERSION,
            0,
            0,
            0,
            0,
            DOSDATE,
            crc,
            0xFFFFFFFF,
            0xFFFFFFFF,
            len(name),
            len(extra),
        )
        + name
        + extra
    )


def _central_entry(name: bytes, crc: int, size: int, offset: int) -> bytes:
    extra: List[int] = []
    fsize = csize = size
    if size > ZIP64_LIMIT:
        extra += [size, size]
        fsize = csize = 0xFFFFFFFF
    if offset > ZIP64_LIMIT:
        extra.append(offset)
        offset = 0xFFFFFFFF
    xdata = struct.pack("<HH" + "Q" * len(extra), 1, 8 * len(extra), *extra) if extra else b""
    return (
        struct.pack(
            "<4s4B4HL2L5H2L",
            b"PK\x01\x02",
            VERSION,
            CREATE_SYSTEM,
            VERSION,
            0,
            0,
            0,
            0,
            DOSDATE,
            crc,
            csize,
            fsize,
            len(name),
            len(xdata),
            0,
            0,
            0,
            EXTERNAL_ATTR,
            offset,
        )
        + name
        + xdata
    )


def _end_records(cd_offset: int, cd_size: int) -> bytes:
    out = b""
    if cd_offset > ZIP64_LIMIT or cd_size > ZIP64_LIMIT:
        out += struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, VERSION, VERSION, 0, 0, 2, 2, cd_size, cd_offset)
        out += struct.pack("<4sLQL", b"PK\x06\x07", 0, cd_offset + cd_size, 1)
        cd_offset, cd_size = min(cd_offset, 0xFFFFFFFF), min(cd_size, 0xFFFFFFFF)
    return out + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 2, 2, cd_size, cd_offset, 0)


@functools.lru_cache(maxsize=1024)
def _y_member(nsamples: int) -> Tuple[bytes, int]:
    data = header_bytes((int(nsamples),), "<i8") + bytes(8 * int(nsamples))
    return data, zlib.crc32(data)


@functools.lru_cache(maxsize=4096)
def layout(shape: Tuple[int, ...], dtype: str) -> Tuple[bytes, bytes, int, bytes, bytes]:
    """(local header of x, npy header of x, data bytes of x, bytes after x's data up to x's CRC in the
    central directory, the rest) for x of this shape; x's CRC goes at offset 14 and between the last
    two parts."""
    nsamples = shape[-1]
    head = header_bytes(shape, dtype)
    nbytes = record_elems(shape) * np.dtype(dtype).itemsize
    xsize = len(head) + nbytes
    lh_x = _local_header(b"x.npy", 0, xsize)
    ydata, ycrc = _y_member(nsamples)
    y_off = len(lh_x) + xsize
    lh_y = _local_header(b"y.npy", ycrc, len(ydata))
    cd_off = y_off + len(lh_y) + len(ydata)
    cd_x = _central_entry(b"x.npy", 0, xsize, 0)
    cd = cd_x + _central_entry(b"y.npy", ycrc, len(ydata), y_off)
    tail = _end_records(cd_off, len(cd))
    return lh_x, head, nbytes, lh_y + ydata + cd_x[:16], cd_x[20:] + cd[len(cd_x) :] + tail


def program(prog: Program, dims: Dims, nsamples: int, spec: DatasetSpec, seed: int, final: str) -> None:
    shape = array_shape(dims, nsamples)
    lh_x, head, nbytes, mid, rest = layout(shape, spec.record_element_type)
    key = ("npz", shape, spec.record_element_type)
    prog.begin(final, seed)
    prog.lit(lh_x, key=key + (0,))
    prog.crc_begin(P.CRC32)
    prog.lit(head, key=key + (1,))
    prog.rand(nbytes)
    prog.crc_end()
    prog.patch(P.LE, 14)
    prog.lit(mid, key=key + (2,))
    prog.put(P.LE)
    prog.lit(rest, key=key + (3,))


def expected_size(dims: Dims, nsamples: int, spec: DatasetSpec) -> int:
    lh_x, head, nbytes, mid, rest = layout(array_shape(dims, nsamples), spec.record_element_type)
    return len(lh_x) + len(head) + nbytes + len(mid) + 4 + len(rest)


def estimate_sizes(dims: NDArray[np.int64], nsamples: int, spec: DatasetSpec) -> NDArray[np.int64]:
    dims = np.asarray(dims, dtype=np.int64)
    return np.prod(dims, axis=1) * int(nsamples) * itemsize(spec) + 8 * int(nsamples) + 500


def companions(final: str, spec: DatasetSpec) -> List[str]:
    return []


def valid(path: str, dims: Dims, nsamples: int, spec: DatasetSpec) -> bool:
    """Complete when it has the expected size and the zip directory lists x.npy and y.npy with the
    expected sizes."""
    shape = array_shape(dims, nsamples)
    xsize = len(header_bytes(shape, spec.record_element_type)) + record_elems(shape) * itemsize(spec)
    try:
        if os.stat(path).st_size != expected_size(dims, nsamples, spec):
            return False
        with zipfile.ZipFile(path) as zf:
            info = {i.filename: i.file_size for i in zf.infolist()}
    except (OSError, zipfile.BadZipFile, ValueError):
        return False
    return info.get("x.npy") == xsize and "y.npy" in info


def extents(path: str, nsamples: int, spec: DatasetSpec) -> Extents:
    return whole_file_extents(path, nsamples)
