#!/usr/bin/env python3
"""DLIO 2.0.0 and dlio-fast side by side: the same scaled workload on the same files.

Each case's dataset is generated once by dlio-fast (DLIO's layout and npz format) in --dir
(tmpfs by default); then DLIO (`dlio_benchmark ... ++workload.dataset.data_folder=DIR
++workload.workflow.generate_data=False`) and dlio-fast (`python -m dlio run` with the very same
DLIO-style overrides) train on it. Each of --repeats repeats (5 by default) runs both back to back,
alternating who goes first, and gives one ratio (dlio-fast / DLIO samples/s); the verdict is the median
of these per-repeat ratios (not the ratio of the medians: a pair sees the same minute of this shared
machine), printed with the pairs' spread (min-max, IQR). --quick: 1 epoch per run, the same pairs.
computation_time is 0 everywhere, so both measure only their own read path.

Cases (npz / pytorch: what DLIO 2.0.0 reads without DALI or TensorFlow trouble):
  bert-like     4,096 npz files of one 2.5 KB sample, batch 48, 1 reader (BERT's sample size)
  npz-64k       2,048 npz files of 64 KiB, batch 32, 2 readers (dlio-measured.md's small-file case)
  unet3d-like   16 npz files of ~140 MB (unet3d_h100's size spread), batch 2, 4 readers

Goal: dlio-fast >= 10x DLIO's samples/s on small samples and where DLIO is CPU-bound. Where the
files' own read ceiling (`dlio-fast io` on the same files, 4 MiB sequential, same threads) is less
than 10x DLIO (big files on tmpfs: memory bandwidth), the goal there is 0.9x that ceiling. That
ceiling is measured in every repeat too, next to dlio-fast (a repeat runs DLIO, dlio-fast, ceiling or
ceiling, dlio-fast, DLIO); whether it sits below 10x DLIO is the median of the per-repeat ceiling / DLIO
read MiB/s, and the verdict there is the median of the per-repeat dlio-fast / ceiling read MiB/s
(dlio-fast's read MiB/s as DLIO's: samples/s x the mean file size), printed with those pairs' spread.

Left of the bar: what each writes to summary.json (DLIO's formulas: samples/s, "MB/s" = samples/s x
the nominal record length / 2^20, AU; the ratio uses these samples/s, the same formula on both
sides); right of it: dlio-fast's exact figures over whole epochs (dlio-fast.json per-epoch
samples, bytes really read and duration; CPU per sample)
and each tool's whole wall time (start-up included). The "read MiB/s" of DLIO shown here is
samples/s x the mean file size (npz: numpy reads the whole file per sample).

Needs DLIO: uses --dlio-bin, else /tmp/dlio-venv/bin/dlio_benchmark, else dlio_benchmark on PATH;
if none runs, prints how to install it (../shared/reference/dlio-measured.md) and exits 0.
Usage: python bench/vs_dlio.py [--cases bert-like,npz-64k,unet3d-like] [--epochs 2] [--repeats 5]
                               [--quick] [--dir /dev/shm/dlio-fast-vs-dlio] [--keep]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from paired import Paired, add_repeat_args, warn_few  # noqa: E402

INSTALL = """DLIO (dlio_benchmark 2.0.0) is not installed. To install it for this bench (never as a dependency):
  python3 -m venv /tmp/dlio-venv
  /tmp/dlio-venv/bin/pip install --no-deps dlio-benchmark==2.0.0
  /tmp/dlio-venv/bin/pip install 'numpy<2.3' h5py pandas psutil Pillow PyYAML omegaconf \\
      'hydra-core>=1.3.2' pydftracer==1.0.2 mpi4py mpich torch==2.13.0 tensorflow
