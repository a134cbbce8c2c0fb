"""Traces -> one numpy structured array of file I/O events (EVENT_DTYPE) plus the file paths.

Sources: the interposer's folder (ev-*.bin + files-*.txt, see src/dlio_profile/interpose.c),
DFTracer / dlio-fast `.pfw` and `.pfw.gz` (JSON lines of Chrome trace events; a run folder of
`dlio-fast run --trace` holds trace-*.pfw), Darshan DXT text (darshan-dxt-parser), and
`strace -f -tt -T` logs. Times are ns on the source's clock, shifted so that the first event is 0.
"""

import glob
import gzip
import json
import os
import re
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from dlio.errors import DlioError

OP_OPEN, OP_CLOSE, OP_READ, OP_WRITE, OP_MMAP = 0, 1, 2, 3, 4
EVENT_DTYPE = np.dtype(
    [
        ("t", "<i8"),
        ("dur", "<i8"),
        ("pid", "<i8"),
        ("tid", "<i8"),
        ("op", "u1"),
        ("file", "<i4"),
        ("offset", "<i8"),
        ("size", "<i8"),
    ]
)
# The interposer's record (struct rec in interpose.c).
NATIVE_DTYPE = np.dtype(
    [
        ("t", "<u8"),
        ("dur", "<u8"),
        ("off", "<i8"),
        ("req", "<i8"),
        ("ret", "<i8"),
        ("file", "<u4"),
        ("tid", "<u4"),
        ("pid", "<u4"),
        ("op", "<u2"),
        ("pad", "<u2"),
    ]
)


@dataclass
class Trace:
    events: np.ndarray  # EVENT_DTYPE, sorted by t; size = bytes done (mmap: length); file -1: none
    paths: np.ndarray  # str, indexed by events["file"]
    source: str  # "interposer", "pfw", "darshan", "strace"
    forked: Optional[np.ndarray] = None  # pids forked from a traced process (interposer only; None: unknown)


def _finish(rows: List[tuple], paths: List[str], source: str) -> Trace:
    ev = np.array(rows, dtype=EVENT_DTYPE) if rows else np.zeros(0, EVENT_DTYPE)
    return _sorted(ev, np.array(paths, dtype=object), source)


def _sorted(ev: np.ndarray, paths: np.ndarray, source: str, forked=None) -> Trace:
    ev = ev[np.argsort(ev["t"], kind="stable")]
    if len(ev):
        ev["t"] -= ev["t"][0]
    return Trace(ev, paths, source, forked)


# ------------------------------------------------------------------------------------ interposer


def _names(path: str):
    """(id -> path dict, parent process name or None) of one files-*.txt."""
    ids, parent = {}, None
    with open(path, errors="replace") as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("\t")
            if k == "parent":
                parent = v
            elif k.isdigit():
                ids[int(k)] = v
    return ids, parent


def load_native(folder: str) -> Trace:
    """Every process's records of an interposer folder, file ids resolved through fork parents."""
    bins = sorted(glob.glob(os.path.join(folder, "ev-*.bin")))
    names = {}
    for p in glob.glob(os.path.join(folder, "files-*.txt")):
        names[os.path.basename(p)[6:-4]] = _names(p)
    path_index, paths, parts = {}, [], []
    for b in bins:
        rec = np.fromfile(b, NATIVE_DTYPE)
        if not len(rec):
            continue
        proc = os.path.basename(b)[3:-4]
        uniq, inv = np.unique(rec["file"], return_inverse=True)
        gidx = np.empty(len(uniq), np.int32)
        for i, fid in enumerate(uniq):  # one lookup per distinct file id, not per event
            p, name, hops = None, proc, 0
            while p is None and name in names and hops < 64:
                ids, parent = names[name]
                p = ids.get(int(fid))
                name, hops = parent, hops + 1
            p = p if p is not None else f"<fd id {int(fid)}>"
            gidx[i] = path_index.setdefault(p, len(paths))
            if gidx[i] == len(paths):
                paths.append(p)
        ev = np.zeros(len(rec), EVENT_DTYPE)
        ev["t"], ev["dur"] = rec["t"], rec["dur"]
        ev["pid"], ev["tid"], ev["op"] = rec["pid"], rec["tid"], rec["op"]
        ev["file"] = gidx[inv]
        ev["offset"] = rec["off"]
        io = np.isin(rec["op"], (OP_READ, OP_WRITE, OP_MMAP))
        ev["size"] = np.where(io, np.where(rec["op"] == OP_MMAP, rec["req"], rec["ret"]), 0)
        ev["size"][io & (rec["ret"] < 0)] = -1  # failed call
        parts.append(ev)
    ev = np.concatenate(parts) if parts else np.zeros(0, EVENT_DTYPE)
    # a process forked by a traced one (a DataLoader worker) names its parent; an exec'd one does not
    forked = np.array(sorted({int(k.split("-")[0]) for k, (_, parent) in names.items() if parent}), np.int64)
    return _sorted(ev, np.array(paths, dtype=object), "interposer", forked)


