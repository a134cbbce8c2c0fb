"""This host: its facts for the results, DLIO's timestamps, and its page cache."""

from __future__ import annotations

import os
import platform
import time
from datetime import datetime
from typing import Any, Dict, Iterable, Optional

from dlio import _core
from dlio.errors import DlioRunError


def iso(t: Optional[float] = None) -> str:
    """Local time as DLIO writes it (its ``utcnow()`` is local time): 2026-01-02T03:04:05.678901."""
    return datetime.fromtimestamp(time.time() if t is None else t).strftime("%Y-%m-%dT%H:%M:%S.%f")


def host_info() -> Dict[str, Any]:
    """CPU count and model, memory (bytes, GiB), and whether free memory is handed back to a VM host."""
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
    return {"cpu_count": os.cpu_count(), "processor_name": proc, "memory_bytes": mem,
            "memory_GB": mem / 1024 ** 3, "free_page_reporting": free_page_reporting()}


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


def drop_cache(paths: Iterable[str], host_wide: bool = False) -> str:
    """Drop the files' cached pages (fdatasync + posix_fadvise DONTNEED, no root needed), and with
    `host_wide` the whole page cache too when this process may (root). Says what was done.

    A file whose pages cannot be dropped is an error naming it: a figure read from a cache that was
    meant to be dropped must not pass for a storage figure."""
    n = 0
    for p in paths:
        try:
            _core.drop_file_cache(p)
        except OSError as e:
            raise DlioRunError(f"{p}: cannot drop its cached pages: {e.strerror or e}") from None
        n += 1
    if host_wide:
        try:
            _core.drop_all_caches()
            return f"dropped ({n} files + all, root)"
        except OSError:
            pass
    return f"dropped ({n} files, posix_fadvise)"
