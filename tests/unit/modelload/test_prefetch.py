"""vLLM's prefetch (read_mode prefetch) and its choice (read_mode auto), checked against what vLLM's
weight_utils does, restated here independently: the shards sorted_files[rank::world_size], each read
whole by f.read(16 MiB) loops on 8 threads; prefetch only on nfs / nfs4 / lustre when the checkpoint
fits in 90 % of the available RAM."""

import json
import threading

import pytest

from dlio.base.errors import Interrupted
from dlio.config import load_config
from dlio.config.sections import ModelLoadConfig
from dlio.modelload import models, shards, strategy
from dlio.modelload.plan import prefetch_plan
from dlio.system import execute

MiB = 1 << 20


@pytest.fixture(scope="module")
def llama8b():
    """Llama 3 8B's real layout (4 shards of up to 5 GB): no bytes are made, only offsets."""
    m = models.model_of(load_config(workload="load_llama3_8b", env={}, sets=[]))
    return shards.layout(m, 5 * 10**9)


def vllm_reads(sizes, rank, world, block):
    """(file index, offset, length) of every read() vLLM's prefetch of this rank issues, in order."""
    out = []
    for f in range(len(sizes))[rank::world]:
        off = 0
        while off < sizes[f]:
            n = min(block, sizes[f] - off)
            out.append((f, off, n))
            off += n
    return out


def test_the_defaults_are_vllms():
    ml = load_config(workload="load_llama3_8b", env={}, sets=[]).section(ModelLoadConfig)
    # vllm/config/load.py: DEFAULT_SAFETENSORS_PREFETCH_NUM_THREADS = 8, ..._BLOCK_SIZE = 16 * 1024 * 1024
    assert (ml.read_mode, ml.prefetch_threads, ml.prefetch_block_size) == ("auto", 8, 16 * MiB)


@pytest.mark.parametrize("world", [1, 2, 3, 8])
def test_shards_are_dealt_rank_by_world_and_read_whole_in_16_mib(llama8b, world):
    sizes = [s.size for s in llama8b]
    assert len(sizes) == 4
    every = []
    for rank in range(world):
        p = prefetch_plan(llama8b, rank, world, 16 * MiB)
        assert p.files == [i for i in range(4) if i % world == rank]
        got = [(p.files[int(o["file"])], int(o["offset"]), int(o["length"])) for o in p.ops]
        assert got == vllm_reads(sizes, rank, world, 16 * MiB)
        # the 5 GB shards take whole 16 MiB blocks but for each tail; more ranks than shards: some idle
        assert max(n for _, _, n in got) == 16 * MiB if rank < 4 else got == []
        assert p.bytes == p.wanted_bytes == sum(sizes[f] for f in p.files)
        every += p.files
    # every shard read once over the job, whatever the number of ranks
    assert sorted(every) == [0, 1, 2, 3]


