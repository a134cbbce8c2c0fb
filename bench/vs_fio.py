#!/usr/bin/env python3
"""dlio-fast io next to fio on the same points, paired runs, the median of the paired ratios per point.

Needs fio on the PATH (apt-get install fio); installs nothing itself. Points (issue 2):
  seq-1m-cached   1 MiB sequential read, buffered, file in the page cache, psync vs posix
  rand-4k-uring   4 KiB random read, io_uring qd 32, O_DIRECT (ext4)
  seq-128k-psync  128 KiB sequential read, buffered, cached, psync vs posix
Goal: dlio-fast >= 0.97x fio's bandwidth and IOPS on every point, CPU per I/O no higher (within 2 %:
the CPU per I/O of a copy-bound loop moves by about 1 % from run to run, and there CPU per I/O is
1 / IOPS, so a bar tighter than the noise would judge the noise). Both are medians of paired ratios
(each repeat runs both tools back to back), printed with the pairs' spread (min-max, IQR).

Like-for-like (issue 42):
- fio at its best: each repeat runs fio as is and on huge pages (THP `always` for that run and
  --iomem_align=2m, as dlio-fast's buffer pools ask for huge pages: on cached reads that is worth
  several x here; root only, host_memory.thp_always); the variant with the higher median is the bar,
  paired repeat by repeat (the per-repeat max of two noisy runs would raise the bar by the noise alone).
- io_uring at its best on both sides: fio --fixedbufs=1 --registerfiles=1 against dlio-fast io
  --fixedbufs --regfiles. fio --hipri only when the file's block device polls (queue/io_poll = 1; this
  VM's virtio disk does not: the bench prints which). No --sqthread_poll: `dlio-fast io` does not
  use SQPOLL, and a kernel thread polling for one tool alone would spend a third CPU's worth of this
  2-core VM on it.
- The same kind of block sequence: fio's random points visit new random blocks every run
  (--randrepeat=0); dlio-fast io plans its random order from a fixed seed (42), so the bench gives it
  a fresh seed per repeat (bench-side, through the planner's default seed; dlio/ is unchanged).
  Replaying the same 150k blocks every run would let a cache under this VM (it holds recently read
  blocks of the virtual disk) serve dlio-fast and not fio.
With --defaults (issue 12): each tool with its defaults on the same rw / bs, nothing else given:
fio (psync, buffered, invalidate=1, one pass over --size) next to dlio-fast io (posix, buffered,
the file's pages dropped before the point, one pass). Goal: within 10 %. Free memory is warmed
before every run on both sides (host_memory.py); the table shows fio as is ("fio 4k pg") too.
Mixed read/write (issue 30): randrw-4k-70 is fio's --rw=randrw --rwmixread=70 next to dlio-fast io
--rw randrw --rwmixread 70 (4 KiB, io_uring qd 32, O_DIRECT, both random anew every run as above),
both on one file of --size that dlio-fast made (it writes only into files it made; fio writes into
any). Each repeat runs fio, dlio-fast, fio: the second fio against the first is this disk's own
pair-to-pair noise, and the goal is read and write IOPS each within max(2 %, that noise) of fio's,
the noise taken as the half-IQR of the fio/fio pairs (what a median of such pairs still moves by).
--mixed runs only these points.
Usage: python bench/vs_fio.py [--dir /var/tmp/dlio-fast-bench] [--runtime 5] [--repeats 5] [--quick]
       [--defaults] [--mixed]
"""

import argparse
import functools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from host_memory import thp_always, warm_free_memory  # noqa: E402
from paired import Paired, add_repeat_args, warn_few  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from dlio.base.units import parse_size  # noqa: E402

POINTS = [
    # name, rw, bs, fio engine, dlio-fast engine, qd, direct, cached
    ("seq-1m-cached", "read", "1m", "psync", "posix", 1, False, True),
    ("rand-4k-uring-qd32", "randread", "4k", "io_uring", "io_uring", 32, True, False),
    ("seq-128k-psync", "read", "128k", "psync", "posix", 1, False, True),
]

# `dlio-fast io` with the planner's seed given: its random order is drawn anew per repeat, as fio's.
SEEDED_DLIO = (
    "import sys; import dlio.fsbench.points as p; p.build_plan.__defaults__ = (int(sys.argv[1]),); "
    "from dlio.cli.main import main; main(sys.argv[2:])"
)


def device_polls(path):
    """Does the block device under path poll completions (queue/io_poll = 1: fio --hipri works)?"""
    st = os.stat(path if os.path.exists(path) else os.path.dirname(path))
    base = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    for q in (f"{base}/queue/io_poll", f"{base}/../queue/io_poll"):  # a partition's is its disk's
        if os.path.exists(q):
            return open(q).read().strip() == "1"
    return False


