#!/usr/bin/env python3
"""Peak memory and time of reading a large valid DFTracer trace (`dlio-fast profile --trace`).

Writes a .pfw.gz of --events POSIX read events (DFTracer's line shape: 3 processes x 4 threads,
1,000 files, about 190 bytes a line) into --dir, then loads it in a fresh child process and
reports the child's peak RSS (ru_maxrss) and wall time of load_trace alone and of load_trace +
the inference (`profile`'s analysis), next to the events' own size. Goal: peak RSS within 2x the
events' array plus 200 MB (the reader gathers numpy chunks, never a Python object per event)
and no more than --max-rss-gb; the time is reported (JSON parsing is per line in Python).
Usage: python bench/profile_trace_memory.py [--events 12000000] [--dir /tmp] [--max-rss-gb 3]
"""

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import json, resource, sys, time
from dlio.profile.parsers import load_trace
t0 = time.perf_counter()
tr = load_trace(sys.argv[1], int(sys.argv[2]))
t1 = time.perf_counter()
out = {"events": len(tr.events), "bytes": int(tr.events.nbytes), "load_s": t1 - t0,
       "load_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "notes": tr.notes}
if sys.argv[3] == "infer":
    from dlio.profile import analyze
    analyze.infer(tr)
    out["infer_s"] = time.perf_counter() - t1
out["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(out))
"""


def write_trace(path: str, n: int) -> None:
    """n read events, 1 ms apart per thread, in blocks of lines built with one format per line."""
    line = (
        '{{"id":{i},"name":"read","cat":"POSIX","pid":{p},"tid":{t},"ts":{ts},"dur":40,"ph":"X",'
        '"args":{{"fname":"/data/train/img_{f:05d}.npz","ret":131072,"offset":{o},"level":1}}}},\n'
    )
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write("[\n")
        block = 100_000
        for s in range(0, n, block):
            f.write(
                "".join(
                    line.format(i=i, p=100 + i % 3, t=1000 + i % 12, ts=10 * i, f=i % 1000, o=(i // 1000) % 8 * 131072)
                    for i in range(s, min(n, s + block))
                )
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=12_000_000)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--max-rss-gb", type=float, default=3.0)
    ap.add_argument("--infer", action="store_true", help="also run profile's inference on the events")
    a = ap.parse_args()
    path = os.path.join(a.dir, f"dlio-bench-{os.getpid()}.pfw.gz")
    try:
        t0 = time.perf_counter()
        write_trace(path, a.events)
        mib = os.path.getsize(path) / 2**20
        print(f"wrote {a.events:,} events: {mib:,.0f} MiB gz in {time.perf_counter() - t0:.0f} s")
        args = [path, str(max(a.events, 20_000_000)), "infer" if a.infer else "load"]
        r = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True)
        if r.returncode:
            print(r.stderr)
            return 1
        out = json.loads(r.stdout)
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert out["events"] == a.events, out
        goal = 2 * out["bytes"] + (200 << 20)
        print(f"events array      {out['bytes'] / 2**20:,.0f} MiB ({out['bytes'] / a.events:.0f} B/event)")
        print(f"load_trace        {out['load_s']:.1f} s, peak RSS {out['load_rss'] / 2**20:,.0f} MiB")
        if a.infer:
            print(f"+ inference       {out['infer_s']:.1f} s, peak RSS {out['rss'] / 2**20:,.0f} MiB")
        ok = out["load_rss"] <= goal and out["load_rss"] <= a.max_rss_gb * 2**30
        print(
            f"goal: load peak RSS <= {goal / 2**20:,.0f} MiB and <= {a.max_rss_gb} GiB: {'ok' if ok else 'MISSED'}"
            f" (the bench's own RSS {own / 1024:,.0f} MiB)"
        )
        return 0 if ok else 1
    finally:
        if os.path.exists(path):
            os.unlink(path)


if __name__ == "__main__":
    sys.exit(main())
