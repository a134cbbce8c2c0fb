"""Attestation: did the run's fsync and fadvise reach the kernel?

A v3.0 CLOSED KVCache submission ran with LD_PRELOAD=libnofadvise.so:libeatmydata.so, which turn
posix_fadvise and fsync into no-ops: reads then come from the page cache and writes are never
flushed, and the benchmark's figures cannot tell. A dlio-fast run says, per trial:

  - which libraries are preloaded (LD_PRELOAD, /etc/ld.so.preload), and which I/O functions resolve
    outside libc in this process (dlsym of the process's scope against libc's own, dladdr naming
    the library): the C engine calls exactly those;
  - the device under the cache folder (/proc/diskstats): bytes written and flush requests during the
    trial against the bytes written and fsync'ed (fsync must put them on the device, and on a device
    with a volatile write cache issue a flush);
  - mincore on a sample of files just after their posix_fadvise(DONTNEED) (the C store checks every
    kvcache.drop_check-th read): pages still resident mean the drop did not happen.

Other processes on the same device only add bytes and flushes, so a shared device can hide a shim
from the counters (the symbol check still names it), never make a clean run look bad.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import resource
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from dlio.system import counters

# What the C engine calls for its I/O (glibc names; the 64-bit aliases too).
IO_SYMBOLS = (
    "fsync",
    "fdatasync",
    "posix_fadvise",
    "posix_fadvise64",
    "open",
    "open64",
    "openat",
    "openat64",
    "read",
    "write",
    "pread64",
    "pwrite64",
    "close",
    "fallocate",
    "fallocate64",
    "unlink",
    "lseek",
    "lseek64",
    "mincore",
    "syscall",
)
RESIDENT_MAX = 0.05  # pages still cached after the drop, at most this share of those checked
DEVICE_MIN = 0.8  # the device must take at least this share of the bytes written and fsync'ed


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


@functools.lru_cache(maxsize=None)
def _libc() -> Optional[ctypes.CDLL]:
    """libc, looked up once (find_library runs ldconfig: a stopped trial's attestation must not wait for it)."""
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def _addr(lib: ctypes.CDLL, name: str) -> Optional[int]:
    try:
        return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    except AttributeError:
        return None


def _library_of(addr: int) -> str:
    libc = _libc()
    dladdr = getattr(libc, "dladdr", None) if libc else None
    if dladdr is None:
        try:
            dladdr = ctypes.CDLL(ctypes.util.find_library("dl") or "libdl.so.2").dladdr
        except (OSError, AttributeError):
            return "?"
    info = _DlInfo()
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    if dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) and info.dli_fname:
        return os.fsdecode(info.dli_fname)
    return "?"


def interposed(symbols: Sequence[str] = IO_SYMBOLS) -> List[Dict[str, str]]:
    """The I/O functions that resolve, in this process, to something other than libc's own."""
    libc = _libc()
    if libc is None:
        return []
    scope = ctypes.CDLL(None)  # dlopen(NULL): the process's global scope, preloads first
    out = []
    for name in symbols:
        mine, theirs = _addr(scope, name), _addr(libc, name)
        if mine and theirs and mine != theirs:
            out.append({"symbol": name, "library": _library_of(mine)})
    return out


def preloaded() -> List[str]:
    libs = [x for x in os.environ.get("LD_PRELOAD", "").replace(":", " ").split() if x]
    try:
        with open("/etc/ld.so.preload") as f:
            libs += [x for line in f for x in line.split() if not x.startswith("#")]
    except OSError:
        pass
    return libs


def _flushes(dev: Optional[Tuple[int, int]]) -> Optional[Dict[str, Optional[int]]]:
    """(flush requests, write bytes, read bytes) of a device from /proc/diskstats (flushes from 5.5)."""
    try:
        with open("/proc/diskstats") as f:
            text = f.read()
    except OSError:
        return None
    for line in text.splitlines():
        x = line.split()
        if len(x) >= 10 and (int(x[0]), int(x[1])) == dev:
            return {
                "read_bytes": int(x[5]) * counters.SECTOR,
                "write_bytes": int(x[9]) * counters.SECTOR,
                "flushes": int(x[18]) if len(x) >= 19 else None,  # field 16: flushes completed
            }
    return None