(`mpich` brings the MPI library the mpi4py wheel loads when no system MPI is installed.)
Then: python bench/vs_dlio.py   (or --dlio-bin /path/to/dlio_benchmark)"""

# name: (DLIO workload, overrides without the ++workload. prefix, bandwidth-bound?)
CASES = {
    "bert-like": (
        "unet3d_h100",
        {
            "dataset.num_files_train": 4096,
            "dataset.record_length": 2500,
            "dataset.record_length_stdev": 0,
            "dataset.record_length_resize": 2500,
            "reader.batch_size": 48,
            "reader.read_threads": 1,
        },
        False,
    ),
    "npz-64k": (
        "unet3d_h100",
        {
            "dataset.num_files_train": 2048,
            "dataset.record_length": 65536,
            "dataset.record_length_stdev": 0,
            "dataset.record_length_resize": 65536,
            "reader.batch_size": 32,
            "reader.read_threads": 2,
        },
        False,
    ),
    "unet3d-like": (
        "unet3d_h100",
        {"dataset.num_files_train": 16, "reader.batch_size": 2, "reader.read_threads": 4},
        True,
    ),
}
COMMON = {
    "dataset.num_files_eval": 0,
    "dataset.num_samples_per_file": 1,
    "dataset.format": "npz",
    "reader.data_loader": "pytorch",
    "workflow.train": True,
    "workflow.evaluation": False,
    "workflow.checkpoint": False,
    "train.computation_time": 0,
    "checkpoint.model_size": 1024,  # DLIO allocates the model tensor even with checkpointing off
}
SIDES = {"dlio": "DLIO", "fast": "dlio-fast", "ceiling": "ceiling"}


def find_dlio(given):
    for cand in ([given] if given else []) + ["/tmp/dlio-venv/bin/dlio_benchmark", shutil.which("dlio_benchmark")]:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return [cand]
    if given:
        return None
    try:  # importable in this interpreter?
        import importlib.util

        if importlib.util.find_spec("dlio_benchmark") is not None:
            return [sys.executable, "-m", "dlio_benchmark.main"]
    except (ImportError, ValueError):
        pass
    return None


def dlio_works(cmd):
    """DLIO 2.0.0 imports torch, tensorflow and mpi4py at start: check that it gets that far."""
    py = sys.executable
    if cmd[0] != sys.executable:  # a console script: its interpreter is on the #! line
        with open(cmd[0]) as f:
            first = f.readline()
        if first.startswith("#!"):
            py = first[2:].strip().split()[0]
    p = subprocess.run([py, "-c", "import dlio_benchmark.main"], capture_output=True, text=True, env=dlio_env())
    return p.returncode == 0, (p.stderr.strip().splitlines() or [""])[-1]


def dlio_env():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore", DFTRACER_ENABLE="0")
    return env


def overrides(workload, case_over, data_folder, epochs, out):
    kv = dict(COMMON)
    kv.update(case_over)
    kv.update(
        {
            "dataset.data_folder": data_folder,
            "workflow.generate_data": False,
            "train.epochs": epochs,
            "output.folder": out,
        }
    )
    return [f"workload={workload}"] + [f"++workload.{k}={v}" for k, v in kv.items()]


def run(cmd, cwd, env=None, timeout=1800):
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"{' '.join(cmd[:3])} ... exited {p.returncode}:\n{tail}")
    return wall


def generate(workload, case_over, folder, epochs, tmp):
    """dlio-fast writes the dataset in DLIO's layout (skips files already complete)."""
    cmd = [sys.executable, "-m", "dlio", "-q", "generate"] + overrides(
        workload, case_over, folder, epochs, os.path.join(tmp, "gen")
    )
    t = run(cmd, ROOT)
    train = os.path.join(folder, "train")
    sizes = [os.path.getsize(os.path.join(train, f)) for f in os.listdir(train) if f.endswith(".npz")]
    return t, sizes


def run_dlio(dlio_cmd, workload, case_over, folder, epochs, tmp, i):
    out = os.path.join(tmp, f"dlio-{i}")
    wall = run(dlio_cmd + overrides(workload, case_over, folder, epochs, out), tmp, env=dlio_env())
    m = json.load(open(os.path.join(out, "summary.json")))["metric"]
    return {
        "sps": m["train_throughput_mean_samples_per_second"],
        "MBps": m["train_io_mean_MB_per_second"],
        "au": m["train_au_mean_percentage"],
        "wall": wall,
        "epochs": m["train_throughput_samples_per_second"],
    }


