"""The C vector-search run (dc_vdb_run through _core.VdbRun): every count checked against the plan it was given,
latency against the null engine's known delay, the reads' offsets and O_DIRECT against strace."""

import errno
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from dlio import _core
from dlio.vdb import model
from dlio.vdb.layout import SECTOR, Layout


def _uring_ok():
    return {n: ok for n, _, ok, _ in _core.engines()}["io_uring"]


def index_file(path, lay, seg=0, medoid=0):
    """A real index file of the layout: metadata sector, then random node sectors."""
    size = lay.index_bytes(seg)
    with open(path, "wb") as f:
        f.write(lay.metadata(seg, medoid))
        f.write(os.urandom(size - SECTOR))
    return str(path)


def small_plan(searches=40, L=24, W=4, nodes=500, R=16, seed=3):
    return model.plan(searches, L, W, nodes, R, 0.1, 0.3, seed)


def vdb_run(engine, paths, lay, ch, **kw):
    kw.setdefault("queries", 10)
    return _core.VdbRun(
        engine,
        paths,
        [lay.nodes_in(s) for s in range(lay.segments)],
        ch.hop_first,
        ch.read_first,
        ch.nodes,
        beam_width=kw.pop("beam_width", 4),
        read_bytes=lay.read_bytes,
        nodes_per_sector=lay.nodes_per_sector,
        **kw,
    ).execute()


def test_counts_follow_the_plan_on_the_null_engine():
    """One client, batch 1, one segment: the run takes chains 0, 1, 2 ... in turn; every count is the plan's."""
    lay = Layout("diskann", 500, 32, 4, 16, 1)
    ch = small_plan()
    res = vdb_run("null", ["unused"], lay, ch, queries=25, direct=False)
    reads, hops = ch.reads()[:25], ch.hops()[:25]
    assert res["queries"] == res["searches"] == 25
    assert res["reads"] == reads.sum() and res["hops"] == hops.sum()
    assert res["bytes"] == reads.sum() * lay.read_bytes
    assert res["cache_hits"] == 0 and res["query_lat"]["count"] == 25 and res["read_lat"]["count"] == reads.sum()


def test_progress_counts_reads_bytes_and_queries():
    lay = Layout("diskann", 500, 32, 4, 16, 1)
    ch = small_plan()
    run = _core.VdbRun(
        "null",
        ["x"],
        [500],
        ch.hop_first,
        ch.read_first,
        ch.nodes,
        beam_width=4,
        read_bytes=4096,
        nodes_per_sector=lay.nodes_per_sector,
        queries=15,
        clients=2,
        batch=2,
        direct=False,
    )
    res = run.execute()
    assert run.progress() == (res["reads"], res["bytes"], 15)


def test_latency_on_a_storage_of_known_latency():
    """null engine, 50 us per read, synchronous: a query of one segment search takes reads x 50 us."""
    lay = Layout("diskann", 500, 32, 4, 16, 1)
    ch = small_plan()
    delay = 50_000
    res = vdb_run("null", ["unused"], lay, ch, queries=20, direct=False, delay_ns=delay)
    want = ch.reads()[:20].mean() * delay
    got = res["query_lat"]["sum"] / res["query_lat"]["count"]
    assert want <= got
    # One client, batch 1: the queries ran one after another inside the run's window; each one's latency is
    # its search (as the search thread timed it) plus the hand-overs between the client and the search thread,
    # which a loaded machine may stretch, never the other way round.
    wall = res["t_end"] - res["t_start"]
    assert res["query_lat"]["sum"] <= res["batch_lat"]["sum"] <= wall
    assert res["search_ns"] <= res["query_lat"]["sum"]
    assert res["io_wait_ns"] == pytest.approx(res["hop_lat"]["sum"], rel=1e-9)
    assert wall >= ch.reads()[:20].sum() * delay


def test_segments_batches_and_clients():
    """3 clients x batch 4, 3 segments, a budget of 22 queries: the last batch is cut to what is left."""
    lay = Layout("diskann", 1500, 32, 4, 16, 3)
    ch = small_plan()
    res = vdb_run("null", ["a", "b", "c"], lay, ch, queries=22, clients=3, batch=4, search_threads=2, direct=False)
    assert res["queries"] == 22 and res["searches"] == 66
    assert res["query_lat"]["count"] == 22 and res["batch_lat"]["count"] == res["batches"]
    # chains are taken in turn from 0: 66 segment searches use chains 0..39 then 0..25
    order = np.arange(66) % ch.searches
    assert res["reads"] == ch.reads()[order].sum()


def test_node_cache_serves_its_nodes():
    lay = Layout("diskann", 500, 32, 4, 16, 1)
    ch = small_plan()
    cached = model.cache_bitmap(500, ch.medoid, 50)
    res = vdb_run("null", ["unused"], lay, ch, queries=40, cached=cached, cached_bits=500, direct=False)
    ids = ch.nodes.astype(np.int64)
    hit = (cached[ids >> 3] >> (ids & 7)) & 1
    assert res["cache_hits"] == hit.sum() and res["reads"] == len(ids) - hit.sum()
    assert hit[ch.read_first[ch.hop_first[:-1].astype(np.int64)].astype(np.int64)].all()  # the medoid is cached


