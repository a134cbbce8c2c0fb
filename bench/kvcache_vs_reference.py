#!/usr/bin/env python3
"""The KV-cache workload: dlio-fast next to the reference benchmark, and direct mode next to fio.

1. compat: the same option (default Option 1, llama3.1-8b, shrunk to --users users for --duration s) on
   the same filesystem (--dir), the reference's kv-cache.py and `dlio-fast run` in compat mode (the
   reference's syscalls), alternating, --repeats times, page cache dropped and free memory warmed before
   each. Storage bandwidth: the rules' headline, read + write GiB/s, each tool's own figure by the same
   formula (the reference's results JSON, dlio-fast's summary.json). Client CPU per GiB: each process's
   user + system seconds (getrusage of the child) over the GiB it moved to and from storage. Goals:
   dlio-fast's bandwidth >= the reference's, its CPU per GiB <= 0.5x the reference's (medians of the
   paired ratios).
2. direct: `dlio-fast run` in direct mode (O_DIRECT through io_uring, --chunk transfers, --qd in
   flight) against fio writing and reading the same object sizes the same way (io_uring, direct=1,
   bs=chunk, iodepth=qd, one job per allocation slot writing its share of the objects with an fsync
   each, then one job per worker reading them back as many times as dlio-fast read its objects), with
   THP `always` for fio (host_memory.thp_always: its buffers then get huge pages, as dlio-fast's do).
   fio's time for dlio-fast's bytes is W / fio's write rate + R / fio's read rate, each rate over fio's
   own runtime; goal: dlio-fast's wall-clock window <= that / 0.9 (>= 0.9x fio). dlio-fast's window
   holds the open-loop gaps of its users too: enough users (--users) keep the device busy.

Each mode runs --repeats pairs (5 by default) and judges the median of the per-pair ratios, printed
with the pairs' spread. A pair takes a little over twice --duration (two runs of --duration each, plus
start-up, the page cache dropped and memory warmed before each: 2 pairs of each mode at 10 s runs took
2.7 minutes here): the defaults (60 s, 5 pairs) take about 25 minutes for both modes (compat ~11, direct
~12); --quick (20 s runs, --model tiny-1b unless given) about 9.

The reference is run from --reference (its kv_cache_benchmark folder) with the Python of --ref-venv,
created there with numpy and pyyaml when missing; it is never a dependency of dlio-fast.
Usage: python bench/kvcache_vs_reference.py --reference /path/to/kv_cache_benchmark [--dir /var/tmp/kvb]
       [--users 8] [--duration 60] [--model tiny-1b] [--repeats 5] [--quick] [--skip-compat] [--skip-direct]
The options' entries are 0.1-3 GiB (llama3.1-8b): a request of the reference takes tens of seconds on a
small VM and it writes no summary before one completes; --model tiny-1b keeps the option's users,
conversations and concurrency with entries of 10-400 MiB.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from host_memory import thp_always, warm_free_memory  # noqa: E402
from paired import Paired, add_repeat_args, warn_few  # noqa: E402

from dlio import _core  # noqa: E402

GiB = 1 << 30
OPTIONS = {  # rules Table KVCache-1: the reference's flags and dlio-fast's workload
    "opt1": ("llama3.1-8b", 0, 16, "kvcache_llama3_8b_opt1"),
    "opt2": ("llama3.1-8b", 4, 16, "kvcache_llama3_8b_opt2"),
    "opt3": ("llama3.1-70b-instruct", 0, 4, "kvcache_llama3_70b_opt3"),
}


def ref_python(venv):
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        print(f"creating {venv} for the reference (numpy, pyyaml)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "numpy", "pyyaml"], check=True)
    return py


def settle(nbytes):
    os.sync()
    try:
        _core.drop_all_caches()
    except OSError:
        pass
    warm_free_memory(nbytes)


def timed(cmd, log):
    """Run cmd; (wall s, child CPU s) from getrusage of the child alone."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with open(log, "w") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        sys.exit(f"{cmd[0]} ... failed ({p.returncode}); see {log}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_reference(a, py, opt, d):
    model, cpu_gb, allocs, _ = OPTIONS[opt]
    model = a.model or model
    out = os.path.join(d, "ref.json")
    shutil.rmtree(os.path.join(d, "ref-cache"), ignore_errors=True)
    cmd = [
        py,
        os.path.join(a.reference, "kv-cache.py"),
        "--model",
        model,
        "--num-users",
        str(a.users),
        "--duration",
        str(a.duration),
        "--gpu-mem-gb",
        "0",
        "--cpu-mem-gb",
        str(cpu_gb),
        "--max-concurrent-allocs",
        str(allocs),
        "--generation-mode",
        "none",
        "--seed",
        "42",
        "--cache-dir",
        os.path.join(d, "ref-cache"),
        "--output",
        out,
    ]
    wall, cpu = timed(cmd, os.path.join(d, "ref.log"))
    with open(out) as f:
        doc = json.load(f)
    if "summary" not in doc:
        sys.exit(
            f"the reference completed no request in {a.duration} s (see {d}/ref.log): raise --duration, or "
            "--model tiny-1b for smaller entries"
        )
    cs = doc["summary"]["cache_stats"]
    shutil.rmtree(os.path.join(d, "ref-cache"), ignore_errors=True)
    moved = (cs["tier_storage_kv_bytes_read_gb"] + cs["tier_storage_kv_bytes_written_gb"]) * GiB
    return {
        "bw": cs["tier_storage_read_bandwidth_gbps"] + cs["tier_storage_write_bandwidth_gbps"],
        "cpu": cpu,
        "moved": moved,
        "wall": wall,
    }


