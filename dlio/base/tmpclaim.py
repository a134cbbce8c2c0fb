"""Temporary files written beside their final names, and the proof that a later run may remove them.

A process about to write temporary files under a folder (a dataset's, `io`'s test folder, a result
file's) claims it: it creates ``.dlio-fast-claim-{token}`` there (a random token of this process) and
holds an exclusive flock on it while it has temporary files there (``claimed``); their names carry the
token (``.{name}.tmp-{token}-{thread}``).
``sweep`` removes only the temporary files of claims whose holder is gone (their flock is free) and
then the claim itself: a file is removed because a claim proves dlio-fast made it, never by its name
alone (a user's ``.notes.tmp-123-4`` stays).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import secrets
import stat
import threading
from typing import Dict, Iterable, Iterator, List

TMP_MARK = ".tmp-"
CLAIM = ".dlio-fast-claim-"
MAKING = ".dlio-fast-claiming-"  # a claim until it is locked (never swept: its holder is at work)
TOKEN = secrets.token_hex(6)  # this process's
_HELD: Dict[str, List[int]] = {}  # claimed folder -> [the claim's open, locked fd, users]
_LOCK = threading.Lock()


def claim(folder: str) -> str:
    """Claim ``folder`` for this process (one more user of the claim); the suffix its temporary names
    carry. ``release`` ends a use."""
    folder = os.path.abspath(folder)
    with _LOCK:
        if folder not in _HELD:
            # made under another name and locked before it is named a claim: another process's sweep would
            # take a claim not locked yet for a dead one (64 ranks claiming and sweeping one folder at once)
            making = os.path.join(folder, MAKING + TOKEN)
            fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(making, os.path.join(folder, CLAIM + TOKEN))
            _HELD[folder] = [fd, 0]
        _HELD[folder][1] += 1
    return TMP_MARK + TOKEN


def release(folder: str) -> None:
    """One use of the claim ended (its temporary file renamed or removed); the last removes the claim."""
    folder = os.path.abspath(folder)
    with _LOCK:
        held = _HELD.get(folder)
        if held is None:
            return
        held[1] -= 1
        if held[1] <= 0:
            _drop(folder, held[0])
            del _HELD[folder]


@contextlib.contextmanager
def claimed(folder: str) -> Iterator[str]:
    """``with claimed(folder) as suffix``: temporary files named with the suffix may be written there."""
    suffix = claim(folder)
    try:
        yield suffix
    finally:
        release(folder)


def _drop(folder: str, fd: int) -> None:
    try:
        os.unlink(os.path.join(folder, CLAIM + TOKEN))
    except OSError:
        pass
    os.close(fd)


@atexit.register
def _release_all() -> None:
    """At exit: the claims left go (their temporary files were renamed or removed by their writers)."""
    with _LOCK:
        for folder, (fd, _) in list(_HELD.items()):
            _drop(folder, fd)
        _HELD.clear()


def sweep(folder: str, dirs: Iterable[str] = ()) -> List[str]:
    """Remove the temporary files of dead claims on ``folder`` (in it and in ``dirs``), then the claims.
    Returns the files removed."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    removed: List[str] = []
    for e in names:
        if not e.startswith(CLAIM) or e == CLAIM + TOKEN:
            continue
        path = os.path.join(folder, e)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: its process is gone
            except OSError:
                continue
            if not _still_named(path, fd):  # released meanwhile (its holder unlinks it, then unlocks), and
                continue  # perhaps claimed anew under the same token: its files are a live process's
            mark = TMP_MARK + e[len(CLAIM) :] + "-"
            for d in dict.fromkeys([folder, *dirs]):
                removed += _remove_marked(d, mark)
            with contextlib.suppress(FileNotFoundError):  # another process swept it meanwhile
                os.unlink(path)
        finally:
            os.close(fd)
    return removed


def _still_named(path: str, fd: int) -> bool:
    try:
        st, named = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (named.st_dev, named.st_ino)


def _remove_marked(folder: str, mark: str) -> List[str]:
    out: List[str] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return out
    for e in names:
        if not (e.startswith(".") and mark in e):
            continue
        p = os.path.join(folder, e)
        try:
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                os.unlink(p)
                out.append(p)
        except OSError:
            pass
    return out
