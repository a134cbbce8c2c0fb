#!/usr/bin/env python3
"""Planning cost at full scale: one ImageNet epoch (1,281,167 samples) for all 8 ranks, and BERT / Megatron.

Builds a dlio.train.planner.Layout by hand (no files on disk): 1,281,167 one-sample JPEG files whose
sizes follow DLIO's size distribution for the built-in imagenet workload (DLIO's seeded normal
draw of the two image sides, dlio.dataset.file_dims, times the jpeg format's size estimate),
then plans epoch 1 of all 8 ranks with the workload's settings (batch 400, file and sample
shuffle on, ResNet-50 compute draws) with dlio.train.planner.epoch_plans (the global order once,
then each rank's shard), keeping all 8 plans.

Measures: wall time (best of --repeats, no tracing), peak Python-heap memory of the 8 plans
(tracemalloc, which numpy reports its buffers to) and the process's ru_maxrss growth during the
first (traced) pass. The input Layout (10 MB of file sizes) is built before and not counted.
Also shown: one rank alone (what each rank of a real MPI run plans).
Goal: all 8 ranks' plans in < 1 s and < 64 MB.

Then the two built-in workloads whose sample counts dwarf what a run reads, at full size, 8 ranks,
their own settings (1,000 steps each): bert_v100 (500 TFRecord files x 313,532 records, read as
streams) and megatron_deepspeed (one indexed binary file of 277,203,535 samples, sample shuffle on).
Their Layouts hold a uniform range table (dlio.dataset.ranges: one first offset per file), as the manifest
of their generated files does. Goal: the same, < 1 s and < 64 MB for the 8 plans (listing every
sample would take 3.7 GB of ranges for BERT, and 1.1 GB of order plus 6.6 GB of ranges for Megatron).
Last, one rank alone (what each rank of an MPI run plans) for imagenet, unet3d, megatron_deepspeed and DLIO
2.0.0's own dlrm.yaml (one file of 4,195,198,976 samples, at 100 and 1,000 of its steps): time, peak memory,
the plan's arrays, and the estimate `dlio-fast run` checks against the memory left before it plans
(dlio.train.plan_size); before that check, dlrm.yaml was refused with "about 93.77 GiB of memory is needed"
(24 bytes per sample of the dataset), --dry-run included.
Usage: python bench/planning.py [--samples 1281167] [--ranks 8] [--repeats 3]
"""

import argparse
import gc
import os
import resource
import sys
import time
import tracemalloc

import numpy as np

try:
    import dlio  # noqa: F401
except ImportError:  # run from bench/ without installing: use the in-place build next to it
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from dlio.config import load_config  # noqa: E402
from dlio.dataset import ranges
from dlio.dataset.formats import get_format  # noqa: E402
from dlio.dataset.spec import dataset_spec, file_dims
from dlio.system.mpi import Comm  # noqa: E402
from dlio.train import (
    loop,  # noqa: E402
    plan_size,
    planner,
)


def build(samples, name="imagenet", sets=None):
    """A full-size workload of whole-file samples, its files' sizes as drawn for generation."""
    cfg = load_config(workload=name, env={}, sets=[f"dataset.num_files_train={samples}"] if sets is None else sets)
    spec = dataset_spec(cfg)
    dims = file_dims(spec, "train")
    sizes = np.asarray(get_format(spec.format).module.estimate_sizes(dims, 1, spec), dtype=np.uint64)
    layout = planner.Layout(nfiles=spec.num_files_train, spf=1, file_size=sizes, whole_file=True)
    return layout, train_settings(cfg), cfg.train.computation_time, cfg


def train_settings(cfg):
    """The planner settings a run of cfg uses (dlio.train.loop.Trainer's)."""
    return loop.Trainer(cfg, Comm(), echo=print).settings("train")


