"""The limits the host sets on this process beside its hardware: its control group's memory, CPU and task
limits (cgroup v2 and v1), CPU affinity. A container with 3 GiB of memory.max on a 24 GiB host has
3 GiB, whatever /proc/meminfo says; a CPU quota of one CPU on a 2-core host gives one CPU.
"""

from __future__ import annotations

import os
from typing import Iterator, List, Optional, Tuple

Limit = Tuple[int, str]  # (bytes or count left, where the limit is set)


def _mounts() -> List[Tuple[str, str, List[str]]]:
    """(mount point, fs type, super options) of the cgroup filesystems, from /proc/self/mountinfo."""
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(fields) > 4 and tail and tail[0] in ("cgroup", "cgroup2"):
                    out.append((fields[4], tail[0], tail[2].split(",") if len(tail) > 2 else []))
    except OSError:
        pass
    return out


def _own_groups() -> List[Tuple[str, List[str], str]]:
    """(hierarchy id, controllers, path) of this process's cgroups, from /proc/self/cgroup."""
    out = []
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3:
                    out.append((parts[0], [c for c in parts[1].split(",") if c], parts[2]))
    except OSError:
        pass
    return out


def _folders(controller: str) -> Iterator[Tuple[str, str]]:
    """(folder, version) of this process's cgroup and of each of its ancestors, for a controller: the
    limits of every ancestor apply too."""
    mounts = _mounts()
    for hid, controllers, path in _own_groups():
        if hid == "0" and not controllers:
            bases = [m for m, t, _ in mounts if t == "cgroup2"]
            version = "v2"
        elif controller in controllers:
            bases = [m for m, t, opts in mounts if t == "cgroup" and controller in opts]
            version = "v1"
        else:
            continue
        for base in bases:
            rel = path.strip("/")
            while True:
                folder = os.path.join(base, rel) if rel else base
                if os.path.isdir(folder):
                    yield folder, version
                if not rel:
                    break
                rel = os.path.dirname(rel)


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _number(text: Optional[str]) -> Optional[int]:
    if text is None or text in ("max", "-1") or not text.lstrip("-").isdigit():
        return None
    n = int(text)
    return None if n >= 1 << 62 else n  # v1's "no limit" is a page-rounded 2^63


def _smallest(pairs: Iterator[Limit]) -> Optional[Limit]:
    best = None
    for left, where in pairs:
        if best is None or left < best[0]:
            best = (left, where)
    return best


# the memory limit and usage files of each cgroup version
FILES = {"v2": ("memory.max", "memory.current"), "v1": ("memory.limit_in_bytes", "memory.usage_in_bytes")}


def _memory_groups() -> Iterator[Tuple[int, int, str]]:
    """(limit, usage, limit file) of each of this process's memory control groups that sets a limit."""
    for folder, version in _folders("memory"):
        limit_file, usage_file = FILES[version]
        limit = _number(_read(os.path.join(folder, limit_file)))
        if limit is not None:
            used = _number(_read(os.path.join(folder, usage_file))) or 0
            yield limit, used, os.path.join(folder, limit_file)


def memory_left() -> Optional[Limit]:
    """Bytes this process's control groups still allow, and the file that sets the tightest limit."""
    return _smallest((max(0, limit - used), where) for limit, used, where in _memory_groups())


def memory_limit() -> Optional[Limit]:
    """The tightest memory limit of this process's control groups (bytes), and the file that sets it."""
    return _smallest((limit, where) for limit, _, where in _memory_groups())


def tasks_left() -> Optional[Limit]:
    """Threads and processes this process's control groups still allow (pids.max - pids.current)."""

    def each() -> Iterator[Limit]:
        for folder, _ in _folders("pids"):
            limit = _number(_read(os.path.join(folder, "pids.max")))
            if limit is not None:
                used = _number(_read(os.path.join(folder, "pids.current"))) or 0
                yield max(0, limit - used), os.path.join(folder, "pids.max")

    return _smallest(each())


def cpu_quota() -> Optional[Tuple[float, str]]:
    """CPUs' worth of time the control groups give this process (a quota / period), when limited."""
    best: Optional[Tuple[float, str]] = None
    for folder, version in _folders("cpu"):
        if version == "v2":
            parts = (_read(os.path.join(folder, "cpu.max")) or "max").split()
            quota, period = _number(parts[0]), _number(parts[1]) if len(parts) > 1 else None
            where = os.path.join(folder, "cpu.max")
        else:
            quota = _number(_read(os.path.join(folder, "cpu.cfs_quota_us")))
            period = _number(_read(os.path.join(folder, "cpu.cfs_period_us")))
            where = os.path.join(folder, "cpu.cfs_quota_us")
        if quota and period:
            cpus = quota / period
            if best is None or cpus < best[0]:
                best = (cpus, where)
    return best


def usable_cpus() -> float:
    """The CPUs this process can use: its affinity mask, capped by its control groups' CPU quota."""
    try:
        n: float = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = cpu_quota()
    return min(n, quota[0]) if quota else n
