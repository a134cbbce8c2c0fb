"""What a checkpoint's objects hold on S3: random (or patterned) bytes, each 4 KiB block stamped with
its object and offset, and torch.save's container literals laid over them where the object is a `.pt`.

The stamps make every block of every object unique, as the file backend's are (the C core's
generator stamps each 4 KiB block of its random pool): a store that deduplicates or compresses
cannot store one part for many. Stamping costs one pass of 16-byte writes per 4 KiB; the bytes then
go to the client with ``copy=True`` (it copies them before returning), so one buffer per thread
serves every part.
"""

from __future__ import annotations

import zlib
from typing import List, Optional, Sequence, Tuple

import numpy as np

BLOCK = 4096
STAMP_WORDS = 2  # 16 bytes per block: the object's id, the block's offset in it


def content(size: int, pattern: Optional[int]) -> bytes:
    """The base bytes of a part: random, or an 8-byte pattern repeated (tensors of ones)."""
    if pattern is None:
        return np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    return np.full(-(-size // 8), int(pattern), dtype=np.uint64).tobytes()[:size]


def patches(segments: Sequence[Tuple[int, bytes]], off: int, n: int) -> List[Tuple[int, bytes]]:
    """(position in the piece, literal bytes) of the container segments inside [off, off + n)."""
    out = []
    for so, lit in segments:
        lo, hi = max(so, off), min(so + len(lit), off + n)
        if lo < hi:
            out.append((lo - off, lit[lo - so : hi - so]))
    return out


def object_id(uri: str) -> int:
    """A 64-bit id of an object, the same on every run (the stamps' first word)."""
    return zlib.crc32(uri.encode()) << 32 | zlib.crc32(uri.encode()[::-1])


class Stamper:
    """One thread's writable copy of a base: ``piece()`` stamps it for (object, offset), lays the
    literals over it and returns a view that stays valid until the next call (send it with a copy)."""

    def __init__(self, base: bytes, stamped: bool):
        self.base = base
        self.work = bytearray(base) + bytes(-len(base) % 8)  # whole words for the stamps' view
        self.stamped = stamped  # random content only: a pattern the user asked for stays as it is
        self.words = np.frombuffer(self.work, dtype=np.uint64)
        self.undo: List[Tuple[int, int]] = []

    def piece(self, uid: int, off: int, n: int, segments: Sequence[Tuple[int, bytes]]) -> memoryview:
        for at, ln in self.undo:  # the last piece's literals out again: the base's bytes back
            self.work[at : at + ln] = self.base[at : at + ln]
        self.undo = []
        if self.stamped:
            blocks = self.words[: n // BLOCK * (BLOCK // 8)].reshape(-1, BLOCK // 8)
            blocks[:, 0] = uid
            blocks[:, 1] = off + np.arange(len(blocks), dtype=np.uint64) * BLOCK
        for at, lit in patches(segments, off, n) if segments else []:
            self.work[at : at + len(lit)] = lit
            self.undo.append((at, len(lit)))
        return memoryview(self.work)[:n]
