#!/usr/bin/env python3
"""The README's imagenet run with `--cache drop` on the real disk, next to what the device gives for the
same transfer size and number of reads in flight (issue 42).

dlio-fast: `run -w imagenet --scale 0.01 --cache drop` (12,812 JPEG files of ~112 KiB in 1,000 folders,
each file's pages dropped before every epoch, 8 reader threads of one read in flight each), compute 0 so
that the epoch is the reading alone; its figure is the exact read MiB/s (bytes read over the epochs'
time, `metrics.MiB_per_second_mean` of dlio-fast.json), and its verdict must say `storage`.

The ceiling: fio reading one file of the dataset's size at 112 KiB random, 8 jobs of one read in flight
(the same concurrency), O_DIRECT (the device's own) and buffered with the file's pages dropped first
(invalidate=1), each job over its own eighth of the file once (as an epoch reads each byte once); the
higher of the two is the bar. Beside the verdict, for where the time goes: the same run with
`--engine odirect` against fio O_DIRECT (the harness on the device's own path), the README's run against
fio buffered (the same reads through the page cache), the io_uring engine (8 threads x qd 4: more in
flight across files), and the README's run against 8 plain readers of the same files (8 `cat` processes,
each over its own eighth of the files in a shuffled order, the files' pages dropped first as `--cache drop`
drops them: posix_fadvise DONTNEED per file): the harness's own part, with the files' layout on the disk
the same for both, where the one-file ceiling has one contiguous file read at one block size.

Each repeat runs the tools back to back (paired.py), in reverse order every other repeat; the verdict is
the median of the paired ratios, with their spread. Goal (issue 42): >= 0.8x the ceiling. Needs fio
(apt-get install fio) and a folder on a real disk (not tmpfs). Usage:
  python bench/imagenet_drop_vs_ceiling.py [--dir /var/tmp/dlio-fast-imagenet] [--repeats 5]
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired import Paired, add_repeat_args, warn_few  # noqa: E402

GOAL = 0.8
READERS = 8  # the imagenet workload's reader.read_threads
BS = "112k"  # the workload's mean JPEG (record_length_bytes 114,660)


def dlio_run(data, out, extra=()):
    """One training run of 2 epochs at compute 0 over the cold dataset: (read MiB/s, verdict)."""
    sets = ["train.epochs=2", "train.computation_time=0", f"dataset.data_folder={data}"]
    cmd = [sys.executable, "-m", "dlio", "-q", "run", "-w", "imagenet", "--scale", "0.01", "--cache", "drop"]
    cmd += [a for s in sets for a in ("--set", s)] + list(extra) + ["-o", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"dlio-fast failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    with open(os.path.join(out, "dlio-fast.json")) as f:
        doc = json.load(f)
    return doc["metrics"]["MiB_per_second_mean"], {str(v.get("verdict")) for v in doc.get("verdicts") or []}


def dataset_bytes(data):
    train = os.path.join(data, "train")
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(train) for n in names)


def lay_out(path, size):
    """The ceiling's file, written once with incompressible data and synced (fio reads it as it is)."""
    block = os.urandom(2**20)
    with open(path, "wb") as f:
        for done in range(0, size, len(block)):
            f.write(block[: min(len(block), size - done)])
        os.fsync(f.fileno())


def fio_point(folder, size, direct):
    """fio at 112 KiB random over one file of the dataset's size, READERS jobs of one read in flight, each
    job over its own eighth once, as an epoch reads each byte once: a buffered job that ran on by time would
    read back the pages it had already brought in, the page cache's speed and not the device's."""
    share = size // READERS // 2**20 * 2**20
    # No --filesize: with it, fio's size is a job's I/O amount over the rest of the file, the jobs'
    # ranges overlap and 40 % of the reads found pages another job had brought in.
    cmd = ["fio", "--name=ceil", f"--filename={os.path.join(folder, 'ceiling.bin')}", f"--size={share}"]
    cmd += [f"--offset_increment={share}", "--rw=randread", f"--bs={BS}", "--ioengine=psync"]
    cmd += [f"--numjobs={READERS}", "--group_reporting", "--randrepeat=0", "--output-format=json"]
    cmd += ["--direct=1"] if direct else ["--direct=0", "--invalidate=1"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"fio failed: {p.stderr.strip()[-2000:]}")
    job = json.loads(p.stdout[p.stdout.index("{") :])["jobs"][0]
    return job["read"]["bw_bytes"] / 2**20


