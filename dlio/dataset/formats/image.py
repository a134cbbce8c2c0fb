"""jpeg / png: one greyscale uint8 image per file of the file's drawn shape (d1 x d2, as DLIO),
readable and decodable by Pillow, and exactly the drawn record size d1*d2 bytes on disk.

DLIO saves a d1 x d2 noise image, whose JPEG is much smaller than the record length. Here the image
is a d1 x d2 picture of 8-pixel stripes (it decodes to DLIO's shape and compresses to a few KB), and
the rest of the file up to d1*d2 bytes is unique random padding in segments decoders skip (JPEG: COM
0xFFFE segments of at most 65533 payload bytes right after SOI; PNG: a private ancillary chunk
'prVt' with its CRC right after IHDR). So every 4 KiB block of a file but its image is unique and
incompressible, and the image, encoded once per shape, is copied into every file of that shape.
A target below the encoded image's size gets the image unpadded.
"""
import functools
import io
import os
import struct

import numpy as np

from dlio.dataset.formats import program as P
from dlio.dataset.formats import whole_file_extents

EXT = None  # the format name: 'jpeg' or 'png'
WHOLE_FILE = True
COM_MAX = 65533          # payload bytes per JPEG COM segment (length field counts itself: <= 65535)
PNG_CHUNK_MAX = 1 << 30  # payload bytes per private PNG chunk (spec limit is 2^31-1)
PNG_CHUNK_TYPE = b"prVt"
SPLIT = {"JPEG": 2, "PNG": 33}   # padding goes after SOI / after signature + IHDR


def _fmt_of(spec):
    f = str(spec.format).lower()
    return "PNG" if f == "png" else "JPEG"


def image_dims(dims):
    return (int(dims[0]), int(dims[1])) if len(dims) > 1 else (1, int(dims[0]))


@functools.lru_cache(maxsize=4096)
def base_image(fmt, h, w):
    """The encoded h x w image (stripes of 0 and 255, 8 pixels wide) shared by files of that shape."""
    from PIL import Image
    a = np.zeros((max(h, 1), max(w, 1)), np.uint8)
    a[:, (np.arange(a.shape[1]) // 8) % 2 == 1] = 255
    out = io.BytesIO()
    Image.fromarray(a).save(out, format=fmt)
    return out.getvalue()


def target_bytes(dims):
    return int(dims[0]) * int(dims[1]) if len(dims) > 1 else int(dims[0])


def _min_pad(fmt):
    return 4 if fmt == "JPEG" else 12


def plan(fmt, dims):
    """(encoded image, padding bytes) of a file of this shape."""
    base = base_image(fmt, *image_dims(dims))
    pad = target_bytes(dims) - len(base)
    return base, (pad if pad >= _min_pad(fmt) else 0)


def _jpeg_sizes(pad):
    """Sizes of the COM segments totalling pad bytes (each >= 4 bytes)."""
    nseg = -(-pad // (COM_MAX + 4))
    sizes = [pad // nseg] * nseg
    for i in range(pad - sum(sizes)):
        sizes[i] += 1
    return sizes


def _png_sizes(pad):
    sizes, left = [], pad
    while left:
        body = min(left - 12, PNG_CHUNK_MAX)
        if 0 < left - 12 - body < 12:  # leave room for a valid last chunk
            body -= 12
        sizes.append(body)
        left -= body + 12
    return sizes


def program(prog, dims, nsamples, spec, seed, final):
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


def write(path, dims, nsamples, spec, seed, final=None, index=0):
    prog = P.Program()
    program(prog, dims, nsamples, spec, seed, path)
    data = P.render(prog.finish(), 0)
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def expected_size(dims, nsamples, spec, seed=None):
    base, pad = plan(_fmt_of(spec), dims)
    return len(base) + pad


def estimate_sizes(dims, nsamples, spec):
    dims = np.asarray(dims, dtype=np.int64)
    t = dims[:, 0] * (dims[:, 1] if dims.shape[1] > 1 else 1)
    return np.maximum(t, 400)


def companions(final, spec):
    return []


def valid(path, dims, nsamples, spec):
    try:
        return os.stat(path).st_size == expected_size(dims, nsamples, spec)
    except OSError:
        return False


def extents(path, nsamples, spec):
    return whole_file_extents(path, nsamples)