# ------------------------------------------------------------------------------------ .pfw


def _pfw_op(name: str):
    n = name.lower()
    if "mmap" in n:
        return OP_MMAP
    if "read" in n and "dir" not in n and "link" not in n:
        return OP_READ
    if "write" in n:
        return OP_WRITE
    if n in ("open", "open64", "openat", "openat64", "fopen", "fopen64", "__open_2", "creat", "creat64"):
        return OP_OPEN
    if n in ("close", "fclose"):
        return OP_CLOSE
    return None


def load_pfw(paths: List[str]) -> Trace:
    """POSIX events of DFTracer / dlio-fast .pfw files (file names from args.fname, or the FH
    metadata lines that map args.fhash to a name). Other categories (sample, fetch, compute) are
    the emulator's own spans and are left out."""
    rows, files, index, fh = [], [], {}, {}
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", errors="replace") as f:
            for line in f:
                line = line.strip().rstrip(",")
                if not line.startswith("{"):
                    continue
                e = json.loads(line)
                args = e.get("args") or {}
                if e.get("ph") == "M":
                    if e.get("name") == "FH":
                        fh[args.get("value")] = args.get("name")
                    continue
                if e.get("cat") not in ("POSIX", "STDIO"):
                    continue
                op = _pfw_op(str(e.get("name", "")))
                if op is None:
                    continue
                fname = args.get("fname") or fh.get(args.get("fhash")) or "<unknown>"
                fi = index.setdefault(fname, len(files))
                if fi == len(files):
                    files.append(fname)
                ret = args.get("ret", args.get("size", 0))
                size = int(ret) if isinstance(ret, (int, float)) and ret >= 0 else -1
                if op in (OP_OPEN, OP_CLOSE):
                    size = 0
                rows.append(
                    (
                        int(float(e.get("ts", 0)) * 1000),
                        int(float(e.get("dur", 0)) * 1000),
                        int(e.get("pid", 0)),
                        int(e.get("tid", 0)),
                        op,
                        fi,
                        int(args.get("offset", -1)),
                        size,
                    )
                )
    return _finish(rows, files, "pfw")


# ------------------------------------------------------------------------------------ Darshan DXT

_DXT_FILE = re.compile(r"^# DXT, file_id: \S+, file_name: (.*)$")
_DXT_ROW = re.compile(r"^\s*X_(POSIX|MPIIO)\s+(\d+)\s+(read|write)\s+\d+\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)")


