"""jpeg / png: one greyscale uint8 image per file, readable and decodable by Pillow, and exactly the
drawn record size d1*d2 bytes on disk.

DLIO saves a d1 x d2 noise image, whose JPEG is much smaller than the record length. Here the image
is a square picture of 8-pixel stripes with about d1*d2 pixels (side on a 2 % grid: it decodes to
about DLIO's pixel count and compresses to a few KB), and
the rest of the file up to d1*d2 bytes is unique random padding in segments decoders skip (JPEG: COM
0xFFFE segments of at most 65533 payload bytes right after SOI; PNG: a private ancillary chunk
'prVt' with its CRC right after IHDR). So every 4 KiB block of a file but its image is unique and
incompressible, and the image, encoded once per shape, is copied into every file of that shape.
A target below the encoded image's size gets the image unpadded.
"""

import functools
import io
import math
import os
import struct
import zlib
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
from numpy.typing import NDArray

from dlio.dataset.formats import Dims, Extents, whole_file_extents
from dlio.dataset.formats import program as P
from dlio.dataset.formats.program import Program
from dlio.dataset.section import DatasetSpec

EXT = None  # the format name: 'jpeg' or 'png'
WHOLE_FILE = True
COM_MAX = 65533  # payload bytes per JPEG COM segment (length field counts itself: <= 65535)
PNG_CHUNK_MAX = 1 << 30  # payload bytes per private PNG chunk (spec limit is 2^31-1)
PNG_CHUNK_TYPE = b"prVt"
SPLIT = {"JPEG": 2, "PNG": 33}  # padding goes after SOI / after signature + IHDR


def _fmt_of(spec: DatasetSpec) -> str:
    f = str(spec.format).lower()
    return "PNG" if f == "png" else "JPEG"


GRID = 1.02  # image sides: 1..8, then a 2 % geometric progression (few shapes to encode)


def image_sides(targets: Union[Sequence[int], NDArray[np.int64]]) -> NDArray[np.int64]:
    """The square image side of files of these target sizes: the grid side nearest below
    sqrt(target), so it decodes to about DLIO's pixel count while a dataset of drawn shapes needs
    only a few dozen encoded images (vectorised; the one place the side is computed)."""
    x = np.sqrt(np.maximum(np.asarray(targets, dtype=np.float64), 1.0))
    k = np.floor(np.log(np.maximum(x, 8.0) / 8.0) / math.log(GRID))
    grid = np.minimum(np.floor(8.0 * GRID**k), np.floor(x))
    return np.where(x < 9, np.maximum(1, np.floor(x)), np.maximum(8, grid)).astype(np.int64)


def image_dims(dims: Dims) -> Tuple[int, int]:
    side = int(image_sides([target_bytes(dims)])[0])
    return side, side


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png(a: NDArray[np.uint8]) -> bytes:
    """A greyscale 8-bit PNG of the array a: signature, IHDR, one IDAT (each row led by filter 0), IEND.
    Written here because importing Pillow costs more than a short generation of PNGs takes to write."""
    h, w = a.shape
    rows = np.zeros((h, w + 1), np.uint8)
    rows[:, 1:] = a
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
        + _png_chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + _png_chunk(b"IEND", b"")
    )


