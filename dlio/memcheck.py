"""Before allocating something whose size comes from input: does it fit in this process?

The limit is the smaller of the host's available memory (MemAvailable) and what the address-space
limit (`ulimit -v`, RLIMIT_AS) still allows. Without the check an absurd file count or queue depth
grows a list or a buffer pool until the kernel's OOM killer ends the process with no message.
"""

import resource
from typing import Optional

from dlio.errors import DlioError

# Python's cost of one str in a list (object header + the list's pointer), beside its characters
STR_OVERHEAD = 57


def _meminfo_available() -> Optional[int]:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _address_space_left() -> Optional[int]:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return max(0, soft - int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    return soft


def available_bytes() -> Optional[int]:
    """What this process may still allocate, or None when it cannot be told."""
    limits = [x for x in (_meminfo_available(), _address_space_left()) if x is not None]
    return min(limits) if limits else None


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.1f} MiB"


def check_fits(nbytes: float, what: str, fix: str) -> None:
    """DlioError naming `what` (the key and the amount) when `nbytes` does not fit in memory."""
    avail = available_bytes()
    if avail is not None and nbytes > avail:
        raise DlioError(f"{what}: about {_gib(nbytes)} of memory is needed but only {_gib(avail)} is available; {fix}")
