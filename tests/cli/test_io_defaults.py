"""What `dlio-fast io` / `ceiling` measure by default: the storage, not the page cache; the queue
depth that ran is the one every output shows; a cache drop is checked."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import one_line

from dlio import _core
from dlio.base.errors import DlioRunError
from dlio.system import host

SMALL = ["--file-size", "1m", "--size", "1m", "--bs", "64k"]


def points_of(path):
    return json.loads(path.read_text())["points"]


def direct_ok(folder):
    from dlio.fsbench.points import direct_supported

    return direct_supported(str(folder))


def test_default_reads_buffered_with_the_pages_dropped_as_fio_does(run_cli, tmp_path):
    # fio's defaults: buffered, invalidate=1. Before: the page cache was kept and measured (2.1 M IOPS).
    js = tmp_path / "r.json"
    code, out, err = run_cli("io", tmp_path, *SMALL, "--json", js)
    assert code == 0, err
    (p,) = points_of(js)
    assert not p["direct"] and p["cache"].startswith("dropped (1 files")
    assert " buffer " in out.splitlines()[1]


def test_direct_when_asked(run_cli, tmp_path):
    if not direct_ok(tmp_path):
        pytest.skip(f"{tmp_path}: the filesystem refuses O_DIRECT")
    js = tmp_path / "r.json"
    code, out, err = run_cli("io", tmp_path, *SMALL, "--direct", "--json", js)
    assert code == 0, err
    (p,) = points_of(js)
    assert p["direct"] and p["cache"] == "bypassed (O_DIRECT)"
    assert " direct " in out.splitlines()[1]


def test_buffered_on_tmpfs_says_the_files_are_in_memory(run_cli):
    if not os.path.isdir("/dev/shm") or host.memory_filesystem("/dev/shm") is None:
        pytest.skip("no tmpfs at /dev/shm")
    import tempfile

    with tempfile.TemporaryDirectory(dir="/dev/shm") as d:
        js = os.path.join(d, "r.json")
        # 3 passes over a 1 MiB file: the later ones could be served from memory
        code, out, err = run_cli(
            "io", d, "--file-size", "1m", "--size", "3m", "--bs", "64k", "--buffered", "--json", js
        )
        assert code == 0, err
        (p,) = json.loads(open(js).read())["points"]
    assert not p["direct"] and "in memory" in p["cache"]
    assert "fit in free memory" in err  # the buffered file set is smaller than RAM


def test_buffered_default_drops_each_files_pages_and_checks(run_cli, tmp_path):
    js = tmp_path / "r.json"
    code, out, err = run_cli("io", tmp_path, *SMALL, "--buffered", "--json", js)
    assert code == 0, err
    (p,) = points_of(js)
    assert not p["direct"] and p["cache"].startswith("dropped (1 files")
    assert " buffer " in out.splitlines()[1]


def test_one_pass_by_default_and_no_memory_warning(run_cli, tmp_path):
    js = tmp_path / "r.json"
    code, out, err = run_cli("io", tmp_path, "--file-size", "1m", "--bs", "64k", "--json", js)
    assert code == 0, err
    (p,) = points_of(js)
    assert p["bytes"] == 1 << 20 and p["ops"] == 16  # each byte read once: none from the page cache
    assert "free memory" not in err


def test_page_cache_only_when_asked_and_the_table_says_so(run_cli, tmp_path):
    js, cs = tmp_path / "r.json", tmp_path / "r.csv"
    code, out, err = run_cli("io", tmp_path, *SMALL, "--buffered", "--cache", "keep", "--json", js, "--csv", cs)
    assert code == 0, err
    (p,) = points_of(js)
    assert p["cache"].startswith("kept")
    assert " cached " in out.splitlines()[1]
    assert "kept" in cs.read_text()


def test_drop_all_needs_root(run_cli, tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code, out, err = run_cli("io", tmp_path, *SMALL, "--buffered", "--cache", "drop-all")
    assert code == 2 and "needs root" in one_line(err)


def test_sync_engine_points_at_depth_are_left_out_once(run_cli, tmp_path):
    if not {n: ok for n, _, ok, _ in _core.engines()}.get("io_uring"):
        pytest.skip("io_uring unavailable here")
    js = tmp_path / "r.json"
    code, out, err = run_cli("io", tmp_path, *SMALL, "--engine", "posix,io_uring", "--qd", "1,4", "--json", js)
    assert code == 0, err
    got = [(p["engine"], p["qd"], p["qd_used"]) for p in points_of(js)]
    assert got == [("posix", 1, 1), ("io_uring", 1, 1), ("io_uring", 4, 4)]
    assert err.count("left out") == 1


def test_sync_engine_at_depth_alone_is_an_error(run_cli, tmp_path):
    code, out, err = run_cli("io", tmp_path, *SMALL, "--engine", "posix", "--qd", "8")
    assert code == 2 and "synchronous" in one_line(err)


def test_run_refuses_depth_on_a_sync_engine(run_cli, tmp_path):
    code, out, err = run_cli("run", "-w", "default", "--set", f"dataset.data_folder={tmp_path}", "--qd", "4")
    assert code == 2 and "dlio_fast.qd = 4 with engine posix" in one_line(err)


def test_drop_cache_empties_the_files_pages(tmp_path):
    f = tmp_path / "f.bin"
    f.write_bytes(os.urandom(4 << 20))
    with open(f, "rb") as fh:
        fh.read()
    assert host.resident_share([str(f)]) > 0.9  # just written and read: cached
    note = host.drop_cache([str(f)])
    assert host.resident_share([str(f)]) < host.DROP_RESIDUAL
    assert note.startswith("dropped (1 files")


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_a_drop_writes_back_without_a_device_flush_per_file(tmp_path):
    # fdatasync per file issued a device cache flush each: dropping imagenet --scale 0.01's 12,812
    # files took 130 s on ext4 (a silent pause before every epoch). Dirty pages are written back with
    # sync_file_range (no flush), and every file, dirty or not, is dropped.
    paths = []
    for i in range(50):
        paths.append(tmp_path / f"f{i}")
        paths[-1].write_bytes(os.urandom(64 << 10))  # dirty: just written, not synced
    script = f"from dlio.system import host; print(host.drop_cache({[str(p) for p in paths]!r}))"
    log = tmp_path / "strace.log"
    r = subprocess.run(
        [
            "strace",
            "-f",
            "-o",
            str(log),
            "-e",
            "trace=fdatasync,fsync,sync_file_range,fadvise64",
            sys.executable,
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "dropped (50 files" in r.stdout, r.stderr
    calls = log.read_text()
    assert calls.count("fdatasync(") == 0 and calls.count("fsync(") == 0
    assert calls.count("sync_file_range(") == 50 and calls.count("POSIX_FADV_DONTNEED") == 50
    assert host.resident_share([str(p) for p in paths]) < host.DROP_RESIDUAL


def test_a_drop_that_does_not_happen_is_an_error(tmp_path, monkeypatch):
    f = tmp_path / "f.bin"
    f.write_bytes(os.urandom(1 << 20))
    monkeypatch.setattr(_core, "drop_files_cache", lambda p, durable: None)  # a filesystem that ignores DONTNEED
    with pytest.raises(DlioRunError, match="still in the page cache"):
        host.drop_cache([str(f)])