def drop_pages(files):
    """The files' cached pages dropped, as dlio-fast's --cache drop does before an epoch (metadata kept)."""
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cat_readers(data):
    """READERS `cat` processes reading the dataset's files, each its own share in a shuffled order, once:
    MiB/s over the wall time from their start to the last one's end (their starts included)."""
    files = [os.path.join(d, n) for d, _, names in os.walk(os.path.join(data, "train")) for n in names]
    random.shuffle(files)
    drop_pages(files)
    t0 = time.perf_counter()
    procs = [subprocess.Popen(["cat", *files[i::READERS]], stdout=subprocess.DEVNULL) for i in range(READERS)]
    if any(p.wait() for p in procs):
        sys.exit("cat failed reading the dataset")
    return dataset_bytes(data) / (time.perf_counter() - t0) / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/var/tmp/dlio-fast-imagenet", help="a folder on the real disk")
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
        lay_out(os.path.join(tmp, "ceiling.bin"), size)
        print(f"dataset: {data}, {size / 2**30:.2f} GiB; fio file of the same size; {a.repeats} pairs")
        runs = {  # name: (what makes one figure, the verdict's ceiling or the row it is held against)
            "dlio-fast psync x8": (lambda out: dlio_run(data, out), "ceiling"),
            "dlio-fast odirect x8": (lambda out: dlio_run(data, out, ["--engine", "odirect"]), "fio direct"),
            "dlio-fast io_uring x8 qd4": (
                lambda out: dlio_run(data, out, ["--engine", "io_uring", "--qd", "4"]),
                "ceiling",
            ),
            "fio direct": (lambda out: (fio_point(tmp, size, True), set()), None),
            "fio buffered": (lambda out: (fio_point(tmp, size, False), set()), None),
            "cat x8 same files": (lambda out: (cat_readers(data), set()), None),
        }
        rows = {name: [] for name in runs}
        verdicts = set()
        for i in range(a.repeats):
            order = list(runs.items())[:: 1 if i % 2 == 0 else -1]  # who goes first alternates
            for n, (name, (one, _)) in enumerate(order):
                mib, v = one(os.path.join(tmp, f"r{i}-{n}"))
                rows[name].append(mib)
                verdicts |= v
            print(f"pair {i + 1}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in rows.items()) + " MiB/s", flush=True)
        rows["ceiling"] = [max(d, b) for d, b in zip(rows["fio direct"], rows["fio buffered"])]
        pairs = [(name, against) for name, (_, against) in runs.items() if against]
        pairs += [("dlio-fast psync x8", "fio buffered"), ("fio buffered", "fio direct")]  # the page cache's cost
        pairs += [("dlio-fast psync x8", "cat x8 same files")]  # the harness against plain readers, same layout
        for name, against in pairs:
            pr = Paired.of(rows[name], rows[against])
            line = f"{name:<26} / {against:<17}: {pr.median:.3f}  spread {pr.spread()}"
            if (name, against) == pairs[0]:  # the verdict is on the README's command against the ceiling
                ok = pr.median >= GOAL
                line += f"  goal >= {GOAL}: {'PASS' if ok else 'FAIL'}"
            print(line + ("" if (name, against) == pairs[0] else "  (information)"))
        print(f"dlio-fast verdicts: {', '.join(sorted(verdicts))} (each must be the storage's)")
        sys.exit(0 if ok and all(v.startswith("storage") for v in verdicts) else 1)


if __name__ == "__main__":
    main()
