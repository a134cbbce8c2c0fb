"""What the kernel saw during a phase (an epoch of `run`, an io point): read at the phase's start and
end only, never per I/O, so that dlio.report.verdict can say whether the phase measured storage.

  - the block device under the dataset's filesystem (/proc/self/mountinfo -> major:minor ->
    /proc/diskstats; a partition's parent disk and a dm/md device's slaves are named as
    `underlying`), or the NFS client's bytes from /proc/self/mountstats; none on tmpfs, overlay
    and other filesystems without a device of their own (the reason is kept);
  - this process's CPU time (user, system), the reader threads' CPU time (from the C core, which
    measures each thread with CLOCK_THREAD_CPUTIME_ID: its threads have no names to find them by
    in /proc/self/task), the cores this process may use, and the host's CPU use (/proc/stat);
  - what the phase's caller knows and the kernel cannot tell apart: the emulated accelerator's
    compute (the time it computed, the CPU its spin took, the steps' I/O wait) and the CPU of the
    benchmark's own worker processes (S3), which /proc/stat counts as other processes';
  - whether the files are on a memory-backed filesystem (tmpfs, ramfs: dlio.system.host.memory_filesystem);
  - the share of the dataset's pages in the page cache before the phase (mincore on a sample).

The device counters are the whole device's: another process reading the same disk adds to them. So
each phase also keeps this process's own block I/O (/proc/self/io read_bytes / write_bytes: what its
threads, io_uring's workers included, had the block layer move, readahead included): the device's
bytes beyond it are other processes' (dlio.report.verdict says so, and judges by the process's own).
"""

from __future__ import annotations

import math
import os
import resource
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from dlio.base.limits import usable_cpus
from dlio.system.host import memory_filesystem, resident_share

SECTOR = 512  # /proc/diskstats counts 512-byte sectors whatever the device's block size
NFS_TYPES = ("nfs", "nfs4")
MEMORY_TYPES = ("tmpfs", "ramfs")  # their files live in memory (dlio.system.host.memory_filesystem by statfs)


@dataclass(frozen=True)
class Mount:
    mount_point: str
    major: int
    minor: int
    fstype: str
    source: str


