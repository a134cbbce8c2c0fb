#!/usr/bin/env python3
"""Model loading (`dlio-fast run -w load_model`) next to a peer reading the same safetensors shards the
same way, cold, paired runs, the median of the paired ratios per read mode with the pairs' spread.

  mode       dlio-fast                         peer
  mmap       C mmap engine, a load per page    bench/mmap_fault.c (compiled here): maps each shard and
                                               faults its pages in without copying, as dlio-fast does;
                                               at its best of a load per page (vmtouch -t's loop) and
                                               madvise(MADV_POPULATE_READ) per request (the kernel
                                               faults the range in, no trap per page)
  read       posix, buffered pread             fio --ioengine=psync
  odirect    posix, O_DIRECT                   fio --ioengine=psync --direct=1
  io_uring   io_uring, O_DIRECT, qd 8          fio --ioengine=io_uring --direct=1 --iodepth=8
                                               --fixedbufs=1 --registerfiles=1 (fio at its best; dlio-fast's
                                               model load registers neither)

Why the mmap peer is not fio (issue 42): fio's mmap engine memcpy()s every block out of the mapping,
a copy of every byte that dlio-fast's mmap load (one load per page, as a safetensors mmap that hands
out views) never does; 2.07x over that peer said nothing. dlio-fast has no mmap mode that copies, so
the fair peer is one that faults the same pages of the same mapping (MAP_SHARED, PROT_READ, no hint,
files in order, --bs requests) without copying, at the best of two ways to do it; its clock runs from
before the first open to after the last close, as dlio-fast's time to ready does.
Both read every shard whole, one thread, one file after the other, in --bs requests (dlio-fast's
model_load.transfer_size), with the shards' pages dropped first (posix_fadvise DONTNEED, checked) and
free memory warmed alike (host_memory.warm_free_memory). fio on huge pages (THP always for its run,
--iomem_align=2m, as vs_fio.py: the virtio disk splits O_DIRECT reads from 4 KiB pages),
--file_service_type=sequential, --fadvise_hint=0 (dlio-fast gives no hint, nor does safetensors), its
bandwidth over its job's runtime;
dlio-fast: the bytes of the load over its time to ready (the clock starts before the files are
opened, so it holds what the peer's does and more). Each tool loads twice, cold, and the second load
counts: dlio-fast's first comes a second of Python start-up after the bench's drop and memory warm-up
(by then this VM's balloon may have taken freed memory back, bench/README.md) and its second right
after its own drop; the peer runs once after the warm-up, then again right after a drop.
Goal: >= 0.95x the peer in every mode (median of --repeats pairs, 5 by default; --quick: a 512 MiB
model). Needs fio on the PATH (apt-get install fio) and a C compiler (cc); installs nothing.
Usage: python bench/model_load_vs_fio.py [--dir /var/tmp/dlio-fast-bench-modelload] [--size 1g]
       [--shard 256m] [--bs 16m] [--repeats 5] [--quick] [--modes mmap,read,odirect,io_uring]
"""

import argparse
import functools
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
from dlio import _core  # noqa: E402
from dlio.base.units import parse_size  # noqa: E402
from dlio.system.host import drop_cache  # noqa: E402

FIO = {  # mode -> (fio engine, direct, iodepth)
    "read": ("psync", 0, 1),
    "odirect": ("psync", 1, 1),
    "io_uring": ("io_uring", 1, 8),
}
MMAP_WAYS = ("touch", "populate")  # bench/mmap_fault.c's two ways to fault a mapping in
GOAL = 0.95


def dlio_sets(a, mode):
    return [
        "model_load.model=generic",
        f"model_load.model_bytes={a.size}",
        f"model_load.shard_size={a.shard}",
        f"model_load.transfer_size={a.bs}",
        f"checkpoint.checkpoint_folder={a.dir}",
        "model_load.spread=whole",
        "model_load.cache=cold",
        "model_load.repeats=2",
        f"model_load.read_mode={mode}",
    ]


def run_dlio(a, mode, out):
    cmd = [sys.executable, "-m", "dlio", "run", "-q", "-w", "load_model", "--output", out]
    for s in dlio_sets(a, mode):
        cmd += ["--set", s]
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    with open(os.path.join(out, "dlio-fast.json")) as f:
        load = json.load(f)["loads"][1]  # the second: right after its own drop, as fio's run is after ours
    return load["bytes"] / 2**20 / load["slowest_rank_s"]