def uring_best(path):
    """fio's io_uring options at their best on this device (see the docstring)."""
    return ["--fixedbufs=1", "--registerfiles=1"] + (["--hipri=1"] if device_polls(path) else [])


def fio_cmd(path, size, rw, bs, engine, qd, direct, runtime, extra=()):
    cmd = ["fio", *extra, "--name=p", f"--filename={path}", f"--size={size}", f"--rw={rw}", f"--bs={bs}"]
    cmd += [f"--ioengine={engine}", f"--iodepth={qd}", f"--direct={int(direct)}", "--time_based"]
    cmd += [f"--runtime={runtime}", "--output-format=json", "--randrepeat=0"]
    return cmd + (uring_best(path) if engine == "io_uring" else [])


def fio_job(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index("{") :])["jobs"][0]


def run_fio(path, size, rw, bs, engine, qd, direct, runtime, extra=()):
    job = fio_job(fio_cmd(path, size, rw, bs, engine, qd, direct, runtime, extra) + ["--invalidate=0"])
    r = job["read"]
    secs = job["job_runtime"] / 1000.0
    cpu_s = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * secs
    return {
        "MiB_s": r["bw_bytes"] / 2**20,
        "iops": r["iops"],
        "cpu_us_per_io": cpu_s / max(1, r["total_ios"]) * 1e6,
        "p50_us": r["clat_ns"]["percentile"]["50.000000"] / 1e3,
        "p99_us": r["clat_ns"]["percentile"]["99.000000"] / 1e3,
    }


def dlio_io(args, js):
    """`dlio-fast io ARGS --json js -q` with a fresh planner seed; its one point's record."""
    cmd = [sys.executable, "-c", SEEDED_DLIO, str(random.randrange(1, 2**31)), "io", *args, "--json", js, "-q"]
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.load(open(js))["points"][0]


def run_dlio(path, rw, bs, engine, qd, direct, runtime, tmp, mode=None):
    """mode None: as the point says (a buffered point keeps the page cache, as fio's --invalidate=0
    here); mode "defaults": only rw, bs and runtime, everything else dlio-fast's default."""
    args = [path, f"--rw={rw}", f"--bs={bs}"]
    if runtime is not None:
        args.append(f"--runtime={runtime}s")
    if mode != "defaults":
        args += [f"--engine={engine}", f"--qd={qd}", *(["--direct"] if direct else ["--buffered", "--cache=keep"])]
        args += ["--fixedbufs", "--regfiles"] if engine == "io_uring" else []
    p = dlio_io(args, os.path.join(tmp, "d.json"))
    return {
        "MiB_s": p["bw_MiB_s"],
        "iops": p["iops"],
        "cpu_us_per_io": p["cpu_us_per_io"],
        "p50_us": p["lat_ns"]["p50"] / 1e3,
        "p99_us": p["lat_ns"]["p99"] / 1e3,
    }


# name, rw, bs, fio engine, dlio-fast engine, qd, direct, % reads
MIXED_POINTS = [
    ("randrw-4k-70-uring", "randrw", "4k", "io_uring", "io_uring", 32, True, 70),
]


def run_fio_mixed(path, size, rw, bs, engine, qd, direct, mix, runtime):
    """fio's read and write sections of one mixed job: {"read": {...}, "write": {...}}."""
    job = fio_job(fio_cmd(path, size, rw, bs, engine, qd, direct, runtime) + [f"--rwmixread={mix}"])
    return {
        d: {
            "MiB_s": job[d]["bw_bytes"] / 2**20,
            "iops": job[d]["iops"],
            "p50_us": job[d]["clat_ns"]["percentile"]["50.000000"] / 1e3,
        }
        for d in ("read", "write")
    }


def run_dlio_mixed(folder, size, rw, bs, engine, qd, direct, mix, runtime, tmp):
    """dlio-fast io's read and write sections of the same point (its own test file in `folder`, kept)."""
    args = [folder, f"--rw={rw}", f"--rwmixread={mix}", f"--bs={bs}", f"--engine={engine}", f"--qd={qd}"]
    args += [f"--file-size={size}", f"--runtime={runtime}s", "--keep", "--direct" if direct else "--buffered"]
    args += ["--fixedbufs", "--regfiles"] if engine == "io_uring" else []
    p = dlio_io(args, os.path.join(tmp, "m.json"))
    return {
        d: {"MiB_s": p[d]["bw_MiB_s"], "iops": p[d]["iops"], "p50_us": p[d]["lat_ns"]["p50"] / 1e3}
        for d in ("read", "write")
    }