# DLIO 2.0.0's own dlrm.yaml (tests/data/dlio-workloads/2.0.0/dlrm.yaml): one indexed_binary file of
# 4,195,198,976 records of 320 KiB, batch 2048, sample shuffle random; the built-in dlrm (DLIO's current
# file) with its values set, scaled down only by its steps (its own 32,768 would plan 67 M samples)
DLRM_200 = [
    "dataset.num_samples_per_file=4195198976",
    "dataset.record_length_bytes=327680",
    "reader.batch_size=2048",
    "reader.sample_shuffle=random",
]


def build_uniform(name, sets=()):
    """A full-size workload of fixed-size records, as its generated files' manifest describes it."""
    cfg = load_config(workload=name, env={}, sets=list(sets))
    spec = dataset_spec(cfg)
    n, spf = spec.num_files_train, spec.num_samples_per_file
    rec = int(cfg.record_bytes()) + (16 if spec.format == "tfrecord" else 0)  # TFRecord framing
    table = ranges.Table(first=np.zeros(n, np.uint64), stride=rec, length=rec, count=spf)
    layout = planner.Layout(
        nfiles=n,
        spf=spf,
        file_size=np.full(n, rec * spf, np.uint64),
        whole_file=False,
        table=table,
        sequential=spec.format == "tfrecord",
    )
    return layout, train_settings(cfg), cfg.train.computation_time, cfg


def plan_all(layout, settings, time_spec, ranks, which=None):
    return planner.epoch_plans(
        layout, settings, time_spec, ranks, epoch=1, random_seed=1, ranks=None if which is None else [which]
    )


def maxrss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1_281_167)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    print(
        "load average before: %.2f %.2f %.2f (%d CPUs; other work on the machine skews timings)"
        % (*os.getloadavg(), os.cpu_count())
    )
    t0 = time.perf_counter()
    layout, settings, time_spec, cfg = build(a.samples)
    print(
        f"layout: {layout.nfiles} jpeg files, mean {layout.file_size.mean() / 1024:.1f} KiB "
        f"(sd {layout.file_size.std() / 1024:.1f} KiB), built in {time.perf_counter() - t0:.2f} s (not counted); "
        f"batch {settings.batch}, shuffle files={settings.file_shuffle} samples={settings.sample_shuffle}, "
        f"{a.ranks} ranks"
    )

    # memory first (ru_maxrss only grows: measure it before anything else allocates a plan)
    gc.collect()
    rss0 = maxrss_mb()
    tracemalloc.start()
    plans = plan_all(layout, settings, time_spec, a.ranks)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_delta = maxrss_mb() - rss0
    held = sum(p.ops.nbytes + p.steps.nbytes + p.samples.nbytes for p in plans)
    nops = sum(len(p.ops) for p in plans)
    nsteps = sum(p.nsteps for p in plans)
    del plans
    gc.collect()
    tracemalloc.start()
    one = plan_all(layout, settings, time_spec, a.ranks, which=0)
    _, peak1 = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del one

    times, times1 = [], []
    for _ in range(a.repeats):
        gc.collect()
        t = time.perf_counter()
        plans = plan_all(layout, settings, time_spec, a.ranks)
        times.append(time.perf_counter() - t)
        del plans
        t = time.perf_counter()
        plan_all(layout, settings, time_spec, a.ranks, which=0)
        times1.append(time.perf_counter() - t)
    best, best1 = min(times), min(times1)
    mb = 2**20
    print(f"plans: {nops} reads, {nsteps} steps in all; arrays held {held / mb:.1f} MiB")
    print(f"{'what':<34} {'measured':>12} {'goal':>8}  verdict")
    print(
        f"{'time, all ranks (best of %d)' % a.repeats:<34} {best:>10.3f} s {'< 1 s':>8}  "
        f"{'ok' if best < 1.0 else 'MISSED'}"
    )
    print(
        f"{'peak memory, all ranks (tracemalloc)':<34} {peak / mb:>9.1f} MiB {'< 64 MB':>8}  "
        f"{'ok' if peak < 64e6 else 'MISSED'}"
    )
    print(
        f"{'ru_maxrss growth, all ranks':<34} {rss_delta:>9.1f} MiB {'< 64 MB':>8}  "
        f"{'ok' if rss_delta * mb < 64e6 else 'MISSED'}"
    )
    print(f"{'time, one rank (best of %d)' % a.repeats:<34} {best1:>10.3f} s {'':>8}  (info)")
    print(f"{'peak memory, one rank (tracemalloc)':<34} {peak1 / mb:>9.1f} MiB {'':>8}  (info)")

    print(f"\nfull size, {a.ranks} ranks, uniform range tables:")
    print(f"{'workload':<20} {'samples':>12} {'steps':>6} {'reads':>7} {'time':>9} {'peak':>10}  goal < 1 s, < 64 MB")
    for name, sets in (
        ("bert_v100", ()),
        ("megatron_deepspeed", ()),
    ):
        layout, settings, time_spec = build_uniform(name, sets)[:3]
        gc.collect()
        tracemalloc.start()
        plans = plan_all(layout, settings, time_spec, a.ranks)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        nsteps, nops = sum(p.nsteps for p in plans), sum(len(p.ops) for p in plans)
        del plans
        times = []
        for _ in range(a.repeats):
            t = time.perf_counter()
            plan_all(layout, settings, time_spec, a.ranks)
            times.append(time.perf_counter() - t)
        ok = min(times) < 1.0 and peak < 64e6
        print(
            f"{name:<20} {layout.nfiles * layout.spf:>12} {nsteps:>6} {nops:>7} {min(times):>7.3f} s "
            f"{peak / mb:>6.1f} MiB  {'ok' if ok else 'MISSED'}"
        )

    one_rank_table(a.repeats)


