"""dlio-fast's vector search against real DiskANN (diskannpy) on the same device, side by side, paired repeats.

Both search an index of the same shape (N x 1536-d, R, built by diskannpy for the real one and written by
dlio-fast for the emulation, in folders on the same filesystem), at the same L, W and thread count, with no node
cache, O_DIRECT:

  serial   one query at a time on one thread: QPS, latency p50 / p99 (real: index.search() timed per query);
  threads  T queries in flight: real batch_search(num_threads=T) QPS; dlio-fast with T query processes x batch 1
           and T search threads: QPS and p99.

For each: device reads/s and bytes/s (/proc/diskstats of the index's device, around the search only), reads per
query, and the client CPU per query (the searching process's user + system time / queries). The emulation's
device reads/s should be >= the real index's and its CPU per query well below: it spends CPU only on issuing reads
(plus vdb.cpu_per_hop_us; none here: vdb.storage_only), where DiskANN computes distances; the real CPU per hop is
printed as a value for vdb.cpu_per_hop_us.

Both indexes are built once, before the repeats (diskannpy's by bench/vdb_capture.py, kept when its parameters
match; dlio-fast's by an untimed one-query run, kept by every later run). The real index is loaded once, in one
diskannpy process that searches on demand. Each of --repeats repeats (5 by default) runs, for each mode, both
sides back to back, alternating who goes first (real first in runs 1, 3, 5..., dlio-fast in 2, 4...), and
gives one ratio per verdict: emulated / real device reads/s (goal >= 1) and emulated / real user CPU per query
(goal < 0.5). The verdicts are the medians of these per-repeat ratios, printed with the pairs' spread (min-max,
IQR); the table shows each figure's median over the repeats. --quick: 250 queries (50 serial), the same pairs.

    python bench/vdb_vs_diskann.py --python /tmp/dkvenv/bin/python [--vectors 10000 --search-list 100 \\
        --beam-width 8 --threads 2 --queries 1000] [--repeats 5] [--quick] [--out result.json]

--out writes the median rows ("rows"), the real side's median raw figures ("real"), every repeat's rows and raw
real figures ("repeats") and each verdict's ratios, median and spread ("verdicts").

The machine should be quiet: another process on the disk or the CPUs changes both sides (the spread says how much).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from paired import Paired, add_repeat_args, warn_few  # noqa: E402

MODES = ("serial", "threads")


def child(a):
    """Under the diskannpy interpreter: load, wait for "go" on stdin, search, print the figures."""
    import diskannpy as dap
    import numpy as np

    idx = dap.StaticDiskIndex(
        a["folder"],
        num_threads=max(2, a["threads"]),
        num_nodes_to_cache=0,
        cache_mechanism=1,
        distance_metric="l2",
        vector_dtype=np.float32,
        dimensions=a["dimension"],
        index_prefix="ann",
    )
    rng = np.random.default_rng(3)
    q = rng.random((a["queries"], a["dimension"]), dtype=np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    while True:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        mode = sys.stdin.readline().strip()
        if mode not in MODES:  # "quit" or the parent gone
            return
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        lat = []
        if mode == "serial":
            for i in range(a["serial_queries"]):
                s = time.monotonic()
                idx.search(q[i], 10, a["search_list"], a["beam_width"])
                lat.append(time.monotonic() - s)
            n = a["serial_queries"]
        else:
            idx.batch_search(q, 10, a["search_list"], a["threads"], a["beam_width"])
            n = a["queries"]
        wall = time.monotonic() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        user, cpu = r1.ru_utime - r0.ru_utime, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        out = {
            "queries": n,
            "seconds": wall,
            "qps": n / wall,
            "cpu_s": cpu,
            "user_s": user,
            "p50_ms": float(np.percentile(lat, 50) * 1e3) if lat else None,
            "p99_ms": float(np.percentile(lat, 99) * 1e3) if lat else None,
        }
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


class Real:
    """The real index, loaded once in a diskannpy process that searches one mode on demand; each search is
    bracketed by the device counters."""

    def __init__(self, args, folder, counters_of):
        a = {
            "folder": folder,
            "dimension": args.dimension,
            "queries": args.queries,
            "serial_queries": args.serial,
            "search_list": args.search_list,
            "beam_width": args.beam_width,
            "threads": args.threads,
        }
        self.counters_of = counters_of
        self.p = subprocess.Popen(
            [args.python, __file__, "--child", json.dumps(a)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def _line(self, want):
        """The child's next line that `want` accepts (anything else diskannpy prints is skipped)."""
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError(f"the diskannpy process ended (exit {self.p.wait()})")
            if want(line.strip()):
                return line.strip()

    def search(self, mode):
        self._line(lambda x: x == "ready")  # loaded, or done with the previous search
        b = self.counters_of()
        self.p.stdin.write(mode + "\n")
        self.p.stdin.flush()
        res = json.loads(self._line(lambda x: x.startswith("{")))
        e = self.counters_of()
        res["device_reads"] = e["read_ios"] - b["read_ios"]
        res["device_bytes"] = e["read_bytes"] - b["read_bytes"]
        return res

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait()


