"""Stragglers named, across two simulated hosts (hA, hB), each host in its own control group (tests/multihost.py
host_groups): a host slowed by its CPU or by its disk is named as the straggler, with its figures, the evidence
(I/O wait or compute) and its share of the AU loss; two hosts alike are said to agree.

- CPU (1 rank per host): hB has a quarter of a CPU (cpu quota 25 ms per 100 ms). The emulated accelerator spins
  5 ms per step on the monotonic clock: a throttled host's spin runs over its set time whenever the quota runs out
  before the step's deadline (up to 75 ms of every 100 ms), so hB arrives late at the per-step barrier and hA
  waits there for it. Each run: ~24 steps, a few seconds.
- I/O (2 ranks per host): the data folder is on this machine's disk (under /var/tmp: /tmp or /dev/shm may be a
  memory filesystem, which no control group can throttle) and hB's reads of that disk are throttled to READ_BPS
  (blkio.throttle.read_bps_device under cgroup v1, io.max's rbps under v2). The ranks read with O_DIRECT, so each
  read reaches the device (the simulated hosts share one page cache: a cached read would pass the throttle by).
  hB's two ranks then read one record each per step at READ_BPS between them: its own time per step is about
  2 x the record's bytes / READ_BPS, ~125 ms, against hA's set compute of 25 ms and a little more. Each run:
  16 steps, a few seconds."""

import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest
from conftest import REPO, set_args
from multihost import dlio_argv, io_device, run_env, run_on_limited_hosts

from dlio.base.units import fmt_ns

QUARTER = 0.25
READ_BPS = 4 << 20  # hB's reads of the disk, throttled: 4 MiB/s
RECORD = 256 << 10  # one record per file, one file per step and rank
# the I/O runs' set compute: long enough that a busy machine's CPU (late wake-ups, a few ms) cannot make either
# host 25 % slower, short beside what the throttle makes of hB's steps (2 x RECORD / READ_BPS = 125 ms)
IO_COMPUTE_S = 0.025


def train_on_hosts(tmp_path, limits, compute_mode, *more, data=None, per_host=1, compute_s=0.005):
    """One epoch of training on HOSTS (per_host ranks each) in their control groups of `limits`; data: the data
    folder's parent (tmp_path by default), whose disk an I/O throttle of `limits` holds back."""
    out = tmp_path / "out"
    data = data or tmp_path
    argv = dlio_argv(
        "run",
        "--workload",
        "default",
        *set_args(
            f"dataset.data_folder={os.path.join(data, 'data')}",
            "dataset.num_files_train=48",
            "reader.batch_size=1",
            "train.epochs=1",
            f"train.computation_time={compute_s}",
            f"dlio_fast.compute_mode={compute_mode}",
            "workflow.evaluation=false",
            *more,
        ),
        "-o",
        out,
    )
    p = run_on_limited_hosts(argv, limits, per_host=per_host, io_folder=str(data))
    assert p.returncode == 0, p.stderr[-3000:]
    with open(out / "dlio-fast.json") as f:
        return json.load(f), p.stdout, out


def arrivals(doc, host):
    """Per step, when the host reached the step barrier (its slowest rank's wait + compute), from the ranks' records."""
    ranks = [r for r in doc["ranks"] if r["hostname"] == host]
    proc = [np.concatenate([ep["train"]["proc"] for ep in r["epochs"] if ep.get("train")]) for r in ranks]
    return np.max(proc, axis=0)


def own_time_per_step(doc, host):
    return float(arrivals(doc, host).mean())


