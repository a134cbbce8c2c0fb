"""Vector search on S3 (storage.storage_type s3) against a real Ceph RADOS Gateway: the index built as objects
holding the bytes of a local build (but the C core's issue-time stamps), downloaded into a local copy in the
load phase (its bytes the index's size), searched there with the same reads as the same run on local files,
kept on a rerun (not uploaded again), and a missing bucket refused in one line."""

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import on_s3, one_line, s3_keys, set_args
from conftest import s3_boto as boto

pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")
boto3 = pytest.importorskip("boto3", reason="pip install boto3 (the test reads the objects with its own client)")

SMALL = {
    "vdb.vectors": 4000,
    "vdb.processes": 2,
    "vdb.batch": 3,
    "vdb.runs": 2,
    "vdb.queries": 40,
    "vdb.search_list": 48,
    "vdb.index_folder": "idx",
    # posix writes each build request from the same buffer (one in flight per thread): two builds of one
    # config hold the same bytes, so the objects can be compared with a build on local files
    "dlio_fast.engine": "posix",
}
POSIX_NOTE = "note: engine posix reads a hop's nodes"  # printed before the run starts
INDEX = "diskann-n4000-d1536x4-r64-s1"
SEGMENT = "segment_00000/_disk.index"


def run(cwd, *extra, **sets):
    """`dlio-fast run -w vdb_diskann_1m` in a subprocess in cwd (the index folder is relative to it)."""
    args = [sys.executable, "-m", "dlio", "run", "-w", "vdb_diskann_1m", *extra, *set_args(**(SMALL | sets))]
    p = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def load(path):
    with open(path) as f:
        return json.load(f)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def unstamped(data: bytes) -> str:
    """The digest of an index file without the issue time the C core stamps in bytes 8-16 of every 4 KiB block
    it writes (dc_stamp_unique: no two builds are alike, as no two real indexes are); all else is the build's."""
    a = np.frombuffer(data, np.uint8).reshape(-1, 4096).copy()
    a[1:, 8:16] = 0  # sector 0 is DiskANN's metadata, written after the blocks
    return sha(a.tobytes())


