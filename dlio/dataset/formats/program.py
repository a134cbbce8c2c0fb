"""Programs the C core writes dataset files from (src/dlio_core/include/dlio_core/gen.h).

A format describes each of its files as segments: literal framing (headers, trailers, fixed
protobuf bytes), stamped random content and checksums over ranges. Literals are interned in one
blob, so framing computed once per shape is shared by every file of that shape; the C core then
writes the files with the GIL released, without per-file Python.
"""

from typing import Callable, Dict, Hashable, List, Optional, Tuple, Union

import numpy as np
from numpy.typing import NDArray

from dlio import _core

LIT, INLINE, RAND, CRC_BEGIN, CRC_END, PUT, PATCH, REPEAT = range(8)
CRC32C, CRC32 = 0, 1
MASKED_LE, BE, LE = 0, 1, 2

SEG_DTYPE = np.dtype([("kind", "<u4"), ("arg", "<u4"), ("a", "<u8"), ("b", "<u8")])
Seg = Tuple[int, int, int, int]  # one SEG_DTYPE record: kind, arg, a, b
Segs = NDArray[np.void]  # SEG_DTYPE records
Literal = Union[bytes, Callable[[], bytes]]  # literal bytes, or a function making them (called once per key)


class Program:
    """Segments of many files plus their shared literal blob. Files are added with begin(); each
    file's segments follow until the next begin()."""

    def __init__(self) -> None:
        self.blob = bytearray()
        self._interned: Dict[Hashable, Tuple[int, int]] = {}
        self.segs: List[Seg] = []  # segments since the last block added by extend()
        self._blocks: List[Segs] = []
        self._nblocked = 0
        self.paths: List[str] = []
        self.seeds: List[int] = []
        self.first: List[int] = []
        self.sizes: List[int] = []  # bytes each file will hold
        self._size = 0

    # ---- files
    def begin(self, path: str, seed: int) -> None:
        self._close()
        self.paths.append(path)
        self.seeds.append(int(seed) & ((1 << 64) - 1))
        self.first.append(self._nblocked + len(self.segs))
        self._size = 0

    def _close(self) -> None:
        if len(self.sizes) < len(self.paths):
            self.sizes.append(self._size)

    def finish(self) -> "Program":
        self._close()
        return self

    def extend(
        self,
        paths: List[str],
        seeds: NDArray[np.uint64],
        segs: Segs,
        counts: NDArray[np.int64],
        sizes: NDArray[np.int64],
    ) -> None:
        """Add many files at once: file k's program is the next counts[k] records of segs (built
        with numpy by a format that describes a batch of files without per-file Python)."""
        self._close()
        self._block()
        starts = self._nblocked + np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
        self.paths += list(paths)
        self.seeds += [int(x) for x in np.asarray(seeds, np.uint64).tolist()]
        self.first += starts.tolist()
        self.sizes += np.asarray(sizes, np.int64).tolist()
        self._blocks.append(np.asarray(segs, SEG_DTYPE))
        self._nblocked += len(segs)

    def block(self, segs: Segs, nbytes: int) -> None:
        """Segments of the file being added, built with numpy (SEG_DTYPE records), writing `nbytes`:
        for a format whose pieces vary per sample (CSV's row numbers) without per-sample Python."""
        self._block()
        self._blocks.append(np.asarray(segs, SEG_DTYPE))
        self._nblocked += len(segs)
        self._size += int(nbytes)

    def _block(self) -> None:
        if self.segs:
            self._blocks.append(np.array(self.segs, dtype=SEG_DTYPE))
            self._nblocked += len(self.segs)
            self.segs = []

    def counts(self) -> NDArray[np.uint64]:
        first = np.array(self.first + [self._nblocked + len(self.segs)], np.uint64)
        return np.diff(first)

    def seg_array(self) -> Segs:
        self._block()
        return np.concatenate(self._blocks) if self._blocks else np.zeros(0, SEG_DTYPE)

    def lit_ref(self, data: Literal, key: Hashable) -> Tuple[int, int]:
        """(offset, length) of interned literal bytes (data may be a function making them)."""
        got = self._interned.get(key)
        if got is None:
            if callable(data):
                data = data()
            got = self._interned[key] = (len(self.blob), len(data))
            self.blob += data
        return got

    # ---- segments
    def lit(self, data: Literal, key: Optional[Hashable] = None, mult: int = 1) -> None:
        """Literal bytes (or a function making them); `key` names data already interned (e.g. a shape),
        else the bytes do."""
        got = self.lit_ref(data, data if key is None else key)
        self.segs.append((LIT, 0, got[0], got[1]))
        self._size += got[1] * mult

    def inline(self, data: bytes, mult: int = 1) -> None:
        if len(data) > 8:
            return self.lit(data, mult=mult)
        self.segs.append((INLINE, len(data), int.from_bytes(data, "little"), 0))
        self._size += len(data) * mult

    def rand(self, n: int, mult: int = 1) -> None:
        if n:
            self.segs.append((RAND, 0, 0, int(n)))
            self._size += int(n) * mult

    def crc_begin(self, kind: int) -> None:
        self.segs.append((CRC_BEGIN, kind, 0, 0))

    def crc_end(self) -> None:
        self.segs.append((CRC_END, 0, 0, 0))

    def put(self, how: int, mult: int = 1) -> None:
        self.segs.append((PUT, how, 0, 0))
        self._size += 4 * mult

    def patch(self, how: int, offset: int) -> None:
        self.segs.append((PATCH, how, int(offset), 0))

    def repeat(self, count: int, body: Callable[[int], None]) -> None:
        """`body(mult)` adds the segments repeated `count` times (no nesting)."""
        at = len(self.segs)
        self.segs.append((REPEAT, 0, 0, 0))  # its count and length once body has added the segments
        body(int(count))
        self.segs[at] = (REPEAT, 0, int(count), len(self.segs) - at - 1)

    @property
    def size(self) -> int:
        """Bytes of the file being added so far."""
        return self._size


def render(prog: Program, i: int) -> bytes:
    """The bytes file i of prog holds once written (what the C core writes), for tests."""
    segs = prog.seg_array()
    first = prog.first[i]
    return _core.gen_render(segs[first : first + int(prog.counts()[i])], bytes(prog.blob), prog.seeds[i])
