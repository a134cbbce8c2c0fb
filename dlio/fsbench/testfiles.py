"""Test files for `dlio-fast io` / `ceiling`: created fully written (no sparse holes), or given.

A read of a never-written region returns zeros without touching the device, so every byte of a
file we create is written first (with the C core's fast fill, GIL released), and files we did not
create are used as they are, read only unless the user asks for writes on them.
"""

import contextlib
import errno
import os
import stat
from typing import Iterable, Iterator, List, Optional, Sequence

from dlio import _core
from dlio.base import tmpclaim
from dlio.base.errors import DlioError, os_error_message
from dlio.base.units import fmt_bytes
from dlio.system.lock_file import LockHeld, take_lock
from dlio.system.output import atomic_path

PREFIX = "dlio-fast-io"


class FileSet:
    """The files of one io run. created: paths we made (removed by cleanup unless keep); lock: the
    folder's lock this run holds while it uses the files."""

    def __init__(
        self, paths: Iterable[str], sizes: Iterable[int], created: Iterable[str] = (), lock: Optional[int] = None
    ) -> None:
        self.paths = list(paths)
        self.sizes = list(sizes)
        self.created = list(created)
        self.lock = lock

    def cleanup(self) -> None:
        for p in self.created:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
        self.created = []
        if self.lock is not None:
            os.close(self.lock)  # closing the file releases its flock
            self.lock = None


LOCK = ".dlio-fast-io.lock"


def lock_folder(folder: str) -> int:
    """Hold the folder's io lock (flock, released when the run ends or dies): two runs in one folder
    would share, overwrite and delete each other's test files and both report clean figures."""
    try:
        return take_lock(os.path.join(folder, LOCK), "test in another folder")
    except LockHeld:
        raise DlioError(
            f"{folder}: another dlio-fast io or ceiling run is using this folder's test files; wait for it to "
            "end, or test in another folder"
        ) from None


def check_writable_dir(path: str) -> None:
    if not os.path.isdir(path):
        raise DlioError(f"{path}: no such directory (create it, or give an existing folder or files)")
    if not os.access(path, os.W_OK | os.X_OK):
        raise DlioError(f"{path}: folder is not writable (choose another folder or fix its permissions)")


def prepare(targets: Sequence[str], nfiles: int, file_size: int, seed: int = 1) -> FileSet:
    """targets: one directory (files are created there) or existing regular files."""
    if not targets:
        raise DlioError("give a folder to test in, or existing files")
    if len(targets) == 1 and os.path.isdir(targets[0]):
        folder = targets[0]
        check_writable_dir(folder)
        if file_size <= 0:
            raise DlioError("--file-size must be positive")
        need = nfiles * file_size
        st = os.statvfs(folder)
        free = st.f_bavail * st.f_frsize
        existing = sum(os.path.getsize(p) for p in _paths(folder, nfiles) if os.path.exists(p))
        if need - existing > free:
            raise DlioError(
                f"{folder}: needs {fmt_bytes(need)} for {nfiles} test file(s) of "
                f"{fmt_bytes(file_size)} but only {fmt_bytes(free)} is free "
                "(use a smaller --file-size or fewer --threads)"
            )
        lock = lock_folder(folder)
        try:
            tmpclaim.sweep(folder)  # temporary files of an earlier run that died, proven ours by its claim
            paths, created = [], []
            for i, p in enumerate(_paths(folder, nfiles)):
                check_ours(p)
                if not (os.path.exists(p) and os.path.getsize(p) == file_size):
                    _write_full(p, file_size, seed + i)
                    created.append(p)
                else:
                    created.append(p)  # ours by name: removed too unless --keep
                paths.append(p)
            return FileSet(paths, [file_size] * nfiles, created, lock)
        except BaseException:
            os.close(lock)
            raise
    sizes = []
    for p in targets:
        if not os.path.exists(p):
            raise DlioError(f"{p}: no such file or directory")
        if not os.path.isfile(p):
            raise DlioError(f"{p}: not a regular file (give one folder, or regular files)")
        if not os.access(p, os.R_OK):
            raise DlioError(f"{p}: permission denied (cannot read it)")
        size = os.path.getsize(p)
        if size == 0:
            raise DlioError(f"{p}: file is empty")
        sizes.append(size)
    return FileSet(targets, sizes)


def check_ours(path: str) -> None:
    """A test file name that already exists is reused or replaced only if it is a regular file of
    ours (same owner), never a link, a device or someone else's file: we write into it."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise DlioError(
            f"{path}: is a symbolic link; the write test never writes through a link "
            "(remove it, or test in another folder)"
        )
    if not stat.S_ISREG(st.st_mode):
        raise DlioError(f"{path}: exists and is not a regular file (remove it, or test in another folder)")
    if st.st_nlink > 1:
        raise DlioError(
            f"{path}: has {st.st_nlink} names (hard links): a write test would write into the file under its "
            "other names too; remove this name, or test in another folder"
        )
    if st.st_uid != os.geteuid():
        raise DlioError(
            f"{path}: exists and belongs to another user (uid {st.st_uid}); remove it, or test in another folder"
        )


def create_exclusive(path: str) -> int:
    """Open a new file for writing: O_EXCL|O_NOFOLLOW, so a link or a file planted at the name is
    never written through."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)


def _paths(folder: str, n: int) -> List[str]:
    return [os.path.join(folder, f"{PREFIX}.{i}.dat") for i in range(n)]


@contextlib.contextmanager
def writing_test_data(path: str) -> Iterator[None]:
    """A full disk or quota while writing test data: one line naming the file and the fix."""
    try:
        yield
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DlioError(os_error_message(e, path, "use a smaller --file-size")) from None
        raise


def _write_full(path: str, size: int, seed: int) -> None:
    with writing_test_data(path), atomic_path(path, fsync=True, claim_root=os.path.dirname(path)) as tmp:
        fd = create_exclusive(tmp)
        try:
            _core.write_random(fd, 0, size, seed, 4 << 20)
        finally:
            os.close(fd)
