"""One run per output folder: a lock file holding the pid, taken with flock for the run's lifetime.

Two runs writing the same result names into one folder would overwrite each other's files; the
second is refused with the pid of the first. The lock goes away with the process (even on SIGKILL),
so a stale lock file never blocks a later run (dlio.system.lock_file).
"""

import os

from dlio.base.errors import DlioError
from dlio.system.lock_file import LOCK_NAME, LockHeld, take_lock

_held: dict = {}  # folder -> open fd, kept until the process exits


def remove_unused(folder: str) -> None:
    """Remove an output folder this process made and locked when it holds nothing but the lock: a run
    refused before it measured leaves no folder (an MLPerf results tree of lock-only runs fails `check`)."""
    key = os.path.realpath(folder)
    try:
        if set(os.listdir(folder)) - {LOCK_NAME}:
            return
        if key in _held:
            os.close(_held.pop(key))
        os.unlink(os.path.join(folder, LOCK_NAME))
        os.rmdir(folder)
    except OSError:
        pass  # a folder someone else is writing into, or already gone: left as it is


def lock_output_folder(folder: str) -> None:
    """Take the folder's lock or raise DlioError naming the run that holds it."""
    key = os.path.realpath(folder)
    if key in _held:
        return
    try:
        fd = take_lock(os.path.join(folder, LOCK_NAME), "choose another output folder with --output")
    except LockHeld as held:
        raise DlioError(
            f"{folder}: another dlio-fast run (pid {held.text or '?'}) is writing its results here; "
            "wait for it to finish or choose another folder with --output"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _held[key] = fd


def unlock_output_folder(folder: str) -> None:
    """Release and remove this process's lock of the folder (a run that ends before writing results)."""
    fd = _held.pop(os.path.realpath(folder), None)
    if fd is None:
        return
    try:
        os.unlink(os.path.join(folder, LOCK_NAME))
    except OSError:
        pass
    os.close(fd)
