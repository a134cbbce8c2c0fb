"""The storage protocol does the same observable thing on every backend: files in a temporary folder and
objects on a real Ceph RADOS Gateway. Files of known content are written, read, staged, uploaded,
downloaded, listed and removed, and checked byte for byte (dlio.storage.base, dlio.storage.staging)."""

import os
import random
import uuid

import numpy as np
import pytest
from conftest import on_s3

from dlio import _core, storage
from dlio.base.errors import ConfigError
from dlio.storage import staging
from dlio.storage.base import SetContent, SetOptions

SIZES = (1, 4096, 70_000)  # a byte, a page, and a size that is neither


def content(seed, n):
    return random.Random(seed).randbytes(n)


@pytest.fixture(params=["files", "s3"])
def store(request, tmp_path):
    """(backend, a root of this test's own) on each backend."""
    if request.param == "files":
        return storage.make("local_fs"), str(tmp_path / "root")
    pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]'")
    bucket = request.getfixturevalue("bucket")
    backend = storage.make(on_s3(bucket)["storage.storage_type"])
    return backend, f"s3://{bucket}/contract-{uuid.uuid4().hex[:8]}/"


def opts(backend, **kw):
    engine, direct = backend.engine_for("posix")
    return SetOptions(engine=engine, direct=direct, qd=1, **kw)


def write(backend, root, rels, seed=0):
    """Files ``rels`` of SIZES bytes and known content, written whole through write_set."""
    names = [backend.join(root, r) for r in rels]
    sizes = [SIZES[i % len(SIZES)] for i in range(len(rels))]
    data = [content(seed + i, n) for i, n in enumerate(sizes)]
    res = backend.write_set(names, sizes, SetContent(overlays=[[(0, d)] for d in data]), opts(backend))
    assert res.bytes == sum(sizes)
    return names, sizes, data


def read_back(backend, root, rels):
    """The bytes of ``rels`` as a job that works on a local copy sees them."""
    folder, found = staging.local_copy(backend, root, rels)
    assert all(found), (rels, found)
    out = []
    for r in rels:
        with open(os.path.join(folder, r), "rb") as f:
            out.append(f.read())
    return out


def test_names(store):
    backend, root = store
    name = backend.join(root, "a", "b.bin")
    assert name.rstrip("/").endswith("a/b.bin") and name.startswith(root.rstrip("/"))
    local, _ = staging.local_copy(backend, root, [])  # the folder a job's local paths are under
    assert backend.names(root, local, [os.path.join(local, "a", "b.bin")]) == [name]
    assert backend.name in storage.BACKENDS


def test_write_then_read_byte_for_byte(store):
    backend, root = store
    backend.check_access([root])
    rels = ["one.bin", "sub/two.bin", "sub/deeper/three.bin"]
    names, sizes, data = write(backend, root, rels)
    assert read_back(backend, root, rels) == data
    assert backend.exist(names)
    assert not backend.exist([backend.join(root, "sub", "absent.bin")])
    assert sorted(backend.list(root)) == sorted(names)
    assert backend.read_set(names, sizes, opts(backend)).bytes == sum(sizes)


def test_read_ranges_reads_the_ranges_asked(store):
    backend, root = store
    names, sizes, _ = write(backend, root, ["r0.bin", "r1.bin", "r2.bin"])
    ops = np.zeros(3, dtype=_core.OP_DTYPE)
    ops["file"], ops["op"], ops["offset"], ops["length"] = [0, 1, 2], _core.OP_READ, [0, 100, 69_000], [1, 3000, 1000]
    res = backend.read_ranges(names, sizes, ops, opts(backend, threads=1))
    assert res.bytes == 4001


def test_remove_tree_leaves_nothing(store):
    backend, root = store
    names, _, _ = write(backend, root, ["x.bin", "d/y.bin"])
    backend.remove_tree(root)
    assert backend.list(root) == []
    assert not backend.exist(names)
    backend.remove_tree(root)  # removing what is not there is not an error


def test_local_copy_says_what_was_not_found_and_discard_keeps_the_data(store):
    backend, root = store
    names, _, data = write(backend, root, ["kept.bin"])
    folder, found = staging.local_copy(backend, root, ["kept.bin", "absent.bin"])
    assert found == [True, False]
    staging.discard_copy(backend, root, folder, ["kept.bin"])
    assert backend.exist(names)
    assert read_back(backend, root, ["kept.bin"]) == data


def test_stage_and_upload_then_download(store, tmp_path):
    backend, root = store
    stage = staging.stage_and_upload(backend, root, str(tmp_path / "staging"))
    rels = ["i/0.bin", "i/1.bin"]
    paths = [os.path.join(stage.folder, r) for r in rels]
    data = [content(10 + i, n) for i, n in enumerate((5000, 123))]
    for p, d in zip(paths, data):
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(d)
    up = stage.upload(paths, opts(backend))
    assert up is None or up.bytes == sum(map(len, data))  # files: written in place, nothing to upload
    assert backend.exist(stage.names(paths))
    for p in paths:  # what was staged may go: the root keeps the files
        if stage.staged:
            os.unlink(p)
    assert read_back(backend, root, rels) == data
    down = stage.download(paths, [len(d) for d in data], opts(backend, threads=2, transfer=4096))
    assert down is None or down.bytes == sum(map(len, data))  # files: already there
    for p, d in zip(paths, data):
        with open(p, "rb") as f:
            assert f.read() == d


def test_a_kv_place_is_claimed_empty(store):
    backend, root = store
    place = staging.kv_place(backend, root, 3)
    assert place.where.rstrip("/").endswith("rank_3")
    names, _, _ = write(backend, place.where, ["kv_1.npy", "kv_2.npy"])
    place.claim("kv_*.npy")
    assert not any(backend.exist([n]) for n in names)
    if place.relayed:  # the relay's helper is the backend's; files have none, and say so in the one shape
        assert place.free_bytes() is None
    else:
        assert place.free_bytes() > 0 and place.relay(1, 4096) is None
        with pytest.raises(ConfigError, match="not available on files"):
            backend.kv_relay(place.where, 1, 4096)


def test_engine_for_a_job(store):
    backend, _ = store
    engine, direct = backend.engine_for("io_uring", True)
    assert (engine, direct) == (("io_uring", True) if backend.name == "local_fs" else ("s3dlio", False))


def test_upload_files_and_download_files_copy_byte_for_byte(store, tmp_path):
    backend, root = store
    src, back = tmp_path / "src.bin", tmp_path / "back" / "copy.bin"
    data = content(7, 9000)
    src.write_bytes(data)
    name = backend.join(root, "u", "up.bin")
    assert backend.upload_files([name], [str(src)], opts(backend)).bytes == len(data)
    assert backend.download_files([name], [len(data)], [str(back)], opts(backend, transfer=4096)).bytes == len(data)
    assert back.read_bytes() == data
