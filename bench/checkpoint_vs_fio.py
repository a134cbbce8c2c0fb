#!/usr/bin/env python3
"""Checkpoint save / load GB/s of dlio-fast next to fio's sequential write / read of the same bytes.

The checkpoint is a built-in LLM workload (default llama_7b: one rank, ZeRO-1, two files) shrunk with
--scale to about --size GiB.  dlio-fast writes it with dlio.checkpoint.save.save (16 MiB requests,
min(4, files) threads, checkpoint.fsync: true, so every file is fsynced inside the timed window) and
reads it back with dlio.checkpoint.load.load.  Writes: each tool creates its own files.  Reads: both read
the checkpoint dlio-fast just wrote (same blocks on disk), fio with one job per dlio-fast thread.
fio does the same total size with the same transfer size and
the same files (names aside) and sizes per thread (one fio job per dlio-fast thread), --fallocate=none (we do
not preallocate either), --end_fsync=1 (each job fsyncs its file inside its runtime).  Before every
run both sides start from no files (write) and from a dropped page cache (read: sync + drop_caches
when root, and posix_fadvise DONTNEED of the files: fio --invalidate=1, dlio-fast's load default).
GB/s here are 10^9 bytes/s: dlio-fast's bytes / its save (load) window, fio's bytes / job runtime.
Runs alternate (who goes first too), --repeats times; every write starts alike: both tools' files
deleted, sync, --settle seconds, caches dropped, free memory warmed. The verdict takes the median
of the per-repeat ratios (each repeat runs both tools back to back).  Goal: dlio-fast >= 0.9x fio on both.
Needs fio on the PATH.  Usage: python bench/checkpoint_vs_fio.py [--dir /var/tmp/ckpt-bench] [--size 1] [--repeats 12]

Free memory is warmed before every timed run, on both sides alike (``warm_free_memory``): this VM
hands freed memory back to its host, and a buffered write into such memory runs several times
slower (bench/README.md, "Memory handed back to the host").

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
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dlio import _core
from dlio.checkpoint import load as ckpt_load  # noqa: E402
from dlio.checkpoint import save as ckpt_save  # noqa: E402
from dlio.checkpoint.layout import plan_checkpoint  # noqa: E402
from dlio.checkpoint.transfers import TransferOptions  # noqa: E402
from dlio.config import load_config  # noqa: E402
from dlio.storage import file_sets  # noqa: E402
from dlio.storage.base import MAX_SET_THREADS  # noqa: E402
from dlio.system.host import free_page_reporting  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from host_memory import warm_free_memory  # noqa: E402
from paired import Paired  # noqa: E402

TRANSFER = 16 << 20


def drop_all():
    os.sync()
    try:
        _core.drop_all_caches()
        return "sync + drop_caches"
    except OSError:
        return "posix_fadvise only (not root)"


def fio(rw, folder, bins, sizes, engine, qd, direct, names=None):
    """One fio job per dlio-fast thread; each job writes (reads) that thread's files, with the same
    sizes, one after the other (fio's file_service_type=sequential), all in one group."""
    os.makedirs(folder, exist_ok=True)
    names = names or [f"ckpt.{i}" for i in range(len(sizes))]
    lines = [
        "[global]",
        "iomem_align=2m",
        f"directory={folder}",
        f"bs={TRANSFER}",
        f"rw={rw}",
        f"ioengine={engine}",
        f"iodepth={qd}",
        f"direct={int(direct)}",
        "fallocate=none",
        "file_service_type=sequential",
        "end_fsync=1" if rw == "write" else "invalidate=1",
    ]
    for j, b in enumerate(bins):
        files = ":".join(names[i] for i in b)
        # fio splits size evenly over a job's files: give each file its own job when sizes differ
        if len({sizes[i] for i in b}) == 1:
            lines += [f"[job{j}]", f"filename={files}", f"size={sizes[b[0]] * len(b)}"]
        else:
            lines += [f"[job{j}-{i}]\nfilename={names[i]}\nsize={sizes[i]}" for i in b]
    jobfile = os.path.join(os.path.dirname(folder.rstrip("/")), f"ckpt-{rw}.fio")
    with open(jobfile, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    t0 = time.monotonic()
    p = subprocess.run(["fio", "--output-format=json", jobfile], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"fio failed ({p.returncode}) on {jobfile}:\n{p.stderr.strip() or p.stdout[-2000:]}")
    out = p.stdout
    wall = time.monotonic() - t0
    jobs = json.loads(out[out.index("{") :])["jobs"]
    # jobs start together: aggregate = all bytes / the longest job runtime (which includes end_fsync).
    # (group_reporting would sum the jobs' runtimes and halve the figure for two jobs.)
    nbytes = sum(jb[rw]["io_bytes"] for jb in jobs)
    secs = max(jb["job_runtime"] for jb in jobs) / 1000.0
    return {"GB_s": nbytes / secs / 1e9, "bytes": nbytes, "secs": secs, "wall": wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/var/tmp/ckpt-bench")
    ap.add_argument("--size", type=float, default=1.0, help="checkpoint size in GiB (about)")
    ap.add_argument("--workload", default="llama_7b")
    ap.add_argument("--engine", default="posix", choices=["posix", "io_uring"])
    ap.add_argument("--qd", type=int, default=1)
    ap.add_argument("--direct", action="store_true", help="O_DIRECT on both sides")
    ap.add_argument("--repeats", type=int, default=12)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds after deleting the previous files")
    a = ap.parse_args()
    if not shutil.which("fio"):
        sys.exit("fio is not on the PATH: apt-get install fio")
    full = plan_checkpoint(load_config(a.workload, env={}), 0, 1).total_bytes
    ck_dir = os.path.join(a.dir, "dlio")
    fio_dir = os.path.join(a.dir, "fio")
    cfg = load_config(
        a.workload,
        env={},
        scale=a.size * 2**30 / full,
        sets=[
            f"checkpoint.checkpoint_folder={ck_dir}",
            "checkpoint.fsync=true",
            f"dlio_fast.engine={a.engine}",
            f"dlio_fast.qd={a.qd}",
        ],
    )
    plan = plan_checkpoint(cfg, 0, 1)
    total = plan.total_bytes
    threads = min(MAX_SET_THREADS, len(plan.files))
    bins = file_sets.assign_files([f.nbytes for f in plan.files], threads)  # dlio-fast's file -> thread assignment
    sizes = [f.nbytes for f in plan.files]
    fio_engine = "psync" if a.engine == "posix" else "io_uring"
    print(
        f"{a.workload} scaled to {total / 2**30:.3f} GiB ({total} bytes) in {len(plan.files)} files: "
        + ", ".join(f"{f.name} {f.nbytes / 2**20:.1f} MiB" for f in plan.files)
    )
    print(
        f"transfer {TRANSFER >> 20} MiB, {threads} threads / fio jobs {bins} (the same files and sizes), "
        f"engine {a.engine} vs fio {fio_engine}, qd {a.qd}, {'O_DIRECT' if a.direct else 'buffered'}, "
        f"fsync each file; dir {a.dir}; {a.repeats} alternating repeats, paired"
    )
    res = {"dw": [], "dr": [], "fw": [], "fr": []}
    cache_note = ""

    def warm():
        if not a.direct:  # O_DIRECT allocates no page cache
            warm_free_memory(total + (1 << 30))

    def fresh():
        # The same start for every write: no files of either tool (deleted before the pause, so
        # their cached pages are freed alike), the filesystem done freeing them, caches dropped.
        shutil.rmtree(ck_dir, ignore_errors=True)
        shutil.rmtree(fio_dir, ignore_errors=True)
        os.sync()
        time.sleep(a.settle)
        note = drop_all()
        warm()
        return note

    for i in range(a.repeats):
        order = ("dlio", "fio") if i % 2 == 0 else ("fio", "dlio")  # alternate who goes first
        line = {}
        for side in order:  # writes: each tool creates its own files
            fresh()
            if side == "dlio":
                rec = ckpt_save.save(cfg, None, 1, i + 1, TransferOptions(direct=a.direct, transfer=TRANSFER))
                res["dw"].append(rec["bytes"] / rec["duration_s"] / 1e9)
                line["dw"] = f"dlio {res['dw'][-1]:.3f} (fsync {rec['fsync_s']:.2f} s)"
            else:
                f = fio("write", fio_dir, bins, sizes, fio_engine, a.qd, a.direct)
                res["fw"].append(f["GB_s"])
                line["fw"] = f"fio {f['GB_s']:.3f}"
        if order[-1] == "fio":  # fio's start removed it: the checkpoint to read, untimed
            fresh()
            ckpt_save.save(cfg, None, 1, i + 1, TransferOptions(direct=a.direct, transfer=TRANSFER))
        step_dir = os.path.join(ck_dir, f"global_epoch1_step{i + 1}")
        for side in order:  # reads: both read the checkpoint dlio-fast wrote
            cache_note = drop_all()
            warm()
            if side == "dlio":
                ld = ckpt_load.load(cfg, None, 1, i + 1, TransferOptions(direct=a.direct, transfer=TRANSFER))
                res["dr"].append(ld["bytes"] / ld["duration_s"] / 1e9)
                line["dr"] = f"dlio {res['dr'][-1]:.3f} ({ld['cache']})"
            else:
                g = fio("read", step_dir, bins, sizes, fio_engine, a.qd, a.direct, names=[f.name for f in plan.files])
                res["fr"].append(g["GB_s"])
                line["fr"] = f"fio {g['GB_s']:.3f}"
        print(
            f"  run {i + 1} ({order[0]} first): write {line['dw']}, {line['fw']} GB/s; "
            f"read {line['dr']}, {line['fr']} GB/s"
        )
    shutil.rmtree(ck_dir, ignore_errors=True)
    shutil.rmtree(fio_dir, ignore_errors=True)
    print(
        f"page cache before each run: {cache_note}"
        + (
            ""
            if a.direct
            else f"; then {(total + (1 << 30)) / 2**30:.1f} GiB of free memory warmed on both sides "
            f"(free page reporting: {'on' if free_page_reporting() else 'off'})"
        )
    )
    # The verdict is on the median of the paired ratios: each repeat measures both tools back to
    # back, so a slow spell of the machine (minutes long here) weighs on both sides of a ratio.
    print(
        f"{'':<8} {'dlio-fast GB/s':>14} {'fio GB/s':>9} {'ratio of medians':>17} {'median of paired ratios':>24}"
        f"  {'spread of pairs':<36}  verdict (goal >= 0.90x)"
    )
    ok = True
    for name, d, f in (("write", "dw", "fw"), ("read", "dr", "fr")):
        dm, fm = statistics.median(res[d]), statistics.median(res[f])
        paired = Paired.of(res[d], res[f])
        ok &= paired.median >= 0.9
        print(
            f"{name:<8} {dm:>14.3f} {fm:>9.3f} {dm / fm:>17.2f} {paired.median:>24.2f}  {paired.spread():<36}  "
            f"{'ok' if paired.median >= 0.9 else 'BELOW GOAL'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
