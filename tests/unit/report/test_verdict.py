"""dlio.system.counters parsing (hand-made /proc texts) and dlio.report.verdict's rules (hand-made counters)."""

import pytest

from dlio.report import verdict, verdict_lines
from dlio.system import counters

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683652k
27 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 27 253:0 / /data\\040set rw,relatime shared:5 master:2 - xfs /dev/mapper/vg-data rw
31 27 0:50 / /mnt/nfs rw,relatime - nfs4 server:/export rw,vers=4.2
32 27 0:60 / /var/lib/docker/overlay2/x/merged rw - overlay overlay rw,lowerdir=/a
33 24 0:27 / /dev/shm rw,relatime - tmpfs tmpfs rw
"""

DISKSTATS = """\
   8       0 sda 100 0 2000 0 50 0 4000 0 0 0 0 0 0 0 0 0 0
   8       1 sda1 90 0 1800 0 40 0 3000 0 0 0 0 0 0 0 0 0 0
 253       0 dm-0 7 1 16 3 5 0 24 1 0 0 0 0 0 0 0 0 0
"""

MOUNTSTATS = """\
device proc mounted on /proc with fstype proc
device server:/export mounted on /mnt/nfs with fstype nfs4 statvers=1.1
\topts:\trw,vers=4.2
\tbytes:\t100 200 300 400 5000 6000 7 8
device /dev/sda1 mounted on / with fstype ext4
"""


def test_parse_mountinfo_fields_optional_tags_and_escapes():
    ms = counters.parse_mountinfo(MOUNTINFO)
    assert len(ms) == 7
    root = ms[2]
    assert (root.mount_point, root.major, root.minor, root.fstype, root.source) == ("/", 8, 1, "ext4", "/dev/sda1")
    assert ms[3].mount_point == "/data set" and ms[3].fstype == "xfs"  # \040 is a space; 2 optional fields


def test_mount_of_longest_prefix_and_last_stacked():
    ms = counters.parse_mountinfo(MOUNTINFO)
    assert counters.mount_of("/data set/train/a.npz", ms).fstype == "xfs"
    assert counters.mount_of("/data settle/x", ms).mount_point == "/"  # a prefix of the name is not a parent
    assert counters.mount_of("/dev/shm/x", ms).major == 0 and counters.mount_of("/dev/shm/x", ms).minor == 27
    assert counters.mount_of("/", ms).mount_point == "/"


def test_parse_diskstats_sectors_are_512_bytes():
    d = counters.parse_diskstats(DISKSTATS)
    assert d[(8, 1)] == {
        "name": "sda1",
        "read_ios": 90,
        "read_bytes": 1800 * 512,
        "write_ios": 40,
        "write_bytes": 3000 * 512,
    }
    assert d[(253, 0)]["read_bytes"] == 16 * 512


def test_parse_mountstats_nfs_server_bytes():
    assert counters.parse_mountstats(MOUNTSTATS) == {"/mnt/nfs": {"read_bytes": 5000, "write_bytes": 6000}}


@pytest.mark.parametrize(
    "path,kind,dev,why",
    [
        ("/home/u/data/x", "block", "sda1", None),
        ("/data set/x", "block", "dm-0", None),
        ("/mnt/nfs/train/x", "nfs", "server:/export", None),
        ("/dev/shm/data/x", "none", None, "tmpfs at /dev/shm has no block device"),
        ("/var/lib/docker/overlay2/x/merged/f", "none", None, "overlay at"),
    ],
)
def test_resolve(path, kind, dev, why):
    t = counters.resolve(path, MOUNTINFO, DISKSTATS).to_json()
    assert t["kind"] == kind and t["device"] == dev
    if why:
        assert why in t["why"]


def c(**kw):
    base = {
        "wall_s": 10.0,
        "app_bytes": 1000,
        "device_bytes": 1000,
        "network_bytes": None,
        "target": {"device": "sda1", "kind": "block"},
        "cpu_user_s": 1.0,
        "cpu_sys_s": 1.0,
        "reader_cpu_s": 2.0,
        "reader_threads": 4,
        "cores": 8,
        "host_cpus": 8,
        "host_busy_share": 0.3,
        "resident_before": 0.0,
        "direction": "read",
    }
    base.update(kw)
    return base


def test_storage_bound_when_bytes_match_and_cpu_spare():
    v = verdict.classify(c(device_bytes=1200))  # readahead may add
    assert v["verdict"] == "storage-bound" and v["storage_ratio"] == pytest.approx(1.2)
    assert verdict.classify(c(device_bytes=800))["verdict"] == "storage-bound"  # MATCH_RATIO 0.8 included
    assert "other processes using the same device" in verdict.classify(c(device_bytes=2000))["reason"]


MIB = 1 << 20


def test_own_block_reads_decide_when_another_process_shares_the_device():
    """The issue's numbers: the device moved 68x the run's bytes while the run's own block reads
    (/proc/self/io) were none: cache, whatever the device's count."""
    app = 32 * MIB
    v = verdict.classify(c(app_bytes=app, device_bytes=int(68.68 * app), own_bytes=0, resident_before=1.0))
    assert v["verdict"] == "cache" and v["storage_ratio"] == 0.0
    assert "this process's reads on device sda1 moved 0 B" in v["reason"]
    # its own reads were the device's, and a neighbour moved as much again: shared, not storage-bound
    v = verdict.classify(c(app_bytes=app, device_bytes=3 * app, own_bytes=app))
    assert (v["verdict"], v["part"]) == ("inconclusive", "other processes on the device")
    assert "other processes moved 64.0 MiB on device sda1" in v["reason"] and "2.0x this run's own" in v["reason"]
    # readahead is the run's own: its bytes beyond the application's are no neighbour's
    v = verdict.classify(c(app_bytes=app, device_bytes=2 * app, own_bytes=2 * app))
    assert v["verdict"] == "storage-bound" and "(more than was read: readahead)" in v["reason"]
    # a little foreign I/O (a journal commit) is below both thresholds
    small = c(app_bytes=app, device_bytes=app + 4 * MIB, own_bytes=app)
    assert verdict.classify(small)["verdict"] == "storage-bound"
    big = c(app_bytes=4 * app, device_bytes=4 * app + 24 * MIB, own_bytes=4 * app)  # 24 MiB < a quarter of 128
    assert verdict.classify(big)["verdict"] == "storage-bound"
    # a checkpoint load of 46 MiB in 50 ms beside two O_DIRECT writers that moved 20 MiB: shared
    load = c(app_bytes=46 * MIB, device_bytes=66 * MIB, own_bytes=46 * MIB)
    assert verdict.classify(load)["part"] == "other processes on the device"


