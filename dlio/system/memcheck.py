"""Before allocating something whose size comes from input: does it fit in this process?

The limit is the smallest of the host's available memory (MemAvailable), what the address-space limit
(`ulimit -v`, RLIMIT_AS) still allows, and what the process's control groups still allow (a container's
memory.max, dlio.base.limits). Without the check an absurd file count or queue depth grows a list or a buffer
pool until the kernel's OOM killer ends the process with no message. Likewise threads: a count from input
is checked against the control group's task limit (pids.max) before any is started.
"""

import resource
from typing import Optional, Tuple

from dlio.base import limits as limits_mod
from dlio.base.errors import DlioError

# threads a run starts beside the ones its settings ask for (the C run's trainer, the thread that waits
# for it, the display's)
THREAD_MARGIN = 4
# Python's cost of one str in a list (object header + the list's pointer), beside its characters
STR_OVERHEAD = 57


def mem_available() -> Optional[int]:
    """The host's MemAvailable in bytes (None where /proc/meminfo does not say)."""
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


def available() -> Optional[Tuple[int, str]]:
    """What this process may still allocate and which limit says so, or None when it cannot be told."""
    limits = [
        (n, where)
        for n, where in (
            (mem_available(), "MemAvailable in /proc/meminfo"),
            (_address_space_left(), "the address-space limit (ulimit -v)"),
            limits_mod.memory_left() or (None, ""),
        )
        if n is not None
    ]
    return min(limits) if limits else None


def available_bytes() -> Optional[int]:
    """What this process may still allocate, or None when it cannot be told."""
    a = available()
    return a[0] if a else None


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.1f} MiB"


def check_fits(nbytes: float, what: str, fix: str) -> None:
    """DlioError naming `what` (the key and the amount) when `nbytes` does not fit in memory, and the
    limit that says so."""
    a = available()
    if a is not None and nbytes > a[0]:
        raise DlioError(
            f"{what}: about {_gib(nbytes)} of memory is needed but only {_gib(a[0])} is available ({a[1]}); {fix}"
        )


def check_threads(n: int, what: str, fix: str) -> None:
    """DlioError when `n` more threads would pass the control group's task limit (pids.max): the C core
    would fail to start them (EAGAIN) halfway through its setup."""
    left = limits_mod.tasks_left()
    if left is not None and n > left[0]:
        raise DlioError(f"{what}: {n} threads are needed but only {left[0]} more tasks are allowed ({left[1]}); {fix}")