def run_fast(workload, case_over, folder, epochs, tmp, i):
    out = os.path.join(tmp, f"fast-{i}")
    shutil.rmtree(out, ignore_errors=True)  # a run never writes over a finished run's folder: each its own
    cmd = [sys.executable, "-m", "dlio", "-q", "run"] + overrides(workload, case_over, folder, epochs, out)
    wall = run(cmd, ROOT)
    m = json.load(open(os.path.join(out, "summary.json")))["metric"]
    doc = json.load(open(os.path.join(out, "dlio-fast.json")))
    x = doc["metrics"]
    # whole epochs: samples and bytes really read / epoch wall time (metrics.*_mean start their
    # window at the first counted step's fetch, after readers have prefetched: inflated with few steps)
    eps = [e for r in doc["ranks"] for e in r["epochs"] if e.get("train")]
    secs = max(1e-9, sum(e["duration_s"] for e in eps) / max(1, len(doc["ranks"])))
    return {
        "sps": m["train_throughput_mean_samples_per_second"],
        "MBps": m["train_io_mean_MB_per_second"],
        "au": m["train_au_mean_percentage"],
        "wall": wall,
        "epochs": m["train_throughput_samples_per_second"],
        "x_sps": sum(e["samples"] for e in eps) / secs,
        "x_MiBps": sum(e["bytes"] for e in eps) / secs / 2**20,
        "m_sps": x["samples_per_second_mean"],
        "x_au": x["au_mean_percentage"],
        "cpu_us": x["cpu_us_per_sample"],
    }


def ceiling(folder, threads, tmp):
    """The files' own read ceiling: dlio-fast io, 4 MiB sequential, buffered, `threads` threads."""
    train = os.path.join(folder, "train")
    files = sorted(os.path.join(train, f) for f in os.listdir(train) if f.endswith(".npz"))
    total = sum(os.path.getsize(f) for f in files)
    js = os.path.join(tmp, "ceiling.json")
    run(
        [
            sys.executable,
            "-m",
            "dlio",
            "-q",
            "io",
            *files,
            "--rw",
            "read",
            "--bs",
            "4m",
            "--engine",
            "posix",
            "--threads",
            str(threads),
            "--buffered",
            f"--size={total}",
            "--json",
            js,
        ],
        ROOT,
    )
    return json.load(open(js))["points"][0]["bw_MiB_s"]


