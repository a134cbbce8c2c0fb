"""Traces -> one numpy structured array of file I/O events (EVENT_DTYPE) plus the file paths.

Sources: the interposer's folder (ev-*.bin + files-*.txt, see src/dlio_profile/interpose.c),
DFTracer / dlio-fast `.pfw` and `.pfw.gz` (JSON lines of Chrome trace events; a run folder of
`dlio-fast run --trace` holds trace-*.pfw), Darshan DXT text (darshan-dxt-parser), and
`strace -f -tt -T` logs. Times are ns on the source's clock, shifted so that the first event is 0.
"""

import glob
import json
import os
import re
from typing import Callable, Dict, Iterator, List, Optional, Tuple, cast

import numpy as np

from dlio.base.errors import DlioError
from dlio.profile.events import (
    EVENT_DTYPE,
    OP_CLOSE,
    OP_MMAP,
    OP_OPEN,
    OP_READ,
    OP_SCHED,
    OP_WRITE,
    SCHED_DTYPE,
    Trace,
    finish,
    read_lines,
    sorted_trace,
)
from dlio.profile.strace import load_strace, looks_like_strace
from dlio.profile.tracein import (
    CHUNK,
    LIMIT,
    MAX_EVENTS,
    Bad,
    EventChunks,
    Full,
    NameTable,
    TraceLines,
    as_int,
    as_real,
    ns,
    open_regular,
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


# ------------------------------------------------------------------------------------ interposer


def _names(path: str, names: NameTable) -> Tuple[Dict[int, int], Optional[str], List[str]]:
    """(id -> path index dict, parent process name or None) of one files-*.txt. The recorder
    writes it through a mapping in chunks: NUL padding between chunks is skipped, and a line cut
    by the job's death (no newline) is left out."""
    ids: Dict[int, int] = {}
    parent: Optional[str] = None
    stopped: List[str] = []
    with TraceLines(path, "dlio-fast profile capture", keep_unterminated=False) as lines:
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            if "\x00" in line:  # NUL padding of a chunk the recorder did not fill; or a line cut short
                line = line.rsplit("\x00", 1)[1]
            k, _, v = line.partition("\t")
            try:
                if k == "stopped":  # the recorder could not go on (a full disk): what came before is kept
                    stopped.append(f"{path}: the recorder stopped early in this process ({v[:200]})")
                elif k == "parent":
                    parent = v[:128]
                elif k.isdigit() and len(k) <= 10:
                    ids[int(k)] = names.get(v)
            except Bad as e:
                lines.malformed(str(e))
    return ids, parent, stopped + lines.notes()


def _native_chunks(path: str, notes: List[str]) -> Iterator[np.ndarray]:
    """The valid records of one ev-*.bin, CHUNK at a time. A record whose t is 0 was reserved
    but not written (the job died first, or the block was not filled): not a record."""
    recsz, bad = NATIVE_DTYPE.itemsize, 0
    with open_regular(path) as f:
        while True:
            buf = f.read(recsz * CHUNK)
            if len(buf) < recsz:
                break
            rec = np.frombuffer(buf[: len(buf) - len(buf) % recsz], NATIVE_DTYPE)
            rec = rec[rec["t"] != 0]
            ok = (rec["t"] < LIMIT) & (rec["op"] <= OP_SCHED) & (rec["dur"] < LIMIT)
            bad += int(len(ok) - ok.sum())
            yield rec[ok]
    if bad:
        notes.append(f"{path}: skipped {bad:,} records that are not the recorder's (a damaged capture?)")


def _native_sched(rec: np.ndarray) -> np.ndarray:
    """OP_SCHED records as SCHED_DTYPE: the thread sampled is the record's file; a thread samples
    itself (its pid is the record's) or the main thread of its fork tree's root (whose id is the
    root's pid). Counters that are not a scheduler's (negative) are left out."""
    s = np.zeros(len(rec), SCHED_DTYPE)
    s["t"], s["tid"], s["cpu"], s["wait"] = rec["t"], rec["file"], rec["off"], rec["req"]
    s["pid"] = np.where(rec["file"] == rec["tid"], rec["pid"], rec["file"])
    return s[(s["cpu"] >= 0) & (s["wait"] >= 0)]


def _native_events(rec: np.ndarray, gidx: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Interposer records as EVENT_DTYPE events; gidx(file ids) -> path indexes."""
    ev = np.zeros(len(rec), EVENT_DTYPE)
    ev["t"], ev["dur"] = rec["t"], rec["dur"]
    ev["pid"], ev["tid"], ev["op"] = rec["pid"], rec["tid"], rec["op"]
    ev["file"] = gidx(rec["file"])
    ev["offset"] = rec["off"]
    io = np.isin(rec["op"], (OP_READ, OP_WRITE, OP_MMAP))
    ev["size"] = np.where(io, np.where(rec["op"] == OP_MMAP, rec["req"], rec["ret"]), 0)
    ev["size"][io & (rec["ret"] < 0)] = -1  # failed call
    return ev


def load_native(folder: str, max_events: int = MAX_EVENTS) -> Trace:
    """Every process's records of an interposer folder, file ids resolved through fork parents."""
    bins = sorted(glob.glob(os.path.join(folder, "ev-*.bin")))
    table, names, notes = NameTable(), {}, []
    for p in glob.glob(os.path.join(folder, "files-*.txt")):
        ids, parent, n = _names(p, table)
        names[os.path.basename(p)[6:-4]] = (ids, parent)
        notes += n
    out = EventChunks(EVENT_DTYPE, max_events)
    sched: List[np.ndarray] = []
    for b in bins:
        proc, known = os.path.basename(b)[3:-4], cast(Dict[int, int], {})

        def path_index(fid: int) -> int:
            p: Optional[int] = None
            name: Optional[str] = proc
            hops = 0
            while p is None and name in names and hops < 64:
                ids, parent = names[name]
                p = ids.get(fid)
                name, hops = parent, hops + 1
            return p if p is not None else table.get(f"<fd id {fid}>")

        def gidx(files: np.ndarray) -> np.ndarray:
            uniq, inv = np.unique(files, return_inverse=True)
            # one lookup per distinct file id, not per event
            idx = np.array([known.setdefault(int(f), path_index(int(f))) for f in uniq], np.int32)
            return idx[inv]

        try:
            for rec in _native_chunks(b, notes):
                is_sched = rec["op"] == OP_SCHED
                sched.append(_native_sched(rec[is_sched]))
                out.add_array(_native_events(rec[~is_sched], gidx))
        except Full:
            notes.append(out.cap_note(folder))
            break
    # a process forked by a traced one (a DataLoader worker) names its parent; an exec'd one does not
    pids = {k.split("-")[0] for k, (_, parent) in names.items() if parent}
    forked = np.array(sorted(int(p) for p in pids if p.isdigit() and len(p) < 12), np.int64)
    tl = np.concatenate(sched) if sched else np.zeros(0, SCHED_DTYPE)
    return sorted_trace(out.array(), table.array(), "interposer", forked, notes, tl)


# ------------------------------------------------------------------------------------ .pfw


_PFW_OPS: dict = {}  # event name -> op (a trace has a few dozen names)


def _pfw_op(name: str) -> Optional[int]:
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


_JSON = json.JSONDecoder().raw_decode


def _pfw_event(line: bytes, names: NameTable, fh: dict, out: EventChunks) -> None:
    """One JSON line: an FH metadata line into fh, a POSIX/STDIO event into out; Bad if malformed."""
    try:
        text = line.decode("utf-8", "replace")
        e, end = _JSON(text)
    except (ValueError, RecursionError):
        raise Bad("not a JSON object")
    if end != len(text):
        raise Bad("more than one JSON value")
    if not isinstance(e, dict):
        raise Bad("not a JSON object")
    args = e.get("args") or {}
    if not isinstance(args, dict):
        raise Bad("args is not an object")
    if e.get("ph") == "M":
        if e.get("name") == "FH":
            h, n = args.get("value"), args.get("name")
            if not isinstance(h, (int, str)) or not isinstance(n, str) or len(str(h)) > 64:
                raise Bad("an FH line without a name and a value")
            names.charge(n)
            fh[h] = n
        return
    if e.get("cat") not in ("POSIX", "STDIO"):
        return
    name = e.get("name", "")
    if not isinstance(name, str):
        raise Bad("name is not a string")
    op = _PFW_OPS.get(name, -1)
    if op == -1:
        op = _pfw_op(name)
        if len(_PFW_OPS) < 4096:  # names are few; a hostile trace's many are not kept
            _PFW_OPS[name] = op
    if op is None:
        return
    fname = args.get("fname")
    if fname is None:
        h = args.get("fhash")
        fname = fh.get(h, "<unknown>") if isinstance(h, (int, str)) else "<unknown>"
    if not isinstance(fname, str):
        raise Bad("fname is not a string")
    ret = args.get("ret", args.get("size", 0))
    size = -1 if ret is None else as_int(ret, -LIMIT, LIMIT)
    size = 0 if op in (OP_OPEN, OP_CLOSE) else max(size, -1)
    out.add(
        (
            ns(e.get("ts", 0), 1000),  # microseconds
            ns(e.get("dur", 0), 1000),
            as_int(e.get("pid", 0), -LIMIT, LIMIT),
            as_int(e.get("tid", 0), -LIMIT, LIMIT),
            op,
            names.get(fname),
            max(as_int(args.get("offset", -1), -LIMIT, LIMIT), -1),
            size,
        )
    )


def load_pfw(paths: List[str], max_events: int = MAX_EVENTS) -> Trace:
    """POSIX events of DFTracer / dlio-fast .pfw files (file names from args.fname, or the FH
    metadata lines that map args.fhash to a name). Other categories (sample, fetch, compute) are
    the emulator's own spans and are left out."""
    out, names, notes = EventChunks(EVENT_DTYPE, max_events), NameTable(), []
    fh: Dict[str, int] = {}

    def event(line: bytes) -> None:
        line = line.strip().rstrip(b",")
        if line.startswith(b"{"):
            _pfw_event(line, names, fh, out)

    for path in paths:
        if out.full:
            notes.append(out.cap_note(path))
            break
        read_lines(path, "DFTracer .pfw", out, notes, event)
    return finish(out, names, "pfw", notes)


# ------------------------------------------------------------------------------------ Darshan DXT

_DXT_FILE = re.compile(r"^# DXT, file_id: \S+, file_name: (.*)$")
_DXT_ROW = re.compile(r"^\s*X_(POSIX|MPIIO)\s+(\S+)\s+(read|write)\s+\S+\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)")


def load_darshan(path: str, max_events: int = MAX_EVENTS) -> Trace:
    """darshan-dxt-parser text: '# DXT, file_name:' headers, then rows
    'X_POSIX rank read|write segment offset length start end [ost...]' (seconds). Darshan has no
    thread ids: the rank is the pid and the tid. MPI-IO rows duplicate POSIX ones: only POSIX kept."""
    out, names = EventChunks(EVENT_DTYPE, max_events), NameTable()
    notes: List[str] = []
    fi = -1

    def event(raw: bytes) -> None:
        nonlocal fi
        line = raw.decode("utf-8", "replace")
        m = _DXT_FILE.match(line)
        if m:
            fi = names.get(m.group(1).strip())
            return
        if not line.lstrip().startswith("X_"):
            return
        m = _DXT_ROW.match(line)
        if not m:
            raise Bad("not a DXT row (module rank read|write segment offset length start end)")
        if m.group(1) != "POSIX" or fi < 0:
            return
        t0, t1 = as_real(m.group(6), 0.0, LIMIT / 1e9), as_real(m.group(7), 0.0, LIMIT / 1e9)
        rank = as_int(m.group(2))
        out.add(
            (
                int(t0 * 1e9),
                int(max(t1 - t0, 0.0) * 1e9),
                rank,
                rank,
                OP_READ if m.group(3) == "read" else OP_WRITE,
                fi,
                as_int(m.group(4)),
                as_int(m.group(5)),
            )
        )

    read_lines(path, "Darshan DXT", out, notes, event)
    return finish(out, names, "darshan", notes)


# ------------------------------------------------------------------------------------ dispatch


def _head(path: str) -> str:
    """The first 64 KiB of a trace file's (decompressed) text, to tell its kind."""
    with TraceLines(path, "trace", max_bytes=1 << 16) as lines:
        return "\n".join(x.decode("utf-8", "replace") for x in lines)


def load_trace(path: str, max_events: int = MAX_EVENTS) -> Trace:
    """Any supported trace: an interposer folder, a run folder or a .pfw[.gz] file, a Darshan
    DXT text file, or an strace log (told apart by content); at most max_events events (the
    trace's notes say so when it had more)."""
    if os.path.isdir(path):
        if glob.glob(os.path.join(path, "ev-*.bin")):
            return load_native(path, max_events)
        if glob.glob(os.path.join(path, "raw", "ev-*.bin")):
            return load_native(os.path.join(path, "raw"), max_events)
        pfw = sorted(glob.glob(os.path.join(path, "*.pfw")) + glob.glob(os.path.join(path, "*.pfw.gz")))
        if pfw:
            return load_pfw(pfw, max_events)
        raise DlioError(
            f"{path}: no trace here (no ev-*.bin of `dlio-fast profile`, no *.pfw of "
            "`dlio-fast run --trace`): give a capture folder, a run folder or a trace file"
        )
    if not os.path.lexists(path):
        raise DlioError(f"{path}: no such file or folder: give a trace file or folder")
    if path.endswith((".pfw", ".pfw.gz")):
        return load_pfw([path], max_events)
    head = _head(path)
    if "# DXT," in head:
        return load_darshan(path, max_events)
    if looks_like_strace(head):
        return load_strace(path, max_events)
    if head.lstrip().startswith("[") or head.lstrip().startswith("{"):
        return load_pfw([path], max_events)
    raise DlioError(
        f"{path}: not a trace this knows (interposer folder, .pfw, Darshan DXT text from "
        "darshan-dxt-parser, or strace -f -tt -T output)"
    )
