"""One console on S3 (issue 30): `io s3://` and `ceiling s3://` show the live bar, the --status-interval
lines and the --live-csv rows of a file io point; `run` on S3 keeps a finished epoch's counts; the S3
workers' CPU is the benchmark's (the client's), in the verdict and in `benchmark CPU per sample`."""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml
from conftest import REPO, s3_workload
from test_progress_console import run_in_pty, screen_lines

from dlio.report import verdict

pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_io_s3_status_lines_and_live_csv(run_cli, bucket, tmp_path):  # noqa: F811
    live = tmp_path / "live.csv"
    code, out, err = run_cli(
        "io",
        f"s3://{bucket}/st",
        *("--bs", "64k", "--qd", "1,2", "--runtime", "1.5s", "--status-interval", "0.3", "--live-csv", live),
    )
    assert code == 0, err
    status = [ln for ln in err.splitlines() if ln.startswith("[status] point ")]
    assert any(ln.startswith("[status] point 1/2 read 64KiB s3dlio qd1 t1:") for ln in status), err
    assert any(ln.startswith("[status] point 2/2 read 64KiB s3dlio qd2 t1:") for ln in status), err
    assert all("MiB/s" in ln and "IOPS" in ln and "ETA" in ln for ln in status)
    io_rows = [r for r in rows(live) if r["phase"] == "io"]
    for label in ("point 1/2 read 64KiB s3dlio qd1 t1", "point 2/2 read 64KiB s3dlio qd2 t1"):
        mine = [r for r in io_rows if r["label"] == label]
        assert mine, io_rows
        assert float(mine[-1]["percent"]) == 100.0  # the point's last row: its whole budget
        assert float(mine[-1]["MiB_s"]) > 0 and float(mine[-1]["IOPS"]) > 0
    # the figures the rows ended with are the point's own (its bytes over the worker's run)
    doc_iops = {r["label"]: float(r["IOPS"]) for r in io_rows}
    assert all(v > 0 for v in doc_iops.values())


def test_io_s3_live_bar_on_a_terminal(s3env, bucket):  # noqa: F811
    code, raw = run_in_pty(["io", f"s3://{bucket}/tty", "--bs", "64k", "--qd", "1,2", "--runtime", "1s"])
    assert code == 0, raw
    lines = screen_lines(raw)
    assert any(ln.startswith("point 1/2 read 64KiB s3dlio qd1 t1") and "ETA" in ln for ln in lines), lines
    assert any(ln.startswith("point 2/2 read 64KiB s3dlio qd2 t1") for ln in lines), lines


def test_ceiling_s3_status_lines(run_cli, bucket, tmp_path):  # noqa: F811
    live = tmp_path / "c.csv"
    code, out, err = run_cli(
        "ceiling",
        f"s3://{bucket}/ceil",
        *("--object-size", "64k", "--runtime", "0.6s", "--max-threads", "1", "--max-qd", "2"),
        *("--status-interval", "0.2", "--live-csv", live),
    )
    assert code == 0, err
    assert "[status] read 64KiB s3dlio qd1 t1:" in err, err
    assert "[status] write 64KiB s3dlio qd1 t1:" in err, err
    labels = {r["label"] for r in rows(live) if r["phase"] == "io"}
    assert {"read 64KiB s3dlio qd1 t1", "write 64KiB s3dlio qd1 t1", "read 4KiB s3dlio qd1 t1"} <= labels


def test_s3_run_keeps_the_counts_of_a_finished_block(s3env, bucket):  # noqa: F811
    """The live display reads progress() after the worker is gone (its last tick): it must still say what
    was done, not 0 (usability bug 4: a finished epoch's bar and live-CSV row reset to 0/N)."""
    import boto3

    from dlio import _core
    from dlio.storage.s3 import settings
    from dlio.storage.s3.trainrun import S3Run

    s = settings.resolve()
    c = boto3.client(
        "s3",
        endpoint_url=s.endpoint,
        aws_access_key_id=s.access_key,
        aws_secret_access_key=s.secret_key,
        region_name=s.region,
    )
    uris = []
    for i in range(4):
        c.put_object(Bucket=bucket, Key=f"blk/o{i}", Body=bytes(1000 + i))
        uris.append(f"s3://{bucket}/blk/o{i}")
    sizes = np.array([1000 + i for i in range(4)], dtype=np.uint64)
    ops = np.zeros(4, dtype=_core.OP_DTYPE)
    ops["file"], ops["offset"], ops["length"] = np.arange(4), 0, sizes
    steps = np.zeros(4, dtype=_core.STEP_DTYPE)
    steps["first_op"], steps["nops"], steps["nsamples"], steps["compute_ns"] = np.arange(4), 1, 1, 1_000_000
    run = S3Run(s, uris, sizes, ops, steps, threads=1, qd=2, prefetch=1)
    res = run.execute()
    assert res["steps_done"] == 4 and res["ops"] == 4 and res["bytes"] == int(sizes.sum())
    assert run.progress() == (4, int(sizes.sum()), 4)  # after the worker is gone


def _tiny_config(tmp_path, bucket):  # noqa: F811
    sections = {
        "model": {"name": "s3-cpu"},
        "dataset": {"data_folder": "tiny", "num_files_train": 256, "record_length_bytes": 1024},
        "reader": {"batch_size": 2, "read_threads": 1},
        "train": {"computation_time": 0.0},
        "dlio_fast": {"qd": 1},
        "output": {"metric": {"exclude_start_steps": 0}},
    }
    return s3_workload(tmp_path / "tiny.yaml", bucket, sections)


