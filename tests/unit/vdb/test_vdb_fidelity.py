"""The emulation against real DiskANN on the same (N, dim, R, L, W): reads per search, hops per search and the
read size within 10 % (issue 28). The committed capture (tests/data/vdb, diskannpy 0.7.0 under strace) runs
everywhere; a live capture runs when diskannpy is installed (here, or in the Python that
DLIO_FAST_DISKANN_PYTHON names: diskannpy pins an old numpy, so a throwaway venv is the usual home)."""

import importlib.util
import os
import subprocess
import sys

import pytest

from dlio import _core
from dlio.config import load_config
from dlio.vdb import search, trace
from dlio.vdb.config import vdb_spec
from dlio.vdb.metrics import run_metrics
from dlio.vdb.store import LocalStore

CAPTURE = "tests/data/vdb/diskann_n5000_d1536_r32_l64_w4.json"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def emulate(tr, tmp_path, queries=60):
    """dlio-fast's run at the capture's parameters: the index written, one query at a time (as captured)."""
    p = tr.params
    engine = "io_uring" if {n: ok for n, _, ok, _ in _core.engines()}["io_uring"] else "posix"
    sets = {
        "vdb.vectors": p["vectors"],
        "vdb.dimension": p["dimension"],
        "vdb.dtype_bytes": p["dtype_bytes"],
        "vdb.max_degree": p["max_degree"],
        "vdb.search_list": p["search_list"],
        "vdb.beam_width": p["beam_width"],
        "vdb.segments": 1,
        "vdb.cache_ratio": 0,
        "vdb.processes": 1,
        "vdb.batch": 1,
        "vdb.search_threads": 1,
        "vdb.queries": queries,
        "vdb.index_folder": str(tmp_path),
        "dlio_fast.engine": engine,
    }
    cfg = load_config(workload="vdb_diskann_1m", sets=[f"{k}={v}" for k, v in sets.items()], env={})
    spec = vdb_spec(cfg)
    plan = search.plan(spec)
    store = LocalStore(spec, plan.chains.medoid)
    store.write()
    idx, pq, _ = store.fetch()
    res, failure, counters = search.timed_run(spec, plan, idx, pq, 0)
    assert failure is None
    return run_metrics(res, counters), plan


def check(tr, m):
    real_reads, real_hops = tr.reads_per_search().mean(), tr.hops_per_search().mean()
    assert m["reads_per_search"] == pytest.approx(real_reads, rel=0.10)
    assert m["hops_per_search"] == pytest.approx(real_hops, rel=0.10)
    assert m["read_bytes_mean"] == tr.read_bytes


def test_committed_capture(tmp_path):
    tr = trace.load(CAPTURE)
    m, plan = emulate(tr, tmp_path)
    check(tr, m)
    first = plan.chains.read_first[plan.chains.hop_first[:-1].astype(int)].astype(int)
    assert (plan.chains.nodes[first] == plan.chains.medoid).all()


def test_replaying_the_capture_reads_what_diskann_read(tmp_path):
    """vdb.trace: the captured searches themselves, at the captured scale: the same counts, exactly."""
    tr = trace.load(CAPTURE)
    cfg = load_config(
        workload="vdb_diskann_1m",
        sets=[
            f"vdb.trace={CAPTURE}",
            "vdb.vectors=5000",
            "vdb.max_degree=32",
            "vdb.segments=1",
            "vdb.beam_width=4",
            "vdb.search_list=64",
            "vdb.cache_ratio=0",
            "vdb.processes=1",
            "vdb.search_threads=1",
            "vdb.queries=50",
            f"vdb.index_folder={tmp_path}",
            "dlio_fast.engine=posix",
        ],
        env={},
    )
    spec = vdb_spec(cfg)
    plan = search.plan(spec)
    assert plan.source == CAPTURE and plan.chains.medoid == tr.medoid
    store = LocalStore(spec, plan.chains.medoid)
    store.write()
    res, failure, _ = search.timed_run(spec, plan, spec.index_paths(), [], 0)
    assert failure is None
    assert res["reads"] == tr.reads_per_search().sum() and res["hops"] == tr.hops_per_search().sum()


def _diskann_python():
    if importlib.util.find_spec("diskannpy"):
        return sys.executable
    return os.environ.get("DLIO_FAST_DISKANN_PYTHON")


def test_live_capture(tmp_path):
    """Build a small 1536-d index with diskannpy, capture 30 searches under strace, compare."""
    py = _diskann_python()
    if not py:
        pytest.skip("diskannpy is not installed (pip install diskannpy, or DLIO_FAST_DISKANN_PYTHON=python-with-it)")
    if subprocess.run(["strace", "-V"], capture_output=True).returncode != 0:
        pytest.skip("strace is not installed")
    out = tmp_path / "live.json"
    cmd = [
        sys.executable,
        os.path.join(REPO, "bench", "vdb_capture.py"),
        "--python",
        py,
        "--out",
        out,
        "--workdir",
        tmp_path / "idx",
        "--vectors",
        "3000",
        "--dimension",
        "1536",
        "--degree",
        "32",
        "--build-list",
        "48",
        "--search-list",
        "96",
        "--beam-width",
        "8",
        "--queries",
        "30",
        "--pq-bytes",
        "16",
    ]
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=REPO))
    assert p.returncode == 0, p.stderr[-2000:]
    tr = trace.load(str(out))
    assert (tr.first_reads() == tr.medoid).all()
    m, _ = emulate(tr, tmp_path / "emu", queries=40)
    check(tr, m)
