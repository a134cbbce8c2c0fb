"""This host: its facts for the results, DLIO's timestamps, and its page cache."""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
import time
from datetime import datetime
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from dlio import _core
from dlio.base.errors import DlioError, DlioRunError


def iso(t: Optional[float] = None) -> str:
    """Local time as DLIO writes it (its ``utcnow()`` is local time): 2026-01-02T03:04:05.678901."""
    return datetime.fromtimestamp(time.time() if t is None else t).strftime("%Y-%m-%dT%H:%M:%S.%f")


def host_info() -> Dict[str, Any]:
    """CPU count and model, memory (bytes, GiB = 2^30 bytes, GB = 10^9 bytes), and whether free memory is
    handed back to a VM host. (DLIO's host_memory_GB field holds GiB: result files take memory_GiB for it.)"""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    proc = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    proc = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu_count": os.cpu_count(),
        "processor_name": proc,
        "memory_bytes": mem,
        "memory_GiB": mem / 2**30,
        "memory_GB": mem / 1e9,
        "free_page_reporting": free_page_reporting(),
    }


def usable_memory() -> Tuple[int, str]:
    """This host's memory as its processes can have it: the tightest of MemTotal and this process's control groups'
    memory limit (a container's, a simulated host's), and where that figure comes from."""
    from dlio.base.limits import memory_limit

    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    group = memory_limit()
    if group is not None and group[0] < total:
        return group[0], group[1]
    return total, "MemTotal"


def free_page_reporting(devices: str = "/sys/bus/virtio/devices") -> bool:
    """True when this machine is a VM that reports its free memory to the host (a virtio-balloon
    device with VIRTIO_BALLOON_F_REPORTING, feature bit 5): the host takes such pages back, and the
    guest's next touch of each one costs a host fault."""
    try:
        names = os.listdir(devices)
    except OSError:
        return False
    for name in names:
        try:
            with open(os.path.join(devices, name, "device")) as f:
                if f.read().strip() != "0x0005":  # virtio balloon
                    continue
            with open(os.path.join(devices, name, "features")) as f:
                if f.read()[5:6] == "1":
                    return True
        except OSError:
            continue
    return False


# What is left in the page cache of files just dropped, above which the drop did not work (a
# filesystem that ignores posix_fadvise, pages pinned by another process's mapping).
DROP_RESIDUAL = 0.01


_MEMORY_FS = {0x01021994: "tmpfs", 0x858458F6: "ramfs"}  # statfs(2) f_type


def memory_filesystem(path: str) -> Optional[str]:
    """The name of the filesystem of `path` when its files live in memory (tmpfs, ramfs), else None:
    there the page cache is the storage, and dropping it means nothing."""
    buf = ctypes.create_string_buffer(256)  # struct statfs; f_type is its first field
    if _libc.statfs(os.fsencode(path), buf) != 0:
        return None
    return _MEMORY_FS.get(ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF)


def drop_cache(paths: Sequence[str]) -> str:
    """Drop the files' cached pages (fdatasync + posix_fadvise DONTNEED, no root needed), then check
    with mincore on a sample of them that the pages are gone. Says what was done.

    A file whose pages cannot be dropped, or pages still resident after the drop, is an error naming
    the files: a figure read from a cache that was meant to be dropped must not pass for storage."""
    if len(paths) and memory_filesystem(paths[0]):
        return f"nothing to drop: the files are on {memory_filesystem(paths[0])}, in memory"
    _drop(paths, durable=False)
    left = resident_share(paths)
    if left is not None and left > DROP_RESIDUAL:  # pages pinned until a commit (NFS): fdatasync each
        _drop(paths, durable=True)
        left = resident_share(paths)
    if left is not None and left > DROP_RESIDUAL:
        raise DlioRunError(
            f"{paths[0]} (and {len(paths) - 1} more): {100 * left:.1f} % of the sampled pages are "
            "still in the page cache after posix_fadvise(DONTNEED); this filesystem or another "
            "process keeps them: use O_DIRECT, or --cache drop-all as root"
        )
    how = residency_method(paths[0]) if len(paths) else "mincore"
    return f"dropped ({len(paths)} files, posix_fadvise; {100 * (left or 0):.1f} % resident after, by {how})"