def _unescape(s: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (\\040)."""
    if "\\" not in s:
        return s
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 3 < len(s) and s[i + 1 : i + 4].isdigit():
            out.append(chr(int(s[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> List[Mount]:
    """The mounts of /proc/self/mountinfo (proc(5)): ID parent M:m root mount-point options
    [optional fields] - fstype source super-options."""
    mounts = []
    for line in text.splitlines():
        parts = line.split()
        if "-" not in parts or len(parts) < 7:
            continue
        sep = parts.index("-")
        if len(parts) < sep + 3:
            continue
        major, minor = parts[2].split(":")
        mounts.append(Mount(_unescape(parts[4]), int(major), int(minor), parts[sep + 1], _unescape(parts[sep + 2])))
    return mounts


def mount_of(path: str, mounts: Sequence[Mount]) -> Optional[Mount]:
    """The mount holding `path` (already a real path): the longest mount point that is a prefix of
    it, the last one mounted when several are stacked on one point."""
    best, best_len = None, -1
    for m in mounts:
        mp = m.mount_point
        if mp == "/" or path == mp or path.startswith(mp.rstrip("/") + "/"):
            if len(mp) >= best_len:
                best, best_len = m, len(mp)
    return best


def parse_diskstats(text: str) -> Dict[Tuple[int, int], Dict[str, Any]]:
    """{(major, minor): {name, read_ios, read_bytes, write_ios, write_bytes}} from /proc/diskstats
    (Documentation/admin-guide/iostats.rst: fields 4 reads completed, 6 sectors read, 8 writes
    completed, 10 sectors written)."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 10:
            continue
        out[(int(f[0]), int(f[1]))] = {
            "name": f[2],
            "read_ios": int(f[3]),
            "read_bytes": int(f[5]) * SECTOR,
            "write_ios": int(f[7]),
            "write_bytes": int(f[9]) * SECTOR,
        }
    return out


def parse_mountstats(text: str) -> Dict[str, Dict[str, int]]:
    """{mount point: {read_bytes, write_bytes}} of the NFS mounts in /proc/self/mountstats: the
    `bytes:` line's server-read and server-write fields (5th and 6th: what crossed the network)."""
    out, current = {}, None
    for line in text.splitlines():
        if line.startswith("device "):
            f = line.split()
            current = None
            if "with" in f and f.index("with") + 2 < len(f) and f[f.index("with") + 2] in NFS_TYPES:
                current = _unescape(f[f.index("on") + 1])
        elif current is not None and line.strip().startswith("bytes:"):
            f = line.split()[1:]
            if len(f) >= 6:
                out[current] = {"read_bytes": int(f[4]), "write_bytes": int(f[5])}
    return out


def parse_proc_io(text: str) -> Optional[Dict[str, int]]:
    """{read_bytes, write_bytes} from /proc/self/io (the block layer's bytes this process caused: reads
    submitted, readahead included; pages it dirtied or wrote direct), or None without task I/O accounting."""
    vals = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        return {k: int(vals[k]) for k in ("read_bytes", "write_bytes")}
    except (KeyError, ValueError):
        return None


def own_io() -> Optional[Dict[str, int]]:
    """This process's block I/O so far (parse_proc_io of /proc/self/io)."""
    return parse_proc_io(_read("/proc/self/io") or "")


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def underlying(major: int, minor: int, sys_root: str = "/sys/dev/block") -> List[str]:
    """What a block device sits on: a partition's parent disk, a dm/md device's slaves."""
    base = os.path.join(sys_root, f"{major}:{minor}")
    try:
        real = os.path.realpath(base)
        if os.path.exists(os.path.join(real, "partition")):
            return [os.path.basename(os.path.dirname(real))]
        return sorted(os.listdir(os.path.join(real, "slaves")))
    except OSError:
        return []


@dataclass
class Target:
    """Where a data folder's bytes come from: a block device, an NFS mount, or nothing countable."""

    mount: str
    fstype: str
    source: str
    kind: str  # "block", "nfs" or "none"
    device: Optional[Tuple[int, int]] = None
    name: str = ""
    underlying: List[str] = field(default_factory=list)
    why: str = ""  # kind "none": why nothing can be counted
    memory_fs: Optional[str] = None  # tmpfs / ramfs: the files live in memory

    def to_json(self) -> Dict[str, Any]:
        return {
            "mount": self.mount,
            "fstype": self.fstype,
            "source": self.source,
            "kind": self.kind,
            "device": self.name or None,
            "underlying": self.underlying,
            "why": self.why or None,
            "memory_fs": self.memory_fs,
        }


def resolve(path: str, mountinfo: Optional[str] = None, diskstats: Optional[str] = None) -> Target:
    """The Target of `path` (a file or folder of the dataset)."""
    real = os.path.realpath(path)
    mounts = parse_mountinfo(mountinfo if mountinfo is not None else (_read("/proc/self/mountinfo") or ""))
    m = mount_of(real, mounts)
    if m is None:
        return Target("?", "?", "?", "none", why=f"{real}: no mount found in /proc/self/mountinfo")
    if m.fstype in NFS_TYPES:
        return Target(m.mount_point, m.fstype, m.source, "nfs", name=m.source)
    disks = parse_diskstats(diskstats if diskstats is not None else (_read("/proc/diskstats") or ""))
    dev = (m.major, m.minor)
    if dev not in disks and m.source.startswith("/dev/"):
        try:  # btrfs and others report an anonymous device number: the source names the real one
            st = os.stat(m.source)
            dev = (os.major(st.st_rdev), os.minor(st.st_rdev))
        except OSError:
            pass
    if dev not in disks:
        memory = m.fstype if m.fstype in MEMORY_TYPES else (None if mountinfo is not None else memory_filesystem(real))
        return Target(
            m.mount_point,
            m.fstype,
            m.source,
            "none",
            why=f"{m.fstype} at {m.mount_point} has no block device in /proc/diskstats"
            + (": a memory-backed filesystem" if memory else ""),
            memory_fs=memory,
        )
    return Target(m.mount_point, m.fstype, m.source, "block", dev, disks[dev]["name"], underlying(*dev))


def dirty_bytes() -> Optional[int]:
    """The host's pages waiting to reach a device (/proc/meminfo Dirty + Writeback), or None."""
    vals = dict(line.split(":", 1) for line in (_read("/proc/meminfo") or "").splitlines() if ":" in line)
    try:
        return sum(int(vals[k].split()[0]) * 1024 for k in ("Dirty", "Writeback"))
    except (KeyError, ValueError, IndexError):
        return None


def host_cpu() -> Tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat's first line (idle and iowait are not busy)."""
    text = _read("/proc/stat") or ""
    f = [int(x) for x in text.split("\n", 1)[0].split()[1:9]] if text.startswith("cpu ") else []
    if len(f) < 5:
        return 0, 0
    total = sum(f)
    return total - f[3] - f[4], total


def snapshot(target: Target) -> Dict[str, Any]:
    """The raw counters now (cumulative values; a phase is the difference of two)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    busy, total = host_cpu()
    snap: Dict[str, Any] = {
        "t_ns": time.monotonic_ns(),
        "user_s": ru.ru_utime,
        "sys_s": ru.ru_stime,
        "host_busy": busy,
        "host_total": total,
        "dev": None,
        "own": None,
        "nfs": None,
        "dirty": None,
    }
    if target.kind == "block" and target.device is not None:
        snap["dev"] = parse_diskstats(_read("/proc/diskstats") or "").get(target.device)
        snap["own"] = own_io()
        snap["dirty"] = dirty_bytes()
    elif target.kind == "nfs":
        snap["nfs"] = parse_mountstats(_read("/proc/self/mountstats") or "").get(target.mount)
    return snap


def usable_cores() -> int:
    """The cores this process can use: its affinity, capped by its control group's CPU quota (rounded up:
    a quota of 1.5 CPUs lets two threads run)."""
    return max(1, math.ceil(usable_cpus()))


_TARGETS: Dict[str, Target] = {}


def target_for(path: str) -> Target:
    """resolve(), once per folder of a run."""
    key = os.path.dirname(os.path.realpath(path))
    if key not in _TARGETS:
        _TARGETS[key] = resolve(path)
    return _TARGETS[key]


class Phase:
    """Counters around one phase: begin() before it, end() after it with what the application did."""

    def __init__(self, paths: Sequence[str], engine: str = "", residency: bool = True) -> None:
        self.target = target_for(paths[0]) if len(paths) else Target("?", "?", "?", "none", why="no files")
        if engine == "null":
            self.target = Target(
                self.target.mount, self.target.fstype, self.target.source, "none", why="engine null issues no I/O"
            )
        self.resident = resident_share(paths) if residency and len(paths) else None
        self.start = snapshot(self.target)

    def end(
        self,
        app_bytes: int,
        app_ops: int,
        reader_cpu_s: Optional[float],
        reader_threads: int,
        write: bool = False,
        samples: int = 0,
        compute_s: float = 0.0,
        compute_set_s: float = 0.0,
        compute_cpu_s: float = 0.0,
        io_wait_s: Optional[float] = None,
        worker_cpu_s: float = 0.0,
    ) -> Dict[str, Any]:
        """The phase's counters (JSON-ready). reader_cpu_s None: the whole process's CPU is the readers'
        (io points, where the workers are nearly all of it); reader_threads 0: the trainer reads.

        The emulated accelerator (training phases): compute_s the time it computed (compute_set_s what it
        was set to), compute_cpu_s the CPU its spin took wherever it ran (not the client's CPU), io_wait_s
        the steps' wait for their data.
        worker_cpu_s: the CPU of the benchmark's own worker processes during the phase (the S3 workers):
        the benchmark's, not other processes'; add it to reader_cpu_s too when the workers read."""
        s0, s1 = self.start, snapshot(self.target)
        wall = max(1e-9, (s1["t_ns"] - s0["t_ns"]) / 1e9)
        user, sys_ = s1["user_s"] - s0["user_s"], s1["sys_s"] - s0["sys_s"]
        dt = s1["host_total"] - s0["host_total"]
        host_cpus = os.cpu_count() or 1
        c = {
            "wall_s": wall,
            "app_bytes": int(app_bytes),
            "app_ops": int(app_ops),
            "samples": int(samples),
            "direction": "write" if write else "read",
            "target": self.target.to_json(),
            "device_bytes": None,
            "device_ios": None,
            "own_bytes": None,
            "network_bytes": None,
            "resident_before": self.resident,
            "cpu_user_s": user,
            "cpu_sys_s": sys_,
            "reader_cpu_s": (user + sys_) if reader_cpu_s is None else float(reader_cpu_s),
            "reader_threads": int(reader_threads),
            "cores": usable_cores(),
            "host_cpus": host_cpus,
            "host_busy_share": (s1["host_busy"] - s0["host_busy"]) / dt if dt > 0 else None,
            "worker_cpu_s": float(worker_cpu_s),
            "compute_s": float(compute_s),
            "compute_set_s": float(compute_set_s),
            "compute_cpu_s": float(compute_cpu_s),
            "io_wait_s": None if io_wait_s is None else float(io_wait_s),
        }
        d = "write" if write else "read"
        if s0["dev"] and s1["dev"]:
            c["device_ios"] = s1["dev"][f"{d}_ios"] - s0["dev"][f"{d}_ios"]
        c.update(device_share(s0, s1, d))
        if s0["nfs"] and s1["nfs"]:
            c["network_bytes"] = s1["nfs"][f"{d}_bytes"] - s0["nfs"][f"{d}_bytes"]
        return c


def device_share(s0: Dict[str, Any], s1: Dict[str, Any], direction: str) -> Dict[str, Any]:
    """Who moved the device's bytes between two snapshots: the device's and this process's own, both ways
    (a writer beside a read phase shares the device as much as a reader does), and the host's dirty pages
    written back meanwhile (pages dirtied before the phase, by anyone: the device's writes they explain are
    nobody's in the phase). device_bytes / own_bytes are the phase's own direction (dlio.report.verdict)."""
    out: Dict[str, Any] = {"device_bytes": None, "own_bytes": None}
    for side in ("read", "write"):
        dev = s1["dev"][f"{side}_bytes"] - s0["dev"][f"{side}_bytes"] if s0.get("dev") and s1.get("dev") else None
        own = s1["own"][f"{side}_bytes"] - s0["own"][f"{side}_bytes"] if s0.get("own") and s1.get("own") else None
        out[f"device_{side}_bytes"], out[f"own_{side}_bytes"] = dev, own
        if side == direction:
            out["device_bytes"], out["own_bytes"] = dev, own
    d0, d1 = s0.get("dirty"), s1.get("dirty")
    out["written_back_bytes"] = None if d0 is None or d1 is None else max(0, d0 - d1)
    return out
