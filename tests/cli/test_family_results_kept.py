"""Results are never lost while the console says they were written: a vector-search run stopped during its
build writes what it has and says the index is incomplete; a KV run whose operation log cannot be written
(a full disk) still writes its results, with one line naming the log, and a folder given as the log is
refused before the run."""

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import REPO, TINY_KV_CONFIG, one_line, set_args, wait_for_text


def test_a_vdb_run_stopped_during_its_build_keeps_what_it_has(tmp_path):
    """The null engine at 0.3 s a request: the index's 1 MiB build writes take seconds; SIGTERM then."""
    sets = set_args(
        "vdb.vectors=4000",
        "vdb.runs=1",
        "vdb.queries=40",
        f"vdb.index_folder={tmp_path / 'idx'}",
        "dlio_fast.engine=null",
        "dlio_fast.null_delay_ns=300000000",
    )
    log = tmp_path / "log"
    with open(log, "w") as f:
        p = subprocess.Popen(
            [sys.executable, "-m", "dlio", "run", "-w", "vdb_diskann_1m", *sets, "-o", str(tmp_path / "out")],
            stdout=f,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    try:
        wait_for_text(str(log), "building the index", p)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    text = log.read_text()
    assert p.returncode == 128 + signal.SIGTERM, text
    assert "Traceback" not in text and "build stopped" in text and "incomplete" in text
    with open(tmp_path / "out" / "dlio-fast.json") as f:
        doc = json.load(f)
    assert doc["complete"] is False and doc["build"]["complete"] is False and "SIGTERM" in doc["build"]["reason"]
    assert not doc["runs"]
    (folder,) = os.listdir(tmp_path / "idx")
    assert not os.path.exists(tmp_path / "idx" / folder / "vdb-index.json")  # never taken for a built index


def kv_args(tmp_path, *more):
    cfg = tmp_path / "kv.yaml"
    cfg.write_text(TINY_KV_CONFIG)
    return ["run", "--config", cfg, *set_args(f"kvcache.cache_dir={tmp_path}/cache", *more), "-o", tmp_path / "out"]


def test_a_kv_operation_log_on_a_full_disk_keeps_the_results(run_cli, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], check=True)
    try:
        fd = os.open(full / "filler", os.O_WRONLY | os.O_CREAT)  # the disk full before the run
        try:
            while os.write(fd, b"x" * 4096):
                pass
        except OSError:
            pass
        os.close(fd)
        code, out, err = run_cli(*kv_args(tmp_path, f"kvcache.io_trace_log={full / 'ops.csv'}"))
    finally:
        subprocess.run(["umount", "-l", str(full)], check=False)
    assert code == 1
    line = one_line(err)
    assert "kvcache.io_trace_log" in line and str(full) in line and "No space left" in line
    with open(tmp_path / "out" / "dlio-fast.json") as f:
        doc = json.load(f)
    (rec,) = doc["records"]
    assert rec["result"]["counts"]["requests"] > 0 and doc["complete"] is False


def test_a_folder_as_the_kv_operation_log_is_refused_before_the_run(run_cli, tmp_path):
    code, out, err = run_cli(*kv_args(tmp_path, f"kvcache.io_trace_log={tmp_path}"))
    assert code == 2
    line = one_line(err)
    assert "kvcache.io_trace_log" in line and str(tmp_path) in line and "a folder" in line
    assert not os.path.exists(tmp_path / "out") and not os.path.exists(tmp_path / "cache")