def test_index_on_s3_built_downloaded_searched_and_kept(s3env, bucket, tmp_path):
    s3dir, localdir = tmp_path / "s3", tmp_path / "local"
    s3dir.mkdir()
    localdir.mkdir()
    code, out, err = run(s3dir, "-o", "out", **on_s3(bucket))
    assert code == 0, err
    assert "building the index" in out and f"s3://{bucket}/idx/{INDEX}" in out
    assert "the search reads the local copy" in out
    doc = load(s3dir / "out" / "dlio-fast.json")
    code, lout, err = run(localdir, "-o", "out")  # the same config on local files
    assert code == 0, err
    ldoc = load(localdir / "out" / "dlio-fast.json")
    local_file = localdir / "idx" / INDEX / SEGMENT

    # the objects: the index file with the very bytes of the local build, and the manifest
    s3 = boto(s3env)
    keys = {o["Key"]: o for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"idx/{INDEX}/")["Contents"]}
    # and the marker that proves the prefix a run's own (dlio.storage.places)
    assert set(keys) == {f"idx/{INDEX}/{SEGMENT}", f"idx/{INDEX}/vdb-index.json", f"idx/{INDEX}/.dlio-fast-place"}
    body = s3.get_object(Bucket=bucket, Key=f"idx/{INDEX}/{SEGMENT}")["Body"].read()
    size = 4096 * (1 + 2 * 4000)  # DiskANN's metadata sector + 2 sectors per 6404 B node
    assert len(body) == size == os.path.getsize(local_file)
    assert unstamped(body) == unstamped(local_file.read_bytes())
    assert body[:4096] == local_file.read_bytes()[:4096]  # DiskANN's metadata sector, byte for byte
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=f"idx/{INDEX}/vdb-index.json")["Body"].read())
    assert manifest["medoid"] == doc["plan"]["medoid"] == ldoc["plan"]["medoid"]

    # the build is the upload; the load is the download of every byte into the local copy
    assert doc["build"]["bytes"] == size and doc["build"]["where"] == f"s3://{bucket}/idx/{INDEX}"
    assert doc["build"]["staging"]["bytes"] == size
    ld = doc["load"]
    assert ld["bytes"] == size and ld["objects"] == 1 and ld["requests"] == -(-size // ld["request_bytes"])
    assert ld["seconds"] > 0 and ld["mb_per_s"] == pytest.approx(size / ld["seconds"] / 1e6)
    assert ld["verdict"]["verdict"] and ld["counters"]["target"]["fstype"] == "s3"
    copy = s3dir / "idx" / (INDEX + ".s3-copy") / SEGMENT
    assert ld["copy"] == os.path.join("idx", INDEX + ".s3-copy")
    assert sha(copy.read_bytes()) == sha(body)
    assert f"load: 1 objects, {size / 2**20:.1f} MiB downloaded" in out
    assert doc["search_reads"].startswith(f"the search reads the local copy in {ld['copy']}")

    # the search read the local copy: the same reads as the run on local files (same seed, same plan)
    assert len(doc["runs"]) == len(ldoc["runs"]) == 2
    for r, lr in zip(doc["runs"], ldoc["runs"]):
        for k in ("queries", "reads_per_query", "hops_per_query", "app_bytes_per_query", "read_bytes_mean"):
            assert r[k] == lr[k], k
        assert r["counters"]["target"]["fstype"] != "s3"  # the local disk's counters

    # a rerun finds the objects and keeps them: nothing uploaded again, the load downloads again
    code, out2, err = run(s3dir, "-o", "out2", **on_s3(bucket))
    assert code == 0, err
    assert f"index present in s3://{bucket}/idx/{INDEX}" in out2
    doc2 = load(s3dir / "out2" / "dlio-fast.json")
    assert doc2["build"] == {"phase": "build", "kept": True} and doc2["load"]["bytes"] == size
    again = {o["Key"]: o for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"idx/{INDEX}/")["Contents"]}
    for k, o in keys.items():
        assert (again[k]["LastModified"], again[k]["ETag"]) == (o["LastModified"], o["ETag"]), k

    # the index object cut short is not the index (its name in the listing was enough before): built again
    s3.put_object(Bucket=bucket, Key=f"idx/{INDEX}/{SEGMENT}", Body=body[: size // 2])
    code, out3, err = run(s3dir, "-o", "out3", **on_s3(bucket))
    assert code == 0, err
    assert "building the index" in out3 and load(s3dir / "out3" / "dlio-fast.json")["build"]["bytes"] == size
    assert s3_keys(s3env, bucket, f"idx/{INDEX}/")[f"idx/{INDEX}/{SEGMENT}"] == size


def test_missing_bucket_is_one_line(s3env, tmp_path):
    code, out, err = run(tmp_path, "-o", "out", **on_s3("no-such-vdb"))
    line = one_line(err)
    assert code != 0 and "no-such-vdb" in line and s3env.endpoint in line and "--create-bucket" in line
    assert not (tmp_path / "idx").exists()  # refused before anything was built


def test_the_s3_client_is_no_search_engine(s3env, bucket, tmp_path):
    sets = {**on_s3(bucket), "dlio_fast.engine": "s3dlio"}
    code, out, err = run(tmp_path, "-o", "out", **sets)
    line = one_line(err)
    assert code == 2 and line.startswith("dlio-fast: error: dlio_fast.engine = s3dlio") and "use io_uring" in line


def test_no_room_for_the_local_copy_is_refused_before_the_download(s3env, bucket, tmp_path, run_cli, monkeypatch):
    import shutil

    code, out, err = run(tmp_path, "-o", "out", **on_s3(bucket))  # the objects, built and uploaded
    assert code == 0, err
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    monkeypatch.chdir(fresh)
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=1 << 20))
    code, out, err = run_cli("run", "-w", "vdb_diskann_1m", "-o", "out", *set_args(**(SMALL | on_s3(bucket))))
    line = one_line("\n".join(x for x in err.splitlines() if not x.startswith(POSIX_NOTE)))
    assert code == 2 and "index present" in out
    assert f"the local copy of s3://{bucket}/idx/{INDEX} needs 31.3 MiB more but 1.0 MiB is free" in line
    assert not (fresh / "idx" / (INDEX + ".s3-copy") / SEGMENT).exists()


def test_hnsw_on_s3_loads_by_downloading(s3env, bucket, tmp_path):
    sets = set_args("vdb.index_folder=idx", "dlio_fast.engine=posix", **on_s3(bucket), **{"vdb.vectors": 2000})
    args = [sys.executable, "-m", "dlio", "run", "-w", "vdb_hnsw", "-o", "out", *sets]
    p = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    doc = load(tmp_path / "out" / "dlio-fast.json")
    size = 4096 * -(-2000 * (1536 * 4 + 4 + 8 * 64) // 4096)  # M=64: 128 links at level 0
    assert doc["build"]["bytes"] == size == doc["load"]["bytes"] and not doc["runs"]
    assert "downloaded" in p.stdout and "search_reads" not in doc


def test_an_s3_uri_as_index_folder_is_refused(s3env, bucket, tmp_path):
    sets = {**on_s3(bucket), "vdb.index_folder": f"s3://{bucket}/x"}
    code, out, err = run(tmp_path, "-o", "out", **sets)
    line = one_line("\n".join(x for x in err.splitlines() if not x.startswith(POSIX_NOTE)))
    assert code == 2 and f"vdb.index_folder = s3://{bucket}/x: it is both the prefix" in line
    assert not os.listdir(tmp_path)


def test_many_ranks_on_s3_are_one_line(s3env, bucket, tmp_path):
    """Many ranks search one index from a shared folder; on an object store each host would need its own
    downloaded copy (not done): refused in one line before a request, nothing written to the bucket."""
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    args = [mpiexec, "-n", "2", sys.executable, "-m", "dlio", "run", "-w", "vdb_diskann_1m", "-o", "out"]
    args += set_args(**(SMALL | on_s3(bucket)))
    p = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    said = [line for line in p.stderr.splitlines() if line.startswith("dlio-fast:")]
    assert len(said) == 1 and "many ranks (2 here)" in said[0] and "vdb.index_folder" in said[0], p.stderr
    assert "Traceback" not in p.stderr
    assert not s3_keys(s3env, bucket, "")  # no object, no marker, no lock
