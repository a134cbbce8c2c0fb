"""Is it a storage result, on a host that is not the run's alone? A tiny run of each family, as a user runs it,
beside real load: a spinning process on every core, or another process writing the same disk with O_DIRECT.
Every family's verdict (its console lines and the JSON it writes) is then inconclusive and says why, with its
figures: the same rules (dlio.report.verdict.classify) for training epochs, checkpoint saves and loads, io
points, vector-search runs, model loads and KV-cache trials."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from conftest import TINY_KV_CONFIG, TINY_MODEL_LOAD, set_args

from dlio.system import counters

SPIN = "while True: pass"
# Other processes writing the disk the whole time: 4 MiB O_DIRECT writes over a 256 MiB file each, round and
# round (no page cache between them and the device: every byte they write is the device's in the run's phases).
# Three of them, so that they hold their share of the disk against a run that reads or writes it flat out (with two,
# a 50 ms checkpoint load on an idle CI machine once had them at under half its bytes).
WRITER = """\
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
buf = mmap.mmap(-1, 4 << 20)
buf.write(b"x" * (4 << 20))
while True:
    for i in range(64):
        os.pwrite(fd, buf, i << 22)
"""


@pytest.fixture
def disk_dir():
    """A folder on a block device (under /var/tmp, not a tmpfs): the run's files and the neighbour's share it."""
    base = "/var/tmp"
    if counters.resolve(base).kind != "block":
        pytest.skip(f"{base} is not on a block device here: {counters.resolve(base).why}")
    d = tempfile.mkdtemp(prefix="dlio-verdict-", dir=base)
    yield d
    subprocess.run(["rm", "-rf", d], check=False)


class Load:
    """Processes beside the run, started before it and killed after it."""

    def __init__(self, cmds):
        self.procs = [subprocess.Popen(c, start_new_session=True) for c in cmds]
        time.sleep(0.3)  # running before the run's first phase

    def stop(self):
        for p in self.procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def cpu_hogs():
    """A spinning process pinned to each core this test may use."""
    cpus = sorted(os.sched_getaffinity(0))
    return Load([["taskset", "-c", str(c), sys.executable, "-c", SPIN] for c in cpus])


def disk_writer(folder):
    return Load([[sys.executable, "-c", WRITER, os.path.join(folder, f"neighbour{i}")] for i in range(3)])


def run_beside(load, args, timeout=240):
    try:
        cmd = [sys.executable, "-m", "dlio", *map(str, args)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    finally:
        load.stop()
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout + p.stderr


def measured(doc):
    """The verdicts of a family's measured phases in its JSON: [(phase, verdict)]."""
    if "verdicts" in doc:  # training epochs, checkpoint saves and loads, model loads, KV-cache trials
        return [(v["phase"], v) for v in doc["verdicts"]]
    if "runs" in doc:  # vector search: each timed run
        return [(f"run {r['run']}", r["verdict"]) for r in doc["runs"]]
    return [(" ".join(map(str, (p["rw"], p["bs"]))), p["verdict"]) for p in doc["points"]]  # io points


# ---- each family's tiny run: (argv, its JSON) ----