def mixed_main(a, path):
    # Both tools on the same file: dlio-fast's (it writes only into files it made, fio into any). Two
    # files of one size on this VM's disk differ by up to 8x in random 4 KiB IOPS (a cache under the VM
    # holds one and not the other): fio alone gave 36.7k reads/s on its own file and 4.7k on dlio-fast's.
    folder = os.path.join(a.dir, "dlio-mixed")
    os.makedirs(folder, exist_ok=True)
    target = os.path.join(folder, "dlio-fast-io.0.dat")
    print(
        f"\nmixed read/write: both tools on {target} ({a.size}, made by dlio-fast), {a.runtime}s per run, "
        f"{a.repeats} repeats of fio, dlio-fast, fio; fio/fio: the disk's own pair-to-pair noise"
    )
    print(
        f"{'point':<20} {'dir':<5} {'fio IOPS':>9} {'dlio IOPS':>9} {'ratio':>6}  {'spread of dlio/fio pairs':<36} "
        f"{'fio/fio':>7}  {'spread of fio/fio pairs':<36} {'goal':>6}  verdict"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name, rw, bs, fio_eng, eng, qd, direct, mix in MIXED_POINTS:
            if not os.path.exists(target):  # dlio-fast makes its file first (untimed), then fio goes first
                run_dlio_mixed(folder, a.size, rw, bs, eng, qd, direct, mix, 1, tmp)
            f_runs, d_runs, f2_runs = [], [], []
            for _ in range(a.repeats):
                fio = functools.partial(run_fio_mixed, target, a.size, rw, bs, fio_eng, qd, direct, mix, a.runtime)
                f_runs.append(fio())
                d_runs.append(run_dlio_mixed(folder, a.size, rw, bs, eng, qd, direct, mix, a.runtime, tmp))
                f2_runs.append(fio())
            for d in ("read", "write"):
                fr, dr, f2 = ([r[d]["iops"] for r in runs] for runs in (f_runs, d_runs, f2_runs))
                ours, noise = Paired.of(dr, fr), Paired.of(f2, fr)
                tol = max(0.02, noise.half_iqr())
                print(
                    f"{name:<20} {d:<5} {statistics.median(fr):>9.0f} {statistics.median(dr):>9.0f} "
                    f"{ours.median:>6.3f}  "
                    f"{ours.spread():<36} {noise.median:>7.3f}  {noise.spread():<36} {tol:>5.1%}  "
                    f"{'ok' if abs(ours.median - 1) <= tol else 'OUTSIDE'}"
                )
    print(
        "goal: |median dlio/fio - 1| <= max(2 %, the fio/fio pairs' half-IQR); a goal below the noise would "
        "judge the disk, not the tool"
    )


# name, rw, bs: points where each tool is given only these (and the runtime)
DEFAULT_POINTS = [
    ("default-read-4k", "read", "4k"),
    ("default-randread-4k", "randread", "4k"),
    ("default-read-1m", "read", "1m"),
]


def both_fio(run, *args, warm=lambda: None):
    """(fio as is, fio on huge pages): warm() runs before each."""
    warm()
    plain = run(*args)
    with thp_always() as ok:
        warm()
        huge = run(*args, extra=["--iomem_align=2m"]) if ok else plain
    return plain, huge


def fio_bar(plain_runs, huge_runs, key="MiB_s"):
    """fio at its best: the variant (as is, huge pages) with the higher median, repeat by repeat."""
    return max((plain_runs, huge_runs), key=lambda runs: median(runs, key))


def run_fio_defaults(path, size, rw, bs, extra=()):
    cmd = ["fio", *extra, "--name=p", f"--filename={path}", f"--size={size}", f"--rw={rw}", f"--bs={bs}"]
    r = fio_job(cmd + ["--output-format=json"])["read"]
    return {"MiB_s": r["bw_bytes"] / 2**20, "iops": r["iops"], "p50_us": r["clat_ns"]["percentile"]["50.000000"] / 1e3}


def lay_out(a):
    """One fully written file both tools read (fio lays it out if missing); its path."""
    os.makedirs(a.dir, exist_ok=True)
    path = os.path.join(a.dir, "vs_fio.dat")
    cmd = ["fio", "--name=lay", f"--filename={path}", f"--size={a.size}", "--rw=write", "--bs=1m", "--end_fsync=1"]
    subprocess.run(cmd + ["--output-format=terse"], capture_output=True, check=True)
    return path


def defaults_main(a, path):
    print(
        f"each tool's defaults; file {path} ({a.size}), one pass per run, {a.repeats} paired repeats, "
        "free memory warmed before each run; ratio: median of paired runs"
    )
    print(
        f"{'point':<22} {'fio 4k pg':>10} {'fio best':>10} {'dlio MiB/s':>10} {'ratio':>6}  {'spread of pairs':<36} "
        f"{'fio p50':>9} {'dlio p50':>9} {'dlio mode':>10}  verdict"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name, rw, bs in DEFAULT_POINTS:
            plain_runs, huge_runs, d_runs = [], [], []
            # Every run reads through fresh page-cache pages: start each from the same memory state.
            warm = functools.partial(warm_free_memory, parse_size(a.size) + (1 << 30))
            for _ in range(a.repeats):
                plain, huge = both_fio(run_fio_defaults, path, a.size, rw, bs, warm=warm)
                plain_runs.append(plain)
                huge_runs.append(huge)
                warm()
                d_runs.append(run_dlio(path, rw, bs, None, None, None, None, tmp, mode="defaults"))
            mode = "direct" if json.load(open(os.path.join(tmp, "d.json")))["points"][0]["direct"] else "buffer"
            f_runs = fio_bar(plain_runs, huge_runs)
            p = Paired.of([d["MiB_s"] for d in d_runs], [f["MiB_s"] for f in f_runs])
            print(
                f"{name:<22} {median(plain_runs, 'MiB_s'):>10.1f} {median(f_runs, 'MiB_s'):>10.1f} "
                f"{median(d_runs, 'MiB_s'):>10.1f} {p.median:>6.3f}  {p.spread():<36} "
                f"{median(f_runs, 'p50_us'):>8.1f}u {median(d_runs, 'p50_us'):>8.1f}u {mode:>10}  "
                f"{'ok' if 0.9 <= p.median <= 1.1 else 'OUTSIDE 10 %'}"
            )


def median(runs, key):
    return statistics.median(r[key] for r in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/var/tmp/dlio-fast-bench")
    ap.add_argument("--size", default="1g")
    ap.add_argument("--runtime", type=int, default=5, help="seconds per run (--quick: 2)")
    add_repeat_args(ap)
    ap.add_argument("--defaults", action="store_true", help="each tool's defaults on DEFAULT_POINTS")
    ap.add_argument("--mixed", action="store_true", help="only the mixed read/write points (MIXED_POINTS)")
    a = ap.parse_args()
    if a.quick:
        a.runtime = min(a.runtime, 2)
    if not shutil.which("fio"):
        sys.exit("fio is not on the PATH: apt-get install fio")
    warn_few(a.repeats)
    path = lay_out(a)
    polls = device_polls(path)
    hipri = "on: the device polls" if polls else "off: the device does not poll (queue/io_poll 0)"
    print(
        f"io_uring: fio --fixedbufs=1 --registerfiles=1{' --hipri=1' if polls else ''} against dlio-fast "
        f"--fixedbufs --regfiles; --hipri {hipri}; "
        "no --sqthread_poll (dlio-fast io does not use SQPOLL); random points: new blocks every run on both sides"
    )
    if a.defaults:
        return defaults_main(a, path)
    if a.mixed:
        return mixed_main(a, path)
    print(f"file {path} ({a.size}), {a.runtime}s per run, {a.repeats} paired repeats; ratios: medians of the pairs")
    print(
        f"{'point':<20} {'fio MiB/s':>10} {'dlio MiB/s':>10} {'ratio':>6}  {'spread of pairs':<36} {'cpu/io':>6}  "
        f"{'spread of cpu pairs':<36} {'fio p50':>8} {'dlio p50':>8} {'fio bar':>7}  verdict"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name, rw, bs, fio_eng, eng, qd, direct, cached in POINTS:
            if cached:  # warm the page cache so both read from memory
                subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
            plain_runs, huge_runs, d_runs = [], [], []
            for _ in range(a.repeats):
                plain, huge = both_fio(run_fio, path, a.size, rw, bs, fio_eng, qd, direct, a.runtime)
                plain_runs.append(plain)
                huge_runs.append(huge)
                d_runs.append(run_dlio(path, rw, bs, eng, qd, direct, a.runtime, tmp))
            f_runs = fio_bar(plain_runs, huge_runs)
            bw = Paired.of([d["MiB_s"] for d in d_runs], [f["MiB_s"] for f in f_runs])
            cpu = Paired.of([d["cpu_us_per_io"] for d in d_runs], [f["cpu_us_per_io"] for f in f_runs])
            ok = bw.median >= 0.97 and cpu.median <= 1.02
            print(
                f"{name:<20} {median(f_runs, 'MiB_s'):>10.1f} {median(d_runs, 'MiB_s'):>10.1f} {bw.median:>6.3f}  "
                f"{bw.spread():<36} {cpu.median:>6.3f}  {cpu.spread():<36} {median(f_runs, 'p50_us'):>7.1f}u "
                f"{median(d_runs, 'p50_us'):>7.1f}u {'huge' if f_runs is huge_runs else 'as is':>7}  "
                f"{'ok' if ok else 'MISSED (goal >= 0.97x, cpu <= 1.02x fio)'}"
            )
    mixed_main(a, path)


if __name__ == "__main__":
    main()