def emulated(args, folder, mode, tag, queries=None):
    """dlio-fast's run of the same shape (the CLI, as a user runs it), its dlio-fast.json: (the timed run, whether
    the index was kept, not built)."""
    threads = 1 if mode == "serial" else args.threads
    out = os.path.join(folder, f"out-{mode}-{tag}")
    shutil.rmtree(out, ignore_errors=True)  # each run its own output folder
    if queries is None:
        queries = args.serial if mode == "serial" else args.queries
    sets = {
        "vdb.vectors": args.vectors,
        "vdb.dimension": args.dimension,
        "vdb.max_degree": args.degree,
        "vdb.search_list": args.search_list,
        "vdb.beam_width": args.beam_width,
        "vdb.segments": 1,
        "vdb.cache_ratio": 0,
        "vdb.processes": threads,
        "vdb.batch": 1,
        "vdb.search_threads": threads,
        "vdb.storage_only": True,  # no CPU per hop: the emulation's own cost, against which DiskANN's is measured
        "vdb.queries": queries,
        "vdb.runs": 1,
        "vdb.index_folder": folder,
        "dlio_fast.engine": "io_uring",
    }
    cmd = [sys.executable, "-m", "dlio", "-q", "run", "-w", "vdb_diskann_1m", "-o", out]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "dlio-fast.json")) as f:
        doc = json.load(f)
    shutil.rmtree(out, ignore_errors=True)
    return doc["runs"][0], bool((doc.get("build") or {}).get("kept"))


def row(args, mode, rr, ee):
    """One mode's figures of one repeat, both sides."""
    c = ee["counters"]
    q = ee["queries"]
    return {
        "mode": mode,
        "threads": 1 if mode == "serial" else args.threads,
        "real_qps": rr["qps"],
        "emulated_qps": ee["throughput_qps"],
        "real_p99_ms": rr["p99_ms"],
        "emulated_p99_ms": ee["query_completion_p99_ms"],
        "real_device_reads_per_s": rr["device_reads"] / rr["seconds"],
        "emulated_device_reads_per_s": (c["device_ios"] or 0) / c["wall_s"],
        "real_reads_per_query": rr["device_reads"] / rr["queries"],
        "emulated_reads_per_query": ee["reads_per_query"],
        "real_cpu_ms_per_query": rr["cpu_s"] / rr["queries"] * 1e3,
        "emulated_cpu_ms_per_query": (c["cpu_user_s"] + c["cpu_sys_s"]) / q * 1e3,
        "real_user_ms_per_query": rr["user_s"] / rr["queries"] * 1e3,
        "emulated_user_ms_per_query": c["cpu_user_s"] / q * 1e3,
        "emulated_hops_per_query": ee["hops_per_query"],
    }


def medians(dicts):
    """Each numeric key's median over the repeats (None where a repeat has none); other keys from the first."""
    out = {}
    for k, v in dicts[0].items():
        vals = [d[k] for d in dicts]
        if all(x == v for x in vals):  # the same in every repeat (mode, threads, queries...)
            out[k] = v
        elif all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vals):
            out[k] = statistics.median(vals)
        else:
            out[k] = None
    return out