def run_ours(a, opt, d, mode, extra=()):
    out = os.path.join(d, f"out-{mode}")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [
        sys.executable,
        "-m",
        "dlio",
        "run",
        "-w",
        OPTIONS[opt][3],
        "--set",
        f"kvcache.users={a.users}",
        "--set",
        f"kvcache.duration={a.duration}",
        "--set",
        "kvcache.trials=1",
        "--set",
        "kvcache.trial_gap=0",  # one trial, no idle around it (the reference runs without its wrapper here)
        "--set",
        f"kvcache.cache_dir={os.path.join(d, 'ours-cache')}",
        "--set",
        f"kvcache.io_mode={mode}",
        "-o",
        out,
        *(("--set", f"kvcache.model={a.model}") if a.model else ()),
        *extra,
    ]
    wall, cpu = timed(cmd, os.path.join(d, f"ours-{mode}.log"))
    with open(os.path.join(out, "summary.json")) as f:
        o = next(iter(json.load(f)["options"].values()))
    with open(os.path.join(out, "dlio-fast.json")) as f:
        doc = json.load(f)
    (rec,) = doc["records"]
    x = rec["exact"]
    return {
        "bw": o["aggregated_read_bandwidth_gbps"] + o["aggregated_write_bandwidth_gbps"],
        "cpu": cpu,
        "moved": x["storage_read_bytes"] + x["storage_write_bytes"],
        "wall": wall,
        "exact": x,
        "rec": rec,
        "verdicts": [v["verdict"] for v in doc["verdicts"]],
    }


def compat(a, py, d):
    pairs = []
    print(f"\n1. compat: {a.option}, {a.users} users, {a.duration} s, in {d} (shared machine: noisy)")
    print(f"{'repeat':>6} {'tool':>10} {'GiB/s':>8} {'GiB moved':>10} {'CPU s':>7} {'CPU s/GiB':>10}")
    for i in range(a.repeats):
        order = ("ref", "ours") if i % 2 == 0 else ("ours", "ref")
        got = {}
        for tool in order:
            settle(4 * GiB)
            got[tool] = run_reference(a, py, a.option, d) if tool == "ref" else run_ours(a, a.option, d, "compat")
            g = got[tool]
            print(
                f"{i:>6} {tool:>10} {g['bw']:>8.3f} {g['moved'] / GiB:>10.2f} {g['cpu']:>7.1f} "
                f"{g['cpu'] / max(1e-9, g['moved'] / GiB):>10.3f}",
                flush=True,
            )
        r, o = got["ref"], got["ours"]
        pairs.append(
            (
                o["bw"] / r["bw"] if r["bw"] else float("inf"),
                (o["cpu"] / (o["moved"] / GiB)) / (r["cpu"] / (r["moved"] / GiB)),
            )
        )
    bwp, cpup = Paired(p[0] for p in pairs), Paired(p[1] for p in pairs)
    bw, cpu = bwp.median, cpup.median
    print(
        f"storage bandwidth dlio-fast / reference: {bw:.2f}x (goal >= 1.0): {'PASS' if bw >= 1 else 'FAIL'}"
        f"; pairs {bwp.spread()}"
    )
    print(
        f"client CPU per GiB dlio-fast / reference: {cpu:.2f}x (goal <= 0.5): {'PASS' if cpu <= 0.5 else 'FAIL'}"
        f"; pairs {cpup.spread()}"
    )
    return bw >= 1 and cpu <= 0.5