def test_a_smaller_block_cuts_the_same_files_finer(llama8b):
    p = prefetch_plan(llama8b, 1, 2, MiB)
    assert len(p.ops) == sum(-(-llama8b[f].size // MiB) for f in (1, 3))


MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:40 / /mnt/models rw,relatime shared:2 - nfs4 srv:/export rw,vers=4.2
41 40 8:17 / /mnt/models/scratch rw,relatime shared:3 - xfs /dev/sdb1 rw
42 22 0:42 / /lustre rw - lustre 10.0.0.1@o2ib:/fs rw
43 22 0:43 / /weka rw - wekafs weka0 rw
"""
GB = 10**9


@pytest.mark.parametrize(
    "root, mode",
    [
        ("/mnt/models/llama3", "prefetch"),  # nfs4
        ("/lustre/ckpt/llama3", "prefetch"),
        ("/mnt/models/scratch/llama3", "mmap"),  # xfs mounted inside the NFS mount: the longest prefix wins
        ("/weka/llama3", "mmap"),  # not on vLLM's list
        ("/home/u/llama3", "mmap"),  # ext4
    ],
)
def test_auto_prefetches_on_nfs_and_lustre_only(root, mode):
    c = strategy.choose("auto", True, 16 * GB, root, mountinfo=MOUNTINFO, ram=100 * GB)
    assert (c.configured, c.mode) == ("auto", mode)
    assert c.checkpoint_bytes == 16 * GB and c.available_ram == 100 * GB
    assert c.fstype in c.why


def test_auto_needs_the_checkpoint_in_90_percent_of_the_ram():
    fits = strategy.choose("auto", True, 90 * GB, "/mnt/models/m", mountinfo=MOUNTINFO, ram=100 * GB)
    over = strategy.choose("auto", True, 90 * GB + 1, "/mnt/models/m", mountinfo=MOUNTINFO, ram=100 * GB)
    assert fits.mode == "prefetch" and over.mode == "mmap"
    assert "exceeds 90% of the available RAM" in over.why and "skips the prefetch" in over.why


def test_a_mode_set_is_kept_and_objects_read():
    assert strategy.choose("prefetch", True, GB, "/home/u/m", mountinfo=MOUNTINFO, ram=GB).mode == "prefetch"
    assert strategy.choose("mmap", True, GB, "/mnt/models/m", mountinfo=MOUNTINFO, ram=100 * GB).mode == "mmap"
    s3 = strategy.choose("auto", False, GB, "models/m")
    assert s3.mode == "read" and "GET" in s3.why


def test_the_run_takes_the_auto_choice_from_the_folders_mount(monkeypatch, run_cli, tmp_path):
    """A local folder made to look like NFS (the mount table injected): auto runs the prefetch, and
    dlio-fast.json and the console say which mode ran and why."""
    folder = tmp_path / "model"
    real = strategy.folder_fstype

    def on_nfs(root, mountinfo=None):
        return "nfs4" if str(root).startswith(str(tmp_path)) else real(root, mountinfo)

    monkeypatch.setattr(strategy, "folder_fstype", on_nfs)
    monkeypatch.setattr(strategy, "available_ram", lambda: 64 * GB)
    sets = [
        "model_load.model=generic",
        "model_load.model_bytes=4194304",
        "model_load.shard_size=1048576",
        "model_load.repeats=1",
        f"checkpoint.checkpoint_folder={folder}",
    ]
    out_dir = tmp_path / "out"
    code, out, err = run_cli("run", "-w", "load_model", "--output", out_dir, *sum((["--set", s] for s in sets), []))
    assert code == 0, err
    doc = json.loads((out_dir / "dlio-fast.json").read_text())
    choice = doc["read_mode_choice"]
    assert (choice["configured"], choice["mode"], choice["fstype"]) == ("auto", "prefetch", "nfs4")
    assert choice["available_ram"] == 64 * GB and choice["checkpoint_bytes"] == sum(
        s["bytes"] for s in doc["model"]["shards"]
    )
    assert doc["settings"]["read_mode"] == "prefetch" and doc["settings"]["read_mode_set"] == "auto"
    assert "Read mode: prefetch, chosen as vLLM chooses (auto): nfs4 is a network filesystem" in out
    (r,) = doc["ranks"]
    assert r["prefetch"]["files"] == len(doc["model"]["shards"])


class WaitingRun:
    """Stands in for the prefetch's C run: goes on until asked to stop."""

    def __init__(self):
        self.stopped = threading.Event()

    def execute(self):
        assert self.stopped.wait(10), "never asked to stop"
        return {"bytes": 0}

    def request_stop(self):
        self.stopped.set()


def test_a_stop_ends_the_prefetch_run_beside_the_main_threads():
    """The prefetch's C run waits on a thread of its own, which installs no signal handler: a stop the
    main thread's run saw (the STOP flag) ends it too, so a stopped load does not read on."""
    run, got = WaitingRun(), {}
    t = threading.Thread(target=lambda: got.update(r=execute.execute_partial(run, tick_s=0.01)))
    t.start()
    try:
        execute.STOP.set()
        t.join(10)
    finally:
        execute.STOP.clear()
    assert not t.is_alive() and run.stopped.is_set()
    _, failure = got["r"]
    assert isinstance(failure, Interrupted)
