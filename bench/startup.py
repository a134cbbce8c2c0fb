#!/usr/bin/env python3
"""Start-up of each dlio-fast command: the whole process, interpreter start and imports included.

Each command is run as a fresh `python -m dlio ...` process doing a small real job (a dry run, a 1 MiB io
point, a report of a tiny run made first), its wall time measured from the parent; `python -c pass` is
the floor (the interpreter alone) and `python -c "import numpy"` what numpy adds to it. The processes run
round-robin, N rounds, so that other work on the machine falls on every command alike; the table shows
the median, the spread of the rounds (min-max) and the median above the floor. A second pass (not timed)
lists what each command imported: the number of modules and the heavy ones among them (numpy and the C
core, YAML, matplotlib, h5py, mpi4py, rich), which a light command should not load at all.

--before TREE runs every command of another checkout too (its dlio/ with the compiled extensions in it),
alternating with this one, and prints the median of the paired ratios (after / before) with their spread.
Usage: python bench/startup.py [--rounds 9] [--before /path/to/old/checkout]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired import compiled_like_an_install  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("numpy", "dlio._core", "yaml", "matplotlib", "h5py", "mpi4py", "rich")
# run a command as `python -m dlio` does, then write the names of the modules it imported (not timed)
MODULES = (
    "import atexit, json, runpy, sys\n"
    "out = sys.argv[1]\n"
    "atexit.register(lambda: json.dump(sorted(sys.modules), open(out, 'w')))\n"
    "sys.argv = ['dlio-fast', *sys.argv[2:]]\n"
    "runpy.run_module('dlio', run_name='__main__', alter_sys=True)\n"
)


def commands(work):
    """(label, argv after `python`) of each command, each a small real job in `work`."""
    data, run = os.path.join(work, "data"), os.path.join(work, "run")
    tiny = ["-w", "default", "--set", f"dataset.data_folder={data}", "--set", "train.epochs=1"]
    tiny += ["--set", "train.computation_time=0", "--set", "evaluation.eval_time=0"]
    tiny += ["--set", "dlio_fast.mlperf_rules=off", "-q"]
    dlio = ["-m", "dlio"]
    return [
        ("python -c pass (floor)", ["-c", "pass"]),
        ("python -c 'import numpy'", ["-c", "import numpy"]),
        ("--help", [*dlio, "--help"]),
        ("--version", [*dlio, "--version"]),
        ("workloads", [*dlio, "workloads"]),
        ("run --dry-run", [*dlio, "run", *tiny, "--dry-run"]),
        ("run (tiny: 16 steps)", [*dlio, "run", *tiny]),  # output/default/{time} in the work folder
        ("io (one 1 MiB point)", [*dlio, "io", os.path.join(work, "io"), "--bs", "4k", "--size", "1m", "-q"]),
        ("ceiling --help", [*dlio, "ceiling", "--help"]),
        ("report RUN", [*dlio, "report", run]),
        ("check RUN", [*dlio, "check", run]),  # exit 1: the tiny run is no valid MLPerf run, as it should
        ("profile --help", [*dlio, "profile", "--help"]),
    ], [*dlio, "run", *tiny, "-o", run]


def wall(argv, env, work):
    t = time.perf_counter()
    p = subprocess.run([sys.executable, *argv], env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - t
    if p.returncode not in ((0, 1) if argv[2:3] == ["check"] else (0,)):
        sys.exit(f"python {' '.join(argv)} failed ({p.returncode}): {p.stderr.decode().strip()[-300:]}")
    return took


def imported(argv, env, work):
    if argv[:2] != ["-m", "dlio"]:
        return None
    out = os.path.join(work, "modules.json")
    subprocess.run([sys.executable, "-c", MODULES, out, *argv[2:]], env=env, cwd=work, capture_output=True)
    with open(out) as f:
        mods = json.load(f)
    return len(mods), [h for h in HEAVY if h in mods]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--before", help="another checkout to compare with (its dlio/ built in place)")
    a = ap.parse_args()
    trees = [("after", HERE)] + ([("before", os.path.abspath(a.before))] if a.before else [])
    envs = {name: {**os.environ, "PYTHONPATH": tree} for name, tree in trees}
    for _, tree in trees:
        compiled_like_an_install(tree)
    print(
        "load average before: %.2f %.2f %.2f (%d CPUs; other work on the machine skews timings)"
        % (*os.getloadavg(), os.cpu_count())
    )
    with tempfile.TemporaryDirectory(prefix="dlio-startup-") as work:
        cmds, make_run = commands(work)
        os.makedirs(os.path.join(work, "io"))
        subprocess.run([sys.executable, *make_run], env=envs["after"], cwd=work, check=True, capture_output=True)
        times = {(label, name): [] for label, _ in cmds for name in envs}
        for _ in range(a.rounds):
            for label, argv in cmds:
                for name, env in envs.items():
                    times[(label, name)].append(wall(argv, env, work))
        mods = {(label, name): imported(argv, env, work) for label, argv in cmds for name, env in envs.items()}
    floor = statistics.median(times[(cmds[0][0], "after")])
    print(f"median of {a.rounds} rounds, wall time of the whole process; floor = python -c pass = {floor * 1e3:.0f} ms")
    head = f"{'command':<26} {'median':>8} {'spread':>13} {'over floor':>10}  {'modules, heavy ones':<40}"
    if a.before:
        head += f" {'before':>8} {'after/before (spread)':>22}"
    print(head)
    for label, _ in cmds:
        t = times[(label, "after")]
        m = mods[(label, "after")]
        line = (
            f"{label:<26} {statistics.median(t) * 1e3:>6.0f} ms {min(t) * 1e3:>5.0f}-{max(t) * 1e3:<5.0f} ms "
            f"{(statistics.median(t) - floor) * 1e3:>7.0f} ms  "
            f"{'' if m is None else f'{m[0]} ' + (','.join(m[1]) or '-'):<40}"
        )
        if a.before:
            b = times[(label, "before")]
            ratios = [x / y for x, y in zip(t, b)]
            line += (
                f" {statistics.median(b) * 1e3:>5.0f} ms {statistics.median(ratios):>9.2f}x "
                f"({min(ratios):.2f}-{max(ratios):.2f})"
            )
        print(line)


if __name__ == "__main__":
    main()