def ratios(num, den):
    return Paired(n / d if d else float("inf") for n, d in zip(num, den))


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(json.loads(sys.argv[2]))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python", default=sys.executable, help="an interpreter with diskannpy")
    p.add_argument("--workdir", default="/tmp/vdb-vs-diskann")
    p.add_argument("--vectors", type=int, default=10000)
    p.add_argument("--dimension", type=int, default=1536)
    p.add_argument("--degree", type=int, default=32)
    p.add_argument("--search-list", type=int, default=100)
    p.add_argument("--beam-width", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--queries", type=int, default=None, help="queries of the threads phase (1000; --quick: 250)")
    p.add_argument("--serial", type=int, default=None, help="queries of the serial phase (200; --quick: 50)")
    add_repeat_args(p)
    p.add_argument("--out")
    args = p.parse_args()
    if args.queries is None:
        args.queries = 250 if args.quick else 1000
    if args.serial is None:
        args.serial = 50 if args.quick else 200
    if args.repeats < 1:
        sys.exit("--repeats must be >= 1")
    sys.path.insert(0, os.path.dirname(HERE))
    from vdb_capture import build

    from dlio.system import counters

    warn_few(args.repeats)
    real_folder = os.path.join(args.workdir, "diskann")
    emu_folder = os.path.join(args.workdir, "emulated")
    cap = argparse.Namespace(
        vectors=args.vectors, dimension=args.dimension, degree=args.degree, build_list=64, pq_bytes=32
    )
    build(args.python, cap, real_folder)
    tgt = counters.resolve(real_folder)
    if tgt.kind != "block":
        sys.exit(f"{real_folder}: {tgt.why or 'no block device'}: device reads cannot be counted here")
    emulated(args, emu_folder, "serial", "build", queries=1)  # builds dlio-fast's index (or keeps it): untimed

    def dev():
        return counters.snapshot(tgt)["dev"]

    reps = []
    real = Real(args, real_folder, dev)
    try:
        for i in range(args.repeats):
            first = "real" if i % 2 == 0 else "emulated"  # alternate who goes first
            rr, ee = {}, {}
            for mode in MODES:
                for side in ("real", "emulated") if first == "real" else ("emulated", "real"):
                    if side == "real":
                        rr[mode] = real.search(mode)
                    else:
                        ee[mode], kept = emulated(args, emu_folder, mode, i)
                        if not kept:
                            sys.exit("dlio-fast built its index again inside a repeat: the figures are not comparable")
            rows_i = [row(args, m, rr[m], ee[m]) for m in MODES]
            reps.append({"repeat": i + 1, "first": first, "rows": rows_i, "real": rr})
            print(
                f"  run {i + 1} ({first} first): "
                + "; ".join(
                    f"{x['mode']} dev reads/s real/emu {x['real_device_reads_per_s']:.0f}/"
                    f"{x['emulated_device_reads_per_s']:.0f}, user ms/q real/emu {x['real_user_ms_per_query']:.3f}/"
                    f"{x['emulated_user_ms_per_query']:.3f}"
                    for x in rows_i
                ),
                flush=True,
            )
    finally:
        real.close()
    rows = [medians([r["rows"][k] for r in reps]) for k in range(len(MODES))]
    r = {m: medians([rep["real"][m] for rep in reps]) for m in MODES}
    print(
        f"index {args.vectors} x {args.dimension}-d, R={args.degree}, L={args.search_list}, W={args.beam_width}, "
        f"no node cache, O_DIRECT; device {tgt.name}; {args.repeats} paired repeats, medians"
    )
    print(
        f"{'':8} {'QPS real/emu':>14} {'p99 ms real/emu':>16} {'dev reads/s real/emu':>21} "
        f"{'reads/q real/emu':>17} {'CPU ms/q real/emu':>18} {'user ms/q real/emu':>19}"
    )
    for x in rows:
        p99 = (f"{x['real_p99_ms']:.2f}/" if x["real_p99_ms"] else "-/") + f"{x['emulated_p99_ms']:.2f}"
        print(
            f"{x['mode']:<8} {x['real_qps']:>6.0f}/{x['emulated_qps']:<7.0f} {p99:>16} "
            f"{x['real_device_reads_per_s']:>10.0f}/{x['emulated_device_reads_per_s']:<10.0f} "
            f"{x['real_reads_per_query']:>8.1f}/{x['emulated_reads_per_query']:<8.1f} "
            f"{x['real_cpu_ms_per_query']:>8.3f}/{x['emulated_cpu_ms_per_query']:<9.3f} "
            f"{x['real_user_ms_per_query']:>8.3f}/{x['emulated_user_ms_per_query']:<9.3f}"
        )
    hops = [
        (s["real_user_ms_per_query"] - s["emulated_user_ms_per_query"]) * 1e3 / s["emulated_hops_per_query"]
        for s in (rep["rows"][0] for rep in reps)
    ]
    print(
        f"real DiskANN's user CPU per hop beyond the emulation's: ~{max(0.0, statistics.median(hops)):.0f} us "
        f"(vdb.cpu_per_hop_us; median of the repeats' serial runs, {min(hops):.0f}-{max(hops):.0f})"
    )
    print("(system CPU is the kernel's cost of the reads: the same per read on both sides)")
    print("verdicts: the median of the per-repeat ratios emulated / real, the pairs' spread beside it")
    verdicts = {}
    for k, mode in enumerate(MODES):
        per = [rep["rows"][k] for rep in reps]
        io = ratios([x["emulated_device_reads_per_s"] for x in per], [x["real_device_reads_per_s"] for x in per])
        cpu = ratios([x["emulated_user_ms_per_query"] for x in per], [x["real_user_ms_per_query"] for x in per])
        ok_io, ok_cpu = io.median >= 1.0, cpu.median < 0.5
        print(
            f"{mode}: device reads/s emulated >= real: {'yes' if ok_io else 'NO'} "
            f"(emulated/real {io.median:.3f}, pairs {io.spread()})"
        )
        print(
            f"{mode}: user CPU per query emulated < half of real: {'yes' if ok_cpu else 'NO'} "
            f"(emulated/real {cpu.median:.3f}, pairs {cpu.spread()})"
        )
        verdicts[mode] = {
            name: {"goal": goal, "ratios": pr.ratios, "median": pr.median, "spread": pr.spread(), "ok": ok}
            for name, goal, pr, ok in (
                ("device_reads_per_s", ">= 1", io, ok_io),
                ("user_cpu_per_query", "< 0.5", cpu, ok_cpu),
            )
        }
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "rows": rows, "real": r, "repeats": reps, "verdicts": verdicts}, f, indent=2)


if __name__ == "__main__":
    main()