def med(runs, k):
    return statistics.median(r[k] for r in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES), help="comma list of: " + ", ".join(CASES))
    ap.add_argument("--epochs", type=int, default=None, help="epochs per run (2; --quick: 1)")
    add_repeat_args(ap)
    ap.add_argument("--dir", default="/dev/shm/dlio-fast-vs-dlio", help="where the datasets go (tmpfs)")
    ap.add_argument("--dlio-bin", default=None, help="path of DLIO's dlio_benchmark script")
    ap.add_argument("--keep", action="store_true", help="keep the datasets")
    a = ap.parse_args()
    if a.epochs is None:
        a.epochs = 1 if a.quick else 2
    if a.repeats < 1:
        sys.exit("--repeats must be >= 1")
    cases = [c.strip() for c in a.cases.split(",") if c.strip()]
    for c in cases:
        if c not in CASES:
            sys.exit(f"unknown case {c!r}: choose from {', '.join(CASES)}")
    dlio_cmd = find_dlio(a.dlio_bin)
    if dlio_cmd is None:
        print(INSTALL)
        return 0
    ok, why = dlio_works(dlio_cmd)
    if not ok:
        print(f"DLIO found at {dlio_cmd[0]} but it does not start: {why}\n")
        print(INSTALL)
        return 0
    print(
        "load average before: %.2f %.2f %.2f (%d CPUs; other work on the machine skews timings)"
        % (*os.getloadavg(), os.cpu_count())
    )
    warn_few(a.repeats)
    print(f"DLIO: {' '.join(dlio_cmd)}; dlio-fast: {sys.executable} -m dlio (from {ROOT})")
    print(
        f"data in {a.dir}; computation_time 0; {a.epochs} epochs; {a.repeats} paired repeats "
        "(both tools back to back, alternating who goes first)"
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="vs_dlio-") as tmp:
        for name in cases:
            workload, over, bw_bound = CASES[name]
            threads = over["reader.read_threads"]
            folder = os.path.join(a.dir, name)
            gtime, sizes = generate(workload, over, folder, a.epochs, tmp)
            mean_file = statistics.fmean(sizes)
            print(
                f"\n== {name}: {len(sizes)} npz files, mean {mean_file / 2**20:.3f} MiB, "
                f"batch {over['reader.batch_size']}, {threads} reader(s)  "
                f"(generated/checked in {gtime:.1f} s)"
            )
            d_runs, f_runs, c_runs = [], [], []
            for i in range(a.repeats):
                # dlio-fast in the middle when the ceiling runs too: it is then next to both of its peers
                order = ["dlio", "fast"] + (["ceiling"] if bw_bound else [])
                if i % 2:
                    order.reverse()  # alternate who goes first
                for side in order:
                    if side == "dlio":
                        d_runs.append(run_dlio(dlio_cmd, workload, over, folder, a.epochs, tmp, i))
                    elif side == "fast":
                        f_runs.append(run_fast(workload, over, folder, a.epochs, tmp, i))
                    else:
                        c_runs.append(ceiling(folder, threads, tmp))
                d, f = d_runs[-1]["sps"], f_runs[-1]["sps"]
                print(
                    f"  run {i + 1} ({SIDES[order[0]]} first): DLIO {d:.1f}, "
                    f"dlio-fast {f:.1f} samples/s, {f / d if d else float('inf'):.1f}x"
                    + (
                        f"; ceiling {c_runs[-1]:.0f} MiB/s, dlio-fast {f * mean_file / 2**20:.0f} MiB/s"
                        if bw_bound
                        else ""
                    )
                )
            d_sps, f_sps = med(d_runs, "sps"), med(f_runs, "sps")
            print(
                f"{'median of':<11} {'samples/s':>11} {'per epoch, run 1':>20} {'MB/s':>9} {'AU %':>6} | "
                f"{'epoch samples/s':>15} {'read MiB/s':>11} {'CPU us/sample':>13} {'wall s':>7}"
            )
            ep = lambda r: "/".join(f"{x:.0f}" for x in r["epochs"])  # noqa: E731
            print(
                f"{'DLIO 2.0.0':<11} {d_sps:>11.1f} {ep(d_runs[0]):>20} {med(d_runs, 'MBps'):>9.1f} "
                f"{med(d_runs, 'au'):>6.2f} | {'-':>15} {'~' + format(d_sps * mean_file / 2**20, '.1f'):>11} "
                f"{'-':>13} {med(d_runs, 'wall'):>7.1f}"
            )
            print(
                f"{'dlio-fast':<11} {f_sps:>11.1f} {ep(f_runs[0]):>20} {med(f_runs, 'MBps'):>9.1f} "
                f"{med(f_runs, 'au'):>6.2f} | {med(f_runs, 'x_sps'):>15.1f} {med(f_runs, 'x_MiBps'):>11.1f} "
                f"{med(f_runs, 'cpu_us'):>13.2f} {med(f_runs, 'wall'):>7.1f}"
            )
            # the verdict's figure: the median of the per-repeat ratios (inf where DLIO read nothing)
            pairs = Paired(f["sps"] / d["sps"] if d["sps"] else float("inf") for f, d in zip(f_runs, d_runs))
            goal, note, verdict = 10.0, ">= 10x", pairs
            if bw_bound:
                # read MiB/s of both tools as DLIO counts it: samples/s x the mean file size
                d_read = [r["sps"] * mean_file / 2**20 for r in d_runs]
                f_read = [r["sps"] * mean_file / 2**20 for r in f_runs]
                ceil_dlio = Paired.of(c_runs, d_read)
                print(
                    f"read ceiling of these files (dlio-fast io, 4 MiB seq, {threads} threads): "
                    f"median {statistics.median(c_runs):.0f} MiB/s; ceiling / DLIO's read MiB/s "
                    f"{ceil_dlio.median:.1f}x, pairs {ceil_dlio.spread()}"
                )
                if ceil_dlio.median < 10 / 0.9:
                    goal, verdict = 0.9, Paired.of(f_read, c_runs)
                    note = f">= 0.9x ceiling (~{0.9 * ceil_dlio.median:.1f}x DLIO)"
            rows.append((name, d_sps, f_sps, pairs, note, verdict, goal))
        print(
            "\nsamples/s, dlio-fast / DLIO: the median of the per-repeat ratios (DLIO, dlio-fast: medians); "
            "the verdict's pairs' spread beside it"
        )
        print(f"{'case':<13} {'DLIO':>10} {'dlio-fast':>11} {'ratio':>8}  {'goal':<30} {'verdict':<7} spread of pairs")
        for name, d, f, pairs, note, verdict, goal in rows:
            on = "" if verdict is pairs else f"dlio-fast/ceiling {verdict.median:.3f}, "
            also = "" if verdict is pairs else f"; dlio-fast/DLIO pairs {pairs.spread()}"
            print(
                f"{name:<13} {d:>10.1f} {f:>11.1f} {pairs.median:>7.1f}x  {note:<30} "
                f"{'ok' if verdict.median >= goal else 'MISSED':<7} {on}pairs {verdict.spread()}{also}"
            )
    if not a.keep:
        shutil.rmtree(a.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