def fio_job(path, rw, folder, sizes, jobs, chunk, qd, loops=1):
    """Writes: one job per allocation slot, each writing its share of the objects one after another
    (an fsync after each). Reads: the objects in groups of `jobs` at once (one job per worker), each
    object read `loops` times in a row, as a request reads its entry once per decode batch."""
    lines = [
        "[global]",
        "ioengine=io_uring",
        "direct=1",
        f"bs={chunk}",
        f"iodepth={qd}",
        f"rw={rw}",
        f"directory={folder}",
        "iomem_align=2m",
        "file_service_type=sequential",
        "fallocate=none",
    ]
    if rw == "write":
        lines.append("fsync_on_close=1")
        for j in range(jobs):
            mine = [(i, s) for i, s in enumerate(sizes) if i % jobs == j]
            if mine:
                lines += [
                    f"[j{j}]",
                    "filename=" + ":".join(f"obj{i}" for i, _ in mine),
                    f"filesize={max(s for _, s in mine)}",
                    f"size={sum(s for _, s in mine)}",
                ]
    else:
        for i, size in enumerate(sizes):
            lines += [f"[r{i}]", f"filename=obj{i}", f"size={size}", f"loops={loops}"]
            if i and i % jobs == 0:
                lines.append("stonewall")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def fio_rate(job, d):
    """Bytes per second of a fio run: all its jobs' bytes over the sum of its groups' runtimes (each
    group's slowest job: fio's own clock, its start-up between groups left out)."""
    with thp_always():  # fio at its best: its 2 MiB-aligned buffers in huge pages, as dlio-fast's are
        out = subprocess.run(["fio", "--output-format=json", job], capture_output=True, text=True, cwd=d)
    if out.returncode:
        sys.exit(f"fio failed: {out.stderr[-500:]}")
    groups = {}
    total = 0
    for j in json.loads(out.stdout)["jobs"]:
        total += j["write"]["io_bytes"] + j["read"]["io_bytes"]
        groups[j["groupid"]] = max(groups.get(j["groupid"], 0), j["job_runtime"])
    return total / (sum(groups.values()) / 1000.0)