def test_a_writes_own_bytes_are_pages_dirtied_so_the_device_decides():
    """A buffered write's own bytes count when it dirtied the pages: the device's count says whether they
    reached storage (cache: not yet written back), and its excess is a neighbour's."""
    app = 32 * MIB
    w = c(app_bytes=app, device_bytes=app // 10, own_bytes=app, direction="write")
    assert verdict.classify(w)["verdict"] == "cache"
    w = c(app_bytes=app, device_bytes=3 * app, own_bytes=app, direction="write")
    assert verdict.classify(w)["part"] == "other processes on the device"


def test_a_writer_beside_a_read_phase_shares_the_device():
    """The other direction counts: a neighbour writing while the phase reads (its own reads all the device's).
    Pages dirtied before the phase and written back during it are nobody's in the phase (/proc/meminfo)."""
    app = 32 * MIB
    both = dict(device_read_bytes=app, own_read_bytes=app, own_write_bytes=0)
    v = verdict.classify(c(app_bytes=app, device_bytes=app, own_bytes=app, device_write_bytes=3 * app, **both))
    assert (v["verdict"], v["part"]) == ("inconclusive", "other processes on the device")
    assert "other processes moved 96.0 MiB on device sda1 during the phase (read 0 B, write 96.0 MiB)" in v["reason"]
    assert "3.0x this run's own 32.0 MiB" in v["reason"]
    flushed = c(
        app_bytes=app, device_bytes=app, own_bytes=app, device_write_bytes=3 * app, written_back_bytes=3 * app, **both
    )
    assert verdict.classify(flushed)["verdict"] == "storage-bound"
    # a host's ranks: the device's bytes are the host's (the largest), the ranks' own are added, both ways
    one = c(device_bytes=app, own_bytes=app // 2, device_write_bytes=8, own_read_bytes=app // 2, own_write_bytes=4)
    host = verdict.combine([one, dict(one, device_write_bytes=6)])
    assert (host["own_read_bytes"], host["own_write_bytes"], host["device_write_bytes"]) == (app, 8, 8)


def test_combine_adds_the_ranks_own_bytes():
    a, b = c(own_bytes=300, device_bytes=1000), c(own_bytes=700, device_bytes=990)
    assert verdict.combine([a, b])["own_bytes"] == 1000
    assert verdict.combine([a, c(device_bytes=990)])["own_bytes"] is None  # one rank without accounting


def test_proc_io_is_parsed():
    text = "rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 0\nread_bytes: 4096\nwrite_bytes: 512\n"
    assert counters.parse_proc_io(text) == {"read_bytes": 4096, "write_bytes": 512}
    assert counters.parse_proc_io("rchar: 1\n") is None


def test_cache_share_is_one_minus_the_ratio():
    v = verdict.classify(c(device_bytes=100, resident_before=0.97))
    assert v["verdict"] == "cache"
    assert "90% came from the page cache" in v["reason"] and "97% of the sampled pages" in v["reason"]
    # cache wins over a busy client: copying from the page cache is what keeps the readers busy
    assert verdict.classify(c(device_bytes=0, reader_cpu_s=40.0))["verdict"] == "cache"


def test_partly_cached_is_inconclusive():
    v = verdict.classify(c(device_bytes=600))
    assert v["verdict"] == "inconclusive" and "partly" in v["reason"]


def test_client_bound_reader_threads_and_the_setting():
    v = verdict.classify(c(reader_threads=2, reader_cpu_s=17.0))  # 1.7 of min(2, 8) cores = 85 %
    assert (v["verdict"], v["part"]) == ("client-bound", "reader threads")
    assert "raise reader.read_threads (2 now, 8 usable cores)" in v["setting"]
    v = verdict.classify(c(reader_threads=8, reader_cpu_s=70.0, cpu_user_s=10.0, cpu_sys_s=60.0))
    assert "io_uring" in v["setting"] and "86% of the process's CPU in the kernel" in v["setting"]


def test_client_bound_process_and_host():
    v = verdict.classify(c(reader_cpu_s=5.0, cpu_user_s=70.0, cpu_sys_s=5.0))  # 7.5 of 8 cores
    assert (v["verdict"], v["part"]) == ("client-bound", "process")
    v = verdict.classify(c(reader_cpu_s=5.0, cpu_user_s=50.0, cpu_sys_s=20.0, host_busy_share=0.95))
    assert (v["verdict"], v["part"]) == ("client-bound", "this process")  # 7.0 of 7.6 busy cores
    # 5.0 of 7.6: the others' 2.6 cores (over a quarter of the host) are what the run would have had on an idle one
    v = verdict.classify(c(reader_cpu_s=5.0, cpu_user_s=30.0, cpu_sys_s=20.0, host_busy_share=0.95))
    assert (v["verdict"], v["part"]) == ("inconclusive", "other processes on the host")
    v = verdict.classify(c(host_busy_share=0.95))  # 0.2 of 7.6: others
    assert (v["verdict"], v["part"]) == ("inconclusive", "other processes on the host")


def test_no_device_or_no_bytes_is_inconclusive():
    v = verdict.classify(c(device_bytes=None, target={"kind": "none", "why": "tmpfs at /dev/shm has no block device"}))
    assert v["verdict"] == "inconclusive" and "tmpfs" in v["reason"]
    assert verdict.classify(c(app_bytes=0))["verdict"] == "inconclusive"


def test_nfs_bytes_count_and_say_the_server_may_cache():
    v = verdict.classify(c(device_bytes=None, network_bytes=1000))
    assert v["verdict"] == "storage-bound" and "NFS server" in v["reason"]


def test_combine_adds_the_ranks_of_a_host():
    a = c(app_bytes=500, device_bytes=1000, reader_cpu_s=1.0, reader_threads=2, cores=2)
    b = c(app_bytes=500, device_bytes=990, reader_cpu_s=1.5, reader_threads=2, cores=2)
    m = verdict.combine([a, b])
    assert (m["app_bytes"], m["device_bytes"], m["reader_cpu_s"], m["reader_threads"], m["cores"]) == (
        1000,
        1000,
        2.5,
        4,
        4,
    )
    assert verdict.classify(m)["verdict"] == "storage-bound"  # 500 alone would read 2x: still storage
    recs = [
        {"hostname": "h", "epochs": [{"epoch": 1, "counters": a}]},
        {"hostname": "h", "epochs": [{"epoch": 1, "counters": b}]},
    ]
    out = verdict.annotate_run(recs)
    assert len(out) == 1 and out[0]["phase"] == "epoch 1" and out[0]["host"] == "h"
    assert recs[0]["epochs"][0]["verdict"]["verdict"] == recs[1]["epochs"][0]["verdict"]["verdict"] == "storage-bound"


def test_a_save_between_training_steps_has_its_own_verdict_per_host():
    """Saves recorded inside an epoch (training's) are judged as checkpoint-only mode's: one verdict per
    save and host, from their combined counters, as a write; the epoch keeps its own."""
    read = c()
    kept = c(direction="write", app_bytes=1000, device_bytes=0, own_bytes=1000)  # not written back
    synced = c(direction="write", app_bytes=1000, device_bytes=1000, own_bytes=1000)
    recs = [
        {
            "hostname": h,
            "epochs": [{"epoch": 1, "counters": read, "checkpoints": [{"kind": "save", "block": 1, "counters": w}]}],
        }
        for h, w in (("a", kept), ("b", synced))
    ]
    out = {(v["phase"], v["host"]): v["verdict"] for v in verdict.annotate_run(recs)}
    assert out == {
        ("epoch 1", "a"): "storage-bound",
        ("checkpoint 1 save", "a"): "cache",
        ("epoch 1", "b"): "storage-bound",
        ("checkpoint 1 save", "b"): "storage-bound",
    }
    assert recs[0]["epochs"][0]["checkpoints"][0]["verdict"]["verdict"] == "cache"


def test_report_table_and_check_read_the_recorded_verdicts(tmp_path):
    """verdict_lines puts each epoch's verdict next to its counters; check_not_cache fails on cache."""
    from dlio.mlperf import checks_v2
    from dlio.report import compare, tables
    from dlio.report.source import Source

    cached = c(device_bytes=100, resident_before=1.0, reader_cpu_s=1.0)
    ep = {"epoch": 2, "counters": cached, "verdict": verdict.classify(cached)}
    doc = {
        "ranks": [{"rank": 0, "hostname": "h", "epochs": [ep]}],
        "verdicts": [{"phase": "epoch 2", "host": "h", **ep["verdict"]}],
    }
    lines = tables.verdict_lines({"verdicts": compare.verdicts([Source("run", str(tmp_path / "r1"), doc)])})
    row = next(x for x in lines if x.startswith("r1"))
    assert row.split() == ["r1", "epoch", "2", "cache", "1000", "B", "100", "B", "0.10x", "100%", "0.10", "30%"]
    name, ok, text = checks_v2.check_not_cache(doc)
    assert not ok and "1 of 1 epoch verdict(s) are cache" in text
    assert checks_v2.check_not_cache({"verdicts": []}) is None  # a run recorded before the counters
    # a save left in the page cache (no checkpoint.fsync, as DLIO's) is not an epoch's reads
    saved = {"phase": "checkpoint 1 save", "host": "h", "verdict": "cache"}
    stored = {"phase": "epoch 1", "host": "h", "epoch": 1, "verdict": "storage-bound"}
    assert checks_v2.check_not_cache({"verdicts": [stored, saved]})[1] is True
    old = [Source("run", "old", {"ranks": [{"epochs": [{"epoch": 1}]}]})]
    assert tables.verdict_lines({"verdicts": compare.verdicts(old)}) == []


# ---- the emulated accelerator's spin is not the client's CPU (issue 30, usability bug 7) --------------


def spin(**kw):
    """Bug 7's phase: 10 s, 2 cores; the trainer spun 9.7 s of the process's 9.9 s (AU 99.99 %, 1 ms of
    I/O wait); a CPU hog beside it: the host 95 % busy."""
    base = c(
        wall_s=10.0,
        cores=2,
        host_cpus=2,
        cpu_user_s=9.8,
        cpu_sys_s=0.1,
        reader_cpu_s=0.1,
        reader_threads=1,
        host_busy_share=0.95,
        compute_s=9.99,
        compute_set_s=9.99,
        compute_cpu_s=9.7,
        io_wait_s=0.001,
    )
    base.update(kw)
    return base


def test_the_spin_is_the_accelerator_not_this_process():
    v = verdict.classify(spin())
    assert v["verdict"] == "storage-bound", v  # today: client-bound (this process) 0.99, others 0.91
    assert "emulated accelerator 0.97" in v["reason"] and "readers 0.01, harness 0.01" in v["reason"]
    s = verdict.cpu_split(spin())
    assert s["accelerator"] == pytest.approx(0.97) and s["client"] == pytest.approx(0.02)
    # the same host, the reads slow (AU 50 %): the hog, not this process, is who may have set the pace
    v = verdict.classify(spin(compute_s=5.0, compute_set_s=5.0, io_wait_s=5.0, compute_cpu_s=4.9, cpu_user_s=5.0))
    assert (v["verdict"], v["part"]) == ("inconclusive", "other processes on the host")
    assert "emulated accelerator 0.49" in v["reason"]
    # the reads kept up but the spin ran 30 % over its set time: the AU is the busy CPU's, not storage's
    v = verdict.classify(spin(compute_s=12.99))
    assert (v["verdict"], v["part"]) == ("inconclusive", "other processes on the host")
    assert "ran 30% over its set time" in v["reason"]
    v = verdict.classify(spin(compute_s=12.99, host_busy_share=0.5))  # nobody else: its own CPU was short
    assert (v["verdict"], v["part"]) == ("client-bound", "emulated accelerator")
    assert "dlio_fast.compute_mode=hybrid" in v["setting"]
    # the process's rule counts the spin (it holds a core the readers cannot use) and says so
    v = verdict.classify(
        spin(compute_s=5.0, compute_set_s=5.0, io_wait_s=5.0, cpu_user_s=18.0, reader_cpu_s=6.0, reader_threads=2)
    )
    assert (v["verdict"], v["part"]) == ("client-bound", "process") and "emulated accelerator 0.97" in v["reason"]


def test_benchmark_cpu_leaves_the_spin_out():
    """cpu_accounts: the trainer's CPU (measured by the C core) bounds the spin; the rest of the process
    is the benchmark's (readers and harness); a worker process's result (S3) counts its CPU instead."""
    import numpy as np

    from dlio.train.epoch_record import cpu_accounts

    steps = {
        "t_fetch": np.array([0, 100], dtype=np.uint64),
        "t_ready": np.array([10, 100], dtype=np.uint64),
        "t_end": np.array([100, 200], dtype=np.uint64),
        "compute_ns": np.array([4 * 10**8, 4 * 10**8], dtype=np.uint64),
        "bytes": np.array([1, 1], dtype=np.uint64),
    }
    res = {"steps_done": 2, "step_times": steps, "threads": [{"cpu_ns": 10**8}], "trainer_cpu_ns": 6 * 10**8}
    a = cpu_accounts(1.0, res, 0, 1, np.array([3 * 10**8, 3 * 10**8]))
    assert a["accelerator_s"] == pytest.approx(0.6)  # 0.8 s spun, the trainer had 0.6 s of CPU: preempted
    assert (a["benchmark_s"], a["readers_s"], a["compute_s"]) == (pytest.approx(0.4), 0.1, pytest.approx(0.8))
    assert a["compute_set_s"] == pytest.approx(0.6) and a["io_wait_s"] == pytest.approx(1e-8)
    hybrid = cpu_accounts(1.0, res, 1, 1)  # hybrid spins the last COMPUTE_SPIN_NS of each step only
    from dlio import _core

    assert hybrid["accelerator_s"] == pytest.approx(min(0.6, 2 * _core.COMPUTE_SPIN_NS / 1e9))
    s3 = cpu_accounts(0.05, dict(res, trainer_cpu_ns=None), 0, 1)  # S3Run: the worker spun, its reading is ours
    assert (s3["accelerator_s"], s3["workers_s"], s3["benchmark_s"]) == (0.8, pytest.approx(0.9), pytest.approx(0.15))
    c3 = c(cpu_user_s=0.05, cpu_sys_s=0.0, worker_cpu_s=s3["workers_s"], compute_cpu_s=s3["accelerator_s"])
    assert verdict.cpu_split(c3)["client"] == pytest.approx(0.015)  # the worker's reading, not its spin


# ---- a figure sampled where it is true; a memory filesystem named ----------------------------------


def test_memory_filesystem_is_named_and_is_cache():
    t = counters.resolve("/dev/shm/data/x", MOUNTINFO, DISKSTATS).to_json()
    assert t["memory_fs"] == "tmpfs" and "memory-backed" in t["why"]
    assert counters.resolve("/home/u/x", MOUNTINFO, DISKSTATS).to_json()["memory_fs"] is None
    v = verdict.classify(c(device_bytes=None, target=dict(t), host_busy_share=0.99, reader_cpu_s=40.0))
    assert (v["verdict"], v["part"]) == ("cache", "memory filesystem (tmpfs)")  # before the CPU rules
    assert "tmpfs at /dev/shm, a memory-backed filesystem" in v["reason"]
    assert verdict_lines.short(v) == "memory"
    io = verdict.classify(c(device_bytes=None, target=dict(t)), verdict.Context("io"))
    assert io["setting"] == "a PATH on the storage to measure"


# ---- advice in the command's words, never what is in effect; grouped lines -----------------------


def test_advice_speaks_the_commands_words_and_skips_what_is_in_effect():
    cached = c(device_bytes=100, resident_before=0.0)
    io = verdict.classify(cached, verdict.Context("io", direct=False, cache="drop", engine="posix"))
    assert io["setting"] == "--direct, or --file-size larger than RAM"  # --cache drop is in effect
    assert "dlio_fast" not in io["setting"] and "first pass" in io["reason"]
    run = verdict.classify(cached, verdict.Context("run", direct=False, cache="keep"))
    assert run["setting"].startswith("--engine odirect (O_DIRECT), --cache drop, or a dataset larger than RAM")
    direct = verdict.classify(cached, verdict.Context("io", direct=True, cache="keep"))
    assert direct["setting"] == "--file-size larger than RAM"
    ceil = verdict.classify(cached, verdict.Context("ceiling", direct=False, cache="drop"))
    assert ceil["setting"] == "--file-size larger than RAM"
    readers = c(reader_threads=2, reader_cpu_s=17.0)
    assert "raise --threads (2 now" in verdict.classify(readers, verdict.Context("io"))["setting"]
    kernel = c(reader_threads=8, reader_cpu_s=70.0, cpu_user_s=10.0, cpu_sys_s=60.0)
    s = verdict.classify(kernel, verdict.Context("io", direct=True, engine="io_uring"))["setting"]
    assert "a deeper --qd" in s and "--direct" not in s and "--engine io_uring" not in s


def test_a_grid_prints_one_line_per_distinct_verdict():
    pts = []
    for rw in ("read", "randread"):
        for bs in (4096, 131072):
            for e, qd in (("posix", 1), ("io_uring", 1), ("io_uring", 8)):
                v = verdict.classify(c(device_bytes=100 if bs > 4096 else 1000), verdict.Context("io", cache="drop"))
                pts.append({"rw": rw, "bs": bs, "engine": e, "qd": qd, "threads": 1, "verdict": v})
    lines = verdict_lines.point_lines(pts)
    assert len(lines) == 4  # the title, cache, storage-bound, the thresholds
    cache = next(x for x in lines if x.startswith("  cache"))
    assert cache.startswith("  cache, 6 points (read,randread 128KiB (posix qd1 t1 | io_uring qd1,qd8 t1)): ")
    assert "131072" not in "\n".join(lines) and "(0.10x of the application's bytes)" in cache
    assert cache.endswith("; change: --direct, or --file-size larger than RAM")
    one = verdict_lines.point_lines(pts[:1])[1]  # a point alone keeps its whole reason
    assert one.startswith("  read 4KiB posix qd1 t1: storage-bound: device sda1 moved 1.00x")
    runs = verdict_lines.run_lines(
        [{"phase": f"epoch {e}", "epoch": e, "host": "h", **pts[3]["verdict"]} for e in (1, 2, 3)]
    )
    assert runs[1].startswith("  cache, 3 epochs (epoch 1,2,3): the page cache served the reads")
