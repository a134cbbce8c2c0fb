#!/usr/bin/env python3
"""The harness's own cost per I/O: the null engine (no I/O) at qd 1, timestamps included.

Goal (issue 2): under 100 ns per request. Prints ns per request for 1 and 2 threads and for
the io_uring-shaped path (qd 32 on the null engine), plus the cost of one clock read.
Usage: python bench/null_engine.py [--seconds 2]
"""

import argparse

import numpy as np

from dlio import _core


def ns_per_op(threads, qd, seconds):
    ops = np.zeros(4096, dtype=_core.OP_DTYPE)
    ops["length"] = 4096
    ops["offset"] = np.arange(4096, dtype=np.uint64) * 4096
    first = np.linspace(0, len(ops), threads + 1).astype(np.uint64)
    run = _core.Run(
        "io",
        "null",
        ["(null engine: no file)"],
        ops,
        threads=threads,
        qd=qd,
        thread_first_op=first,
        runtime_ns=int(seconds * 1e9),
        loop=True,
    )
    res = run.execute()
    window = res["t_end"] - res["t_start"]
    # per thread: each thread issues ops/threads requests in the window
    return window * threads / res["ops"], res["ops"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    print(f"clock: {_core.timer_source()}, {_core.timer_overhead_ns(2_000_000):.1f} ns per read")
    print(f"{'threads':>7} {'qd':>4} {'ns/request (best of %d)' % a.repeats:>26} {'requests':>12}  goal")
    for threads, qd in ((1, 1), (2, 1), (1, 32)):
        best = min(ns_per_op(threads, qd, a.seconds) for _ in range(a.repeats))
        verdict = ("ok" if best[0] < 100 else "MISSED") if (threads, qd) == (1, 1) else ""
        print(f"{threads:>7} {qd:>4} {best[0]:>26.1f} {best[1]:>12}  {'< 100 ns ' + verdict if verdict else ''}")


if __name__ == "__main__":
    main()