def direct(a, d):
    why = _core.kv_store_check("direct", d, 8 << 20, a.chunk, a.qd)
    if why:
        print(f"\n2. direct: skipped: {why}")
        return True
    print(f"\n2. direct: {a.option}, {a.users} users, {a.duration} s, {a.chunk >> 20} MiB transfers, qd {a.qd}")
    ratios = []
    for i in range(a.repeats):
        # dlio-fast goes first in every pair, not alternately: fio's jobs are sized from this run (as many
        # objects of the mean size as it wrote, read back as often as it read them), which the plan alone
        # does not give exactly: arrivals are open loop until the duration, the queue is drained for at
        # most 2 s per worker, demotions and reads follow the cache's state, so what is served depends on
        # the run. Sizing fio from another repeat's run would let it go first, but not on the same bytes.
        # Each side starts alike: synced, page cache dropped, free memory warmed (settle) before each.
        settle(4 * GiB)
        o = run_ours(
            a, a.option, d, "direct", ("--set", f"kvcache.direct_chunk={a.chunk}", "--set", f"kvcache.direct_qd={a.qd}")
        )
        x, c = o["exact"], o["rec"]["result"]["counts"]
        writes, reads = c["storage_writes"] + c["demotions"], c["storage_reads"]
        w_bytes, r_bytes = x["storage_write_bytes"], x["storage_read_bytes"]
        # fio: objects of the mean written size, as many as dlio-fast wrote; read back as often
        n = max(1, writes)
        size = max(4096, (w_bytes // n) // 4096 * 4096)
        folder = os.path.join(d, "fio")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        slots, workers = OPTIONS[a.option][2], min(a.users, 500)
        fio_job(os.path.join(d, "w.fio"), "write", folder, [size] * n, min(slots, n), a.chunk, a.qd)
        settle(4 * GiB)
        bw_w = fio_rate(os.path.join(d, "w.fio"), d)
        loops = max(1, round(reads / n))
        fio_job(os.path.join(d, "r.fio"), "read", folder, [size] * n, min(workers, n), a.chunk, a.qd, loops)
        os.sync()
        bw_r = fio_rate(os.path.join(d, "r.fio"), d)
        shutil.rmtree(folder, ignore_errors=True)
        t_fio = w_bytes / bw_w + r_bytes / bw_r
        t_ours = x["wall_s"]
        ratios.append(t_fio / t_ours)
        print(
            f"repeat {i}: dlio-fast moved {w_bytes / GiB:.2f} GiB written ({writes} objects) + {r_bytes / GiB:.2f} "
            f"GiB read ({reads}) in {t_ours:.1f} s; fio writes {bw_w / GiB:.2f} GiB/s, reads {bw_r / GiB:.2f} GiB/s: "
            f"{t_fio:.1f} s for the same bytes -> {t_fio / t_ours:.2f}x; verdicts {o['verdicts']}",
            flush=True,
        )
    rp = Paired(ratios)
    r = rp.median
    print(
        f"direct mode / fio on the same bytes and object sizes: {r:.2f}x (goal >= 0.9): "
        + ("PASS" if r >= 0.9 else "FAIL")
        + f"; pairs {rp.spread()}"
    )
    return r >= 0.9


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reference", help="the reference's kv_cache_benchmark folder (holds kv-cache.py)")
    p.add_argument("--ref-venv", default="/tmp/kvref-venv", help="a venv for the reference (made when missing)")
    p.add_argument("--dir", default="/var/tmp/kvcache-bench", help="a folder on the filesystem under test")
    p.add_argument("--option", default="opt1", choices=sorted(OPTIONS))
    p.add_argument("--users", type=int, default=8)
    p.add_argument("--model", help="another model for both tools (tiny-1b: entries of 10-400 MiB, for small hosts)")
    p.add_argument("--duration", type=int, default=None, help="seconds per run (60; --quick: 20)")
    add_repeat_args(p)
    p.add_argument("--chunk", type=int, default=8 << 20)
    p.add_argument("--qd", type=int, default=4)
    p.add_argument("--skip-compat", action="store_true")
    p.add_argument("--skip-direct", action="store_true")
    a = p.parse_args()
    a.duration = a.duration or (20 if a.quick else 60)
    if a.quick and not a.model:
        a.model = "tiny-1b"  # the reference completes a request of llama3.1-8b's entries in tens of seconds
    if a.repeats < 1:
        sys.exit("--repeats must be >= 1")
    warn_few(a.repeats)
    os.makedirs(a.dir, exist_ok=True)
    ok = True
    if not a.skip_compat:
        if not a.reference or not os.path.exists(os.path.join(a.reference, "kv-cache.py")):
            sys.exit(
                "--reference: the reference's kv_cache_benchmark folder (with kv-cache.py), e.g. a checkout of "
                "mlcommons/storage or russfellows/mlc-storage"
            )
        ok &= compat(a, ref_python(a.ref_venv), a.dir)
    if not a.skip_direct:
        if not shutil.which("fio"):
            sys.exit("fio not found on the PATH")
        ok &= direct(a, a.dir)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
