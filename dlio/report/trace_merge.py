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
import re
from typing import Any, Dict, Iterator, List, Optional, Tuple

from dlio.report.trace import CLOCK_META, GZIP_LEVEL, open_pfw, trace_path

MERGED_NAME = "trace-merged.json.gz"
TID_SPAN = 1 << 16  # a rank's tids (thread * TRACE_LANES + lane) stay below this
CHUNK_LINES = 8192  # lines per write to the compressor
HEADER_LINES = 8  # the clock_offset line is among a file's first lines (after "[" and process_name)


# An event line as the trace writers write it (dlio.report.trace, the C writer): its pid, tid and ts rewritten
# in place, without parsing the line (~10x faster than json); any other line is parsed
_FAST = re.compile(r'(\{"id":\d+,"name":"[^"\\]*","cat":"[^"\\]*",)"pid":\d+,"tid":(\d+),"ts":(\d+),')


def _lines(path: str) -> Iterator[str]:
    with open_pfw(path) as f:
        for line in f:
            line = line.strip().rstrip(",")
            if line and line not in ("[", "]"):
                yield line


def _events(path: str) -> Iterator[Dict[str, Any]]:
    return (json.loads(line) for line in _lines(path))


def clock_of(path: str) -> Optional[Dict[str, Any]]:
    """The clock_offset metadata of a rank's trace (host, offset_ns, rtt_ns), or None (a one-rank run)."""
    for i, ev in enumerate(_events(path)):
        if ev.get("ph") == "M" and ev.get("name") == CLOCK_META:
            args: Dict[str, Any] = ev["args"]
            return args
        if i >= HEADER_LINES:
            break
    return None


def _shifted(line: str, rank: int, pid: int, shift_us: int) -> Optional[str]:
    """One event line of rank `rank` as the merged file has it, or None for a line it replaces (process_name)."""
    m = _FAST.match(line)
    if m is not None:
        tid, ts = rank * TID_SPAN + int(m.group(2)), int(m.group(3)) + shift_us
        return f'{m.group(1)}"pid":{pid},"tid":{tid},"ts":{ts},{line[m.end() :]}'
    ev = json.loads(line)
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
    return json.dumps(ev, separators=(",", ":"))


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
    pids = {host: pid for pid, host in enumerate(hosts)}
    out = os.path.join(folder, out_name)
    n = 0
    with gzip.open(out, "wb", compresslevel=GZIP_LEVEL) as f:
        # the lines go to zlib in chunks (one write per line costs a compress call each)
        chunk = [json.dumps({"name": "process_name", "ph": "M", "pid": pids[h], "args": {"name": h}}) for h in hosts]
        for rank, path, clock in ranks:
            pid, shift_us = pids[clock["host"]], round(int(clock["offset_ns"]) / 1000)
            for line in _lines(path):
                merged = _shifted(line, rank, pid, shift_us)
                if merged is not None:
                    chunk.append(merged)
                    n += 1
                    if len(chunk) >= CHUNK_LINES:
                        f.write((("[\n" if f.tell() == 0 else ",\n") + ",\n".join(chunk)).encode())
                        chunk = []
        f.write((("[\n" if f.tell() == 0 else ",\n" if chunk else "") + ",\n".join(chunk) + "\n]\n").encode())
    return out, n, left_out
