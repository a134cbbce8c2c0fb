"""Every error dlio-fast raises on purpose, and the one way an OSError becomes a message.

The CLI catches `DlioError` (and OSError, and Interrupted) and prints `str(e)` on one line with the
exit status `e.exit_code`; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import os
import signal
from typing import Any, Dict, Optional


class DlioError(Exception):
    """Bad input or an unusable environment: one line, exit status 2."""

    exit_code = 2


class DlioRunError(DlioError):
    """The run failed while measuring (I/O error, rank failure): exit status 1."""

    exit_code = 1


class ConfigError(DlioError):
    """A bad configuration value. ``str()`` is one line; ``key``, ``value``, ``origin`` when known."""

    def __init__(self, message: str, key: Optional[str] = None, value: Any = None, origin: Optional[str] = None):
        super().__init__(" ".join(str(message).split("\n")))
        self.key = key
        self.value = value
        self.origin = origin


class DatasetError(DlioError):
    """The dataset is missing, incomplete or unusable."""


class InsufficientSpace(DatasetError):
    """Not enough free space for what remains to be generated."""

    def __init__(self, needed: int, free: int, suggested_scale: float, folder: str = ""):
        self.needed = int(needed)
        self.free = int(free)
        self.suggested_scale = float(suggested_scale)
        self.folder = folder
        super().__init__(
            # MiB (dlio.base.units is this module's peer and cannot be imported here): never "0.00 GiB"
            f"{folder or 'data folder'}: generating the dataset needs {self.needed / 2**20:,.1f} MiB more "
            f"but only {self.free / 2**20:,.1f} MiB is free; free some space, use another data_folder, "
            f"or scale the dataset down (e.g. num_files x {self.suggested_scale:.3f})"
        )


class Interrupted(Exception):
    """The run was stopped by a signal; `signum` is the signal. Not a DlioError: the CLI gives it
    its own exit status (128 + signum) after the partial results are written."""

    def __init__(self, signum: int, origin: str = ""):
        """``origin``: another rank's stop that stopped this one ("rank 1 was interrupted by SIGTERM")."""
        name = signal.Signals(signum).name
        super().__init__(f"stopped because {origin}" if origin else f"interrupted by {name}")
        self.signum = signum
        self.origin = origin

    # an io point's measured part before the stop (dlio.fsbench.points.run_point), for the grid to keep
    record: Optional[Dict[str, Any]] = None


# What to do about an errno, where there is something to do.
_HINTS = {
    errno.ENOSPC: "free some space or use a smaller size",
    errno.EDQUOT: "the disk quota is exhausted: free some space or use another folder",
    errno.EROFS: "the filesystem is mounted read-only: use another folder",
    errno.EACCES: "check the permissions, or use another folder",
    errno.EPERM: "check the permissions, or use another folder",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "the path is a folder; give a file",
    errno.EEXIST: "something is already there; remove it or choose another name",
    errno.EMFILE: "too many open files: raise `ulimit -n`",
}


def os_error_message(e: OSError, path: Optional[str] = None, hint: Optional[str] = None) -> str:
    """One line for an OSError: the path, what the system said, and what to do.

    ENOSPC on a filesystem whose blocks are not exhausted is reported as out of inodes."""
    where = path or e.filename
    what = e.strerror or str(e)
    if e.errno == errno.ENOSPC and where and _inodes_exhausted(str(where)):
        what = "no free inodes left on the filesystem (the disk has space, but no room for more files)"
        hint = hint or "remove files or use a filesystem with more inodes"
    hint = hint or _HINTS.get(e.errno or 0)
    return f"{where}: {what}" + (f"; {hint}" if hint else "") if where else what + (f"; {hint}" if hint else "")


def _inodes_exhausted(path: str) -> bool:
    folder = path
    while folder and not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    try:
        st = os.statvfs(folder or ".")
    except OSError:
        return False
    return st.f_files > 0 and st.f_favail == 0 and st.f_bavail > 0
