#!/usr/bin/env python3
"""What the training harness costs in bandwidth: a workload's read MiB/s next to plain reads of
the same files.

For each case, on tmpfs (/dev/shm: the page cache is the storage, so only the readers' own cost
is left), with computation_time 0:
  workload   `dlio-fast run` (training loop: reader threads, prefetch queue, trainer), MiB/s from
             the bytes actually read over whole epochs (dlio-fast.json ranks[].epochs[].bytes /
             duration_s; metrics.MiB_per_second_mean is printed too, but its window misses the
             prefetched reads, see whole_epochs())
  io         `dlio-fast io FILES --rw read --bs 4m --engine posix --threads T --buffered`, one
             pass worth of bytes (--size = the files' total). Two limits of `dlio-fast io` show here:
             thread t reads only file t (files past T are not read; it cycles its file) and a file
             smaller than --bs is refused, so for 2.8 MB files --bs drops to 2 MiB (tails unread)
  fio        fio psync, bs 4m (2 MiB for 2.8 MB files: fio reads only whole blocks, nothing of a
             file smaller than bs), T jobs, buffered, on the same files, each read once: job k
             reads files k, k + T, ... one after the other (--opendir of a folder of hard links of
             its own; with one folder for all, every job read every file, the T jobs side by side
             on the same pages: T times the bytes, all but the first read from the CPU's caches,
             which made fio's figure 5-8 % too high on tmpfs), group bandwidth
with T = the workload's read_threads. Each of --repeats repeats (5 by default) runs the three back
to back, workload, io, fio in runs 1, 3, 5 and fio, io, workload in runs 2, 4 (a drift over the run
then favours no side); ratios are medians of the per-repeat ratios, the wl/fio pairs' spread printed beside
the verdict. --quick: 1 epoch per workload run, 128 cosmoflow files, the same pairs (unet3d keeps 16
files: at batch 7 fewer leave one step per epoch).
Cases:
  unet3d      unet3d_h100: npz, 16 files of ~140 MB (its size spread), 4 readers, batch 7
  cosmoflow   cosmoflow_h100: 256 one-sample files of 2.8 MB, 4 readers, batch 1 (tfrecord:
              read as TFRecordDataset does, in 256 KiB transfers; --cosmo-format npz to read
              whole files in up to 4 MiB pieces instead)
Goal: workload bandwidth >= 0.9x fio's.
Needs fio on the PATH for the fio column (apt-get install fio); without it that column is skipped.
Usage: python bench/harness_overhead.py [--cases unet3d,cosmoflow] [--epochs 3] [--repeats 5] [--quick]
                                        [--unet3d-files 16] [--cosmo-files 256] [--dir /dev/shm/...]

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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from paired import Paired, add_repeat_args, warn_few  # noqa: E402


def dlio(args, check=True):
    p = subprocess.run([sys.executable, "-m", "dlio", "-q"] + args, cwd=ROOT, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"dlio-fast {' '.join(args[:2])} ... exited {p.returncode}:\n{p.stderr.strip()[-2000:]}")
    return p


def case_sets(name, a, folder):
    if name == "unet3d":
        wl, sets = "unet3d_h100", [f"dataset.num_files_train={a.unet3d_files}"]
    else:
        wl, sets = "cosmoflow_h100", [f"dataset.num_files_train={a.cosmo_files}", f"dataset.format={a.cosmo_format}"]
        if a.cosmo_format != "tfrecord":
            sets.append("reader.data_loader=pytorch")
    # A deep prefetch: with compute 0 and batch 1 (cosmoflow) a 2-batch queue makes every file wait
    # for a thread handoff, which measures the workload's configuration, not the harness.
    sets += [f"reader.prefetch_size={a.prefetch}"]
    sets += [
        f"dataset.data_folder={folder}",
        "dataset.num_files_eval=0",
        "train.computation_time=0",
        f"train.epochs={a.epochs}",
        "workflow.checkpoint=False",
        "workflow.evaluation=False",
        "workflow.generate_data=False",
    ]
    args = ["--workload", wl]
    for s in sets:
        args += ["--set", s]
    return args


def train_files(folder, ext):
    out = []
    for dirpath, dirnames, files in os.walk(os.path.join(folder, "train")):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "index"]
        out += [os.path.join(dirpath, f) for f in files if f.endswith("." + ext)]
    return sorted(out)


def whole_epochs(doc):
    """Bytes really read / wall time, over whole epochs of all ranks (from dlio-fast.json's
    per-epoch records). metrics.MiB_per_second_mean is not used: its window starts at the fetch of
    the first counted step, after the readers have already prefetched, so with few steps per
    epoch it is inflated without bound (dlio/report/metrics.py block_metrics)."""
    eps = [e for r in doc["ranks"] for e in r["epochs"] if e.get("train")]
    secs = max(1e-9, sum(e["duration_s"] for e in eps) / max(1, len(doc["ranks"])))
    return sum(e["bytes"] for e in eps) / secs / 2**20


def run_workload(wl_args, out):
    dlio(["run"] + wl_args + ["-o", out])
    doc = json.load(open(os.path.join(out, "dlio-fast.json")))
    return whole_epochs(doc), doc["settings"]["read_threads"], doc["metrics"]["MiB_per_second_mean"]


def io_bs(files):
    """4 MiB, or the largest power of two that fits the smallest file: `dlio-fast io` refuses a
    file smaller than --bs, and fio reads nothing of it (both read whole blocks only)."""
    smallest = min(os.path.getsize(f) for f in files)
    bs = 4 << 20
    while bs > smallest and bs > 4096:
        bs //= 2
    return bs


def run_io(files, threads, total, js):
    dlio(
        [
            "io",
            *files,
            "--rw",
            "read",
            "--bs",
            str(io_bs(files)),
            "--engine",
            "posix",
            "--threads",
            str(threads),
            "--buffered",
            f"--size={total}",
            "--json",
            js,
        ]
    )
    return json.load(open(js))["points"][0]["bw_MiB_s"]


def run_fio(files, threads, tmp):
    """fio reads exactly these files, each once: job k a folder of hard links to files k, k + threads,
    ... (same filesystem), given as its --opendir (a --filename list this long is refused; fio does not
    size symlinks). One folder for all jobs would have every job read every file, side by side: 4x the
    bytes, each page read by the jobs within moments, from the CPU's caches for all but the first."""
    if not os.path.isdir(tmp):
        for j in range(threads):
            os.makedirs(os.path.join(tmp, f"j{j}"))
            for k, f in enumerate(files[j::threads]):
                os.link(f, os.path.join(tmp, f"j{j}", f"{k:06d}-{os.path.basename(f)}"))
    cmd = [
        "fio",
        "--iomem_align=2m",
        "--rw=read",
        f"--bs={io_bs(files)}",
        "--ioengine=psync",
        "--direct=0",
        "--invalidate=0",
        "--file_service_type=sequential",
        "--group_reporting",
        "--output-format=json",
    ]
    for j in range(threads):  # options before the first --name are every job's
        cmd += [f"--name=seq{j}", f"--opendir={os.path.join(tmp, f'j{j}')}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"fio exited {p.returncode}: {(p.stderr or p.stdout).strip()[-1500:]}")
    out = p.stdout
    job = json.loads(out[out.index("{") :])["jobs"][0]["read"]
    if job["io_bytes"] <= 0:
        raise RuntimeError("fio read nothing")
    return job["bw_bytes"] / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="unet3d,cosmoflow")
    ap.add_argument("--epochs", type=int, default=None, help="epochs per workload run (3; --quick: 1)")
    add_repeat_args(ap)
    ap.add_argument("--prefetch", type=int, default=16, help="reader.prefetch_size of the workload runs")
    ap.add_argument("--unet3d-files", type=int, default=16)
    ap.add_argument("--cosmo-files", type=int, default=None, help="256 (--quick: 128)")
    ap.add_argument("--cosmo-format", default="tfrecord", choices=["tfrecord", "npz", "hdf5"])
    ap.add_argument("--dir", default="/dev/shm/dlio-fast-harness")
    ap.add_argument("--keep", action="store_true", help="keep the datasets")
    a = ap.parse_args()
    for k, full, quick in (("epochs", 3, 1), ("cosmo_files", 256, 128)):
        if getattr(a, k) is None:
            setattr(a, k, quick if a.quick else full)
    if a.repeats < 1:
        sys.exit("--repeats must be >= 1")
    print(
        "load average before: %.2f %.2f %.2f (%d CPUs; other work on the machine skews timings)"
        % (*os.getloadavg(), os.cpu_count())
    )
    have_fio = shutil.which("fio") is not None
    if not have_fio:
        print("fio is not on the PATH (apt-get install fio): the fio column is skipped")
    warn_few(a.repeats)
    rows = []
    with tempfile.TemporaryDirectory(prefix="harness-") as tmp:
        for name in [c.strip() for c in a.cases.split(",") if c.strip()]:
            if name not in ("unet3d", "cosmoflow"):
                sys.exit(f"unknown case {name!r} (unet3d, cosmoflow)")
            # the file count in the name: a kept folder of another count (--quick's) is not read by io and fio
            sub = f"unet3d-{a.unet3d_files}" if name == "unet3d" else f"{name}-{a.cosmo_format}-{a.cosmo_files}"
            folder = os.path.join(a.dir, sub)
            wl_args = case_sets(name, a, folder)
            dlio(["generate"] + wl_args)
            ext = "npz" if name == "unet3d" else a.cosmo_format.replace("hdf5", "hdf5")
            files = train_files(folder, ext)
            total = sum(os.path.getsize(f) for f in files)
            subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)  # warm (tmpfs: no-op)
            w, i, f, wm_rep = [], [], [], []
            threads = None
            links = os.path.join(a.dir, f".fio-links-{name}-{os.getpid()}")
            for r in range(a.repeats):
                # workload, io, fio, then reversed: the first repeat starts with the workload, whose run
                # tells io and fio the thread count (the same in every repeat: the same configuration)
                order = ["workload", "io"] + (["fio"] if have_fio else [])
                if r % 2:
                    order.reverse()
                for side in order:
                    if side == "workload":
                        bw, threads, rep = run_workload(wl_args, os.path.join(tmp, f"{name}-{r}"))
                        w.append(bw)
                        wm_rep.append(rep)
                    elif side == "io":
                        i.append(run_io(files, threads, total, os.path.join(tmp, "io.json")))
                    else:
                        f.append(run_fio(files, threads, links))
                print(
                    f"  {name} run {r + 1} ({order[0]} first): workload {w[-1]:.0f}, io {i[-1]:.0f}"
                    + (f", fio {f[-1]:.0f} MiB/s, wl/fio {w[-1] / f[-1]:.2f}" if have_fio else " MiB/s"),
                    flush=True,
                )
            shutil.rmtree(links, ignore_errors=True)
            rows.append((name, len(files), total, threads, w, i, f, io_bs(files), wm_rep))
    print(
        f"tmpfs {a.dir}, computation_time 0, {a.epochs} epochs per workload run, "
        f"{a.repeats} paired repeats (the order reversed every other repeat), medians (MiB/s); "
        "ratios: medians of the per-repeat ratios"
    )
    print(
        f"{'case':<10} {'files':>6} {'GiB':>6} {'thr':>4} {'workload':>9} {'io':>8} {'fio':>8} "
        f"{'wl/io':>6} {'wl/fio':>7} {'io/fio':>7}  {'goal':<14} verdict"
    )
    for name, nf, total, thr, w, i, f, bs, rep in rows:
        wm, im = statistics.median(w), statistics.median(i)
        fm = statistics.median(f) if f else None
        wl_fio = Paired.of(w, f) if f else None  # the verdict: the median of the per-repeat ratios
        ratio = wl_fio.median if wl_fio else None
        verdict = "n/a (no fio)" if fm is None else ("ok" if ratio >= 0.9 else "MISSED")
        print(
            f"{name:<10} {nf:>6} {total / 2**30:>6.2f} {thr:>4} {wm:>9.0f} {im:>8.0f} "
            f"{fm if fm else float('nan'):>8.0f} {Paired.of(w, i).median:>6.2f} "
            f"{ratio if ratio else float('nan'):>7.2f} "
            f"{Paired.of(i, f).median if f else float('nan'):>7.2f}  {'wl >= 0.9x fio':<14} {verdict}"
            + (f"  wl/fio pairs {wl_fio.spread()}" if wl_fio else "")
        )
        print(
            f"{'':<10} io/fio bs {bs >> 10} KiB; runs: workload {' '.join(f'{x:.0f}' for x in w)} "
            f"| io {' '.join(f'{x:.0f}' for x in i)}"
            + (f" | fio {' '.join(f'{x:.0f}' for x in f)}" if f else "")
            + f" | dlio-fast.json MiB_per_second_mean {' '.join(f'{x:.0f}' for x in rep)}"
        )
    if not a.keep:
        shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