def load_darshan(path: str) -> Trace:
    """darshan-dxt-parser text: '# DXT, file_name:' headers, then rows
    'X_POSIX rank read|write segment offset length start end [ost...]' (seconds). Darshan has no
    thread ids: the rank is the pid and the tid. MPI-IO rows duplicate POSIX ones: only POSIX kept."""
    rows, files, index, fi = [], [], {}, -1
    with open(path, errors="replace") as f:
        for line in f:
            m = _DXT_FILE.match(line)
            if m:
                name = m.group(1).strip()
                fi = index.setdefault(name, len(files))
                if fi == len(files):
                    files.append(name)
                continue
            m = _DXT_ROW.match(line)
            if m and m.group(1) == "POSIX" and fi >= 0:
                t0, t1 = float(m.group(6)), float(m.group(7))
                rank = int(m.group(2))
                rows.append(
                    (
                        int(t0 * 1e9),
                        int((t1 - t0) * 1e9),
                        rank,
                        rank,
                        OP_READ if m.group(3) == "read" else OP_WRITE,
                        fi,
                        int(m.group(4)),
                        int(m.group(5)),
                    )
                )
    return _finish(rows, files, "darshan")


# ------------------------------------------------------------------------------------ strace

_ST_LINE = re.compile(r"^(?:\[pid\s+(\d+)\]\s*|(\d+)\s+)?(\d+):(\d+):(\d+(?:\.\d+)?)\s+(.*)$")
_ST_CALL = re.compile(r"^(\w+)\((.*)\)\s+=\s+(-?\d+|0x[0-9a-f]+|\?)(?:\s+(\w+))?.*?(?:<([\d.]+)>)?\s*$")
_ST_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")
_ST_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"(?:\.\.\.)?')
_ST_NESTED = re.compile(r"\[[^\[\]]*\]|\{[^{}]*\}")
_ST_OPENS = {"open": 0, "open64": 0, "creat": 0, "openat": 1, "openat64": 1, "openat2": 1}
_ST_IO = {
    "read": (OP_READ, None),
    "pread64": (OP_READ, 3),
    "pread": (OP_READ, 3),
    "readv": (OP_READ, None),
    "preadv": (OP_READ, 3),
    "preadv2": (OP_READ, 3),
    "write": (OP_WRITE, None),
    "pwrite64": (OP_WRITE, 3),
    "pwrite": (OP_WRITE, 3),
    "writev": (OP_WRITE, None),
    "pwritev": (OP_WRITE, 3),
}


def _strace_args(args: str):
    """(first quoted string, list of the comma-separated arguments with strings and arrays blanked)."""
    q = _ST_QUOTED.search(args)
    s = _ST_QUOTED.sub('""', args)
    for _ in range(4):
        s2 = _ST_NESTED.sub("[]", s)
        if s2 == s:
            break
        s = s2
    return (q.group(0).split('"')[1] if q else None), [a.strip() for a in s.split(",")]


class _StraceState:
    """fd -> (file index, position) per pid, with a fallback on the fd alone: strace -f names
    threads by their own ids, and threads share their process's descriptors."""

    def __init__(self):
        self.fds, self.any_fd, self.files, self.index, self.rows = {}, {}, [], {}, []

    def lookup(self, pid, fd):
        return self.fds.get((pid, fd)) or self.any_fd.get(fd)

    def set(self, pid, fd, entry):
        self.fds[(pid, fd)] = entry
        self.any_fd[fd] = entry

    def call(self, pid, t, name, args, ret, dur):
        if name in _ST_OPENS:
            path, _ = _strace_args(args)
            if path is None or ret < 0:
                return
            fi = self.index.setdefault(path, len(self.files))
            if fi == len(self.files):
                self.files.append(path)
            self.set(pid, ret, [fi, 0])
            self.rows.append((t, dur, pid, pid, OP_OPEN, fi, 0, 0))
            return
        _, a = _strace_args(args)
        if not a or not a[0].lstrip("-").isdigit():
            return self._mmap(pid, t, name, a, ret, dur) if name in ("mmap", "mmap2") else None
        fd = int(a[0])
        ent = self.lookup(pid, fd)
        if ent is None:
            return
        if name == "close":
            self.rows.append((t, dur, pid, pid, OP_CLOSE, ent[0], -1, 0))
            self.fds.pop((pid, fd), None)
            self.any_fd.pop(fd, None)
        elif name in ("lseek", "_llseek") and ret >= 0:
            ent[1] = ret
        elif name in _ST_IO:
            op, off_arg = _ST_IO[name]
            if off_arg is not None and len(a) > off_arg and a[off_arg].isdigit():
                off = int(a[off_arg])
            else:
                off = ent[1]
                ent[1] += max(ret, 0)
            self.rows.append((t, dur, pid, pid, op, ent[0], off, ret if ret >= 0 else -1))

    def _mmap(self, pid, t, name, a, ret, dur):
        if len(a) >= 6 and a[4].lstrip("-").isdigit():
            ent = self.lookup(pid, int(a[4]))
            if ent is not None and a[1].isdigit():
                off = int(a[5], 0) if re.match(r"^(0x[0-9a-f]+|\d+)$", a[5]) else 0
                self.rows.append((t, dur, pid, pid, OP_MMAP, ent[0], off, int(a[1])))


