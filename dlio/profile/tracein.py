"""Reading a trace another tool wrote, within bounds.

A trace is input like any other: it is opened only if it is a regular file (after links; a FIFO, a
device or a folder is refused before it is read, and a FIFO swapped in is never waited on), read as
a stream (gzip too) in lines of at most MAX_LINE bytes and at most MAX_BYTES in all, its events are
gathered into numpy in chunks up to an event cap, and every number is checked (finite, an integer
where one is expected, within LIMIT). A line that fails a check is skipped and counted; the trace's
notes say how many and where the first was, and more than MAX_MALFORMED of them is an error.
"""

from __future__ import annotations

import gzip
import zlib
from typing import Any, BinaryIO, Iterator, List, Optional

import numpy as np

from dlio.base import inputs
from dlio.base.errors import DlioError, os_error_message
from dlio.base.inputs import LIMIT, Bad, as_int, as_real  # noqa: F401 -- profile's readers take them from here

MAX_LINE = 1 << 20  # bytes of one line (a DFTracer, DXT or strace line is well under 10 KiB)
MAX_BYTES = 64 << 30  # (decompressed) bytes read from one trace file
MAX_EVENTS = 20_000_000  # default event cap: about 1 GiB of events; `profile --max-events` raises it
MAX_MALFORMED = 1000  # more skipped lines than this: not a trace of this kind, or a damaged one
MAX_PATH = 1 << 16  # a file name longer is not one (PATH_MAX bounds one call's path, not a name)
MAX_NAME_BYTES = 256 << 20  # distinct file names kept, in bytes
CHUNK = 1 << 16  # events gathered per numpy chunk
BLOCK = 1 << 20  # bytes read at a time
EVENT_BYTES = 64  # about what one event costs in memory (EVENT_DTYPE plus its sort)


class Full(Exception):
    """The event cap is reached: the reader stops and says so in the trace's notes."""


def open_regular(path: str) -> BinaryIO:
    """path opened for reading if (after links) it is a regular file; else one-line DlioError
    (dlio.base.inputs: a FIFO put there between the stat and the open is not waited on)."""
    return inputs.open_regular(path, "trace file")


def ns(seconds_or_units: Any, scale: float) -> int:
    """A time (seconds x 1e9, microseconds x 1e3) as int ns, checked."""
    t = type(seconds_or_units)
    if (t is int or t is float) and 0 <= seconds_or_units <= LIMIT / scale:  # NaN fails the test
        return int(seconds_or_units * scale)
    return as_int(int(as_real(seconds_or_units, 0.0, LIMIT / scale) * scale))


# ------------------------------------------------------------------------------------ lines


class TraceLines:
    """One trace file's lines (bytes, without the newline), streamed with the caps above. `malformed()`
    counts a skipped line; `notes()` says what was skipped or cut, once the file is read."""

    def __init__(self, path: str, kind: str, max_bytes: int = MAX_BYTES, keep_unterminated: bool = True):
        """keep_unterminated: yield a last line that has no newline (False: a line cut short)."""
        self.path, self.kind, self.max_bytes = path, kind, max_bytes
        self.keep_unterminated = keep_unterminated
        self.lineno = self.nbytes = self.bad = self.first_bad = 0
        self.why_bad = ""
        self.cut: Optional[str] = None
        raw = open_regular(path)
        try:
            gz = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
        except OSError as e:
            raw.close()
            raise DlioError(f"{path}: {os_error_message(e)}")
        self.f: BinaryIO = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw  # type: ignore[assignment]
        self._raw = raw

    def close(self) -> None:
        self.f.close()
        self._raw.close()

    def __enter__(self) -> "TraceLines":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _block(self) -> bytes:
        """The next BLOCK bytes (decompressed), within max_bytes; b"" at the end or a cut."""
        if self.cut:
            return b""
        try:
            b = self.f.read1(BLOCK)  # type: ignore[attr-defined]  # read1: a cut gzip stream gives what came before it
        except (OSError, EOFError, zlib.error) as e:  # a damaged or cut gzip stream: keep what came before
            self.cut = f"the gzip stream is damaged after line {self.lineno:,} ({e}); the events before it are kept"
            return b""
        self.nbytes += len(b)
        if self.nbytes > self.max_bytes:
            b = b[: len(b) - (self.nbytes - self.max_bytes)]
            self.cut = (
                f"read the first {self.max_bytes / 2**30:,.3g} GiB only (the cap on a trace's size); "
                "the events after it are left out"
            )
        return b

    def _line(self, line: bytes) -> bool:
        """Count a line; False (and counted as malformed) if it is over MAX_LINE."""
        self.lineno += 1
        if len(line) > MAX_LINE:
            self.malformed(f"longer than {MAX_LINE:,} bytes")
            return False
        return True

    def __iter__(self) -> Iterator[bytes]:
        """Lines without their newline, read BLOCK bytes at a time; a line over MAX_LINE is
        counted as malformed and its rest skipped as it comes, never held whole."""
        carry, skipping = b"", False
        while True:
            b = self._block()
            if not b:
                if carry and not skipping and self.keep_unterminated and not self.cut:  # a cut line: left out
                    self.lineno += 1
                    yield carry
                return
            lines = b.split(b"\n")
            if len(lines) > 1:
                if not skipping and self._line(carry + lines[0]):
                    yield carry + lines[0]
                skipping = False
                for line in lines[1:-1]:
                    if self._line(line):
                        yield line
                carry = b""
            if skipping:
                continue
            carry += lines[-1]
            if len(carry) > MAX_LINE:
                self._line(carry)
                carry, skipping = b"", True

    def malformed(self, why: str) -> None:
        self.bad += 1
        if self.bad == 1:
            self.first_bad, self.why_bad = self.lineno, why
        if self.bad > MAX_MALFORMED:
            raise DlioError(
                f"{self.path}: line {self.lineno}: more than {MAX_MALFORMED} malformed lines (the first: line "
                f"{self.first_bad}, {self.why_bad}): not a {self.kind} trace, or a damaged one"
            )

    def notes(self) -> List[str]:
        out = []
        if self.bad:
            out.append(
                f"{self.path}: skipped {self.bad:,} malformed line{'s' if self.bad > 1 else ''} "
                f"(the first: line {self.first_bad}, {self.why_bad})"
            )
        if self.cut:
            out.append(f"{self.path}: {self.cut}")
        return out


