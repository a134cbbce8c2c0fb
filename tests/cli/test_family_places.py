"""The families' own folders (dlio.storage.places, claimed by the driver for every family): a run never
writes, truncates or removes what it did not make (a user's Hugging Face model, a file behind a link
planted at an index or entry name, a KV cache folder that is a link), two runs never share one folder,
a folder on a kernel filesystem is refused before anything is made, and a finished run's results are
never replaced by a second run into its folder."""

import glob
import hashlib
import os
import signal
import subprocess
import sys

import pytest
from conftest import REPO, TINY_KV_CONFIG, TINY_MODEL_LOAD, on_s3, one_line, s3_boto, set_args, wait_for_text

from dlio import _core

KNOWN = bytes(range(256)) * 64  # a user's file: 16 KiB of known bytes


def engine():
    return "io_uring" if {n: ok for n, _, ok, _ in _core.engines()}["io_uring"] else "posix"


def victim(path, data=KNOWN):
    """A file of someone else's, with its digest to compare after the run."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return hashlib.sha256(data).hexdigest()


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def kv_args(tmp_path, *more, out="out"):
    cfg = tmp_path / "kv.yaml"
    cfg.write_text(TINY_KV_CONFIG)
    return ["run", "--config", cfg, *set_args(f"kvcache.cache_dir={tmp_path}/cache", *more), "-o", tmp_path / out]


def load_args(tmp_path, *more, out="out", **keys):
    keys = {"checkpoint.checkpoint_folder": tmp_path / "model", **keys}
    return ["run", "-w", "load_llama3_8b", "-o", tmp_path / out, *set_args(*TINY_MODEL_LOAD, *more, **keys)]


VDB = ("vdb.vectors=4000", "vdb.processes=2", "vdb.batch=3", "vdb.runs=1", "vdb.queries=40", "vdb.search_list=48")


def vdb_args(tmp_path, *more, out="out"):
    sets = set_args(*VDB, f"vdb.index_folder={tmp_path / 'idx'}", f"dlio_fast.engine={engine()}", *more)
    return ["run", "-w", "vdb_diskann_1m", *sets, "-o", tmp_path / out]


# ---- never write, truncate or remove what the run did not make ----


def test_model_load_never_overwrites_a_users_hugging_face_model(run_cli, tmp_path):
    model = tmp_path / "model"
    index = victim(str(model / "model.safetensors.index.json"), b'{"metadata": {"total_size": 16384}}\n')
    shard = victim(str(model / "model-00001-of-00002.safetensors"))
    code, out, err = run_cli(*load_args(tmp_path))
    assert code == 2
    line = one_line(err)
    assert str(model) in line and "model-00001-of-00002.safetensors" in line and "checkpoint.checkpoint_folder" in line
    assert (
        digest(model / "model.safetensors.index.json") == index
        and digest(model / "model-00001-of-00002.safetensors") == shard
    )
    assert sorted(os.listdir(model)) == ["model-00001-of-00002.safetensors", "model.safetensors.index.json"]
    assert not os.path.exists(tmp_path / "out")  # refused before the output folder


def test_model_load_on_s3_never_overwrites_a_users_model(run_cli, s3env, bucket, tmp_path):
    """The same rule on an object store: a prefix holding a Hugging Face model and no marker object."""
    pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]'")
    s3 = s3_boto(s3env)
    theirs = {
        "models/theirs/model.safetensors.index.json": b"{}\n",
        "models/theirs/model-00001-of-00002.safetensors": KNOWN,
    }
    for key, body in theirs.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    code, out, err = run_cli(*load_args(tmp_path, **on_s3(bucket), **{"checkpoint.checkpoint_folder": "models/theirs"}))
    assert code == 2
    line = one_line(err)
    assert "models/theirs" in line and "model-00001-of-00002.safetensors" in line and "no dlio-fast run made" in line
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="models/theirs/")["Contents"]
    assert {o["Key"]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in listed} == theirs


def test_model_load_rewrites_its_own_model_and_reads_a_complete_one(run_cli, tmp_path):
    """The marker proves the shards its own: a second run with another shard size rewrites them."""
    assert run_cli(*load_args(tmp_path))[0] == 0
    assert os.path.exists(tmp_path / "model" / ".dlio-fast-place")
    code, out, err = run_cli(*load_args(tmp_path, "model_load.shard_size=3000000", out="out2"))
    assert code == 0, err
    assert "Writing the model's" in out


def plant_links(folder, victim_path):
    """Every index file of the built index at ``folder`` replaced: the first by a symbolic link to the
    victim, the others by hard links to copies of it; the manifest removed, so the next run builds."""
    files = sorted(glob.glob(os.path.join(folder, "segment_*", "_disk.index")))
    assert files
    os.unlink(os.path.join(folder, "vdb-index.json"))
    hard = []
    for i, f in enumerate(files):
        os.unlink(f)
        if i == 0:
            os.symlink(victim_path, f)
        else:
            copy = f"{victim_path}.{i}"
            victim(copy)
            os.link(copy, f)
            hard.append(copy)
    return hard


def test_vdb_build_never_writes_through_a_link_at_an_index_name(run_cli, tmp_path):
    code, _, err = run_cli(*vdb_args(tmp_path, "vdb.segments=2"))
    assert code == 0, err
    (folder,) = glob.glob(str(tmp_path / "idx" / "*"))
    want = victim(str(tmp_path / "theirs" / "data.bin"))
    hard = plant_links(folder, str(tmp_path / "theirs" / "data.bin"))
    code, out, err = run_cli(*vdb_args(tmp_path, "vdb.segments=2", out="out2"))
    assert code == 0, err
    assert "building the index" in out
    for p in [str(tmp_path / "theirs" / "data.bin"), *hard]:
        assert digest(p) == want and os.path.getsize(p) == len(KNOWN)
    for f in glob.glob(os.path.join(folder, "segment_*", "_disk.index")):
        st = os.lstat(f)
        assert not os.path.islink(f) and st.st_nlink == 1 and st.st_size > len(KNOWN)


def test_vdb_build_refuses_an_index_folder_it_did_not_make(run_cli, tmp_path):
    code, _, err = run_cli(*vdb_args(tmp_path))
    assert code == 0, err
    (folder,) = glob.glob(str(tmp_path / "idx" / "*"))
    os.unlink(os.path.join(folder, ".dlio-fast-place"))  # as a folder someone else filled
    os.unlink(os.path.join(folder, "vdb-index.json"))
    seg = sorted(glob.glob(os.path.join(folder, "segment_*", "_disk.index")))[0]
    want = victim(seg)
    code, out, err = run_cli(*vdb_args(tmp_path, out="out2"))
    assert code == 2 and "no dlio-fast run made" in one_line(err) and "vdb.index_folder" in err
    assert digest(seg) == want


def test_kv_never_removes_entries_through_a_rank_folder_that_is_a_link(run_cli, tmp_path):
    theirs = tmp_path / "theirs"
    want = victim(str(theirs / "kv_00000001.npy"))
    os.makedirs(tmp_path / "cache")
    os.symlink(theirs, tmp_path / "cache" / "rank_0")
    code, out, err = run_cli(*kv_args(tmp_path))
    assert code == 2
    line = one_line(err)
    assert "rank_0" in line and "symbolic link" in line and "kvcache.cache_dir" in line
    assert os.listdir(theirs) == ["kv_00000001.npy"] and digest(theirs / "kv_00000001.npy") == want


def test_kv_refuses_entries_it_did_not_make(run_cli, tmp_path):
    want = victim(str(tmp_path / "cache" / "rank_0" / "kv_00000001.npy"))
    code, out, err = run_cli(*kv_args(tmp_path))
    assert code == 2 and "kv_00000001.npy" in one_line(err)
    assert digest(tmp_path / "cache" / "rank_0" / "kv_00000001.npy") == want


def test_kv_entry_names_planted_as_links_during_a_run_are_refused(tmp_path):
    """Links planted at every entry name while a trial runs: the run fails on the first one it meets
    (O_CREAT|O_EXCL|O_NOFOLLOW), never writing through it, and still writes what it measured."""
    want = victim(str(tmp_path / "theirs" / "data.bin"))
    log = tmp_path / "log"
    with open(log, "w") as f:
        p = subprocess.Popen(
            [sys.executable, "-m", "dlio", *map(str, kv_args(tmp_path, "kvcache.duration=20"))],
            stdout=f,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    try:
        wait_for_text(str(log), "Running dlio-fast [KV cache]", p)
        rank = tmp_path / "cache" / "rank_0"
        for i in range(1 << 14):
            try:
                os.symlink(tmp_path / "theirs" / "data.bin", rank / f"kv_{i:08x}.npy")
            except FileExistsError:
                pass
        p.wait(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    text = log.read_text()
    assert p.returncode == 1, text
    assert "Traceback" not in text and "File exists" in text
    assert digest(tmp_path / "theirs" / "data.bin") == want
    assert os.path.exists(tmp_path / "out" / "dlio-fast.json")


# ---- one run per folder ----


def _second_is_refused(tmp_path, first, second, ready, what):
    log = tmp_path / "first.log"
    with open(log, "w") as f:
        p = subprocess.Popen(
            [sys.executable, "-m", "dlio", *map(str, first)], stdout=f, stderr=subprocess.STDOUT, cwd=REPO
        )
    try:
        wait_for_text(str(log), ready, p)
        r = subprocess.run(
            [sys.executable, "-m", "dlio", *map(str, second)], capture_output=True, text=True, cwd=REPO, timeout=120
        )
        assert r.returncode == 2, r.stdout + r.stderr
        line = one_line(r.stderr)
        assert f"pid {p.pid}" in line and what in line
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    return p.returncode


def test_two_kv_runs_never_share_a_cache_folder(tmp_path):
    _second_is_refused(
        tmp_path,
        kv_args(tmp_path, "kvcache.duration=60"),
        kv_args(tmp_path, out="out2"),
        "Running dlio-fast [KV cache]",
        "kvcache.cache_dir",
    )
    assert not os.path.exists(tmp_path / "out2")


def test_two_vdb_runs_never_build_one_index(tmp_path):
    _second_is_refused(
        tmp_path,
        vdb_args(tmp_path, "vdb.queries=0", "vdb.duration=60"),
        vdb_args(tmp_path, out="out2"),
        "index files",
        "vdb.index_folder",
    )


def test_two_model_loads_never_share_a_folder(tmp_path):
    _second_is_refused(
        tmp_path,
        load_args(tmp_path, "model_load.repeats=1000"),
        load_args(tmp_path, out="out2"),
        "read mode",
        "checkpoint.checkpoint_folder",
    )


# ---- writes outside a real filesystem ----


@pytest.mark.skipif(
    not os.path.isdir("/sys/fs/cgroup/pids") and not os.path.exists("/sys/fs/cgroup/cgroup.procs"),
    reason="no cgroup filesystem",
)
@pytest.mark.parametrize("family", ["kvcache", "vdb", "model_load", "train", "output"])
def test_a_folder_on_a_kernel_filesystem_is_refused_before_anything_is_made(run_cli, tmp_path, family):
    base = "/sys/fs/cgroup/pids" if os.path.isdir("/sys/fs/cgroup/pids") else "/sys/fs/cgroup"
    where = os.path.join(base, f"dlio-fast-test-{os.getpid()}-{family}")
    args = {
        "kvcache": kv_args(tmp_path, f"kvcache.cache_dir={where}"),
        "vdb": vdb_args(tmp_path, f"vdb.index_folder={where}"),
        "model_load": load_args(tmp_path, **{"checkpoint.checkpoint_folder": where}),
        "train": ["run", "-w", "default", "-o", tmp_path / "out", *set_args(f"dataset.data_folder={where}")],
        "output": kv_args(tmp_path)[:-1] + [where],
    }[family]
    try:
        code, out, err = run_cli(*args)
        assert code == 2
        line = one_line(err)
        assert where in line and "cgroup" in line and "kernel filesystem" in line
        assert not os.path.exists(where)  # no cgroup made
        assert not os.path.exists(tmp_path / "out")
    finally:
        if os.path.isdir(where):
            os.rmdir(where)


# ---- a finished run's results are kept ----


def test_a_second_run_into_a_finished_folder_is_refused(run_cli, tmp_path):
    assert run_cli(*kv_args(tmp_path))[0] == 0
    before = digest(tmp_path / "out" / "dlio-fast.json")
    code, out, err = run_cli(*kv_args(tmp_path))
    assert code == 2
    line = one_line(err)
    assert str(tmp_path / "out") in line and "finished run" in line and "--output" in line
    assert digest(tmp_path / "out" / "dlio-fast.json") == before
