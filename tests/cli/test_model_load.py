"""`dlio-fast run -w load_llama3_8b` on a tiny Llama-shaped model: the loads' figures against what the
test measures itself (file sizes, its own mmap's page faults, mincore), each read mode, cold and warm,
tensor parallelism under `mpiexec -n 2`, and what is refused."""

import ctypes
import json
import mmap
import os
import resource
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, TINY_MODEL_LOAD, on_s3, one_line, s3_boto, s3_keys, set_args

from dlio import _core

TINY = TINY_MODEL_LOAD
GiB = float(1 << 30)
PAGE = os.sysconf("SC_PAGE_SIZE")


def args(tmp_path, *sets, out="out", folder=None, **keys):
    folder_key = f"checkpoint.checkpoint_folder={folder or tmp_path / 'model'}"
    return ["run", "-w", "load_llama3_8b", "--output", tmp_path / out, *set_args(*TINY, folder_key, *sets, **keys)]


def doc_of(folder):
    with open(os.path.join(folder, "dlio-fast.json")) as f:
        return json.load(f)


def shard_files(tmp_path):
    d = tmp_path / "model"
    return sorted(str(d / n) for n in os.listdir(d) if n.endswith(".safetensors"))


def resident_pages(path):
    """Pages of the file in the page cache, by mincore(2) on a mapping of our own."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    size = os.path.getsize(path)
    # python's mmap object does not give its address: a mapping of our own (touching nothing)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        pages = -(-size // PAGE)
        vec = (ctypes.c_ubyte * pages)()
        assert libc.mincore(ctypes.c_void_p(addr), size, vec) == 0
        libc.munmap(ctypes.c_void_p(addr), size)
    finally:
        os.close(fd)
    return sum(v & 1 for v in vec), pages


def own_mmap_faults(paths):
    """Page faults of this thread mapping the (dropped) files and touching one byte per page, as
    safetensors' mmap is faulted in: the kernel's own count for these files, measured here."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    r0 = resource.getrusage(resource.RUSAGE_THREAD)
    for p in paths:
        with open(p, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            s = 0
            for off in range(0, len(m), PAGE):
                s += m[off]
            m.close()
    r1 = resource.getrusage(resource.RUSAGE_THREAD)
    return (r1.ru_minflt - r0.ru_minflt) + (r1.ru_majflt - r0.ru_majflt)


def test_mmap_cold_load_faults_its_pages_and_reads_every_byte(run_cli, tmp_path):
    code, out, err = run_cli(*args(tmp_path, "model_load.spread=whole"))
    assert code == 0, err
    doc = doc_of(tmp_path / "out")
    assert doc["schema"] == "dlio-fast.modelload/1" and doc["complete"]
    files = shard_files(tmp_path)
    size = sum(os.path.getsize(p) for p in files)
    pages = sum(-(-os.path.getsize(p) // PAGE) for p in files)
    assert len(files) == len(doc["model"]["shards"]) > 2
    assert [r["kind"] for r in doc["ranks"]] == ["timed", "timed"]
    for r in doc["ranks"]:
        assert r["bytes"] == size and r["pages"] == pages and r["engine"] == "mmap"
        assert r["GiB_per_second"] == pytest.approx(size / GiB / r["time_to_ready_s"])
        assert 0 < r["io_s"] <= r["time_to_ready_s"]
        # cold: the pages were dropped before the load (the run's mincore sample)
        assert r["counters"]["resident_before"] == 0.0
    s = doc["summary"]
    assert s["loads"] == 2 and s["time_to_ready_s"]["max"] == max(r["time_to_ready_s"] for r in doc["ranks"])
    # the reading thread's faults: as many as this thread's own mmap of the same files takes (the kernel
    # maps a folio and its neighbours per fault, so fewer than pages), none outside the touches
    mine = own_mmap_faults(files)
    for r in doc["ranks"]:
        faults = r["minflt"] + r["majflt"]
        assert mine / 3 <= faults <= 3 * mine + 16, (faults, mine, pages)
        assert faults <= pages + 16
        assert r["pages_per_fault"] == pytest.approx(pages / faults)
    # read mode copies instead: its thread faults nothing of the files
    code, _, err = run_cli(*args(tmp_path, "model_load.spread=whole", "model_load.read_mode=read", out="read"))
    assert code == 0, err
    for r in doc_of(tmp_path / "read")["ranks"]:
        assert r["minflt"] + r["majflt"] <= max(16, mine // 4)
    assert "Time to ready (slowest rank), 2 load(s)" in out and "Verdict" in out


def test_cold_means_cold(tmp_path):
    """The backend's drop leaves none of the shards' pages in the page cache (mincore of our own)."""
    from dlio.storage.files import FileBackend

    src = tmp_path / "f.bin"
    with open(src, "wb") as f:
        f.write(os.urandom(8 << 20))
    with open(src, "rb") as f:
        f.read()
    assert resident_pages(str(src))[0] > 0
    FileBackend().drop_cache([str(src)], "drop")
    assert resident_pages(str(src))[0] == 0


@pytest.mark.parametrize("mode", ["read", "odirect", "io_uring"])
def test_read_modes_read_the_shards_whole(run_cli, tmp_path, mode):
    if mode == "io_uring":
        why = next(w for n, _, ok, w in _core.engines() if n == "io_uring")
        if why:
            pytest.skip(f"io_uring refused here: {why}")
    code, _, err = run_cli(
        *args(tmp_path, "model_load.spread=whole", f"model_load.read_mode={mode}", "model_load.transfer_size=1048576")
    )
    assert code == 0, err
    doc = doc_of(tmp_path / "out")
    size = sum(os.path.getsize(p) for p in shard_files(tmp_path))
    for r in doc["ranks"]:
        assert r["bytes"] == size
        assert r["direct"] == (mode != "read")
        assert r["requests"] == sum(-(-os.path.getsize(p) // (1 << 20)) for p in shard_files(tmp_path))
        assert r["qd"] == (8 if mode == "io_uring" else 1)


def test_warm_load_is_the_page_cache_and_says_so(run_cli, tmp_path):
    code, out, err = run_cli(*args(tmp_path, "model_load.cache=warm", "model_load.repeats=1"))
    assert code == 0, err
    doc = doc_of(tmp_path / "out")
    assert [r["kind"] for r in doc["ranks"]] == ["warm-up", "timed"]
    timed = doc["ranks"][1]
    assert timed["counters"]["resident_before"] == pytest.approx(1.0)
    assert [v["verdict"] for v in doc["verdicts"] if v["phase"] == "load 2"] == ["cache"]
    assert "warm: the page cache's figure" in out
    assert doc["summary"]["loads"] == 1


def test_dry_run_touches_nothing(run_cli, tmp_path):
    code, out, err = run_cli(*args(tmp_path), "--dry-run")
    assert code == 0, err
    assert "tensor-parallel rank 0 reads" in out and "safetensors file(s)" in out
    assert not (tmp_path / "model").exists() and not (tmp_path / "out").exists()


def test_bad_settings_are_one_line(run_cli, tmp_path):
    code, _, err = run_cli(*args(tmp_path, "model_load.tensor_parallel=3"))
    assert code == 2 and "model_load.tensor_parallel = 3" in one_line(err)
    code, _, err = run_cli(*args(tmp_path, "model_load.read_mode=sendfile"))
    assert code == 2 and "model_load.read_mode" in one_line(err)
    code, _, err = run_cli(*args(tmp_path, "model_load.repeats=0"))
    assert code == 2 and "model_load.repeats" in one_line(err)
    code, _, err = run_cli(*args(tmp_path), "--engine", "io_uring")  # training's engine key: refused, not ignored
    assert code == 2 and "set model_load.read_mode instead" in one_line(err)


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="needs mpiexec (pip install mpich mpi4py)")
def test_two_tensor_parallel_ranks_read_their_slices(tmp_path):
    pytest.importorskip("mpi4py")
    cmd = ["mpiexec", "-n", "2", sys.executable, "-m", "dlio", *map(str, args(tmp_path, "model_load.repeats=1"))]
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = doc_of(tmp_path / "out")
    assert doc["comm_size"] == 2 and doc["settings"]["tensor_parallel"] == 2
    r0, r1 = sorted(doc["ranks"], key=lambda r: r["rank"])
    assert (r0["tp_rank"], r1["tp_rank"]) == (0, 1)
    model = doc["model"]["bytes"]
    # each rank wants half of every split tensor and all of the norms and headers: a little over half
    for r in (r0, r1):
        assert model / 2 < r["wanted_bytes"] < 0.55 * model
        assert r["files"] == len(doc["model"]["shards"])  # every rank opens every shard
    (load,) = doc["loads"]
    assert load["slowest_rank_s"] == max(r0["time_to_ready_s"], r1["time_to_ready_s"])
    assert load["bytes"] == r0["bytes"] + r1["bytes"]
    assert load["GiB_per_second"] == pytest.approx(load["bytes"] / GiB / load["slowest_rank_s"])


def test_model_on_s3_written_and_loaded_by_range_gets(run_cli, s3env, bucket, tmp_path):
    """The shards as objects (boto3 lists them, safetensors opens one downloaded), read back with range
    GETs (auto picks read there); mmap and prefetch are refused on S3 in one line."""
    pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")
    s3 = on_s3(bucket)
    code, _, err = run_cli(*args(tmp_path, "model_load.read_mode=mmap", folder="models/tiny", **s3))
    assert code == 2 and "model_load.read_mode = mmap: not available on S3" in one_line(err)
    code, _, err = run_cli(*args(tmp_path, "model_load.read_mode=prefetch", folder="models/tiny", **s3))
    assert code == 2 and "model_load.read_mode = prefetch: not available on S3" in one_line(err)
    assert "page cache its mmap pass then hits" in one_line(err)
    code, out, err = run_cli(*args(tmp_path, folder="models/tiny", **s3))
    assert code == 0, err
    doc = doc_of(tmp_path / "out")
    assert doc["read_mode_choice"]["mode"] == doc["settings"]["read_mode"] == "read"
    assert "Read mode: read, chosen as vLLM chooses (auto): objects" in out
    objects = s3_keys(s3env, bucket, "models/tiny/")
    shards = {f"models/tiny/{s['name']}": s["bytes"] for s in doc["model"]["shards"]}
    assert {k: v for k, v in objects.items() if k.endswith(".safetensors")} == shards
    assert "models/tiny/model.safetensors.index.json" in objects
    for r in doc["ranks"]:
        assert r["engine"] == "s3dlio" and r["bytes"] == r["wanted_bytes"] == sum(shards.values())
        assert r["cache"] == "n/a (object store)"
    name = doc["model"]["shards"][1]["name"]
    got = tmp_path / name
    s3_boto(s3env).download_file(bucket, f"models/tiny/{name}", str(got))
    safetensors = pytest.importorskip("safetensors")
    with safetensors.safe_open(str(got), framework="np") as f:
        assert len(list(f.keys())) > 0

    # a shard cut short is not the model (the listing was enough before, whatever the sizes): written again
    key, body = f"models/tiny/{name}", got.read_bytes()
    s3_boto(s3env).put_object(Bucket=bucket, Key=key, Body=body[:4096])
    code, out, err = run_cli(*args(tmp_path, out="again", folder="models/tiny", **s3))
    assert code == 0 and "Writing the model's" in out, out + err
    assert s3_keys(s3env, bucket, "models/tiny/")[key] == len(body)


def test_a_stopped_run_keeps_the_loads_measured(tmp_path):
    from conftest import wait_for_text

    cmd = [sys.executable, "-m", "dlio", *map(str, args(tmp_path, "model_load.repeats=1000"))]
    log = tmp_path / "stdout"
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(log, "w") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
        try:
            wait_for_text(log, "Load 2 [cold]", p)
            p.send_signal(15)
            _, err = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
    assert p.returncode == 128 + 15, err
    doc = doc_of(tmp_path / "out")
    assert not doc["complete"] and "SIGTERM" in doc["reason"]
    assert 2 <= len(doc["loads"]) < 1000 and len(doc["ranks"]) == len(doc["loads"])