@functools.lru_cache(maxsize=4096)
def base_image(fmt: str, h: int, w: int) -> bytes:
    """The encoded h x w image (stripes of 0 and 255, 8 pixels wide) shared by files of that shape."""
    a = np.zeros((max(h, 1), max(w, 1)), np.uint8)
    a[:, (np.arange(a.shape[1]) // 8) % 2 == 1] = 255
    if fmt == "PNG":
        return _png(a)
    from PIL import Image  # only for jpeg datasets: Pillow takes ~0.07 s to import

    out = io.BytesIO()
    Image.fromarray(a).save(out, format=fmt)
    return out.getvalue()


def target_bytes(dims: Dims) -> int:
    return int(dims[0]) * int(dims[1]) if len(dims) > 1 else int(dims[0])


def _min_pad(fmt: str) -> int:
    return 4 if fmt == "JPEG" else 12


def plan(fmt: str, dims: Dims) -> Tuple[bytes, int]:
    """(encoded image, padding bytes) of a file of this shape."""
    base = base_image(fmt, *image_dims(dims))
    pad = target_bytes(dims) - len(base)
    return base, (pad if pad >= _min_pad(fmt) else 0)


def _jpeg_sizes(pad: int) -> List[int]:
    """Sizes of the COM segments totalling pad bytes (each >= 4 bytes)."""
    nseg = -(-pad // (COM_MAX + 4))
    sizes = [pad // nseg] * nseg
    for i in range(pad - sum(sizes)):
        sizes[i] += 1
    return sizes


def _png_sizes(pad: int) -> List[int]:
    """Payload sizes of the private chunks totalling pad bytes with their framing (12 bytes each)."""
    sizes: List[int] = []
    left = pad
    while left:
        body = min(left - 12, PNG_CHUNK_MAX)
        if 0 < left - 12 - body < 12:  # leave room for a valid last chunk
            body -= 12
        sizes.append(body)
        left -= body + 12
    return sizes


def program(prog: Program, dims: Dims, nsamples: int, spec: DatasetSpec, seed: int, final: str) -> None:
    fmt = _fmt_of(spec)
    base, pad = plan(fmt, dims)
    key = (fmt, *image_dims(dims))
    cut = SPLIT[fmt]
    prog.begin(final, seed)
    if not pad:
        prog.lit(base, key=key)
        return
    prog.lit(base[:cut], key=key + ("head",))
    if fmt == "JPEG":
        for s in _jpeg_sizes(pad):
            prog.inline(b"\xff\xfe" + struct.pack(">H", s - 2))
            prog.rand(s - 4)
    else:
        for body in _png_sizes(pad):
            prog.inline(struct.pack(">I", body))
            prog.crc_begin(P.CRC32)
            prog.inline(PNG_CHUNK_TYPE)
            prog.rand(body)
            prog.crc_end()
            prog.put(P.BE)
    prog.lit(base[cut:], key=key + ("tail",))


def programs(
    prog: Program,
    dims: NDArray[np.int64],
    nsamples: int,
    spec: DatasetSpec,
    seeds: NDArray[np.uint64],
    finals: List[str],
) -> None:
    """program() for many files at once, built with numpy (no per-file Python): the files of
    one batch of an ImageNet-like dataset are described in microseconds each."""
    fmt = _fmt_of(spec)
    dims = np.asarray(dims, dtype=np.int64)
    t = dims[:, 0] * (dims[:, 1] if dims.shape[1] > 1 else 1)
    side = image_sides(t)
    if fmt == "PNG" and (t > PNG_CHUNK_MAX).any():  # several padding chunks: file by file
        for k in range(len(finals)):
            program(prog, tuple(dims[k]), nsamples, spec, int(seeds[k]), finals[k])
        return
    uniq, inv = np.unique(side, return_inverse=True)
    cut = SPLIT[fmt]
    pieces: List[Tuple[int, ...]] = []
    for sd in uniq.tolist():
        base, key = base_image(fmt, sd, sd), (fmt, sd, sd)
        pieces.append(
            (
                *prog.lit_ref(base, key),
                *prog.lit_ref(base[:cut], key + ("head",)),
                *prog.lit_ref(base[cut:], key + ("tail",)),
            )
        )
    refs = np.array(pieces, dtype=np.int64)[inv]  # per file: whole, head, tail as (offset, length)
    pad = t - refs[:, 1]
    pad[pad < _min_pad(fmt)] = 0
    per_seg = COM_MAX + 4 if fmt == "JPEG" else PNG_CHUNK_MAX + 12
    nseg = -(-pad // per_seg)
    body = 2 if fmt == "JPEG" else 6  # segments per padding segment
    count = np.where(pad > 0, 2 + body * nseg, 1)
    segs = np.zeros(int(count.sum()), P.SEG_DTYPE)
    start = np.cumsum(count) - count
    whole = pad == 0
    segs[start[whole]] = list(zip([P.LIT] * int(whole.sum()), [0] * int(whole.sum()), refs[whole, 0], refs[whole, 1]))
    padded = ~whole
    for col, at in ((2, start[padded]), (4, (start + count - 1)[padded])):
        segs["kind"][at] = P.LIT
        segs["a"][at] = refs[padded, col]
        segs["b"][at] = refs[padded, col + 1]
    f = np.repeat(np.nonzero(padded)[0], nseg[padded])  # file of each padding segment
    k = np.arange(f.size) - np.repeat(np.cumsum(nseg[padded]) - nseg[padded], nseg[padded])
    size = pad[f] // nseg[f] + (k < pad[f] % nseg[f])
    at = start[f] + 1 + body * k
    if fmt == "JPEG":
        n = size - 2
        segs["kind"][at], segs["arg"][at] = P.INLINE, 4
        segs["a"][at] = 0xFF | (0xFE << 8) | ((n >> 8) << 16) | ((n & 0xFF) << 24)
        segs["kind"][at + 1], segs["b"][at + 1] = P.RAND, size - 4
    else:
        n = size - 12
        be = ((n & 0xFF) << 24) | (((n >> 8) & 0xFF) << 16) | (((n >> 16) & 0xFF) << 8) | ((n >> 24) & 0xFF)
        segs["kind"][at], segs["arg"][at], segs["a"][at] = P.INLINE, 4, be
        segs["kind"][at + 1], segs["arg"][at + 1] = P.CRC_BEGIN, P.CRC32
        segs["kind"][at + 2], segs["arg"][at + 2] = P.INLINE, 4
        segs["a"][at + 2] = int.from_bytes(PNG_CHUNK_TYPE, "little")
        segs["kind"][at + 3], segs["b"][at + 3] = P.RAND, n
        segs["kind"][at + 4] = P.CRC_END
        segs["kind"][at + 5], segs["arg"][at + 5] = P.PUT, P.BE
    prog.extend(finals, seeds, segs, count, refs[:, 1] + pad)


def write(
    path: str, dims: Dims, nsamples: int, spec: DatasetSpec, seed: int, final: Optional[str] = None, index: int = 0
) -> int:
    prog = P.Program()
    program(prog, dims, nsamples, spec, seed, path)
    data = P.render(prog.finish(), 0)
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def expected_size(dims: Dims, nsamples: int, spec: DatasetSpec) -> int:
    base, pad = plan(_fmt_of(spec), dims)
    return len(base) + pad


def estimate_sizes(dims: NDArray[np.int64], nsamples: int, spec: DatasetSpec) -> NDArray[np.int64]:
    dims = np.asarray(dims, dtype=np.int64)
    t = dims[:, 0] * (dims[:, 1] if dims.shape[1] > 1 else 1)
    return np.maximum(t, 400)


def companions(final: str, spec: DatasetSpec) -> List[str]:
    return []


PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"  # the empty IEND chunk and its CRC


def valid(path: str, dims: Dims, nsamples: int, spec: DatasetSpec) -> bool:
    """The size this module writes, or (an image DLIO saved: its size is whatever the encoder made) a
    complete file: JPEG from SOI to EOI, PNG from its signature to IEND."""
    try:
        size = os.stat(path).st_size
        if size == expected_size(dims, nsamples, spec):
            return True
        with open(path, "rb") as f:
            head = f.read(8)
            f.seek(max(0, size - len(PNG_END)))
            tail = f.read()
        if spec.format == "png":
            return head == b"\x89PNG\r\n\x1a\n" and tail == PNG_END
        return head[:2] == b"\xff\xd8" and tail[-2:] == b"\xff\xd9"
    except OSError:
        return False


def extents(path: str, nsamples: int, spec: DatasetSpec) -> Extents:
    return whole_file_extents(path, nsamples)
