"""What every trace reader makes: file I/O events (EVENT_DTYPE, one numpy structured array) with the
file paths and the scheduler samples, as a Trace (dlio.profile.parsers reads the sources; strace.py
reads strace logs)."""

from dataclasses import dataclass, field
from typing import Callable, List, Optional

import numpy as np

from dlio.profile.tracein import Bad, EventChunks, Full, NameTable, TraceLines, sort_by_time

OP_OPEN, OP_CLOSE, OP_READ, OP_WRITE, OP_MMAP, OP_SCHED = 0, 1, 2, 3, 4, 5
# A thread's scheduler counters at a moment (the interposer's OP_SCHED records, timeline.py): ns on
# a CPU, ns runnable but waiting for one (another process had it), time slices.
SCHED_DTYPE = np.dtype([("t", "<i8"), ("pid", "<i8"), ("tid", "<i8"), ("cpu", "<i8"), ("wait", "<i8")])
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


@dataclass
class Trace:
    events: np.ndarray  # EVENT_DTYPE, sorted by t; size = bytes done (mmap: length); file -1: none
    paths: np.ndarray  # str, indexed by events["file"]
    source: str  # "interposer", "pfw", "darshan", "strace"
    forked: Optional[np.ndarray] = None  # pids forked from a traced process (interposer only; None: unknown)
    notes: List[str] = field(default_factory=list)  # lines skipped, caps reached: said with the results
    sched: Optional[np.ndarray] = None  # SCHED_DTYPE by t, on the events' clock (interposer only; None: none)


def finish(out: EventChunks, names: NameTable, source: str, notes: List[str]) -> Trace:
    return sorted_trace(out.array(), names.array(), source, notes=notes)


def sorted_trace(
    ev: np.ndarray,
    paths: np.ndarray,
    source: str,
    forked: Optional[np.ndarray] = None,
    notes: Optional[List[str]] = None,
    sched: Optional[np.ndarray] = None,
) -> Trace:
    ev = sort_by_time(ev)
    if len(ev):
        if sched is not None:
            sched = sched[np.argsort(sched["t"], kind="stable")]
            sched["t"] -= ev["t"][0]
        ev["t"] -= ev["t"][0]
    return Trace(ev, paths, source, forked, notes or [], sched)


def read_lines(path: str, kind: str, out: EventChunks, notes: List[str], event: Callable[[bytes], None]) -> None:
    """Each line of a trace file to ``event``, which adds its events to ``out``: a line it raises Bad on
    is counted as malformed, and the file ends at the event cap (a note says so). The file's notes go
    to ``notes``."""
    with TraceLines(path, kind) as lines:
        for line in lines:
            try:
                event(line)
            except Bad as e:
                lines.malformed(str(e))
            except Full:
                notes.append(out.cap_note(path))
                break
        notes += lines.notes()