def one_rank_table(repeats):
    """What one rank plans for an epoch (each rank of an MPI run, or a run of one process), beside the
    estimate `dlio-fast run` checks against the memory left (dlio.train.plan_size) before planning."""
    print("\none rank, full-size datasets, its own settings (the estimate is what dlio-fast checks before planning):")
    print(
        f"{'workload':<22} {'dataset samples':>15} {'planned':>9} {'reads':>9} {'time':>8} "
        f"{'peak':>10} {'held':>9} {'estimate':>10}"
    )
    rows = [
        ("imagenet", lambda: build(0, "imagenet", [])),
        ("unet3d", lambda: build(0, "unet3d", [])),
        ("megatron_deepspeed", lambda: build_uniform("megatron_deepspeed")),
        ("dlrm 2.0.0, 100 steps", lambda: build_uniform("dlrm", [*DLRM_200, "train.total_training_steps=100"])),
        ("dlrm 2.0.0, 1000 steps", lambda: build_uniform("dlrm", [*DLRM_200, "train.total_training_steps=1000"])),
    ]
    mb = 2**20
    for name, make in rows:
        layout, settings, time_spec, cfg = make()
        gc.collect()
        tracemalloc.start()
        (plan,) = planner.epoch_plans(layout, settings, time_spec, 1, epoch=1, random_seed=1)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        held = plan.ops.nbytes + plan.steps.nbytes + plan.samples.nbytes
        planned, reads = len(plan.samples), len(plan.ops)
        del plan
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            planner.epoch_plans(layout, settings, time_spec, 1, epoch=1, random_seed=1)
            times.append(time.perf_counter() - t)
        est = plan_size.plan_bytes(planned, dataset_spec(cfg))
        print(
            f"{name:<22} {layout.nfiles * layout.spf:>15,} {planned:>9,} {reads:>9,} {min(times):>6.3f} s "
            f"{peak / mb:>6.1f} MiB {held / mb:>5.1f} MiB {est / mb:>6.1f} MiB"
            + ("" if est >= peak else "  (estimate below the peak)")
        )


if __name__ == "__main__":
    main()