def test_a_host_with_a_quarter_of_the_cpu_is_named_the_straggler(tmp_path):
    doc, so, out = train_on_hosts(tmp_path, {"hA": {}, "hB": {"cpus": QUARTER}}, "spin")
    s = doc["metrics"]["stragglers"]
    assert [n["host"] for n in s["named"]] == ["hB"], s
    n = s["named"][0]
    rows = {r["host"]: r for r in s["per_host"]}
    # the evidence: each host's own time per step as its ranks recorded it, hB's CPU as its control group sets it
    a, b = own_time_per_step(doc, "hA"), own_time_per_step(doc, "hB")
    assert rows["hA"]["own_s"] == pytest.approx(a, rel=1e-9) and rows["hB"]["own_s"] == pytest.approx(b, rel=1e-9)
    assert n["slower_percentage"] == pytest.approx(100 * (b / a - 1), rel=1e-9) and n["slower_percentage"] >= 25
    assert rows["hB"]["cpus"] == QUARTER and rows["hA"]["cpus"] >= 1
    assert n["cause"] == "compute"  # its spin ran over: the host's CPU, not its reads
    assert rows["hB"]["compute_s"] > rows["hB"]["compute_set_s"] == pytest.approx(0.005)
    # what it cost: the AU points it explains are part of the run's loss
    au = doc["metrics"]["au_mean_percentage"]
    assert n["au_loss_points"] == pytest.approx(100 - au)
    assert 0 < n["au_points_explained"] <= n["au_loss_points"]
    wait = float((np.maximum(arrivals(doc, "hA"), arrivals(doc, "hB")) - arrivals(doc, "hA")).mean())
    step = np.mean([ep["train"]["duration_s"] / ep["train"]["steps"] for r in doc["ranks"] for ep in r["epochs"]])
    assert n["wait_for_it_s"] == pytest.approx(wait, rel=1e-9)
    assert n["au_without_percentage"] == pytest.approx(min(100.0, au * step / (step - wait)), rel=1e-9)
    assert n["au_points_explained"] == pytest.approx(n["au_without_percentage"] - au, rel=1e-9)
    # the console names it, with the figures
    assert f"straggler: host hB (ranks 1) is {n['slower_percentage']:.0f} % slower than the other hosts" in so, so
    assert f"it explains {n['au_points_explained']:.1f} of the {n['au_loss_points']:.1f} AU points lost" in so
    assert "its ranks could use 0.25 CPUs" in so and "hosts agree" not in so
    # and so does the report of the run folder
    p = subprocess.run(dlio_argv("report", out), env=run_env(), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert s["summary"][0] in p.stdout.splitlines() and s["rule"] in p.stdout
    # every format carries the per-host figures and the straggler (its own row of the run's table)
    per_host = {h["host"]: h for h in doc["metrics"]["per_host"]}

    def host_text(h):
        eps = per_host[h]["epochs"]
        au = sum(e["au_percentage"] for e in eps) / len(eps)
        return f"{h}: {au:.2f} %, {sum(e['bytes_per_second'] for e in eps) / len(eps) / 2**20:.1f} MiB/s"

    want = {
        "per_host": f"{host_text('hA')}; {host_text('hB')}",
        "straggler": f"hB, {n['slower_percentage']:.0f} % slower (compute)",
    }
    args = ["--json", tmp_path / "r.json", "--markdown", tmp_path / "r.md", "--csv", tmp_path / "r.csv"]
    args += ["--html", tmp_path / "r.html"]
    p = subprocess.run(
        dlio_argv("report", out, *args), env=run_env(), cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    figures = json.loads((tmp_path / "r.json").read_text())["runs"]["runs"][0]["figures"]
    assert {k: figures[k] for k in want} == want
    for name in ("r.md", "r.csv", "r.html"):
        text = (tmp_path / name).read_text()
        assert all(v in text for v in want.values()), (name, want)
    assert want["per_host"] in p.stdout and want["straggler"] in p.stdout


def test_hosts_alike_agree(tmp_path):
    doc, so, out = train_on_hosts(tmp_path, {"hA": {}, "hB": {}}, "hybrid")
    s = doc["metrics"]["stragglers"]
    assert s["named"] == [], s
    a, b = own_time_per_step(doc, "hA"), own_time_per_step(doc, "hB")
    assert max(a, b) / min(a, b) < 1.25
    assert [line for line in so.splitlines() if line.startswith("hosts agree: no straggler")] == s["summary"], so
    assert "straggler: host" not in so


# --- a host whose reads are throttled -----------------------------------------------------------------------------


@pytest.fixture
def on_disk():
    """A folder on this machine's disk (/var/tmp), removed after."""
    folder = tempfile.mkdtemp(prefix="dlio-iothrottle-", dir="/var/tmp")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def train_on_disk(tmp_path, folder, limits):
    return train_on_hosts(
        tmp_path,
        limits,
        "hybrid",
        "dataset.num_files_train=64",
        f"dataset.record_length_bytes={RECORD}",
        "dlio_fast.engine=odirect",
        data=folder,
        per_host=2,
        compute_s=IO_COMPUTE_S,
    )


def counters(doc, host):
    return [ep["counters"] for r in doc["ranks"] if r["hostname"] == host for ep in r["epochs"] if ep.get("train")]


def reached_the_device(doc):
    """Every rank's reads reached the device: the bytes its process read from storage (/proc/self/io) are at
    least those it asked for (O_DIRECT rounds each read up to the device's sector)."""
    return all(c["own_read_bytes"] >= c["app_bytes"] > 0 for h in ("hA", "hB") for c in counters(doc, h))


def test_a_host_whose_reads_are_throttled_is_named_the_straggler(tmp_path, on_disk):
    doc, so, out = train_on_disk(tmp_path, on_disk, {"hA": {}, "hB": {"read_bps": READ_BPS}})
    assert reached_the_device(doc), [c for h in ("hA", "hB") for c in counters(doc, h)]
    s = doc["metrics"]["stragglers"]
    assert [n["host"] for n in s["named"]] == ["hB"], s  # and not hA
    n = s["named"][0]
    rows = {r["host"]: r for r in s["per_host"]}
    # what the throttle makes of hB's steps, independently: the bytes its ranks read per step at READ_BPS
    steps = sum(ep["train"]["steps"] for ep in doc["ranks"][0]["epochs"] if ep.get("train"))
    per_step = sum(c["own_read_bytes"] for c in counters(doc, "hB")) / steps
    assert per_step == pytest.approx(2 * RECORD, rel=0.01)
    expected = per_step / READ_BPS  # ~125 ms
    a, b = own_time_per_step(doc, "hA"), own_time_per_step(doc, "hB")
    assert rows["hB"]["own_s"] == pytest.approx(b, rel=1e-9) and rows["hA"]["own_s"] == pytest.approx(a, rel=1e-9)
    assert b == pytest.approx(expected, rel=0.2) and a < expected / 2, (a, b, expected)
    assert n["slower_percentage"] == pytest.approx(100 * (b / a - 1), rel=1e-9) and n["slower_percentage"] >= 150
    # the evidence: its reads, not its compute. At each step hB arrives with the later of its ranks (the other's
    # read went first at the throttled rate): that rank's I/O wait and compute make the host's own time
    assert n["cause"] == "io_wait"
    ranks = [r for r in doc["ranks"] if r["hostname"] == "hB"]
    proc, load = (
        [np.concatenate([ep["train"][k] for ep in r["epochs"] if ep.get("train")]) for r in ranks]
        for k in ("proc", "load")
    )
    last = np.argmax(proc, axis=0)
    io = float(np.mean([load[i][step] for step, i in enumerate(last)]))
    assert rows["hB"]["io_wait_s"] == pytest.approx(io, rel=1e-9)
    assert rows["hB"]["io_wait_s"] + rows["hB"]["compute_s"] == pytest.approx(b, rel=1e-6)
    assert io > 2 * rows["hB"]["compute_s"] and rows["hA"]["io_wait_s"] < 0.1 * io
    assert 0 < n["au_points_explained"] <= n["au_loss_points"]
    # the console names it, with the evidence
    slower = f"{n['slower_percentage']:.0f} % slower"
    named = f"straggler: host hB (ranks 2,3) is {slower} than the other hosts: its reads were late"
    assert named in so.splitlines(), so
    assert f"  hB: own time per step {fmt_ns(b * 1e9)} (I/O wait {fmt_ns(io * 1e9)}, compute " in so
    assert "straggler: host hA" not in so and "hosts agree" not in so
    # and so does the report of the run folder
    p = subprocess.run(dlio_argv("report", out), env=run_env(), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert named in p.stdout.splitlines() and f"hB, {slower} (I/O wait)" in p.stdout


def test_hosts_reading_the_disk_alike_agree(tmp_path, on_disk):
    """The control: the same run with neither host throttled."""
    doc, so, _ = train_on_disk(tmp_path, on_disk, {"hA": {}, "hB": {}})
    assert reached_the_device(doc)
    s = doc["metrics"]["stragglers"]
    assert s["named"] == [], s
    a, b = own_time_per_step(doc, "hA"), own_time_per_step(doc, "hB")
    assert max(a, b) < 2 * RECORD / READ_BPS / 2  # each far from what the throttle made of hB
    assert [line for line in so.splitlines() if line.startswith("hosts agree: no straggler")] == s["summary"], so


def test_the_throttle_is_on_the_disk_of_the_data_folder(on_disk):
    """io_device names the whole disk that holds the folder (the kernel throttles a disk, not a partition), and a
    memory filesystem has none: the throttled tests skip there, saying so."""
    dev = io_device(on_disk)
    disk = f"/sys/dev/block/{dev}"
    assert not os.path.exists(os.path.join(disk, "partition"))
    st = os.stat(on_disk)
    mine = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    with open(os.path.join(disk, "dev")) as f:
        parts = [f.read().strip()]
    for entry in os.listdir(disk):  # its partitions' folders
        if os.path.exists(os.path.join(disk, entry, "partition")):
            with open(os.path.join(disk, entry, "dev")) as f:
                parts.append(f.read().strip())
    assert mine in parts, (mine, parts)
    if os.path.ismount("/dev/shm"):
        with pytest.raises(pytest.skip.Exception, match="/dev/shm is on no block device to throttle"):
            io_device("/dev/shm")