def write_cache(name: str) -> Optional[str]:
    """'write back' (a volatile cache: fsync must flush it), 'write through', or None; a partition's
    or a dm device's from the disk below it."""
    devs = [name]
    try:
        with open(f"/sys/class/block/{name}/dev") as f:
            major, minor = f.read().strip().split(":")
        devs += counters.underlying(int(major), int(minor))
    except (OSError, ValueError):
        pass
    for dev in devs:
        try:
            with open(f"/sys/block/{dev}/queue/write_cache") as f:
                return f.read().strip()
        except OSError:
            continue
    return None


def _delta(before: Optional[int], after: Optional[int]) -> Optional[int]:
    """A counter's change, None when either reading is missing (a kernel without it)."""
    return None if before is None or after is None else after - before


class Window:
    """The counters around one trial of one rank: begin at construction, end() after the run."""

    def __init__(self, folder: str, target: Optional[counters.Target] = None) -> None:
        self.target = target or counters.resolve(folder)
        self.t0 = time.monotonic()
        self.ru0 = resource.getrusage(resource.RUSAGE_SELF)
        self.dev0 = _flushes(self.target.device) if self.target.kind == "block" else None
        self.own0 = counters.own_io() if self.target.kind == "block" else None
        self.host0, self.dirty0 = counters.host_cpu(), counters.dirty_bytes()

    def end(self, helper_cpu_s: float = 0.0) -> Dict[str, Any]:
        """helper_cpu_s: the CPU of a helper process that issued the requests (an object store's
        client), counted as the client's with this process's."""
        ru = resource.getrusage(resource.RUSAGE_SELF)
        dev1 = _flushes(self.target.device) if self.target.kind == "block" else None
        d = None
        if self.dev0 and dev1:
            d = {k: _delta(self.dev0[k], dev1[k]) for k in dev1}
        own1 = counters.own_io() if self.target.kind == "block" else None
        own = {k: own1[k] - self.own0[k] for k in own1} if own1 and self.own0 else None
        (busy0, total0), (busy1, total1), dirty1 = self.host0, counters.host_cpu(), counters.dirty_bytes()
        return {
            "host_busy_share": (busy1 - busy0) / (total1 - total0) if total1 > total0 else None,
            # the host's dirty pages written back in the trial (dlio.system.counters.device_share)
            "written_back_bytes": None if dirty1 is None or self.dirty0 is None else max(0, self.dirty0 - dirty1),
            "own": own,  # this process's block I/O (dlio.system.counters.own_io)
            "wall_s": time.monotonic() - self.t0,
            "cpu_user_s": ru.ru_utime - self.ru0.ru_utime + helper_cpu_s,
            "cpu_sys_s": ru.ru_stime - self.ru0.ru_stime,
            "helper_cpu_s": helper_cpu_s,
            "target": self.target.to_json(),
            "device": d,
            "write_cache": write_cache(self.target.name) if self.target.kind == "block" else None,
        }


