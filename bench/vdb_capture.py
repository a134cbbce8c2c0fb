"""Capture real DiskANN's reads: build a small index with diskannpy, search it one query at a time under
strace, and write the reads as a dlio-fast vdb trace (dlio/vdb/trace.py) that `vdb.trace` replays and that
tests/unit/vdb/test_fidelity.py checks the model against.

    python bench/vdb_capture.py --python /tmp/dkvenv/bin/python --out tests/data/vdb/capture.json \\
        --vectors 5000 --dimension 1536 --degree 32 --search-list 64 --beam-width 4 --queries 50

--python names an interpreter with diskannpy (pip install diskannpy==0.7.*; it may live in a throwaway
venv); the same file runs there as the child (`--child build|search`), importing only numpy and diskannpy.
Data and queries are what vdbbench generates: i.i.d. uniform [0, 1) vectors, L2-normalised, float32.
diskannpy 0.7.0 deadlocks on load with num_threads=1: the child loads with 2 and searches serially.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

MARKER = "/nonexistent-vdb-capture/q"  # dlio.vdb.trace.MARKER (the child cannot import dlio)


def _vectors(n, dim, seed):
    import numpy as np

    x = np.random.default_rng(seed).random((n, dim), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def child(argv):
    """Runs under the diskannpy interpreter: `build` writes the index, `search` runs the queries."""
    import diskannpy as dap
    import numpy as np

    a = json.loads(argv[1])
    folder = a["folder"]
    if argv[0] == "build":
        os.makedirs(folder, exist_ok=True)
        # A small search-memory budget keeps the PQ small: its training dominates the build time.
        dap.build_disk_index(
            _vectors(a["vectors"], a["dimension"], 1),
            "l2",
            folder,
            complexity=a["build_list"],
            graph_degree=a["degree"],
            search_memory_maximum=a["pq_budget_gb"],
            build_memory_maximum=2.0,
            num_threads=a["threads"],
        )
        return
    idx = dap.StaticDiskIndex(
        folder,
        num_threads=2,
        num_nodes_to_cache=0,
        cache_mechanism=1,
        distance_metric="l2",
        vector_dtype=np.float32,
        dimensions=a["dimension"],
        index_prefix="ann",
    )
    q = _vectors(a["queries"], a["dimension"], 2)
    for i in range(len(q)):
        os.access(f"{MARKER}{i}", os.F_OK)  # the query boundary in the strace output
        idx.search(q[i], 10, a["search_list"], a["beam_width"])


def build(py, args, folder):
    """Build the index unless the folder holds one of the same parameters."""
    stamp = os.path.join(folder, "vdb-capture-params.json")
    want = {k: getattr(args, k) for k in ("vectors", "dimension", "degree", "build_list", "pq_bytes")}
    if os.path.exists(stamp) and json.load(open(stamp)) == want:
        return
    shutil.rmtree(folder, ignore_errors=True)
    # diskannpy sizes the PQ codes from the search-memory budget: bytes per vector = budget / vectors.
    a = dict(want, folder=folder, threads=os.cpu_count() or 2, pq_budget_gb=args.vectors * args.pq_bytes / 2**30)
    subprocess.run([py, __file__, "--child", "build", json.dumps(a)], check=True, stdout=subprocess.DEVNULL)
    json.dump(want, open(stamp, "w"))


def capture(args):
    from dlio.vdb import trace

    py = args.python
    folder = os.path.abspath(args.workdir)
    build(py, args, folder)
    a = {
        "folder": folder,
        "dimension": args.dimension,
        "queries": args.queries,
        "search_list": args.search_list,
        "beam_width": args.beam_width,
    }
    log = os.path.join(folder, "strace.txt")
    cmd = [
        "strace",
        "-f",
        "-qq",
        "-o",
        log,
        "-e",
        "trace=openat,io_submit,access,faccessat,faccessat2",
        py,
        __file__,
        "--child",
        "search",
        json.dumps(a),
    ]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ver = subprocess.run(
        [py, "-c", "import importlib.metadata as m; print(m.version('diskannpy'))"], capture_output=True, text=True
    ).stdout.strip()
    params = {
        "dimension": args.dimension,
        "dtype_bytes": 4,
        "max_degree": args.degree,
        "search_list": args.search_list,
        "beam_width": args.beam_width,
        "build_list": args.build_list,
        "pq_bytes": args.pq_bytes,
        "metric": "l2",
        "queries": args.queries,
    }
    tr = trace.parse_strace(
        open(log).read(),
        os.path.join(folder, "ann_disk.index"),
        params,
        source=f"diskannpy {ver}, strace of io_submit, node cache 0, one query at a time",
    )
    trace.save(tr, args.out)
    r, h = tr.reads_per_search(), tr.hops_per_search()
    print(
        f"{args.out}: {tr.searches} searches, reads/search {r.mean():.1f}, hops/search {h.mean():.2f}, "
        f"read {tr.read_bytes} B, medoid first in {(tr.first_reads() == tr.medoid).mean():.0%}, "
        f"opened {sorted(set(tr.open_flags))}"
    )
    return tr


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python", default=sys.executable, help="an interpreter with diskannpy")
    p.add_argument("--out", required=True)
    p.add_argument("--workdir", default="/tmp/vdb-capture")
    p.add_argument("--vectors", type=int, default=5000)
    p.add_argument("--dimension", type=int, default=1536)
    p.add_argument("--degree", type=int, default=32)
    p.add_argument("--build-list", type=int, default=64)
    p.add_argument("--search-list", type=int, default=64)
    p.add_argument("--beam-width", type=int, default=4)
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--pq-bytes", type=int, default=32, help="PQ code bytes per vector (the build's budget)")
    capture(p.parse_args())


if __name__ == "__main__":
    main()