def test_aisaq_scale_reads_pq_pages_every_hop(tmp_path):
    lay = Layout("aisaq_scale", 500, 32, 4, 16, 1, pq_bytes=16)
    ch = small_plan()
    idx = index_file(tmp_path / "i", lay)
    pq = tmp_path / "pq"
    pq.write_bytes(os.urandom(lay.pq_file_bytes(0)))
    engine = "io_uring" if _uring_ok() else "posix"
    res = vdb_run(
        engine,
        [idx],
        lay,
        ch,
        queries=10,
        pq_paths=[str(pq)],
        pq_pages=[lay.pq_file_bytes(0) // SECTOR],
        pq_reads_per_hop=2,
        beam_width=6,
    )
    hops = ch.hops()[:10].sum()
    assert res["pq_reads"] == 2 * hops and res["reads"] == ch.reads()[:10].sum() + 2 * hops


def test_a_missing_index_file_names_it(tmp_path):
    lay = Layout("diskann", 500, 32, 4, 16, 1)
    with pytest.raises(_core.RunError) as e:
        vdb_run("posix", [str(tmp_path / "nope")], lay, small_plan(), queries=3)
    assert e.value.errno == errno.ENOENT and e.value.filename == str(tmp_path / "nope")
    assert "open failed" in str(e.value) and e.value.result["queries"] == 0


def test_hops_wider_than_the_beam_are_refused():
    lay = Layout("diskann", 500, 32, 4, 16, 1)
    with pytest.raises(OSError):
        vdb_run("null", ["x"], lay, small_plan(W=8), beam_width=4, direct=False)


def test_io_uring_reads_the_index(tmp_path):
    if not _uring_ok():
        pytest.skip("io_uring is not available here (see dlio-fast engines)")
    lay = Layout("diskann", 3000, 1536, 4, 32, 1)  # 8 KiB reads, nodes spanning two sectors
    ch = small_plan(nodes=3000, R=32)
    idx = index_file(tmp_path / "_disk.index", lay)
    res = vdb_run("io_uring", [idx], lay, ch, queries=30, clients=2, batch=3, search_threads=2)
    assert res["queries"] == 30 and res["bytes"] == res["reads"] * 8192
    assert res["hop_lat"]["count"] == res["hops"] and 0 < res["io_wait_ns"] <= res["search_ns"]


SCRIPT = """
import sys, numpy as np
from dlio import _core
from dlio.vdb import model
from dlio.vdb.layout import Layout
lay = Layout("diskann", 3000, 1536, 4, 32, 1)
ch = model.plan(30, 24, 4, 3000, 32, 0.1, 0.3, 5)
np.save(sys.argv[3], ch.nodes)
np.save(sys.argv[4], ch.read_first[ch.hop_first[:-1].astype(np.int64)].astype(np.int64))
_core.VdbRun(sys.argv[2], [sys.argv[1]], [3000], ch.hop_first, ch.read_first, ch.nodes, beam_width=4,
             read_bytes=8192, nodes_per_sector=0, queries=30).execute()
"""


@pytest.mark.parametrize("engine", ["posix", "io_uring"])
def test_strace_sees_o_direct_and_the_medoid_first(tmp_path, engine):
    """Under strace: the index is opened O_DIRECT; with posix every read is a pread64 (io_uring's are not
    visible to strace), in the plan's order, each search's first read at the medoid's offset."""
    if not shutil.which("strace"):
        pytest.skip("strace is not installed")
    if engine == "io_uring" and not _uring_ok():
        pytest.skip("io_uring is not available here (see dlio-fast engines)")
    lay = Layout("diskann", 3000, 1536, 4, 32, 1)
    idx = index_file(tmp_path / "_disk.index", lay)
    log = tmp_path / "strace.txt"
    nodes_f, first_f = tmp_path / "nodes.npy", tmp_path / "first.npy"
    p = subprocess.run(
        [
            "strace",
            "-f",
            "-qq",
            "-o",
            str(log),
            "-e",
            "trace=openat,pread64",
            sys.executable,
            "-c",
            SCRIPT,
            idx,
            engine,
            str(nodes_f),
            str(first_f),
        ],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0 and "ptrace" in p.stderr:
        pytest.skip(f"strace cannot trace here: {p.stderr.strip()[:200]}")
    assert p.returncode == 0, p.stderr
    text = log.read_text()
    opens = [m for m in re.findall(r'openat\([^"]*"([^"]+)", ([A-Z_|]+)', text) if m[0] == idx]
    assert opens and all("O_DIRECT" in flags for _, flags in opens)
    if engine == "posix":
        offs = np.array([int(o) for o in re.findall(r"pread64.*, 8192, (\d+)\)\s+=", text)])
        nodes = np.load(nodes_f)
        assert np.array_equal(offs, lay.node_offsets(nodes).astype(np.int64))
        medoid_off = lay.node_offsets(np.array([model.medoid_of(3000, 5)]))[0]
        assert (offs[np.load(first_f)] == medoid_off).all()