def _drop(paths: Sequence[str], durable: bool) -> None:
    try:
        _core.drop_files_cache(paths, durable)
    except OSError as e:
        raise DlioRunError(f"{e.filename}: cannot drop its cached pages: {e.strerror or e}") from None


def drop_host_cache() -> str:
    """Drop the whole host's page cache (sync; echo 3 > /proc/sys/vm/drop_caches): root only.
    It hurts every other job on the node, so it is never a default (`--cache drop-all`)."""
    if os.geteuid() != 0:
        raise DlioError(
            "--cache drop-all drops the whole host's page cache and needs root; use --cache drop "
            "(each file's pages, no root needed)"
        )
    try:
        _core.drop_all_caches()
    except OSError as e:
        raise DlioRunError(f"/proc/sys/vm/drop_caches: cannot drop the page cache: {e.strerror or e}") from None
    return "dropped (whole host page cache, root)"


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_PAGE = os.sysconf("SC_PAGE_SIZE")
_MAX_SAMPLED_BYTES = 1 << 30  # per file: mincore's vector is one byte per page


def resident_share(paths: Sequence[str], max_files: int = 64) -> Optional[float]:
    """Share (0..1) of the pages of up to `max_files` of `paths` (evenly spaced) that are in the page
    cache (``residency_method`` says how it is seen); None when no file could be sampled."""
    if not len(paths):
        return None
    idx = np.unique(np.linspace(0, len(paths) - 1, num=min(max_files, len(paths))).astype(np.int64))
    resident = total = 0
    for i in idx:
        counts = _resident_pages(paths[int(i)])
        if counts is not None:
            resident += counts[0]
            total += counts[1]
    return resident / total if total else None


def residency_method(path: str) -> str:
    """How the page cache of `path` is seen: mincore(2), which since Linux 5.2 answers truthfully only
    for files the caller owns or may write (for others every page reads as resident, and cachestat(2) is
    refused), else timed one-page reads with readahead off (a page read from memory returns in
    microseconds, one from the device in tens of them), each page the probe brought in dropped again."""
    try:
        st = os.stat(path)
    except OSError:
        return "mincore"
    if os.geteuid() == 0 or st.st_uid == os.geteuid() or os.access(path, os.W_OK):
        return "mincore"
    return "timed reads"


def _resident_pages(path: str) -> Optional[Tuple[int, int]]:
    if residency_method(path) == "mincore":
        return _mincore_pages(path)
    return _probed_pages(path)


def _mincore_pages(path: str) -> Optional[Tuple[int, int]]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        size = min(os.fstat(fd).st_size, _MAX_SAMPLED_BYTES)
        if size == 0:
            return None
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return None
        try:
            pages = (size + _PAGE - 1) // _PAGE
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(addr, size, vec) != 0:
                return None
            return int(np.frombuffer(memoryview(vec), dtype=np.uint8).__and__(1).sum()), pages
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


_PROBES = 32  # pages timed per file
_PROBE_FLOOR_NS = 8_000  # a page read faster than this (or 4x a cached re-read) came from memory


def _probed_pages(path: str) -> Optional[Tuple[int, int]]:
    """(pages seen resident, pages probed) by timed one-page reads; the pages the probe read from the
    device are dropped again, so the probe leaves the cache as it found it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        pages = os.fstat(fd).st_size // _PAGE
        if pages == 0:
            return None
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # one page per read, no readahead around it
        offs = np.unique(np.linspace(0, pages - 1, num=min(_PROBES, pages)).astype(np.int64)) * _PAGE
        took = []
        for off in offs:
            t0 = time.perf_counter_ns()
            os.pread(fd, 1, int(off))
            took.append(time.perf_counter_ns() - t0)
        cached = []  # the first page is in memory now: what a read from memory costs here
        for _ in range(3):
            t0 = time.perf_counter_ns()
            os.pread(fd, 1, int(offs[0]))
            cached.append(time.perf_counter_ns() - t0)
        limit = max(4 * min(cached), _PROBE_FLOOR_NS)
        resident = [t <= limit for t in took]
        for off, was in zip(offs, resident):
            if not was:
                os.posix_fadvise(fd, int(off), _PAGE, os.POSIX_FADV_DONTNEED)
        return int(sum(resident)), len(offs)
    except OSError:
        return None
    finally:
        os.close(fd)
