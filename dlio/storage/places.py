"""The folders a family's run writes besides its output folder (a KV cache folder, a vector index, a
model's shards), claimed here by the driver before the run prepares, so that no family can skip the rules:

  - a real filesystem: a folder under procfs, sysfs or a cgroup filesystem is refused before anything is
    made (writing there creates kernel objects: a cgroup for each folder);
  - no symbolic link where the run makes a folder of its own (a ``rank_0`` linked elsewhere would have
    the run delete and write there);
  - one run at a time: the folder is locked for the run (two KV runs on one cache folder would delete
    each other's entries; two builds of one index would write the same files);
  - only what a run made is written or removed: a run leaves a marker (``.dlio-fast-place``) in each
    folder it claims, first; a folder holding files of the run's names but no marker holds someone
    else's files (a Hugging Face model with the standard shard names) and is refused.

On an object store (S3) the marker rule holds too (a marker object under the prefix), and the lock is a
lease: an object made with a conditional PUT that names its holder and is refreshed while the run goes,
so that a run that died leaves a lock that ends (dlio.storage.s3.lease).
The driver (dlio.jobs.driver) claims every family's places (dlio.family.Run.places).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fnmatch
import os
import stat
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple, Type

from dlio.base.errors import DlioError, os_error_message
from dlio.storage.base import Backend, SetContent, SetOptions
from dlio.system.lock_file import LockHeld, take_lock

MARKER = ".dlio-fast-place"
LOCK = ".dlio-fast-place.lock"  # not the output folder's: a place may be the output folder itself
MARKER_TEXT = b"made by dlio-fast: the files of its runs' names here are its own\n"

# statfs(2) f_type of filesystems that are no storage: writes there make kernel objects or fail late
PSEUDO_FS = {
    0x9FA0: "procfs",
    0x62656572: "sysfs",
    0x27E0EB: "cgroupfs",
    0x63677270: "cgroup2fs",
    0x64626720: "debugfs",
    0x74726163: "tracefs",
    0x73636673: "securityfs",
    0xCAFE4A11: "bpffs",
    0x6165676C: "pstorefs",
    0x62656570: "configfs",
    0x65735543: "fusectl",
    0x1CD1: "devpts",
    0xDE5E81E4: "efivarfs",
    0x42494E4D: "binfmt_misc",
}


@dataclass(frozen=True)
class Place:
    """A folder (or object prefix) one rank's run writes: ``path`` (a path on this host, or the backend's
    name), the config key that names it, what it is in words, the names (globs, relative) of the files
    the run makes there (empty: it only reads them), whether the run makes the folder itself (then
    a symbolic link there is refused), whether one run at a time may use it (a dataset is read by
    many) and whether ``path`` is a folder on this host whatever the backend (a local copy of objects)."""

    path: str
    key: str
    what: str
    names: Tuple[str, ...] = ()
    made: bool = False
    lock: bool = True
    on_host: bool = False


def fs_type(path: str) -> Optional[int]:
    """statfs(2)'s f_type of the filesystem holding ``path`` (its nearest existing folder); None when
    it cannot be read."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
    if libc.statfs(os.fsencode(probe), buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF


def check_real_fs(path: str, key: str) -> None:
    """Refuse a folder under a kernel's pseudo filesystem before anything is made there."""
    kind = PSEUDO_FS.get(fs_type(path) or 0)
    if kind is not None:
        raise DlioError(
            f"{key} = {path}: is on {kind}, a kernel filesystem, not storage (writing there makes kernel "
            f"objects); choose a folder on a real filesystem for {key}"
        )


class Claimed:
    """The places this rank holds for its run: released (unlocked) by ``release``, which also takes the
    marker away from a folder the run left none of its files in (nothing there to prove)."""

    def __init__(self) -> None:
        self.fds: List[Tuple[str, int]] = []
        self.marked: List[Tuple[str, Tuple[str, ...]]] = []
        self.marked_objects: List[Tuple[Backend, str, Tuple[str, ...]]] = []
        self.leases: List[Any] = []
        self.notes: List[str] = []  # said by the driver: a stale lease taken over

    def release(self) -> None:
        for folder, names in self.marked:
            try:
                if not _matching(folder, names):
                    os.unlink(os.path.join(folder, MARKER))
            except OSError:
                pass
        for backend, prefix, names in self.marked_objects:
            try:
                if not _matching_objects(_listed(backend, prefix), names):
                    backend.remove([backend.join(prefix, MARKER)])
            except Exception:  # the gateway's failure is the run's already; the marker only proves
                pass
        for lease in self.leases:
            lease.release()
        for folder, fd in self.fds:
            try:
                os.unlink(os.path.join(folder, LOCK))
            except OSError:
                pass
            os.close(fd)
        self.fds, self.marked = [], []


def _matching(folder: str, names: Sequence[str]) -> List[str]:
    return [n for n in os.listdir(folder) if any(fnmatch.fnmatch(n, g) for g in names)]


def _listed(backend: Backend, path: str) -> List[str]:
    """The keys under the prefix ``path``, relative to it."""
    prefix = backend.join(path, "")
    return [u[len(prefix) :] for u in backend.list(prefix) if u.startswith(prefix)]


def _matching_objects(listed: Sequence[str], names: Sequence[str]) -> List[str]:
    """The run's names among ``listed``: directly under the prefix (a glob's * would match a '/')."""
    return [n for n in listed if "/" not in n and any(fnmatch.fnmatch(n, g) for g in names)]


def own_objects(backend: Backend, path: str, names: Sequence[str]) -> List[str]:
    """The objects of the run's names under the prefix ``path`` (claimed: its marker proves them the
    runs' own), as full names: what a run may remove there, and nothing else under the prefix."""
    return [backend.join(path, n) for n in _matching_objects(_listed(backend, path), names)]


def claim(backend: Backend, places: Sequence[Place], held: Optional[Claimed] = None) -> Claimed:
    """Claim this rank's places (see the module's docstring) into ``held`` (a new Claimed when None), or
    raise DlioError naming the place, its key and what to do. On failure nothing stays locked."""
    held = held if held is not None else Claimed()
    try:
        for p in places:
            local = p.path if p.on_host else backend.local_path(p.path)
            if local is None:
                _claim_objects(backend, p, held)
            else:
                _claim_folder(local, p, held)
    except BaseException:
        held.release()
        raise
    return held


def _claim_folder(folder: str, p: Place, held: Claimed) -> None:
    check_real_fs(folder, p.key)
    if p.made and os.path.islink(folder):
        raise DlioError(
            f"{folder}: a symbolic link where the run makes its {p.what} ({p.key}); dlio-fast writes and "
            "removes files only in folders of its own: remove the link or choose another folder"
        )
    if not p.lock and not p.names:
        return  # read, or written by the family's own rules (a dataset, checkpoints): the filesystem only
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise DlioError(os_error_message(e, folder, f"choose another {p.key}")) from None
    if not os.path.isdir(folder):
        raise DlioError(f"{folder}: not a folder; choose another {p.key}")
    if p.lock:
        _lock(folder, p, held)
    if not p.names:
        return
    held.marked.append((folder, p.names))
    if os.path.exists(os.path.join(folder, MARKER)):
        return
    try:
        _refuse_foreign(folder, p, _matching(folder, p.names))
    except OSError as e:
        raise DlioError(os_error_message(e, folder)) from None
    try:
        fd = os.open(os.path.join(folder, MARKER), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        os.write(fd, MARKER_TEXT)
        os.close(fd)
    except OSError as e:
        if e.errno != errno.EEXIST:
            raise DlioError(os_error_message(e, folder, f"choose another {p.key}")) from None


def _lock(folder: str, p: Place, held: Claimed) -> None:
    try:
        fd = take_lock(os.path.join(folder, LOCK), f"choose another {p.key}")
    except LockHeld as h:
        raise DlioError(
            f"{folder}: another dlio-fast run (pid {h.text or '?'}) is using this {p.what} ({p.key}); wait for "
            f"it to finish or choose another {p.key}"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    held.fds.append((folder, fd))


def _claim_objects(backend: Backend, p: Place, held: Claimed) -> None:
    """An object prefix: a lease for the lock (dlio.storage.s3.lease), then the marker rule."""
    if p.lock:
        lease = backend.lease(backend.join(p.path, LOCK), p.what, p.key)
        if lease is not None:
            held.leases.append(lease)
            if lease.note:
                held.notes.append(lease.note)
    if not p.names:
        return
    listed = _listed(backend, p.path)
    held.marked_objects.append((backend, p.path, p.names))
    if MARKER in listed:
        return
    _refuse_foreign(p.path, p, _matching_objects(listed, p.names))
    marker = backend.join(p.path, MARKER)
    opts = SetOptions(engine=backend.engine_for("posix")[0], direct=False, qd=1, transfer=len(MARKER_TEXT))
    backend.write_set([marker], [len(MARKER_TEXT)], SetContent(overlays=[[(0, MARKER_TEXT)]]), opts)


def _refuse_foreign(where: str, p: Place, found: Sequence[str]) -> None:
    if found:
        shown = ", ".join(sorted(found)[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        raise DlioError(
            f"{where}: holds {shown}, which no dlio-fast run made (no {MARKER} there); a run never "
            f"overwrites or removes files it did not make: choose an empty folder for {p.key}, or move those "
            "files away"
        )


def lstat_or_none(path: str, error: Type[DlioError] = DlioError) -> Optional[os.stat_result]:
    """What ``path`` names itself (a link is not followed), None when nothing has that name; any other
    failure is one line naming the path."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise error(os_error_message(e, path)) from None


def remove_name(path: str, error: Type[DlioError] = DlioError) -> None:
    """Remove the name ``path`` (a link, never what it points to); a failure is one line naming the path."""
    try:
        os.unlink(path)
    except OSError as e:
        raise error(os_error_message(e, path)) from None


def own_files(folder: str, paths: Sequence[str]) -> None:
    """Before the run writes ``paths`` (under its claimed ``folder``): a symbolic link at a name on the way
    (a file's or a subfolder's) or a file with other names (hard links) is removed, so that the write
    makes a file of its own instead of writing through into something elsewhere. Removing a link never
    touches what it points to."""
    top = os.path.abspath(folder)
    for path in paths:
        rel = os.path.relpath(os.path.abspath(path), top)
        assert not rel.startswith(".."), (path, folder)
        at = top
        for part in rel.split(os.sep):
            at = os.path.join(at, part)
            st = lstat_or_none(at)
            if st is None:
                break
            last = at == os.path.join(top, rel)
            if stat.S_ISLNK(st.st_mode) or (last and stat.S_ISREG(st.st_mode) and st.st_nlink > 1):
                remove_name(at)
                break
