#!/usr/bin/env python3
"""What torch.save's container costs a checkpoint save: the same files, requests and bytes written
with the .pt container (the C core copies the zip records into the requests that cover them) and
without it (the same sizes, raw content), side by side, alternating, in one run.

The checkpoint is a built-in LLM workload (default llama_7b) shrunk with --scale to about --size GiB,
saved with dlio.checkpoint.save.save (16 MiB requests, min(4, files) threads).  Every save starts
alike: the previous files deleted, sync, caches dropped, free memory warmed (bench/README.md,
"Memory handed back to the host").  Buffered writes without fsync by default
(--fsync to include it): the page cache is then the target, where a CPU cost shows most;
--engine null runs the C path without I/O (request preparation only: where the container's work is).  GB/s are
10^9 bytes / the save window.  On this VM a save right after another one's files were deleted is
often several times faster (it gets the pages they freed) than one after a cache drop, so every
timed save follows an untimed one of the same size, deleted: both sides then write at the page
cache's full speed.  The verdict is the median of the paired ratios container / raw over an even
number of alternating repeats (goal >= 0.97: the container must not cost write speed).
Usage: python bench/checkpoint_container.py [--dir /var/tmp/ckpt-container] [--size 1] [--repeats 16]
"""

import argparse
import dataclasses
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from checkpoint_vs_fio import warm_free_memory  # noqa: E402  (this VM hands freed memory back)
from paired import Paired  # noqa: E402

from dlio import _core  # noqa: E402
from dlio.checkpoint import save as ckpt_save  # noqa: E402
from dlio.checkpoint.layout import plan_checkpoint  # noqa: E402
from dlio.checkpoint.transfers import TransferOptions  # noqa: E402
from dlio.config import load_config  # noqa: E402


def drop_all() -> None:
    os.sync()
    try:
        _core.drop_all_caches()
    except OSError:
        pass  # not root: the deleted files' pages are gone anyway


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/var/tmp/ckpt-container")
    ap.add_argument("--size", type=float, default=1.0, help="checkpoint size in GiB (about)")
    ap.add_argument("--workload", default="llama_7b")
    ap.add_argument("--repeats", type=int, default=16)
    ap.add_argument("--fsync", action="store_true", help="fsync each file inside the window")
    ap.add_argument(
        "--engine", default="posix", help="posix, io_uring, or null: the C path alone (no I/O), its CPU cost shows"
    )
    a = ap.parse_args()
    a.repeats += a.repeats % 2  # even: each side goes first as often
    full = plan_checkpoint(load_config(a.workload, env={}), 0, 1).total_bytes
    cfg = load_config(
        a.workload,
        env={},
        scale=a.size * 2**30 / full,
        sets=[f"checkpoint.checkpoint_folder={a.dir}", f"checkpoint.fsync={str(a.fsync).lower()}"],
    )
    plan = plan_checkpoint(cfg, 0, 1)
    # the same files and sizes without a container: raw content where the zip records were
    raw = dataclasses.replace(plan, files=tuple(dataclasses.replace(f, state=None) for f in plan.files))
    ranges = sum(len(f.torch_file.segments) for f in plan.files)
    literal = sum(len(s) for f in plan.files for _, s in f.torch_file.segments)
    print(
        f"{a.workload} scaled to {plan.rank_bytes / 2**30:.3f} GiB in {len(plan.files)} files, "
        f"{sum(f.tensors for f in plan.files)} tensors; container: {ranges} literal ranges, {literal} bytes; "
        f"engine {a.engine}, buffered, {'fsync' if a.fsync else 'no fsync'}; {a.repeats} alternating repeats, paired"
    )
    got = {"container": [], "raw": []}
    for i in range(a.repeats):
        order = ("container", "raw") if i % 2 == 0 else ("raw", "container")
        line = []
        for side in order:
            shutil.rmtree(a.dir, ignore_errors=True)
            drop_all()
            warm_free_memory(plan.rank_bytes + (1 << 30))
            ckpt_save.save(cfg, None, 1, 0, TransferOptions(engine=a.engine), plan=raw)  # untimed: see the module doc
            shutil.rmtree(a.dir, ignore_errors=True)
            rec = ckpt_save.save(
                cfg, None, 1, i + 1, TransferOptions(engine=a.engine), plan=plan if side == "container" else raw
            )
            got[side].append(rec["bytes"] / rec["duration_s"] / 1e9)
            line.append(f"{side} {got[side][-1]:.3f}")
        print(f"  run {i + 1}: " + ", ".join(line) + " GB/s")
    shutil.rmtree(a.dir, ignore_errors=True)
    pairs = Paired.of(got["container"], got["raw"])
    med = pairs.median
    print(
        f"{'':<10} {'container GB/s':>14} {'raw GB/s':>9} {'median of paired ratios':>24}  {'spread of pairs':<36}  "
        "verdict (goal >= 0.97x)"
    )
    print(
        f"{'save':<10} {statistics.median(got['container']):>14.3f} {statistics.median(got['raw']):>9.3f} "
        f"{med:>24.3f}  {pairs.spread():<36}  {'ok' if med >= 0.97 else 'BELOW GOAL'}"
    )
    sys.exit(0 if med >= 0.97 else 1)


if __name__ == "__main__":
    main()