def test_s3_workers_cpu_is_the_clients(s3env, bucket, tmp_path):  # noqa: F811
    """Tiny objects, no compute: the S3 worker reads as fast as it can, so the client's CPU is the
    worker's. It is counted as this process's in the epoch's counters (not as other processes'), the
    benchmark CPU per sample is the worker's reading CPU (not 0.00 us), and the verdict says client-bound
    when the client (this process and its workers) used the cores, never 'other processes'."""
    cfg = _tiny_config(tmp_path, bucket)
    cmd = [sys.executable, "-m", "dlio", "-q", "run", "--config", str(cfg), "-o", str(tmp_path / "o")]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert p.returncode == 0, p.stderr
    with open(tmp_path / "o" / "dlio-fast.json") as f:
        doc = json.load(f)
    (ep,) = doc["ranks"][0]["epochs"]
    c = ep["counters"]
    split = verdict.cpu_split(c)  # cores: this process and its workers, the spin apart
    # the workers' CPU (their rusage over the epoch) is the benchmark's, in the epoch's CPU and the client's
    assert ep["cpu_s"] > 0 and c["worker_cpu_s"] > 0
    assert split["total"] * c["wall_s"] >= ep["cpu_s"] * 0.99, (split, ep["cpu_s"])
    per_sample_us = ep["cpu_s"] / ep["samples"] * 1e6
    assert per_sample_us > 1, per_sample_us
    v = ep["verdict"]
    client = split["total"]
    assert v["part"] != "other processes on the host" or c["host_busy_share"] * c["host_cpus"] - client > client, v
    if split["client"] >= 0.8:  # the worker kept a core busy: that is the client
        assert v["verdict"] == "client-bound", v


def test_benchmark_cpu_per_sample_on_a_busy_core(s3env, bucket, tmp_path):  # noqa: F811
    """The run and a CPU hog share one core: the emulated compute's spin gets about half of it, so its
    wall time is twice its CPU. The benchmark's CPU is the worker's reading CPU (its CPU less the CPU the
    trainer thread spun), not its CPU less the spin's wall time (that gave 0.00 us per sample)."""
    import yaml

    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity on this platform")
    core = min(os.sched_getaffinity(0))
    pin = lambda: os.sched_setaffinity(0, {core})  # noqa: E731
    doc = yaml.safe_load(_tiny_config(tmp_path, bucket).read_text())
    doc["dataset"]["num_files_train"] = 80
    doc["train"]["computation_time"] = 0.02
    cfg = tmp_path / "busy.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=pin)
    try:
        cmd = [sys.executable, "-m", "dlio", "-q", "run", "--config", str(cfg), "-o", str(tmp_path / "o")]
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300, preexec_fn=pin)
    finally:
        hog.kill()
        hog.wait()
    assert p.returncode == 0, p.stderr
    with open(tmp_path / "o" / "dlio-fast.json") as f:
        (ep,) = json.load(f)["ranks"][0]["epochs"]
    c = ep["counters"]
    assert c["cores"] == 1
    per_sample_us = ep["cpu_s"] / ep["samples"] * 1e6
    assert per_sample_us > 1, per_sample_us  # the worker's GETs cost CPU
    # the spin is the accelerator's: the client's CPU stays well below the compute's wall time
    assert ep["cpu_s"] < 0.9 * ep["steps_done"] * 0.02, ep["cpu_s"]
    assert verdict.cpu_split(c)["total"] * c["wall_s"] >= ep["cpu_s"] * 0.99


@pytest.mark.parametrize("storage", ["files", "s3"])
def test_live_au_is_the_recorded_au(storage, s3env, bucket, tmp_path):  # noqa: F811
    """The live display's exact AU (its last --live-csv row of an epoch) is the figure dlio-fast.json records
    for that epoch: both over the time from the first step's fetch. On S3 the live clock started with the
    worker's start-up (90-93 % live against 98-99 % recorded, usability review)."""
    cfg = _tiny_config(tmp_path, bucket)
    doc = yaml.safe_load(cfg.read_text())
    doc["train"] = {"epochs": 2, "computation_time": 0.02}
    doc["dataset"]["record_length_bytes"] = 65536
    if storage == "files":
        doc["storage"] = {"storage_type": "local_fs"}
        doc["dataset"]["data_folder"] = str(tmp_path / "data")
    cfg.write_text(yaml.safe_dump(doc))
    live = tmp_path / "live.csv"
    cmd = [sys.executable, "-m", "dlio", "-q", "run", "--config", str(cfg), "-o", str(tmp_path / "o")]
    p = subprocess.run([*cmd, "--live-csv", str(live)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert p.returncode == 0, p.stderr
    with open(tmp_path / "o" / "dlio-fast.json") as f:
        epochs = json.load(f)["ranks"][0]["epochs"]
    train_rows = [r for r in rows(live) if r["phase"] == "train"]
    for e, ep in enumerate(epochs, 1):
        last = [r for r in train_rows if r["label"].startswith(f"epoch {e} ")][-1]
        assert last["done"] == last["total"]
        recorded = ep["train"]["exact"]["au_percentage"]
        assert abs(float(last["AU_percent"]) - recorded) <= 1.0, (e, last, recorded)
