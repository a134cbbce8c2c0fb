"""Outputs of the live figures that never block the run: the live CSV and the status lines.

A reader that is absent or stalled must cost the run nothing: a FIFO given to --live-csv with no reader
(opening it for writing would wait for one forever, deaf to Ctrl-C), or stderr piped into a reader that
stopped reading (a write waits once the pipe's 64 KiB are full). So the outputs are written without
waiting: a FIFO is opened with O_NONBLOCK (no reader: the open fails at once, and is tried again at the
next row), and a line that finds the pipe full is dropped. Dropped lines are counted; the first drop is
said once (`note`), the count when the output is closed.

Only a pipe or FIFO is written non-blocking, through a file description of our own (a regular file or a
terminal does not block on a reader; and setting O_NONBLOCK on an inherited stderr would change it for
every process that shares it, the shell included).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Any, Callable, Optional, TextIO

# A drop that means "no reader now": nothing was written, try again at the next line.
_NO_READER = (errno.ENXIO, errno.EAGAIN, errno.EPIPE)


def _is_fifo(fd: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


class Dropper:
    """Counts the lines that could not be written and says so once (then the count at close)."""

    def __init__(self, what: str, note: Callable[[str], None]) -> None:
        self.what = what
        self.note = note
        self.dropped = 0
        self.written = 0

    def drop(self, why: str) -> None:
        self.dropped += 1
        if self.dropped == 1:
            self.note(f"warning: {self.what}: {why}; lines are dropped (and counted) until it reads again")

    def close(self) -> None:
        if self.dropped:
            self.note(
                f"note: {self.what}: {self.dropped} of {self.dropped + self.written} lines were dropped "
                "(nobody was reading)"
            )
            self.dropped = self.written = 0


class CsvSink:
    """Rows appended to the live CSV at `path` (a file, or a FIFO that a plotter reads); the header goes
    first into a new or empty file, and first to each reader that opens the FIFO."""

    def __init__(self, path: str, header: str, note: Callable[[str], None]) -> None:
        self.path = path
        self.header = header
        self.fd: Optional[int] = None
        self.fifo = False
        self.drops = Dropper(f"--live-csv {path}", note)

    def _open(self) -> bool:
        try:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as e:
            if e.errno == errno.ENXIO:  # a FIFO with no reader
                self.drops.drop("the FIFO has no reader")
            else:
                self.drops.drop(os.strerror(e.errno or errno.EIO))
            return False
        st = os.fstat(self.fd)
        self.fifo = stat.S_ISFIFO(st.st_mode)
        if self.fifo or st.st_size == 0:
            if not self._write(self.header):
                return False
        return True

    def _write(self, text: str) -> bool:
        data = text.encode()
        if self.fd is None:
            return False
        try:
            n = os.write(self.fd, data)  # a row is < PIPE_BUF: a pipe takes it whole or not at all
        except OSError as e:
            if e.errno not in _NO_READER:
                self.drops.drop(os.strerror(e.errno or errno.EIO))
            elif e.errno == errno.EAGAIN:
                self.drops.drop("its reader is not keeping up")
            else:
                self.drops.drop("its reader went away")
            if e.errno != errno.EAGAIN:  # the reader left: open again (a new reader gets a header)
                self._close_fd()
            return False
        if n < len(data):  # a regular file on a full disk: the rest is lost, as the row is
            self.drops.drop("short write")
            return False
        return True

    def write_row(self, text: str) -> None:
        if self.fd is None and not self._open():
            return
        if self._write(text):
            self.drops.written += 1

    def _close_fd(self) -> None:
        _close_quietly(self.fd)
        self.fd = None

    def close(self) -> None:
        self._close_fd()
        self.drops.close()


class LineSink:
    """Status lines to a stream (stderr). A pipe or FIFO is written through a non-blocking description of
    our own: a line that finds it full is dropped, and the count said in the first line that fits
    again (saying it elsewhere would block on the same pipe). Anything else through the stream itself."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.fd: Optional[int] = None
        self.dropped = 0
        fileno = _fileno(stream)
        if fileno is not None and _is_fifo(fileno):
            try:  # /proc/self/fd/N of a pipe opens the same pipe, as a description of our own
                self.fd = os.open(f"/proc/self/fd/{fileno}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                self.fd = None

    def write(self, line: str) -> None:
        if self.fd is None:
            self.stream.write(line)
            self.stream.flush()
            return
        if self.dropped and self._raw(f"[status] {self.dropped} status line(s) dropped: stderr was full\n"):
            self.dropped = 0
        if not self._raw(line):
            self.dropped += 1

    def _raw(self, text: str) -> bool:
        if self.fd is None:
            return False
        try:
            return os.write(self.fd, text.encode()) > 0
        except OSError:
            return False

    def close(self) -> None:
        _close_quietly(self.fd)
        self.fd = None


def _close_quietly(fd: Optional[int]) -> None:
    """Close a descriptor of our own, if any; a failed close loses nothing more than it already had."""
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def _fileno(stream: Any) -> Optional[int]:
    try:
        return int(stream.fileno())
    except (AttributeError, ValueError, OSError):
        return None