def run_fio(a, mode, files):
    engine, direct, qd = FIO[mode]
    cmd = [
        "fio",
        "--name=load",
        f"--filename={':'.join(f.replace(':', chr(92) + ':') for f in files)}",
        "--file_service_type=sequential",
        "--rw=read",
        f"--bs={a.bs}",
        f"--ioengine={engine}",
        f"--direct={direct}",
        f"--iodepth={qd}",
        "--fadvise_hint=0",
        "--invalidate=1",
        "--output-format=json",
    ]
    if engine == "io_uring":
        cmd += ["--fixedbufs=1", "--registerfiles=1"]
    with thp_always() as ok:  # fio at its best: its buffers on huge pages, as dlio-fast's pools are
        out = subprocess.run(cmd + (["--iomem_align=2m"] if ok else []), capture_output=True, text=True, check=True)
    job = json.loads(out.stdout[out.stdout.index("{") :])["jobs"][0]
    return job["read"]["bw_bytes"] / 2**20


def run_mmap_peer(exe, how, a, files):
    out = subprocess.run([exe, how, str(a.bs), *files], capture_output=True, text=True, check=True).stdout
    r = json.loads(out)
    return r["bytes"] / 2**20 / r["secs"]


def compile_peer(tmp):
    """bench/mmap_fault.c built into tmp; its path."""
    exe = os.path.join(tmp, "mmap_fault")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mmap_fault.c")
    subprocess.run(["cc", "-O2", "-o", exe, src], check=True)
    return exe


def cold(files, nbytes):
    drop_cache(files)  # checked with mincore: fails when pages stay
    warm_free_memory(nbytes + (1 << 30))


def peer_load(run, files, nbytes):
    """The peer's counted load: once after the warm-up (not counted, as dlio-fast's first), then again
    right after a drop."""
    cold(files, nbytes)
    run()
    drop_cache(files)
    return run()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", default="/var/tmp/dlio-fast-bench-modelload")
    p.add_argument("--size", default="1g", help="model bytes (a generic model; --quick: 512m)")
    p.add_argument("--shard", default="256m", help="shard size")
    p.add_argument("--bs", default="16m", help="bytes per request")
    add_repeat_args(p)
    p.add_argument("--modes", default="mmap,read,odirect,io_uring")
    a = p.parse_args()
    if shutil.which("fio") is None:
        sys.exit("fio is not on the PATH: apt-get install -y fio")
    if a.quick:
        a.size = "512m"
    a.size, a.shard, a.bs = parse_size(a.size), parse_size(a.shard), parse_size(a.bs)
    modes = [m for m in a.modes.split(",") if m]
    uring_why = next((w for n, _, ok, w in _core.engines() if n == "io_uring" and not ok), None)
    if "io_uring" in modes and uring_why:
        print(f"io_uring skipped: {uring_why}")
        modes.remove("io_uring")
    warn_few(a.repeats)
    tmp = tempfile.mkdtemp(prefix="dlio-fast-bench-")
    try:
        exe = compile_peer(tmp) if "mmap" in modes else None
        run_dlio(a, "read", os.path.join(tmp, "first"))  # writes the shards once (or reuses them)
        files = sorted(os.path.join(a.dir, n) for n in os.listdir(a.dir) if n.endswith(".safetensors"))
        nbytes = sum(os.path.getsize(f) for f in files)
        print(f"{len(files)} shards, {nbytes / 2**30:.2f} GiB at {a.dir}; bs {a.bs >> 20} MiB, {a.repeats} pairs")
        print(
            f"{'mode':<9} {'dlio-fast MiB/s':>16} {'peer MiB/s':>10} {'ratio':>7}  {'spread of pairs':<36} "
            f"{'peer':<22} goal    verdict"
        )
        failed = False
        for mode in modes:
            # peer variant -> its loads; the bar is the variant with the higher median, pair by pair
            if mode == "mmap":
                peers = {f"mmap_fault {h}": functools.partial(run_mmap_peer, exe, h, a, files) for h in MMAP_WAYS}
            else:
                peers = {f"fio {FIO[mode][0]}": functools.partial(run_fio, a, mode, files)}
            ours, theirs = [], {name: [] for name in peers}
            for i in range(a.repeats):
                cold(files, nbytes)
                ours.append(run_dlio(a, mode, os.path.join(tmp, f"{mode}{i}")))
                for name, run in peers.items():
                    theirs[name].append(peer_load(run, files, nbytes))
            bar = max(theirs, key=lambda name: statistics.median(theirs[name]))
            r = Paired.of(ours, theirs[bar])
            ok = r.median >= GOAL
            failed |= not ok
            others = ", ".join(f"{n} {statistics.median(v):.0f}" for n, v in theirs.items() if n != bar)
            print(
                f"{mode:<9} {statistics.median(ours):>16.1f} {statistics.median(theirs[bar]):>10.1f} "
                f"{r.median:>6.3f}x  {r.spread():<36} {bar:<22} >={GOAL:.2f}  {'ok' if ok else 'BELOW'}"
                + (f"   (other peer: {others} MiB/s)" if others else "")
            )
        print("(median of paired runs; a shared VM's disk moves by 2x between runs: the spread says how far)")
        sys.exit(1 if failed else 0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
