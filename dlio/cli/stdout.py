"""Standard output that its reader may close (`dlio-fast run ... | head -1`) without costing the run.

Python ignores SIGPIPE, so a write to a pipe whose reader left raises BrokenPipeError wherever it happens
(a log line, a table row), and that used to end the run with exit status 1 and nothing written. Here
stdout is a text stream over a raw writer that, on EPIPE, points fd 1 at /dev/null (every later write, a
library's included, succeeds and goes nowhere), says so once on stderr, and lets the run go on: its
results are written to their files as usual and the exit status is the run's. A result document that
was asked for on stdout (`--json -`) and could not be written there is the caller's to report
(`lost()` says whether stdout was lost).
"""

from __future__ import annotations

import errno
import io
import os
import sys
from typing import Any, Optional

_NOTE = (
    "dlio-fast: note: standard output was closed by its reader (e.g. `| head`); its lines are dropped from "
    "here on, the run goes on and writes its results as usual\n"
)


class _PipeSafeRaw(io.RawIOBase):
    """fd 1, as a raw stream whose write never fails for a reader that left."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.lost = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return not self.lost and os.isatty(self.fd)

    def write(self, b: Any) -> int:
        if self.lost:
            return len(b)
        try:
            return os.write(self.fd, b)
        except BrokenPipeError:
            self._lose()
            return len(b)
        except OSError as e:
            if e.errno != errno.EPIPE:
                raise
            self._lose()
            return len(b)

    def _lose(self) -> None:
        self.lost = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self.fd)
            os.close(null)
        except OSError:
            pass
        try:
            os.write(2, _NOTE.encode())
        except OSError:
            pass


_RAW: Optional[_PipeSafeRaw] = None


def guard_stdout() -> None:
    """Replace sys.stdout (fd 1) by the pipe-safe stream; once per process."""
    global _RAW
    if _RAW is not None or sys.stdout is None:
        return
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        return  # not a real file (a test's capture): nothing to guard
    old = sys.stdout
    try:
        old.flush()
    except OSError:
        pass
    _RAW = _PipeSafeRaw(fd)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(_RAW),
        encoding=old.encoding,
        errors=old.errors,
        line_buffering=bool(getattr(old, "line_buffering", False)) or os.isatty(fd),
        write_through=False,
    )


def lost() -> bool:
    """Standard output's reader left (its lines since then went nowhere)."""
    return _RAW is not None and _RAW.lost
