"""Rank 0's cost of gathering, merging and reporting a training run as ranks and hosts grow (issue 41).

Two parts:

- simulation (--sim): a real `mpirun` (Open MPI, tests/multihost.py's flags) of a tiny training run (data on
  /dev/shm, compute 1 ms) at 4 .. 64 ranks on 2 .. 32 simulated hosts (tools/simhost-agent), oversubscribed.
  Rank 0's cost is read from timestamps the run already writes: the end of the measured phase (`end` in
  dlio-fast.json, rank 0's clock) to the last result file's mtime (dlio.log is written last). That covers the
  gather (and the wait for the slowest rank to finish), the merge and every file; the console lines printed after
  the files are left out (they are a few lines whatever the ranks).
- on paper (--paper): the rank-0 functions TrainRun.write calls, in one process, fed with N copies of a real
  run's rank record (made here by a real one-rank run: per-step arrays of --steps steps x --epochs epochs), each
  copy unpickled as mpi4py's gather does on rank 0, with 8 ranks per host. Each N runs in a fresh process, so its
  peak RSS is its own. Every stage is timed; the growth is fitted (log-log slope over the larger N) and the cost
  at 1,000 hosts x 8 ranks is read off the measured N = 8,192 (and from the fit).

    python bench/rank0_scale.py --paper [--max-ranks 16384] [--steps 256 --epochs 2]
    python bench/rank0_scale.py --sim [--ranks 4,8,16,32,64]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import pickle
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from typing import Any, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RANKS_PER_HOST = 8  # on paper: a host of 8 accelerators (MLPerf's 8 x H100 hosts)
TINY = (
    "dataset.record_length=4096",
    "dataset.record_length_stdev=0",
    "dataset.num_samples_per_file=1",
    "dataset.num_files_eval=0",
    "reader.batch_size=1",
    "reader.read_threads=1",
    "workflow.evaluation=false",
    "train.computation_time=0.001",
)


def sets(pairs: Tuple[str, ...]) -> List[str]:
    return [a for p in pairs for a in ("--set", p)]


# --- on paper --------------------------------------------------------------------------------------------------


def real_record(folder: str, steps: int, epochs: int) -> Tuple[Any, Dict[str, Any]]:
    """A real one-rank training run in this process: (its TrainRun, its rank record)."""
    sys.path.insert(0, REPO)
    from dlio import config
    from dlio.family import RunContext
    from dlio.storage import backend_for
    from dlio.system import mpi
    from dlio.train.family import FAMILY

    pairs = TINY + (
        f"dataset.data_folder={os.path.join(folder, 'data')}",
        f"dataset.num_files_train={steps}",
        f"train.epochs={epochs}",
        "dlio_fast.plots=false",
    )
    cfg = config.load_config(workload="default", sets=list(pairs))
    quiet = lambda line: None  # noqa: E731
    ctx = RunContext(cfg, mpi.world(), quiet, quiet, backend_for(cfg))
    job = FAMILY.plan(ctx)
    job.check()
    out = os.path.join(folder, "one")
    os.makedirs(out)
    job.prepare(out)
    rec, failure = job.measure()
    assert failure is None, failure
    return job, rec


class Stages:
    """CPU seconds and RSS growth per stage: module functions wrapped in place (the bench's own process). CPU
    time, not wall: the machine is shared, and every stage is CPU-bound (files go to /dev/shm)."""

    def __init__(self) -> None:
        self.s: Dict[str, float] = {}
        self.rss: Dict[str, int] = {}

    def wrap(self, module: Any, name: str, label: str) -> None:
        fn = getattr(module, name)

        def timed(*a: Any, **k: Any) -> Any:
            t = time.process_time()
            before = rss_bytes()
            try:
                return fn(*a, **k)
            finally:
                self.s[label] = self.s.get(label, 0.0) + time.process_time() - t
                self.rss[label] = max(self.rss.get(label, 0), rss_bytes() - before)

        setattr(module, name, timed)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def paper_one(n: int, steps: int, epochs: int) -> Dict[str, Any]:
    """Rank 0's write of an N-rank run (its records N unpickled copies of a real one): seconds per stage."""
    from dlio.report import exact, run_files, verdict
    from dlio.report.dlio import files as dlio_files
    from dlio.report.dlio import log as dlio_log
    from dlio.train import family as train_family

    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        job, rec = real_record(tmp, steps, epochs)
        blobs = []
        for i in range(n):  # what each rank sends: its own record, pickled (mpi4py's gather)
            r = copy.copy(rec)
            r["rank"], r["hostname"] = i, f"h{i // RANKS_PER_HOST:04d}"
            blobs.append(pickle.dumps(r, pickle.HIGHEST_PROTOCOL))
        blob_bytes = sum(len(b) for b in blobs)
        base_rss = rss_bytes()
        st = Stages()
        t = time.process_time()
        records = [pickle.loads(b) for b in blobs]  # rank 0's side of the gather
        st.s["gather (unpickle)"] = time.process_time() - t
        st.rss["gather (unpickle)"] = rss_bytes() - base_rss
        del blobs
        for module, name, label in (
            (verdict, "annotate_run", "verdicts"),
            (train_family, "_result", "merge (RunResult)"),
            (run_files, "write_all", "files (all)"),
            (dlio_files, "summary", "  summary.json"),
            (dlio_files, "rank_output", "  {rank}_output.json"),
            (dlio_files, "per_epoch_stats", "  per_epoch_stats"),
            (run_files, "dlio_fast_doc", "  dlio-fast.json"),
            (dlio_log, "render", "  dlio.log"),
            (dlio_files, "metric_lines", "console: DLIO lines"),
            (exact, "exact_table", "console: exact table"),
            (exact, "dlio_fast_doc", "document (--json)"),
        ):
            st.wrap(module, name, label)
        job.comm = type("Ranks", (), {"rank": 0, "size": n})()  # rank 0 of N (only its size is read)
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        t = time.process_time()
        job.write(out, records, None)
        write_s = time.process_time() - t
        files = sum(len(fs) for _, _, fs in os.walk(out))
    return {
        "n": n,
        "steps_per_rank": sum(len((e.get("train") or {}).get("load", ())) for e in rec["epochs"]),
        "record_bytes": blob_bytes // n,
        "stages": st.s,
        "rss_growth": st.rss,
        "total_s": st.s["gather (unpickle)"] + write_s,  # CPU s
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "base_rss": base_rss,
        "files": files,
    }


def slope(ns: List[int], ts: List[float]) -> float:
    """The log-log slope of t against n (least squares): 1 is linear, 2 quadratic."""
    xs, ys = [math.log(n) for n in ns], [math.log(max(t, 1e-9)) for t in ts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def growth(ns: List[int], ts: List[float]) -> str:
    """The growth in words, from the slope over the larger half of the points (fixed costs hide it below)."""
    k = max(3, len(ns) // 2)
    s = slope(ns[-k:], ts[-k:])
    word = "flat" if s < 0.5 else "linear" if s < 1.15 else "n log n" if s < 1.3 else "superlinear"
    return f"{word} (slope {s:.2f})"


def paper(args: argparse.Namespace) -> None:
    ns, n = [], 8
    while n <= args.max_ranks:
        ns.append(n)
        n *= 4 if n < 512 else 2
    rows = []
    for n in ns:
        p = subprocess.run(
            [sys.executable, __file__, "--paper-one", str(n), "--steps", str(args.steps), "--epochs", str(args.epochs)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": REPO},
        )
        if p.returncode != 0:
            print(f"N={n}: failed: {p.stderr.strip()[-800:]}")
            break
        rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(
            f"N={n:6d} ({n // RANKS_PER_HOST or 1} hosts): {r['total_s']:8.2f} CPU s, "
            f"peak RSS {r['peak_rss'] / 2**20:8.0f} MiB",
            flush=True,
        )
    labels = list(rows[0]["stages"])
    r = rows[0]
    print(
        f"\nrecord per rank: {r['record_bytes'] / 1024:.0f} KiB pickled, "
        f"{r['steps_per_rank']} steps ({args.epochs} epochs)"
    )
    head = "| stage | " + " | ".join(f"N={r['n']}" for r in rows) + " | growth | per rank at the largest N |"
    print(head)
    print("|" + "---|" * (len(rows) + 3))
    for label in labels + ["total"]:
        ts = [r["total_s"] if label == "total" else r["stages"].get(label, 0.0) for r in rows]
        nn = [r["n"] for r in rows]
        per = ts[-1] / nn[-1]
        print(f"| {label} | " + " | ".join(f"{t:.3g}" for t in ts) + f" | {growth(nn, ts)} | {per * 1e3:.3g} ms |")
    mem = [r["peak_rss"] - r["base_rss"] for r in rows]
    print(
        "| RSS growth while gathering and writing, MiB | "
        + " | ".join(f"{m / 2**20:.0f}" for m in mem)
        + f" | {growth([r['n'] for r in rows], [max(m, 1) for m in mem])} | {mem[-1] / rows[-1]['n'] / 1024:.0f} KiB |"
    )
    at = next((r for r in rows if r["n"] >= 8000), None)
    if at:
        print(
            f"\n1,000 hosts x 8 ranks ~ N={at['n']}: {at['total_s']:.1f} CPU s, "
            f"peak RSS {at['peak_rss'] / 2**30:.2f} GiB"
        )


# --- in simulation ---------------------------------------------------------------------------------------------


def sim_one(ranks: int, hosts: int, steps: int, tmp: str) -> Dict[str, Any]:
    sys.path[:0] = [os.path.join(REPO, "tests"), os.path.join(REPO, "tests", "cli")]
    from multihost import open_mpi, open_mpi_command

    mpirun, why = open_mpi()
    if mpirun is None:
        raise SystemExit(f"no Open MPI here: {why}")
    names = [f"h{i:02d}" for i in range(hosts)]
    out = os.path.join(tmp, f"out{ranks}x{hosts}")
    argv = [sys.executable, "-m", "dlio", "run", "--workload", "default"]
    argv += sets(
        TINY
        + (
            f"dataset.data_folder={os.path.join(tmp, f'data{ranks}')}",
            f"dataset.num_files_train={steps * ranks}",
            "train.epochs=1",
            "dlio_fast.plots=false",
        )
    )
    cmd = open_mpi_command(mpirun, names, ranks // hosts, [*argv, "-o", out])
    t = time.time()
    load_before = os.getloadavg()[0]
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": REPO}, timeout=3600)
    wall = time.time() - t
    if p.returncode != 0:  # said, and the other points still run
        why = next((x for x in p.stderr.splitlines() if "dlio-fast" in x), p.stderr.strip()[-300:])
        return {"ranks": ranks, "hosts": hosts, "failed": f"exit {p.returncode}: {why}", "wall_s": wall}
    with open(os.path.join(out, "dlio-fast.json")) as f:
        doc = json.load(f)
    assert sorted(set(doc["hostnames"])) == names, doc["hostnames"]
    end = datetime.fromisoformat(doc["end"]).timestamp()  # rank 0's end of the measured phase (local time)
    times = sorted(os.path.getmtime(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    first = next(t for t in times if t >= end)  # summary.json: the first file rank 0 writes after the gather
    return {
        "ranks": ranks,
        "hosts": hosts,
        "rank0_s": times[-1] - end,
        "gather_s": first - end,
        "files_s": times[-1] - first,
        "wall_s": wall,
        "load": load_before,
    }


def sim(args: argparse.Namespace) -> None:
    rows = []
    tmp = tempfile.mkdtemp(prefix="rank0-", dir="/dev/shm")
    try:
        for ranks in [int(x) for x in args.ranks.split(",")]:
            hosts = max(2, min(32, ranks // 2))
            rows.append(sim_one(ranks, hosts, args.sim_steps, tmp))
            r = rows[-1]
            print(f"{ranks:4d} ranks on {hosts:2d} hosts: {sim_line(r)}", flush=True)
            shutil.rmtree(os.path.join(tmp, f"data{ranks}"), ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        "\n| ranks | hosts | rank 0: end of training -> files written (s) | of which gather + merge (s) "
        "| of which files (s) | mpirun wall (s) | load avg (1 min) |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "failed" in r:
            print(f"| {r['ranks']} | {r['hosts']} | failed: {r['failed']} | | | {r['wall_s']:.0f} | |")
        else:
            print(
                f"| {r['ranks']} | {r['hosts']} | {r['rank0_s']:.3f} | {r['gather_s']:.3f} | {r['files_s']:.3f} "
                f"| {r['wall_s']:.0f} | {r['load']:.1f} |"
            )
    done = [r for r in rows if "failed" not in r]
    if len(done) >= 3:
        print(f"growth: {growth([r['ranks'] for r in done], [r['rank0_s'] for r in done])}")


def sim_line(r: Dict[str, Any]) -> str:
    if "failed" in r:
        return f"failed ({r['failed']})"
    return (
        f"rank 0 end -> files {r['rank0_s']:.3f} s (gather + merge {r['gather_s']:.3f} s, files "
        f"{r['files_s']:.3f} s; mpirun wall {r['wall_s']:.0f} s, load {r['load']:.1f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paper", action="store_true", help="rank 0's functions on N synthetic records")
    ap.add_argument("--sim", action="store_true", help="real mpirun runs on simulated hosts")
    ap.add_argument("--paper-one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--max-ranks", type=int, default=16384)
    ap.add_argument("--steps", type=int, default=256, help="on paper: steps per epoch in the real record")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--ranks", default="4,8,16,32,64", help="in simulation: the rank counts (2 per host, <= 32 hosts)")
    ap.add_argument("--sim-steps", type=int, default=16, help="in simulation: steps per rank")
    args = ap.parse_args()
    if args.paper_one:
        print(json.dumps(paper_one(args.paper_one, args.steps, args.epochs)))
        return
    if not (args.paper or args.sim):
        ap.error("say --paper, --sim or both")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    if args.paper:
        paper(args)
    if args.sim:
        sim(args)


if __name__ == "__main__":
    main()
