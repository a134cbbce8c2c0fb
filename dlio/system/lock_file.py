"""A lock file taken with flock for as long as its descriptor stays open: released when the process ends,
even on SIGKILL, so a stale file never blocks a later run. An output folder (one run's results) and an io
test folder (one run's test files) are each held this way."""

import errno
import fcntl
import os

from dlio.base.errors import DlioError, os_error_message

LOCK_NAME = ".dlio-fast.lock"  # a folder's lock file (an output folder, a family's place)


class LockHeld(Exception):
    """Another process holds the lock; ``text`` is what its file says (its pid, where it writes one)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def take_lock(path: str, elsewhere: str) -> int:
    """The open descriptor of the lock file at path, created if need be and flock'ed now.

    LockHeld while another process holds it; DlioError when the file cannot be opened (its message ends
    with ``elsewhere``: where else to run) or locked."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise DlioError(os_error_message(e, path, elsewhere)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        try:
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        finally:
            os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise LockHeld(text) from None
        raise DlioError(os_error_message(e, path)) from None
    return fd
