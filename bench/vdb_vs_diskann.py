"""dlio-fast's vector search against real DiskANN (diskannpy) on the same device, side by side in one run.

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

    python bench/vdb_vs_diskann.py --python /tmp/dkvenv/bin/python [--vectors 10000 --search-list 100 \\
        --beam-width 8 --threads 2 --queries 1000] [--out result.json]

The machine should be quiet: another process on the disk or the CPUs changes both sides.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


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
    out = {}
    for mode in ("serial", "threads"):
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        sys.stdin.readline()
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
        out[mode] = {
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


def real(args, folder, counters_of):
    """The real index's two phases, each bracketed by the device counters."""
    a = {
        "folder": folder,
        "dimension": args.dimension,
        "queries": args.queries,
        "serial_queries": args.serial,
        "search_list": args.search_list,
        "beam_width": args.beam_width,
        "threads": args.threads,
    }
    p = subprocess.Popen(
        [args.python, __file__, "--child", json.dumps(a)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )

    def ready():
        while p.stdout.readline().strip() != "ready":
            pass

    def go():
        p.stdin.write("go\n")
        p.stdin.flush()

    ready()
    b = counters_of()
    go()
    ready()  # the serial phase is over when the child is ready for the next one
    dev = {"serial": (b, counters_of())}
    b = counters_of()
    go()
    res = json.loads(p.stdout.readline())
    dev["threads"] = (b, counters_of())
    p.wait()
    for mode in res:
        b, e = dev[mode]
        res[mode]["device_reads"] = e["read_ios"] - b["read_ios"]
        res[mode]["device_bytes"] = e["read_bytes"] - b["read_bytes"]
    return res


def emulated(args, folder, mode):
    """dlio-fast's run of the same shape (the CLI, as a user runs it), its dlio-fast.json."""
    threads = 1 if mode == "serial" else args.threads
    out = os.path.join(folder, f"out-{mode}")
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
        "vdb.queries": args.serial if mode == "serial" else args.queries,
        "vdb.runs": 1,
        "vdb.index_folder": folder,
        "dlio_fast.engine": "io_uring",
    }
    cmd = [sys.executable, "-m", "dlio", "-q", "run", "-w", "vdb_diskann_1m", "-o", out]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "dlio-fast.json")) as f:
        return json.load(f)["runs"][0]


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
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--serial", type=int, default=200, help="queries of the serial phase")
    p.add_argument("--out")
    args = p.parse_args()
    sys.path.insert(0, os.path.dirname(HERE))
    from vdb_capture import build

    from dlio.system import counters

    real_folder = os.path.join(args.workdir, "diskann")
    cap = argparse.Namespace(
        vectors=args.vectors, dimension=args.dimension, degree=args.degree, build_list=64, pq_bytes=32
    )
    build(args.python, cap, real_folder)
    tgt = counters.resolve(real_folder)
    if tgt.kind != "block":
        sys.exit(f"{real_folder}: {tgt.why or 'no block device'}: device reads cannot be counted here")

    def dev():
        return counters.snapshot(tgt)["dev"]

    r = real(args, real_folder, dev)
    e = {m: emulated(args, os.path.join(args.workdir, "emulated"), m) for m in ("serial", "threads")}
    rows = []
    for mode in ("serial", "threads"):
        rr, ee = r[mode], e[mode]
        c = ee["counters"]
        q = ee["queries"]
        rows.append(
            {
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
        )
    print(
        f"index {args.vectors} x {args.dimension}-d, R={args.degree}, L={args.search_list}, W={args.beam_width}, "
        f"no node cache, O_DIRECT; device {tgt.name}"
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
    s = rows[0]
    hop_us = (s["real_user_ms_per_query"] - s["emulated_user_ms_per_query"]) * 1e3 / s["emulated_hops_per_query"]
    print(f"real DiskANN's user CPU per hop beyond the emulation's: ~{max(0.0, hop_us):.0f} us (vdb.cpu_per_hop_us)")
    print("(system CPU is the kernel's cost of the reads: the same per read on both sides)")
    for x in rows:
        ok_io = x["emulated_device_reads_per_s"] >= x["real_device_reads_per_s"]
        ok_cpu = x["emulated_user_ms_per_query"] < 0.5 * x["real_user_ms_per_query"]
        print(
            f"{x['mode']}: device reads/s emulated >= real: {'yes' if ok_io else 'NO'}; "
            f"user CPU per query emulated < half of real: {'yes' if ok_cpu else 'NO'}"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "rows": rows, "real": r}, f, indent=2)


if __name__ == "__main__":
    main()
