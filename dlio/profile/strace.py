"""`strace -f -tt -T` logs -> a Trace (dlio.profile.events): opens, reads, writes and maps per (pid, tid),
descriptors followed through dup / dup2 / dup3 / fcntl(F_DUPFD*) (a copy shares the original's position, as
in the kernel)."""

import re
from typing import Any, Dict, List, Optional, Tuple

from dlio.profile.events import EVENT_DTYPE, OP_CLOSE, OP_MMAP, OP_OPEN, OP_READ, OP_WRITE, Trace, finish, read_lines
from dlio.profile.tracein import LIMIT, MAX_EVENTS, Bad, EventChunks, NameTable, as_int, as_real, ns

_ST_LINE = re.compile(r"^(?:\[pid\s+(\d+)\]\s*|(\d+)\s+)?(\d+):(\d+):(\d+(?:\.\d+)?)\s+(.*)$")
_ST_CALL = re.compile(r"^(\w+)\((.*)\)\s+=\s+(-?\d+|0x[0-9a-f]+|\?)(?:\s+(\w+))?.*?(?:<([\d.]+)>)?\s*$")
_ST_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")
_ST_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"(?:\.\.\.)?')
_ST_NESTED = re.compile(r"\[[^\[\]]*\]|\{[^{}]*\}")
_ST_DUPS = ("dup", "dup2", "dup3")
_ST_DUPFD = ("F_DUPFD", "F_DUPFD_CLOEXEC")
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


def _strace_args(args: str) -> Tuple[Optional[str], List[str]]:
    """(first quoted string, list of the comma-separated arguments with strings and arrays blanked)."""
    q = _ST_QUOTED.search(args)
    s = _ST_QUOTED.sub('""', args)
    for _ in range(4):
        s2 = _ST_NESTED.sub("[]", s)
        if s2 == s:
            break
        s = s2
    return (q.group(0).split('"')[1] if q else None), [a.strip() for a in s.split(",")]


def _arg_int(a: str) -> int:
    """An integer argument of a call (decimal or 0x hex), checked."""
    if len(a) > 24 or not re.match(r"^(0x[0-9a-f]+|-?\d+)$", a):
        raise Bad(f"{a[:30]!r} is not an integer argument")
    return as_int(int(a, 0), -LIMIT, LIMIT)


class _StraceState:
    """fd -> (file index, position) per pid, with a fallback on the fd alone: strace -f names
    threads by their own ids, and threads share their process's descriptors."""

    def __init__(self, out: EventChunks):
        self.fds: Dict[Tuple[int, int], Any] = {}
        self.any_fd: Dict[int, Any] = {}
        self.names, self.out = NameTable(), out

    def lookup(self, pid: int, fd: int) -> Any:
        return self.fds.get((pid, fd)) or self.any_fd.get(fd)

    def set(self, pid: int, fd: int, entry: Any) -> None:
        self.fds[(pid, fd)] = entry
        self.any_fd[fd] = entry

    def call(self, pid: int, t: int, name: str, args: str, ret: int, dur: int) -> None:
        if name in _ST_OPENS:
            path, _ = _strace_args(args)
            if path is None or ret < 0:
                return
            fi = self.names.get(path)
            self.out.add((t, dur, pid, pid, OP_OPEN, fi, 0, 0))
            self.set(pid, ret, [fi, 0])
            return
        _, a = _strace_args(args)
        if not a or not a[0].lstrip("-").isdigit():
            return self._mmap(pid, t, name, a, ret, dur) if name in ("mmap", "mmap2") else None
        fd = _arg_int(a[0])
        ent = self.lookup(pid, fd)
        if name in _ST_DUPS or (name in ("fcntl", "fcntl64") and len(a) > 1 and a[1] in _ST_DUPFD):
            # a duplicate shares the file and its position (one open file description): np.load
            # reads a .npy through os.dup's fcntl(F_DUPFD_CLOEXEC) and a FILE*
            if ret >= 0 and ret != fd:
                if ent is None:
                    self.fds.pop((pid, ret), None)
                    self.any_fd.pop(ret, None)
                else:
                    self.set(pid, ret, ent)
            return
        if ent is None:
            return
        if name == "close":
            self.out.add((t, dur, pid, pid, OP_CLOSE, ent[0], -1, 0))
            self.fds.pop((pid, fd), None)
            self.any_fd.pop(fd, None)
        elif name in ("lseek", "_llseek") and ret >= 0:
            ent[1] = ret
        elif name in _ST_IO:
            op, off_arg = _ST_IO[name]
            if off_arg is not None and len(a) > off_arg and a[off_arg].isdigit():
                off = as_int(_arg_int(a[off_arg]))
            else:
                off = ent[1]
                ent[1] = min(ent[1] + max(ret, 0), LIMIT)
            self.out.add((t, dur, pid, pid, op, ent[0], off, ret if ret >= 0 else -1))

    def _mmap(self, pid: int, t: int, name: str, a: List[str], ret: int, dur: int) -> None:
        if len(a) >= 6 and a[4].lstrip("-").isdigit():
            ent = self.lookup(pid, _arg_int(a[4]))
            if ent is not None and a[1].isdigit():
                off = max(_arg_int(a[5]), 0) if re.match(r"^(0x[0-9a-f]+|\d+)$", a[5]) else 0
                self.out.add((t, dur, pid, pid, OP_MMAP, ent[0], off, as_int(_arg_int(a[1]))))


_ST_MAX_PENDING = 1 << 16  # calls left unfinished at once (one per thread)


def load_strace(path: str, max_events: int = MAX_EVENTS) -> Trace:
    """`strace -f -tt -T [-o FILE]` output: `PID HH:MM:SS.us call(args) = ret <secs>` lines
    (or `[pid N]` prefixes, or no pid before the first fork), with `<unfinished ...>` /
    `<... call resumed>` pairs joined. Offsets of read/write follow open/lseek per descriptor."""
    out = EventChunks(EVENT_DTYPE, max_events)
    notes: List[str] = []
    pending: Dict[int, Tuple[int, str]] = {}
    st = _StraceState(out)

    def event(raw: bytes) -> None:
        m = _ST_LINE.match(raw.decode("utf-8", "replace").rstrip("\r"))
        if not m:
            return
        pid = as_int(m.group(1) or m.group(2) or 0)
        day = as_int(m.group(3), 0, 10**6) * 3600 + as_int(m.group(4), 0, 10**6) * 60
        t = ns(day + as_real(m.group(5), 0.0, 10.0**9), 1e9)
        body = m.group(6)
        if body.endswith("<unfinished ...>"):
            if len(pending) >= _ST_MAX_PENDING and pid not in pending:
                raise Bad(f"more than {_ST_MAX_PENDING} calls unfinished at once")
            pending[pid] = (t, body[: -len("<unfinished ...>")].rstrip()[:65536])
            return
        r = _ST_RESUMED.match(body)
        if r:
            if pid not in pending:
                return
            t, head = pending.pop(pid)
            body = head + r.group(2)
        c = _ST_CALL.match(body)
        if not c or c.group(3) == "?":
            return
        ret = _arg_int(c.group(3))
        dur = ns(c.group(5), 1e9) if c.group(5) else 0
        st.call(pid, t, c.group(1), c.group(2), ret, dur)

    read_lines(path, "strace", out, notes, event)
    return finish(out, st.names, "strace", notes)


def looks_like_strace(head: str) -> bool:
    """Whether a file's first lines are strace -f -tt output."""
    return any(_ST_LINE.match(x) for x in head.splitlines()[:50])
