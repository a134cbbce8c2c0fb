"""jpeg / png: one greyscale uint8 image per file, readable (and decodable) by Pillow.

DLIO saves a d1 x d2 noise image, whose JPEG is much smaller than the record length (about
0.56 bytes per pixel). Here each file is made to be exactly the drawn record size d1*d2 bytes:
a noise image is chosen whose encoded size is slightly below the target, then padded with random
bytes in comment segments (JPEG: COM 0xFFFE segments of at most 65533 payload bytes right after
SOI; PNG: a private ancillary chunk 'prVt' with a correct CRC right after IHDR). Decoders skip
both. To keep generation disk-bound, base images come from a small per-process pool (side
lengths on a 2% geometric grid, a few content variants each); each file is unique by its
random padding. A target below the smallest encodable image gets that image unpadded.
"""
import io
import math
import os
import struct
import threading
import zlib

import numpy as np

from dlio.dataset.formats import core, mix_seed, whole_file_extents

EXT = None  # the format name: 'jpeg' or 'png'
WHOLE_FILE = True
VARIANTS = 4
GRID = 1.02
POOL_BYTES = 256 << 20
COM_MAX = 65533          # payload bytes per JPEG COM segment (length field counts itself: <= 65535)
PNG_CHUNK_MAX = 1 << 30  # payload bytes per private PNG chunk (spec limit is 2^31-1)
PNG_CHUNK_TYPE = b"prVt"

_lock = threading.Lock()
_pool = {}        # (fmt, side, variant) -> encoded bytes
_pool_bytes = [0]
_calib = {}       # fmt -> (bytes per pixel, size of the 1x1 image)


def _fmt_of(spec):
    f = str(spec.format).lower()
    return "PNG" if f == "png" else "JPEG"


def _encode(fmt, side, variant):
    from PIL import Image
    a = np.empty((side, side), np.uint8)
    core().fill_random(a, mix_seed(0x1A6E, side, variant, fmt == "PNG"))
    out = io.BytesIO()
    Image.fromarray(a).save(out, format=fmt)
    return out.getvalue()


def _base(fmt, side, variant):
    key = (fmt, side, variant)
    b = _pool.get(key)
    if b is not None:
        return b
    with _lock:
        b = _pool.get(key)
        if b is None:
            b = _encode(fmt, side, variant)
            if _pool_bytes[0] + len(b) > POOL_BYTES:
                _pool.clear()
                _pool_bytes[0] = 0
            _pool[key] = b
            _pool_bytes[0] += len(b)
    return b


def _calibration(fmt):
    c = _calib.get(fmt)
    if c is None:
        big = len(_encode(fmt, 256, 0))
        small = len(_encode(fmt, 1, 0))
        c = _calib[fmt] = ((big - small) / (256 * 256), small)
    return c


def _grid_below(x):
    """Largest grid side <= x (grid: 1..8 then a 2% geometric progression)."""
    if x < 9:
        return max(1, int(x))
    k = math.floor(math.log(x / 8.0) / math.log(GRID))
    g = int(8 * GRID ** k)
    return max(8, min(g, int(x)))


def _grid_step_down(side):
    if side <= 8:
        return side - 1
    return _grid_below(side / GRID)


def _min_pad(fmt):
    return 4 if fmt == "JPEG" else 12


def plan(fmt, target, variant=0):
    """(base image bytes, padding bytes) for a file of `target` bytes."""
    bpp, small = _calibration(fmt)
    minpad = _min_pad(fmt)
    if target <= small:
        return _base(fmt, 1, variant), 0
    side = _grid_below(math.sqrt(max(target - small, 1) * 0.97 / bpp))
    while side >= 1:
        b = _base(fmt, side, variant)
        pad = target - len(b)
        if pad == 0 or pad >= minpad:
            return b, pad
        side = _grid_step_down(side)
    return _base(fmt, 1, variant), 0


def target_bytes(dims):
    return int(dims[0]) * int(dims[1]) if len(dims) > 1 else int(dims[0])


def _jpeg_padding(pad, payload):
    """COM segments totalling pad bytes (pad == 0 or >= 4)."""
    out = bytearray()
    nseg = -(-pad // (COM_MAX + 4))
    # spread so that every segment has at least 4 bytes
    sizes = [pad // nseg] * nseg
    for i in range(pad - sum(sizes)):
        sizes[i] += 1
    pos = 0
    for s in sizes:
        body = s - 4
        out += b"\xff\xfe" + struct.pack(">H", body + 2) + payload[pos:pos + body]
        pos += body
    return bytes(out)


def _png_padding(pad, payload):
    out = bytearray()
    pos, left = 0, pad
    while left:
        body = min(left - 12, PNG_CHUNK_MAX)
        if 0 < left - 12 - body < 12:  # leave room for a valid last chunk
            body -= 12
        data = payload[pos:pos + body]
        crc = zlib.crc32(PNG_CHUNK_TYPE + data) & 0xFFFFFFFF
        out += struct.pack(">I", body) + PNG_CHUNK_TYPE + data + struct.pack(">I", crc)
        pos += body
        left -= body + 12
    return bytes(out)


def build(fmt, target, seed):
    """The complete file content (list of byte strings) for one image file."""
    base, pad = plan(fmt, target, seed % VARIANTS)
    if pad == 0:
        return [base]
    payload = np.empty(pad, np.uint8)
    core().fill_random(payload, mix_seed(seed, 1))
    payload = payload.tobytes()
    if fmt == "JPEG":
        return [base[:2], _jpeg_padding(pad, payload), base[2:]]
    return [base[:33], _png_padding(pad, payload), base[33:]]  # signature + IHDR, then ours


def write(path, dims, nsamples, spec, seed, final=None, index=0):
    parts = build(_fmt_of(spec), target_bytes(dims), seed)
    with open(path, "wb") as f:
        for p in parts:
            f.write(p)
        return f.tell()


def expected_size(dims, nsamples, spec, seed=None):
    fmt = _fmt_of(spec)
    target = target_bytes(dims)
    base, pad = plan(fmt, target, 0 if seed is None else seed % VARIANTS)
    if pad or len(base) == target:
        return target
    if seed is None:
        return None  # an unpadded small image: its size depends on the variant
    return len(base)


def estimate_sizes(dims, nsamples, spec):
    dims = np.asarray(dims, dtype=np.int64)
    t = dims[:, 0] * (dims[:, 1] if dims.shape[1] > 1 else 1)
    return np.maximum(t, 400)


def companions(final, spec):
    return []


def valid(path, dims, nsamples, spec):
    try:
        size = os.stat(path).st_size
    except OSError:
        return False
    exp = expected_size(dims, nsamples, spec)
    if exp is not None:
        return size == exp
    try:
        from PIL import Image
        with Image.open(path) as im:
            im.verify()
        return True
    except Exception:
        return False


def extents(path, nsamples, spec):
    return whole_file_extents(path, nsamples)
