"""`dlio-fast run -w load_llama3_8b --set model_load.read_mode=prefetch` on a tiny model in a local
folder: vLLM's prefetch forced (auto would not choose it here). Each rank reads the shards vLLM deals
it (sorted files[rank::ranks]) whole in prefetch_block_size reads, checked against the shard files
on disk; the mmap pass maps its slice; the figures and the console say so."""

import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO
from test_model_load import GiB, args, doc_of, shard_files

BLOCK = 1 << 20  # the tiny shards are ~6 MB: several reads each (vLLM's 16 MiB would be one)


def expected_share(tmp_path, rank, world):
    files = shard_files(tmp_path)[rank::world]
    sizes = [os.path.getsize(p) for p in files]
    return [os.path.basename(p) for p in files], sum(sizes), sum(-(-n // BLOCK) for n in sizes)


def test_prefetch_reads_the_dealt_shards_whole_then_maps_the_slice(run_cli, tmp_path):
    code, out, err = run_cli(
        *args(tmp_path, "model_load.read_mode=prefetch", f"model_load.prefetch_block_size={BLOCK}")
    )
    assert code == 0, err
    doc = doc_of(tmp_path / "out")
    names, nbytes, reads = expected_share(tmp_path, 0, 1)
    assert doc["settings"]["read_mode"] == doc["settings"]["read_mode_set"] == "prefetch"
    assert doc["settings"]["prefetch_threads"] == 8 and doc["settings"]["prefetch_block_size"] == BLOCK
    assert doc["plans"][0]["prefetch"] == {"files": names, "bytes": nbytes, "requests": reads}
    for r in doc["ranks"]:
        p = r["prefetch"]
        # one rank: every shard, whole, in 1 MiB reads on min(8 threads, shards) threads, buffered
        assert (p["files"], p["bytes"], p["requests"]) == (len(names), nbytes, reads)
        assert p["threads"] == min(8, len(names)) and p["engine"] == "posix" and p["block_size"] == BLOCK
        assert r["bytes"] == nbytes  # the rank's storage bytes are its prefetch's
        # the mmap pass: the slice (TP 1: every page of every shard) touched by the mmap engine
        assert r["engine"] == "mmap" and r["map_bytes"] == nbytes and r["pages"] > 0
        assert r["GiB_per_second"] == pytest.approx(nbytes / GiB / r["time_to_ready_s"])
        assert 0 < p["io_s"] <= p["done_s"] and r["time_to_ready_s"] > 0
        assert r["counters"]["resident_before"] == 0.0  # cold: dropped before each load
    (load,) = {p["bytes"] for p in doc["loads"]}
    assert load == nbytes
    assert "prefetch            shards dealt over the 1 rank(s)" in out
    assert "Read mode: prefetch (set in model_load.read_mode)" in out
    assert "Prefetch (vLLM's), load 2: " in out and "Time to ready (slowest rank), 2 load(s)" in out


def test_auto_on_a_local_folder_is_the_local_disk_path(run_cli, tmp_path):
    code, out, err = run_cli(*args(tmp_path, "model_load.repeats=1"))
    assert code == 0, err
    doc = doc_of(tmp_path / "out")
    c = doc["read_mode_choice"]
    assert c["configured"] == "auto" and c["mode"] == doc["settings"]["read_mode"] == "mmap"
    assert c["fstype"] not in ("nfs", "nfs4", "lustre") and "prefetch" not in doc["ranks"][0]
    assert "Read mode: mmap, chosen as vLLM chooses (auto)" in out


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="needs mpiexec (pip install mpich mpi4py)")
def test_two_ranks_prefetch_alternate_shards(tmp_path):
    pytest.importorskip("mpi4py")
    sets = ("model_load.read_mode=prefetch", f"model_load.prefetch_block_size={BLOCK}", "model_load.repeats=1")
    cmd = ["mpiexec", "-n", "2", sys.executable, "-m", "dlio", *map(str, args(tmp_path, *sets))]
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = doc_of(tmp_path / "out")
    total = sum(os.path.getsize(f) for f in shard_files(tmp_path))
    for r in doc["ranks"]:
        names, nbytes, reads = expected_share(tmp_path, r["rank"], 2)
        assert doc["plans"][r["rank"]]["prefetch"]["files"] == names
        assert (r["bytes"], r["prefetch"]["requests"]) == (nbytes, reads)
        # TP 2: the mmap pass maps every shard and touches the pages of its half (a little over half)
        assert r["files"] == len(doc["model"]["shards"])
        assert total / 2 < r["wanted_bytes"] <= r["map_bytes"] < total
    (load,) = doc["loads"]
    assert load["bytes"] == total  # every shard read once over the job
