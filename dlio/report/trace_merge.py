"""The per-rank traces of a run (trace-R-of-N.pfw.gz, DLIO's format, kept as they are) merged onto one timeline:
`trace-merged.json.gz` in the output folder, written by rank 0 after a traced run of many ranks.

Chrome / Perfetto trace-event format: one process per host (named after it), one thread per rank and thread
(tid = rank * TID_SPAN + the rank's tid, named "rank R: trainer"), and every event's ts shifted by its rank's
clock offset against rank 0 (the clock_offset line of its file: dlio.system.clock_offset), so that events of
different hosts taken at one instant have one ts. The file is one JSON document (a list of events, one a line,
commas between them): json.load reads it, and so does dlio.report.trace.read_pfw, line by line.

It streams: one event at a time from each rank's file to the merged one (events need no order in this format),
so a run of many ranks and events never holds them in memory; the first pass reads only each file's first lines.
"""

import gzip
import json
import os
from typing import Any, Dict, Iterator, List, Optional, Tuple

from dlio.report.trace import CLOCK_META, GZIP_LEVEL, open_pfw, trace_path

MERGED_NAME = "trace-merged.json.gz"
TID_SPAN = 1 << 16  # a rank's tids (thread * TRACE_LANES + lane) stay below this
HEADER_LINES = 8  # the clock_offset line is among a file's first lines (after "[" and process_name)


def _events(path: str) -> Iterator[Dict[str, Any]]:
    with open_pfw(path) as f:
        for line in f:
            line = line.strip()
            if line and line not in ("[", "]"):
                yield json.loads(line.rstrip(","))


def clock_of(path: str) -> Optional[Dict[str, Any]]:
    """The clock_offset metadata of a rank's trace (host, offset_ns, rtt_ns), or None (a one-rank run)."""
    for i, ev in enumerate(_events(path)):
        if ev.get("ph") == "M" and ev.get("name") == CLOCK_META:
            args: Dict[str, Any] = ev["args"]
            return args
        if i >= HEADER_LINES:
            break
    return None


def _shifted(ev: Dict[str, Any], rank: int, pid: int, shift_us: int) -> Optional[Dict[str, Any]]:
    """One event of rank `rank` as the merged file has it, or None for a line it replaces (process_name)."""
    name = ev.get("name")
    if ev.get("ph") == "M":
        if name == "process_name":
            return None  # the merged file names the hosts
        if name == "thread_name":
            ev["args"] = {"name": f"rank {rank}: {ev['args']['name']}"}
    if "ts" in ev:
        ev["ts"] = ev["ts"] + shift_us
    ev["pid"] = pid
    ev["tid"] = rank * TID_SPAN + int(ev.get("tid", 0))
    return ev


def merge(folder: str, size: int, out_name: str = MERGED_NAME) -> Tuple[str, int, List[str]]:
    """Merge the traces of ranks 0..size-1 in folder into folder/out_name: (its path, its events, the ranks'
    files that were missing or had no clock offset, left out)."""
    ranks: List[Tuple[int, str, Dict[str, Any]]] = []
    left_out: List[str] = []
    for rank in range(size):
        path = trace_path(folder, rank, size)
        clock = clock_of(path) if os.path.exists(path) else None
        if clock is None:
            left_out.append(os.path.basename(path))
        else:
            ranks.append((rank, path, clock))
    hosts = list(dict.fromkeys(c["host"] for _, _, c in ranks))  # in rank order: rank 0's host is pid 0
    out = os.path.join(folder, out_name)
    n = 0
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=GZIP_LEVEL) as f:
        f.write("[\n")
        sep = ""
        for pid, host in enumerate(hosts):
            f.write(sep + json.dumps({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": host}}))
            sep = ",\n"
        for rank, path, clock in ranks:
            pid, shift_us = hosts.index(clock["host"]), round(int(clock["offset_ns"]) / 1000)
            for ev in _events(path):
                merged = _shifted(ev, rank, pid, shift_us)
                if merged is not None:
                    f.write(sep + json.dumps(merged, separators=(",", ":")))
                    n += 1
        f.write("\n]\n")
    return out, n, left_out