def attest(io_mode: str, window: Dict[str, Any], store: Dict[str, Any], app_write_bytes: int) -> Dict[str, Any]:
    """The attestation of one trial (of one host's ranks: counts summed, device deltas the host's)."""
    shims = interposed()
    pre = preloaded()
    problems: List[str] = []
    for s in shims:
        problems.append(f"{s['symbol']}() is not libc's in this process: it resolves to {s['library']}")
    fsync_ok: Optional[bool] = None
    fadvise_ok: Optional[bool] = None
    if io_mode in ("compat", "direct"):
        names = {s["symbol"] for s in shims}
        if names & {"fsync", "fdatasync", "syscall"}:
            fsync_ok = False
        if io_mode == "compat" and names & {"posix_fadvise", "posix_fadvise64"}:
            fadvise_ok = False
        dev = window.get("device")
        name = (window.get("target") or {}).get("device") or "?"
        if dev and store.get("fsyncs") and app_write_bytes:
            moved, flushes = dev["write_bytes"], dev.get("flushes")
            if moved < DEVICE_MIN * app_write_bytes:
                fsync_ok = False
                problems.append(
                    f"device {name} took {moved / 2**20:.1f} MiB of the {app_write_bytes / 2**20:.1f} MiB written "
                    f"and fsync'ed ({store['fsyncs']} fsyncs returned): the data stayed in the page cache"
                )
            elif flushes == 0 and window.get("write_cache") == "write back":
                fsync_ok = False
                problems.append(
                    f"no flush reached {name} (a volatile write cache) although {store['fsyncs']} fsyncs returned"
                )
            elif fsync_ok is None:
                fsync_ok = True
        checked = store.get("drop_pages") or 0
        if io_mode == "compat" and checked:
            share = (store.get("drop_resident") or 0) / checked
            if share > RESIDENT_MAX:
                fadvise_ok = False
                problems.append(
                    f"{share:.0%} of the pages checked with mincore were still cached right after "
                    f"posix_fadvise(DONTNEED) ({store['drop_checks']} files): the drop did not happen"
                )
            elif fadvise_ok is None:
                fadvise_ok = True
    return {
        "preloaded": pre,
        "interposed": shims,
        "fsyncs": store.get("fsyncs"),
        "fadvises": store.get("fadvises"),
        "drop_checks": store.get("drop_checks"),
        "drop_pages": store.get("drop_pages"),
        "drop_resident": store.get("drop_resident"),
        "device": (window.get("target") or {}).get("device"),
        "device_write_bytes": (window.get("device") or {}).get("write_bytes"),
        "device_read_bytes": (window.get("device") or {}).get("read_bytes"),
        "device_flushes": (window.get("device") or {}).get("flushes"),
        "write_cache": window.get("write_cache"),
        "app_write_bytes": app_write_bytes,
        "fsync_reached_kernel": fsync_ok,
        "fadvise_reached_kernel": fadvise_ok,
        "problems": problems,
        "ok": not problems,
    }


OBJECT_STORE_NOTE = (
    "n/a (object store; no page cache): no fsync, fadvise or drop on the client; a PUT is stored when the "
    "server answers it, and every GET is served by the server"
)


def object_store(app_write_bytes: int) -> Dict[str, Any]:
    """The attestation of a trial on an object store: nothing to attest, and said so."""
    return {
        "preloaded": preloaded(),
        "interposed": [],
        "fsyncs": None,
        "fadvises": None,
        "drop_checks": None,
        "drop_pages": None,
        "drop_resident": None,
        "device": None,
        "device_write_bytes": None,
        "device_read_bytes": None,
        "device_flushes": None,
        "write_cache": None,
        "app_write_bytes": app_write_bytes,
        "fsync_reached_kernel": None,
        "fadvise_reached_kernel": None,
        "not_applicable": OBJECT_STORE_NOTE,
        "problems": [],
        "ok": True,
    }


def lines(a: Dict[str, Any], label: str = "") -> List[str]:
    """The attestation in words."""
    if a.get("not_applicable"):
        return [f"Attestation{label}: {a['not_applicable']}"]

    def yn(v: Optional[bool]) -> str:
        return "yes" if v else "NO" if v is False else "unknown"

    head = f"Attestation{label}: fsync reached the kernel: {yn(a['fsync_reached_kernel'])}; fadvise: " + yn(
        a["fadvise_reached_kernel"]
    )
    out = [head]
    if a["preloaded"]:
        out.append(f"  preloaded: {', '.join(a['preloaded'])}")
    out += [f"  {p}" for p in a["problems"]]
    return out
