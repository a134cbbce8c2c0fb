#!/usr/bin/env python3
"""The README's imagenet run with `--cache drop` on the real disk, next to what the device gives for the
same transfer size and number of reads in flight (issue 42).

dlio-fast: `run -w imagenet --scale 0.01 --cache drop` (12,812 JPEG files of ~112 KiB in 1,000 folders,
each file's pages dropped before every epoch, 8 reader threads of one read in flight each), compute 0 so
that the epoch is the reading alone; its figure is the exact read MiB/s (bytes read over the epochs'
time, `metrics.MiB_per_second_mean` of dlio-fast.json), and its verdict must say `storage`.

The ceiling: fio reading one file of the dataset's size at 112 KiB random, 8 jobs of one read in flight
(the same concurrency), O_DIRECT (the device's own) and buffered with the file's pages dropped first
(invalidate=1), time based; the higher of the two is the bar. The same run is also made with the io_uring
engine (8 threads x qd 4) beside it, for what reading across files with more in flight gives.

Each repeat runs the tools back to back (paired.py); the verdict is the median of the paired ratios, with
their spread. Goal (issue 42): >= 0.8x the ceiling. Needs fio (apt-get install fio) and a folder on a real
disk (not tmpfs). Usage:
  python bench/imagenet_drop_vs_ceiling.py [--dir /var/tmp/dlio-fast-imagenet] [--repeats 5] [--runtime 10]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired import Paired, add_repeat_args, warn_few  # noqa: E402

GOAL = 0.8
READERS = 8  # the imagenet workload's reader.read_threads
BS = "112k"  # the workload's mean JPEG (record_length_bytes 114,660)


def dlio_run(data, out, engine=None):
    """One training run of 2 epochs at compute 0 over the cold dataset: (read MiB/s, verdict)."""
    sets = ["train.epochs=2", "train.computation_time=0", f"dataset.data_folder={data}"]
    sets += [f"dlio_fast.engine={engine}", "dlio_fast.qd=4"] if engine else []
    cmd = [sys.executable, "-m", "dlio", "-q", "run", "-w", "imagenet", "--scale", "0.01", "--cache", "drop"]
    cmd += [a for s in sets for a in ("--set", s)] + ["-o", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"dlio-fast failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    with open(os.path.join(out, "dlio-fast.json")) as f:
        doc = json.load(f)
    return doc["metrics"]["MiB_per_second_mean"], {str(v.get("verdict")) for v in doc.get("verdicts") or []}


def dataset_bytes(data):
    train = os.path.join(data, "train")
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(train) for n in names)


def fio_point(folder, size, runtime, direct):
    """fio at 112 KiB random over one file of the dataset's size, READERS jobs of one read in flight."""
    cmd = ["fio", "--name=ceil", f"--filename={os.path.join(folder, 'ceiling.bin')}", f"--size={size}"]
    cmd += ["--rw=randread", f"--bs={BS}", "--ioengine=psync", f"--numjobs={READERS}", "--group_reporting"]
    cmd += ["--time_based", f"--runtime={runtime}", "--randrepeat=0", "--output-format=json"]
    cmd += ["--direct=1"] if direct else ["--direct=0", "--invalidate=1"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"fio failed: {p.stderr.strip()[-2000:]}")
    job = json.loads(p.stdout[p.stdout.index("{") :])["jobs"][0]
    return job["read"]["bw_bytes"] / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/var/tmp/dlio-fast-imagenet", help="a folder on the real disk")
    ap.add_argument("--runtime", type=int, default=10, help="seconds per fio point")
    add_repeat_args(ap)
    a = ap.parse_args()
    warn_few(a.repeats)
    if not shutil.which("fio"):
        sys.exit("fio is not on the PATH: apt-get install fio")
    data = os.path.join(a.dir, "imagenet")
    os.makedirs(a.dir, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        dlio_run(data, os.path.join(tmp, "gen"))  # generates the dataset on the first run (not measured)
        size = dataset_bytes(data)
        print(f"dataset: {data}, {size / 2**30:.2f} GiB; fio file of the same size; {a.repeats} pairs")
        rows = {"dlio-fast psync x8": [], "dlio-fast io_uring x8 qd4": [], "fio direct": [], "fio buffered": []}
        verdicts = set()
        for i in range(a.repeats):
            mib, v = dlio_run(data, os.path.join(tmp, f"p{i}"))
            rows["dlio-fast psync x8"].append(mib)
            verdicts |= v
            rows["dlio-fast io_uring x8 qd4"].append(dlio_run(data, os.path.join(tmp, f"u{i}"), "io_uring")[0])
            rows["fio direct"].append(fio_point(tmp, size, a.runtime, True))
            rows["fio buffered"].append(fio_point(tmp, size, a.runtime, False))
            print(f"pair {i + 1}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in rows.items()) + " MiB/s", flush=True)
        ceiling = [max(d, b) for d, b in zip(rows["fio direct"], rows["fio buffered"])]
        ok = True
        for name in ("dlio-fast psync x8", "dlio-fast io_uring x8 qd4"):
            pr = Paired.of(rows[name], ceiling)
            met = pr.median >= GOAL
            ok = ok and (met or "io_uring" in name)  # the verdict is on the README's command
            print(
                f"{name:<26} / ceiling: {pr.median:.3f}  spread {pr.spread()}  goal >= {GOAL}: "
                f"{'PASS' if met else 'FAIL'}{'' if 'psync' in name else ' (information)'}"
            )
        print(f"dlio-fast verdicts: {', '.join(sorted(verdicts))} (each must be the storage's)")
        sys.exit(0 if ok and all(v.startswith("storage") for v in verdicts) else 1)


if __name__ == "__main__":
    main()