def training(d):
    data = os.path.join(d, "data")
    sets = set_args(
        f"dataset.data_folder={data}",
        "dataset.num_files_train=16",
        "dataset.num_samples_per_file=1",
        "dataset.record_length_bytes=4194304",
        "dataset.record_length_bytes_stdev=0",
        "train.epochs=1",
        "train.computation_time=0",
        "reader.batch_size=2",
    )
    gen = subprocess.run(
        [
            sys.executable,
            "-m",
            "dlio",
            "run",
            "-w",
            "unet3d",
            *sets,
            "--set",
            "workflow.train=false",
            "--set",
            "workflow.checkpoint=false",
            "--set",
            "workflow.generate_data=true",
            "-o",
            f"{d}/g",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert gen.returncode == 0, gen.stdout[-2000:] + gen.stderr[-2000:]
    return ["run", "-w", "unet3d", *sets, "--cache", "drop", "-o", f"{d}/out"], f"{d}/out/dlio-fast.json"


def io_points(d):
    os.makedirs(f"{d}/io")
    argv = ["io", f"{d}/io", "--bs", "1m", "--file-size", "64m", "--direct", "--runtime", "2s"]
    return [*argv, "--json", f"{d}/io.json"], f"{d}/io.json"


VDB = ("vdb.vectors=4000", "vdb.processes=2", "vdb.batch=3", "vdb.runs=1", "vdb.duration=2", "vdb.search_list=48")


def vector_search(d):
    return ["run", "-w", "vdb_diskann_1m", *set_args(*VDB, f"vdb.index_folder={d}/idx"), "-o", f"{d}/out"], (
        f"{d}/out/dlio-fast.json"
    )


def model_loading(d):
    sets = set_args(*TINY_MODEL_LOAD, f"checkpoint.checkpoint_folder={d}/model")
    return ["run", "-w", "load_llama3_8b", *sets, "-o", f"{d}/out"], f"{d}/out/dlio-fast.json"


def kv_cache(d):
    cfg = os.path.join(d, "kv.yaml")
    with open(cfg, "w") as f:
        f.write(TINY_KV_CONFIG)
    sets = set_args(f"kvcache.cache_dir={d}/cache", "kvcache.duration=3")
    return ["run", "--config", cfg, *sets, "-o", f"{d}/out"], f"{d}/out/dlio-fast.json"


def checkpoints(d):
    sets = set_args(
        "workflow.train=false",
        "workflow.checkpoint=true",
        "model.model_size_bytes=48000000",
        "checkpoint.num_checkpoints_write=1",
        "checkpoint.num_checkpoints_read=1",
        "checkpoint.time_between_checkpoints=0",
        "checkpoint.fsync=true",
        f"checkpoint.checkpoint_folder={d}/ck",
    )
    return ["run", "-w", "default", *sets, "-o", f"{d}/out"], f"{d}/out/dlio-fast.json"


FAMILIES = [training, checkpoints, io_points, vector_search, model_loading, kv_cache]


# A verdict made inconclusive by other processes names them: on the host's CPUs (tried first), or on the device.
# This shared test machine's own neighbours may take the CPUs during a writer's test: the reason then says both.
ON_CPUS, ON_DEVICE = "other processes on the host", "other processes on the device"


def check_inconclusive(out, path, why, parts=(ON_CPUS, ON_DEVICE)):
    with open(path) as f:
        phases = measured(json.load(f))
    assert phases, out[-2000:]
    for name, v in phases:
        assert v["verdict"] == "inconclusive", (name, json.dumps(v), out[-3000:])
        assert v["part"] in parts, (name, v)
        assert why in v["reason"], (name, v)
    assert "inconclusive (other processes on the " in out, out[-3000:]
    assert why in out, out[-3000:]  # the console says why, with the figures


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_other_processes_on_every_core_make_the_verdict_inconclusive(disk_dir, family):
    args, path = family(disk_dir)
    out = run_beside(cpu_hogs(), args)
    # the host's CPUs were busy, and not with this run: "... (1.93 cores: ..., other processes 1.40)"
    check_inconclusive(out, path, "other processes ", parts=(ON_CPUS,))
    with open(path) as f:
        for _, v in measured(json.load(f)):
            assert "busy" in v["reason"] or "took the CPU" in v["reason"], v


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_another_writer_on_the_same_disk_makes_the_verdict_inconclusive(disk_dir, family):
    args, path = family(disk_dir)
    out = run_beside(disk_writer(disk_dir), args)
    check_inconclusive(out, path, "the storage was shared")
    with open(path) as f:
        for _, v in measured(json.load(f)):
            assert "other processes moved" in v["reason"] and "write " in v["reason"], v
