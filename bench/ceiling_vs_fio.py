#!/usr/bin/env python3
"""`dlio-fast ceiling` next to fio at the points the ceiling search chose (issue 12).

The ceiling search reports, per target (sequential read and write at 1 MiB, random read at 4 KiB),
the best point it found: engine, queue depth, threads, O_DIRECT or buffered. This bench runs that
search once, then, per target, fio at the same point (same engine, iodepth, numjobs with one file
each of the same size, direct or invalidate=1, time based) and `dlio-fast io` at the same point back
to back, --repeats times (5 by default), free memory warmed before each tool's turn (host_memory.py).
Printed per target: the ceiling's figure, the median of dlio-fast io, the median of fio, the median of
paired io/fio ratios with the pairs' spread, and the ceiling/fio ratio. Goal (issue 12): within 10 % of
fio. --quick: files of 256 MiB, 1 s per run (the search's too), the same pairs.

fio runs twice per repeat: as is, and with its buffers on transparent huge pages (THP switched to
`always` for that run, --iomem_align=2m; root only), and the better figure is the bar. A repeat runs
fio as is, fio on huge pages, dlio-fast io, and the next one the reverse (dlio-fast io, fio on huge
pages, fio as is), so that a drift over the run favours neither tool. dlio-fast's
buffer pools ask for huge pages (bufpool.c). On this VM's virtio disk (max_segments 254) an
O_DIRECT 1 MiB read from 4 KiB pages is split into two device requests, from a huge page it is one:
fio as is reads 1 MiB sequentially at qd 8 at half the speed of fio on huge pages. That is the
client's buffer memory, not the storage, so the bar is fio at its best.

Needs fio on the PATH (apt-get install fio). Usage:
  python bench/ceiling_vs_fio.py [--dir /var/tmp/dlio-fast-bench] [--file-size 1g] [--runtime 3] [--repeats 5]
                                 [--quick] [--max-threads N]
"""

import argparse
import json
import os
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

FIO_ENGINE = {"posix": "psync", "io_uring": "io_uring"}


def figure(metric, rec):
    return rec["bw_MiB_s"] if metric == "bw_MiB_s" else rec["iops"]


def run_ceiling(folder, file_size, runtime, max_threads, tmp):
    js = os.path.join(tmp, "ceiling.json")
    cmd = [sys.executable, "-m", "dlio", "ceiling", folder, f"--file-size={file_size}", f"--runtime={runtime}s"]
    cmd += ["--json", js, "-q"] + ([f"--max-threads={max_threads}"] if max_threads else [])
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.load(open(js))


def run_dlio_io(folder, p, file_size, runtime, tmp):
    js = os.path.join(tmp, "io.json")
    cmd = [sys.executable, "-m", "dlio", "io", folder, f"--rw={p['rw']}", f"--bs={p['bs']}"]
    cmd += [f"--engine={p['engine']}", f"--qd={p['qd']}", f"--threads={p['threads']}", f"--file-size={file_size}"]
    cmd += [f"--runtime={runtime}s", "--direct" if p["direct"] else "--buffered", "--json", js, "-q"]
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    rec = json.load(open(js))["points"][0]
    return {"bw_MiB_s": rec["bw_MiB_s"], "iops": rec["iops"]}


def best_fio(folder, p, file_size, runtime, huge_first=False):
    """fio as is and on huge pages (the latter first when huge_first: next to dlio-fast io when the
    repeat's order is reversed)."""

    def huge_run():
        with thp_always() as ok:
            return run_fio(folder, p, file_size, runtime, ["--iomem_align=2m"]) if ok else None

    if huge_first:
        huge = huge_run()
        plain = run_fio(folder, p, file_size, runtime)
    else:
        plain = run_fio(folder, p, file_size, runtime)
        huge = huge_run()
    return plain, huge or plain