# ------------------------------------------------------------------------------------ events


class EventChunks:
    """Event rows (tuples of checked ints) gathered into numpy arrays CHUNK at a time, up to a cap:
    never a Python object per event for the whole trace."""

    def __init__(self, dtype: np.dtype, max_events: int):
        self.dtype, self.max_events = dtype, max_events
        self.rows: List[tuple] = []
        self.parts: List[np.ndarray] = []
        self.n = 0

    @property
    def full(self) -> bool:
        return self.n + len(self.rows) >= self.max_events

    def add(self, row: tuple) -> None:
        if self.n + len(self.rows) >= self.max_events:
            raise Full()
        self.rows.append(row)
        if len(self.rows) >= CHUNK:
            self._flush()

    def add_array(self, a: np.ndarray) -> None:
        """Events already in an array; Full if the cap cut them (those up to the cap are kept)."""
        room = max(0, self.max_events - self.n - len(self.rows))
        self._flush()
        if len(a[:room]):
            self.parts.append(a[:room])
            self.n += len(a[:room])
        if len(a) > room:
            raise Full()

    def _flush(self) -> None:
        if self.rows:
            self.parts.append(np.array(self.rows, dtype=self.dtype))
            self.n += len(self.rows)
            self.rows = []

    def array(self) -> np.ndarray:
        """All events in one array, filled part by part as each part is freed (peak: the result
        and one part, not twice the events)."""
        self._flush()
        out = np.empty(self.n, self.dtype)
        at = 0
        while self.parts:
            p = self.parts.pop(0)
            out[at : at + len(p)] = p
            at += len(p)
        self.n = 0
        return out

    def cap_note(self, what: str) -> str:
        return (
            f"{what}: read the first {self.max_events:,} events only (the cap); give --max-events N to read "
            f"more (about {EVENT_BYTES} bytes of memory per event)"
        )


def sort_by_time(ev: np.ndarray) -> np.ndarray:
    """ev sorted by its "t" field in place, a field at a time (a temporary of one field, not of
    the whole array)."""
    t = ev["t"]
    if len(t) < 2 or bool(np.all(t[1:] >= t[:-1])):
        return ev
    order = np.argsort(t, kind="stable")
    for name in ev.dtype.names or ():
        ev[name] = ev[name][order]
    return ev


class NameTable:
    """Distinct file names -> indexes, within MAX_NAME_BYTES."""

    def __init__(self) -> None:
        self.index: dict = {}
        self.names: List[str] = []
        self.nbytes = 0

    def charge(self, name: str) -> None:
        """Count a name kept elsewhere (a file-handle table) against the budget."""
        if len(name) > MAX_PATH:
            raise Bad(f"a file name of {len(name):,} characters")
        self.nbytes += len(name) + 64
        if self.nbytes > MAX_NAME_BYTES:
            raise DlioError(
                f"more than {MAX_NAME_BYTES >> 20} MiB of distinct file names in the trace: "
                "give a part of it (fewer processes or a shorter time)"
            )

    def get(self, name: str) -> int:
        i = self.index.get(name)
        if i is None:
            self.charge(name)
            i = self.index[name] = len(self.names)
            self.names.append(name)
        return i

    def array(self) -> np.ndarray:
        return np.array(self.names, dtype=object)