def load_strace(path: str) -> Trace:
    """`strace -f -tt -T [-o FILE]` output: `PID HH:MM:SS.us call(args) = ret <secs>` lines
    (or `[pid N]` prefixes, or no pid before the first fork), with `<unfinished ...>` /
    `<... call resumed>` pairs joined. Offsets of read/write follow open/lseek per descriptor."""
    st, pending = _StraceState(), {}
    with open(path, errors="replace") as f:
        for line in f:
            m = _ST_LINE.match(line.rstrip("\n"))
            if not m:
                continue
            pid = int(m.group(1) or m.group(2) or 0)
            t = int((int(m.group(3)) * 3600 + int(m.group(4)) * 60) * 1e9 + float(m.group(5)) * 1e9)
            body = m.group(6)
            if body.endswith("<unfinished ...>"):
                pending[pid] = (t, body[: -len("<unfinished ...>")].rstrip())
                continue
            r = _ST_RESUMED.match(body)
            if r:
                if pid not in pending:
                    continue
                t, head = pending.pop(pid)
                body = head + r.group(2)
            c = _ST_CALL.match(body)
            if not c or c.group(3) == "?":
                continue
            ret = int(c.group(3), 0)
            dur = int(float(c.group(5)) * 1e9) if c.group(5) else 0
            st.call(pid, t, c.group(1), c.group(2), ret, dur)
    return _finish(st.rows, st.files, "strace")


# ------------------------------------------------------------------------------------ dispatch


def load_trace(path: str) -> Trace:
    """Any supported trace: an interposer folder, a run folder or a .pfw[.gz] file, a Darshan
    DXT text file, or an strace log (told apart by content)."""
    if os.path.isdir(path):
        if glob.glob(os.path.join(path, "ev-*.bin")):
            return load_native(path)
        if glob.glob(os.path.join(path, "raw", "ev-*.bin")):
            return load_native(os.path.join(path, "raw"))
        pfw = sorted(glob.glob(os.path.join(path, "*.pfw")) + glob.glob(os.path.join(path, "*.pfw.gz")))
        if pfw:
            return load_pfw(pfw)
        raise DlioError(
            f"{path}: no trace here (no ev-*.bin of `dlio-fast profile`, no *.pfw of "
            "`dlio-fast run --trace`): give a capture folder, a run folder or a trace file"
        )
    if not os.path.exists(path):
        raise DlioError(f"{path}: no such file or folder: give a trace file or folder")
    if path.endswith((".pfw", ".pfw.gz")):
        return load_pfw([path])
    with open(path, errors="replace") as f:
        head = f.read(65536)
    if "# DXT," in head:
        return load_darshan(path)
    if any(_ST_LINE.match(x) for x in head.splitlines()[:50]):
        return load_strace(path)
    if head.lstrip().startswith("[") or head.lstrip().startswith("{"):
        return load_pfw([path])
    raise DlioError(
        f"{path}: not a trace this knows (interposer folder, .pfw, Darshan DXT text from "
        "darshan-dxt-parser, or strace -f -tt -T output)"
    )
