"""The S3 worker's memory: allocator settings, the heap prefault, GET batches bounded by bytes."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from dlio import _core
from dlio.storage.s3 import bench as points
from dlio.storage.s3 import heap, settings, worker
from dlio.storage.s3.worker_train import _largest_step_bytes

ENV = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "ak", "AWS_SECRET_ACCESS_KEY": "sk"}

# In a child with the given environment: optionally prefault 96 MiB, then allocate and touch 4 x 16 MiB
# at once (a batch's response buffers), free them and do it again; the page faults of each round.
CHILD = """
import ctypes, json, resource, sys
from dlio.storage.s3 import heap
if sys.argv[1] == "prefault":
    heap.prefault(96 << 20)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
faults = []
for _ in range(2):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    bufs = [libc.malloc(16 << 20) for _ in range(4)]
    for b in bufs:
        ctypes.memset(b, 7, 16 << 20)
    for b in bufs:
        libc.free(b)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
print(json.dumps(faults))
"""
PAGES_64M = (64 << 20) // os.sysconf("SC_PAGE_SIZE")


def faults(env_extra: dict, mode: str) -> list:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_worker_env_carries_the_allocator_settings_and_keeps_the_users(monkeypatch):
    for k in heap.MALLOC_REUSE:
        monkeypatch.delenv(k, raising=False)
    env = settings.resolve(environ=ENV).child_env()
    for k, v in heap.MALLOC_REUSE.items():
        assert env[k] == v
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert settings.resolve(environ=ENV).child_env()["MALLOC_ARENA_MAX"] == "4"


def _thp_always():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[always]" in f.read()
    except OSError:
        return False


@pytest.mark.skipif(_thp_always(), reason="transparent huge pages 'always': faults count 2 MiB pages, not 4 KiB")
def test_buffers_fault_every_batch_by_default_and_never_after_a_prefault():
    # glibc's defaults: 16 MiB blocks are mmapped, so every round faults in its 64 MiB afresh
    default = faults({}, "none")
    assert all(f >= 0.9 * PAGES_64M for f in default), default
    # the worker's settings without a prefault: the first round faults, the second reuses its pages
    kept = faults(heap.MALLOC_REUSE, "none")
    assert kept[0] >= 0.9 * PAGES_64M and kept[1] < 0.02 * PAGES_64M, kept
    # with the prefault, no round faults
    pre = faults(heap.MALLOC_REUSE, "prefault")
    assert max(pre) < 0.02 * PAGES_64M, pre


def test_prefault_is_bounded_by_available_memory(monkeypatch):
    assert heap.prefault(1 << 20) == 1 << 20
    assert heap.prefault(0) == 0
    # a host with 64 MiB free: at most a quarter of it is touched, whatever is asked
    pages = {"SC_AVPHYS_PAGES": (64 << 20) // 4096, "SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(heap.os, "sysconf", lambda name: pages[name])
    assert heap.prefault(1 << 60) == 16 << 20


def test_get_batches_are_bounded_by_bytes_but_keep_qd_requests():
    items = list(range(16))
    assert len(worker._batch(items, 8, 0)) == 64  # 8 x qd: short tails
    assert worker._batch(items, 8, 0)[:17] == items + [0]
    assert len(worker._batch(items, 8, 20)) == 20  # the point's request budget
    assert len(worker._batch(items, 8, 0, 24)) == 24  # the byte bound
    # the io point's bound: 1 GiB over the threads, never fewer than qd requests
    for bs, threads, qd, want in ((16 << 20, 1, 8, 64), (64 << 20, 2, 8, 8), (64 << 20, 1, 64, 64)):
        assert worker.get_batch_cap(bs, threads, qd) == want


def test_largest_step_bytes():
    ops = np.zeros(6, dtype=_core.OP_DTYPE)
    ops["length"] = [10, 20, 30, 40, 50, 60]
    steps = np.zeros(4, dtype=_core.STEP_DTYPE)
    steps["first_op"] = [0, 2, 2, 5]
    steps["nops"] = [2, 0, 3, 1]
    assert _largest_step_bytes(ops, steps) == 30 + 40 + 50
    assert _largest_step_bytes(ops, steps[:0]) == 0


def test_held_bytes_of_a_point():
    mib = 1 << 20
    # 16 objects of 16 MiB (2 x qd x threads, at least 256 MiB), qd 8: a batch of 8 x qd = 64 requests
    read = points.S3Point("read", 16 * mib, 8, 1, 16 * mib)
    assert points.held_bytes("p/", read, 0) == (64 + 8) * 16 * mib
    # a --size of 20 requests: batches of 20
    assert points.held_bytes("p/", read, 20 * 16 * mib) == (20 + 8) * 16 * mib
    # 64 MiB objects, 2 threads: 1 GiB over both threads = 8 per batch, qd 8
    big = points.S3Point("read", 64 * mib, 8, 2, 64 * mib)
    assert points.held_bytes("p/", big, 0) == 2 * (8 + 8) * 64 * mib
    assert points.held_bytes("p/", points.S3Point("randread", mib, 4, 3, 1 << 30), 0) == 2 * 3 * 4 * mib
    assert points.held_bytes("p/", points.S3Point("write", mib, 4, 3, mib), 0) == 3 * mib