def run_fio(folder, p, file_size, runtime, extra=()):
    """fio at the same point: numjobs = threads, one file of file_size each, its defaults otherwise
    (invalidate=1 drops each file's pages before a buffered job, as dlio-fast's --cache drop)."""
    cmd = ["fio", *extra, "--name=ceil", f"--directory={folder}", f"--size={file_size}", f"--rw={p['rw']}"]
    cmd += [f"--bs={p['bs']}", f"--ioengine={FIO_ENGINE[p['engine']]}", f"--iodepth={p['qd']}"]
    cmd += [f"--numjobs={p['threads']}", f"--direct={int(p['direct'])}", "--time_based", f"--runtime={runtime}"]
    cmd += ["--group_reporting", "--randrepeat=0", "--output-format=json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    job = json.loads(out[out.index("{") :])["jobs"][0]
    side = job["write"] if p["rw"] in ("write", "randwrite") else job["read"]
    return {"bw_MiB_s": side["bw_bytes"] / 2**20, "iops": side["iops"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/var/tmp/dlio-fast-bench")
    ap.add_argument("--file-size", default=None, help="1g (--quick: 256m)")
    ap.add_argument("--runtime", type=int, default=None, help="seconds per run and per search probe (3; --quick: 1)")
    add_repeat_args(ap)
    ap.add_argument("--max-threads", type=int, default=None)
    a = ap.parse_args()
    a.file_size = a.file_size or ("256m" if a.quick else "1g")
    a.runtime = a.runtime or (1 if a.quick else 3)
    if a.repeats < 1:
        sys.exit("--repeats must be >= 1")
    if not shutil.which("fio"):
        sys.exit("fio is not on the PATH: apt-get install fio")
    warn_few(a.repeats)
    os.makedirs(a.dir, exist_ok=True)
    warm = parse_size(a.file_size) * (a.max_threads or os.cpu_count() or 1) + (1 << 30)
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        ceil_dir, io_dir, fio_dir = (os.path.join(tmp, n) for n in ("ceiling", "io", "fio"))
        for d in (ceil_dir, io_dir, fio_dir):
            os.makedirs(d)
        doc = run_ceiling(ceil_dir, a.file_size, a.runtime, a.max_threads, tmp)
        mode = "O_DIRECT" if doc["direct"] else "buffered, pages dropped per point"
        print(
            f"ceiling of {a.dir} ({mode}); files of {a.file_size}, {a.runtime}s per run, {a.repeats} paired "
            "repeats (fio, fio huge, io; then io, fio huge, fio)"
        )
        print(
            f"{'target':<13} {'point':<28} {'ceiling':>10} {'dlio io':>10} {'fio 4k pg':>10} {'fio best':>10} "
            f"{'io/fio':>7} {'spread of io/fio pairs':<36} "
            f"{'ceil/fio':>8}  verdict"
        )
        for name, best in doc["best"].items():
            metric = "iops" if name.startswith("rand") else "bw_MiB_s"
            f_runs, plain_runs, d_runs = [], [], []
            for r in range(a.repeats):
                reverse = r % 2 == 1  # fio (as is, huge), io; then io, fio (huge, as is)
                for side in ("io", "fio") if reverse else ("fio", "io"):
                    warm_free_memory(warm)
                    if side == "fio":
                        plain, huge = best_fio(fio_dir, best, a.file_size, a.runtime, huge_first=reverse)
                        plain_runs.append(plain)
                        f_runs.append(max(plain, huge, key=lambda x: figure(metric, x)))
                    else:
                        d_runs.append(run_dlio_io(io_dir, best, a.file_size, a.runtime, tmp))
            pairs = Paired.of([figure(metric, d) for d in d_runs], [figure(metric, f) for f in f_runs])
            paired = pairs.median
            fio_med = statistics.median(figure(metric, f) for f in f_runs)
            plain_med = statistics.median(figure(metric, f) for f in plain_runs)
            ceil_ratio = figure(metric, best) / fio_med
            point = f"{best['engine']} qd {best['qd']} x{best['threads']} {'direct' if best['direct'] else 'buf'}"
            ok = 0.9 <= paired <= 1.1 and 0.9 <= ceil_ratio <= 1.1
            print(
                f"{name:<13} {point:<28} {figure(metric, best):>10.1f} "
                f"{statistics.median(figure(metric, d) for d in d_runs):>10.1f} {plain_med:>10.1f} {fio_med:>10.1f} "
                f"{paired:>7.3f} {pairs.spread():<36} "
                f"{ceil_ratio:>8.3f}  {'ok' if ok else 'OUTSIDE 10 %'}"
            )


if __name__ == "__main__":
    main()
