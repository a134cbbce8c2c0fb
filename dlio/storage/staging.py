"""Work on a local copy of what a backend keeps, written once over the backends' core operations.

Some jobs need files on this host: the planner and the verifier read a dataset's manifests and files, a
vector search reads its index with O_DIRECT, the C core's KV stores write a folder. Where the backend's
names are paths on this host (``Backend.local_path``) the work happens in place: the copy is the files
themselves, nothing is downloaded or uploaded. Elsewhere (an object store) the files are downloaded into a
local folder, made in a local staging folder and uploaded, or reached through a relay. The jobs call these
functions and never ask which backend they hold.
"""

from __future__ import annotations

import dataclasses
import errno
import glob
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from typing import Any, List, Optional, Sequence, Tuple

from dlio.storage.base import Backend, SetOptions, SetResult
from dlio.system import counters

OBJECT_STORE_WHY = "an object store: no page cache on the client, and its devices are not visible from it"


def in_place(backend: Backend, root: str) -> Optional[str]:
    """The local folder ``root`` is, where a job works on its files in place; None where it needs a copy."""
    return backend.local_path(root)


def local_copy(backend: Backend, root: str, rels: Sequence[str]) -> Tuple[str, List[bool]]:
    """A local folder standing for ``root`` in which the files ``rels`` (relative names) can be read, and
    which of them were found: ``root`` itself where it is a local folder (no copy), else a download."""
    folder = in_place(backend, root)
    if folder is not None:
        return folder, [os.path.exists(os.path.join(folder, r)) for r in rels]
    return backend.local_view(root, rels)


def discard_copy(backend: Backend, root: str, folder: str, rels: Sequence[str]) -> None:
    """The downloaded copies of ``rels`` in ``folder`` removed (the local disk need not hold a whole
    dataset); nothing where the folder is ``root`` itself: those files are the data."""
    if in_place(backend, root) is not None:
        return
    for rel in rels:
        try:
            os.unlink(os.path.join(folder, rel))
        except OSError:
            pass


@dataclasses.dataclass
class Stage:
    """Where a job makes files that ``root`` keeps: ``folder`` is ``root`` itself (the files are written in
    place and ``upload`` has nothing to do), or a local staging folder whose files ``upload`` PUTs."""

    backend: Backend
    root: str
    folder: str
    staged: bool  # the files made in ``folder`` are copies: uploaded, and they may be removed after

    def names(self, paths: Sequence[str]) -> List[str]:
        """The backend's names of files under ``folder``."""
        return self.backend.names(self.root, self.folder, paths)

    def upload(self, paths: Sequence[str], opts: SetOptions) -> Optional[SetResult]:
        """The staged files ``paths`` stored whole under ``root``, timed; None where they are written in place."""
        if not self.staged:
            return None
        return self.backend.upload_files(self.names(paths), paths, opts)

    def download(self, paths: Sequence[str], sizes: Sequence[int], opts: SetOptions) -> Optional[SetResult]:
        """The files ``paths`` under ``folder`` made from what ``root`` keeps, timed; None where they are there."""
        if not self.staged:
            return None
        return self.backend.download_files(self.names(paths), sizes, paths, opts)


def stage_and_upload(backend: Backend, root: str, staging: str) -> Stage:
    """Where to make files that ``root`` keeps: ``root`` itself where it is a local folder (written in
    place), else the local folder ``staging`` (then uploaded: ``Stage.upload``)."""
    folder = in_place(backend, root)
    return Stage(backend, root, staging, True) if folder is None else Stage(backend, root, folder, False)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class FolderPlace:
    """A folder on this host that the C core's file stores write and read themselves."""

    relayed = False

    def __init__(self, folder: str) -> None:
        self.where = folder

    def claim(self, entries: str) -> None:
        """The folder (claimed by the driver: dlio.storage.places) holds none of the files matching
        ``entries`` (a glob)."""
        self.empty(entries)

    def empty(self, entries: str) -> None:
        if os.path.islink(self.where):  # replaced by a link during the run: its target is not the run's
            raise OSError(errno.ELOOP, "the cache folder became a symbolic link during the run", self.where)
        paths = glob.glob(os.path.join(glob.escape(self.where), entries))
        # several at once: a large file's unlink frees its extents in the journal, and a busy disk makes each
        # wait; together they share the waits (a stopped run's exit waits for them)
        with ThreadPoolExecutor(min(8, len(paths) or 1)) as pool:
            list(pool.map(_unlink, paths))

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.where).free

    def relay(self, workers: int, slot_len: int) -> Any:
        return None

    def target(self) -> Optional[counters.Target]:
        """None: the counters look at the folder's own device."""
        return None


class RelayPlace:
    """A prefix of objects that the C core's relay store reaches through the backend's helper process."""

    relayed = True

    def __init__(self, backend: Backend, root: str) -> None:
        self.backend, self.where = backend, root

    def claim(self, entries: str) -> None:
        self.empty(entries)

    def empty(self, entries: str) -> None:
        """The objects of the run's names (``entries``, a glob) directly under the prefix removed, and
        nothing else: the prefix is claimed (dlio.storage.places), its marker and lock stay."""
        from dlio.storage.places import own_objects

        self.backend.remove(own_objects(self.backend, self.where, (entries,)))

    def free_bytes(self) -> Optional[int]:
        return None  # an object store has no free space to read

    def relay(self, workers: int, slot_len: int) -> Any:
        return self.backend.kv_relay(self.where, workers, slot_len)

    def target(self) -> Optional[counters.Target]:
        return counters.Target(self.where, self.backend.name, "object store", "none", why=OBJECT_STORE_WHY)


def kv_place(backend: Backend, root: str, rank: int) -> Any:
    """One rank's KV-cache place under ``root``: the folder root/rank_N the C file stores write, or the
    prefix root/rank_N/ the C relay store reaches through the backend."""
    folder = in_place(backend, root)
    if folder is not None:
        return FolderPlace(os.path.join(folder, f"rank_{rank}"))
    return RelayPlace(backend, backend.join(root, f"rank_{rank}") + "/")
