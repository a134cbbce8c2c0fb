#!/usr/bin/env python3
"""MPI scaling: dlio-fast on 1, 2, 4 ranks (mpiexec) next to fio with numjobs 1, 2, 4 on the same files.

For each folder (a tmpfs and a disk by default) and each N: `mpiexec -n N dlio-fast io --engine mpiio
--layout fpp` reads N files, one per rank, sequentially (MPI_File_read_at, independent), time
based; then fio reads the same N files with numjobs=N (psync, one file per job, group_reporting).
Both read buffered from the page cache (the files are warmed first), so the figure is what each
tool's own path costs at that parallelism. Each of --repeats repeats (5 by default) runs both back to
back, dlio-fast first in repeats 1, 3, 5 and fio first in 2, 4; the verdict is the median of the paired
ratios of the aggregate MiB/s (dlio-fast: IOR's all bytes / (last end - first start)), the pairs' spread
printed beside it. --quick: 1 s per run on 64 MiB files, the same pairs.
Goal (issue 4): every point >= 0.9x fio.
Needs fio and mpiexec on the PATH; installs nothing. The mpiexec must be of the MPI dlio-fast's mpiio engine
was built for (an MPICH build with Open MPI's mpiexec first on the PATH fails at once: put the venv's bin
first, where the mpich wheel puts its mpiexec).
Usage: python bench/mpi_scaling.py [--dirs /dev/shm/x,/var/tmp/x] [--ranks 1,2,4] [--file-size 256m]
       [--bs 1m] [--runtime 3] [--repeats 5] [--quick]

fio runs with --iomem_align=2m: its buffers then get transparent huge pages, as dlio-fast's
large buffer pools do (worth several x on cached reads on this VM), so the bar is fio at its best.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from paired import Paired, add_repeat_args, warn_few  # noqa: E402


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    return e


def dlio_point(folder, n, bs, file_size, runtime, js, keep=True):
    cmd = [
        "mpiexec",
        "-n",
        str(n),
        sys.executable,
        "-m",
        "dlio",
        "-q",
        "io",
        folder,
        "--engine",
        "mpiio",
        "--layout",
        "fpp",
        "--independent",
        "--rw",
        "read",
        f"--bs={bs}",
        f"--file-size={file_size}",
        f"--runtime={runtime}s",
        "--json",
        js,
    ]
    if keep:
        cmd.append("--keep")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env(), cwd=ROOT)
    if p.returncode:
        sys.exit(f"dlio-fast failed:\n{p.stderr}")
    pt = json.load(open(js))["points"][0]
    return pt["bw_MiB_s"], pt


def fio_point(folder, n, bs, file_size, runtime):
    cmd = [
        "fio",
        "--iomem_align=2m",
        "--name=p",
        f"--directory={folder}",
        "--filename_format=dlio-fast-ior.$jobnum.dat",
        f"--numjobs={n}",
        f"--size={file_size}",
        "--rw=read",
        f"--bs={bs}",
        "--ioengine=psync",
        "--direct=0",
        "--invalidate=0",
        "--time_based",
        f"--runtime={runtime}",
        "--group_reporting",
        "--output-format=json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    job = json.loads(out[out.index("{") :])["jobs"][0]
    return job["read"]["bw_bytes"] / 2**20


def warm(folder, n):
    for r in range(n):
        with open(os.path.join(folder, f"dlio-fast-ior.{r}.dat"), "rb") as f:
            while f.read(8 << 20):
                pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dirs", default="/dev/shm/dlio-fast-mpi,/var/tmp/dlio-fast-mpi")
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--file-size", default=None, help="per rank (256m; --quick: 64m)")
    ap.add_argument("--bs", default="1m")
    ap.add_argument("--runtime", type=int, default=None, help="seconds per run (3; --quick: 1)")
    add_repeat_args(ap)
    a = ap.parse_args()
    a.file_size = a.file_size or ("64m" if a.quick else "256m")
    a.runtime = a.runtime or (1 if a.quick else 3)
    if a.repeats < 1:
        sys.exit("--repeats must be >= 1")
    for tool in ("fio", "mpiexec"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not on the PATH")
    ranks = [int(x) for x in a.ranks.split(",")]
    warn_few(a.repeats)
    print(
        f"fpp sequential read, bs {a.bs}, {a.file_size} per rank, buffered (cached), {a.runtime}s per run, "
        f"{a.repeats} paired repeats (who goes first alternates), medians; {os.cpu_count()} CPUs"
    )
    print(
        f"{'folder':<26} {'N':>2} {'dlio MiB/s':>11} {'fio MiB/s':>10} {'ratio':>6} {'sum ranks':>10} "
        f"{'slowest s':>9}  verdict"
    )
    worst = None
    with tempfile.TemporaryDirectory() as tmp:
        for folder in a.dirs.split(","):
            os.makedirs(folder, exist_ok=True)
            # the files: made once by dlio-fast with the most ranks (rank r writes file r), kept
            dlio_point(folder, max(ranks), a.bs, a.file_size, 1, os.path.join(tmp, "w.json"))
            for n in ranks:
                warm(folder, n)
                d_runs, f_runs, last = [], [], None
                for r in range(a.repeats):
                    order = ("dlio", "fio") if r % 2 == 0 else ("fio", "dlio")  # who goes first alternates
                    for side in order:
                        if side == "dlio":
                            bw, last = dlio_point(folder, n, a.bs, a.file_size, a.runtime, os.path.join(tmp, "d.json"))
                            d_runs.append(bw)
                        else:
                            f_runs.append(fio_point(folder, n, a.bs, a.file_size, a.runtime))
                d, f = statistics.median(d_runs), statistics.median(f_runs)
                pairs = Paired.of(d_runs, f_runs)
                ratio = pairs.median
                worst = ratio if worst is None else min(worst, ratio)
                print(
                    f"{folder:<26} {n:>2} {d:>11.0f} {f:>10.0f} {ratio:>6.2f} "
                    f"{last['bw_sum_of_ranks_MiB_s']:>10.0f} {last['slowest_rank_s']:>9.2f}  "
                    f"{'ok' if ratio >= 0.9 else 'BELOW 0.9x'}  pairs {pairs.spread()}"
                )
                print(
                    f"{'':<29}runs: "
                    + ", ".join(
                        f"{'dlio-fast' if r % 2 == 0 else 'fio'} first {x:.0f}/{y:.0f}"
                        for r, (x, y) in enumerate(zip(d_runs, f_runs))
                    )
                )
            for r in range(max(ranks)):
                try:
                    os.unlink(os.path.join(folder, f"dlio-fast-ior.{r}.dat"))
                except FileNotFoundError:
                    pass
    print(f"worst ratio {worst:.2f} (goal >= 0.90)")


if __name__ == "__main__":
    main()
