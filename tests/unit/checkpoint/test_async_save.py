"""The pieces of an asynchronous save: the timed memcpy, the host buffer's bound, and the interference
figures on a known step plan."""

import numpy as np
import pytest

from dlio import _core
from dlio.checkpoint.async_save import HostBuffer, buffer_bytes
from dlio.report import interference


def test_copy_timed_copies_through_a_staging_buffer():
    src = np.arange(1 << 20, dtype=np.uint64).view(np.uint8)
    dst = np.zeros(len(src), dtype=np.uint8)
    ns = _core.copy_timed(dst, src, len(src))
    assert ns > 0 and np.array_equal(dst, src)
    small = np.zeros(4096, dtype=np.uint8)
    assert _core.copy_timed(small, src, 10 * 4096 + 7) > 0  # 11 copies of up to 4 KiB
    assert np.array_equal(small, src[:4096])
    with pytest.raises(ValueError):
        _core.copy_timed(np.zeros(0, np.uint8), src, 1)
    with pytest.raises((BufferError, ValueError, TypeError)):
        _core.copy_timed(b"read-only", src, 1)


def test_buffer_bound():
    GiB = 1 << 30
    assert buffer_bytes(10 * GiB, 0, 100 * GiB, 1) == 10 * GiB  # the whole state fits
    assert buffer_bytes(10 * GiB, 0, 16 * GiB, 1) == 4 * GiB  # two buffers: half the memory
    assert buffer_bytes(10 * GiB, 0, 16 * GiB, 4) == 1 * GiB  # four ranks on the host share it
    assert buffer_bytes(10 * GiB, 2 * GiB, 100 * GiB, 1) == 2 * GiB  # asked
    assert buffer_bytes(10 * GiB, 20 * GiB, 100 * GiB, 1) == 10 * GiB  # never above the state
    assert buffer_bytes(10 * GiB, 0, None, 1) == 10 * GiB
    b = HostBuffer(3 * 4096 + 1, 4096)
    assert b.staged and b.chunks == 4 and b.snapshot() > 0


def _rank(steps, saves):
    return {"epochs": [{"steps": steps, "checkpoints": saves}]}


def test_interference_on_a_known_plan():
    # 10 steps of 1 MiB and 60 ms of compute: 100 ms each, but steps 4..6 (during the write) 200 ms
    t, steps = 0, {"t_fetch_ns": [], "t_end_ns": [], "bytes": [], "compute_ns": [], "set_compute_ns": []}
    for i in range(10):
        slow = 4 <= i <= 6
        dur = 200_000_000 if slow else 100_000_000
        steps["t_fetch_ns"].append(t)
        steps["t_end_ns"].append(t + dur)
        steps["bytes"].append(1 << 20)
        steps["compute_ns"].append(60_000_000)
        steps["set_compute_ns"].append(60_000_000)
        t += dur
    w0, w1 = 400_000_000 + 1, 1_000_000_000 - 1  # inside steps 4..6 only
    save = {"async": True, "rank": 0, "epoch": 1, "step": 4, "write_start_ns": w0, "write_end_ns": w1}
    rank = _rank(steps, [save, {"async": True, "failed": "disk full"}])
    interference.annotate(rank)
    assert rank["epochs"][0]["checkpoints"] == [save]  # the failed save is dropped
    f = save["interference"]
    assert f["during"] == {
        "steps": 3,
        "seconds": pytest.approx(0.6),
        "au_percentage": pytest.approx(100 * 0.18 / 0.6),
        "bytes": 3 << 20,
        "read_MiB_per_second": pytest.approx(3 / 0.6),
    }
    assert f["outside"]["steps"] == 7 and f["outside"]["au_percentage"] == pytest.approx(60.0)
    assert f["outside"]["read_MiB_per_second"] == pytest.approx(10.0)
    assert f["au_drop_points"] == pytest.approx(30.0)
    assert f["read_MiB_per_second_ratio"] == pytest.approx(0.5)
    # the console's summary pools the steps' time
    save.update(blocked_s=0.01, copy_s=0.008, wait_s=0.0, write_s=0.6, write_GiB_per_second=1.0)
    save["snapshot_to_durable_s"] = 0.61
    s = interference.summary([save])
    assert s["during"]["au_percentage"] == pytest.approx(30.0) and s["outside"]["steps"] == 7
    text = "\n".join(interference.lines([save]))
    assert "AU 30.00 % (3 steps) vs 60.00 % outside (7 steps)" in text and "durable 0.610 s" in text


def test_a_compute_overrun_does_not_raise_the_au():
    steps = {
        "t_fetch_ns": [0],
        "t_end_ns": [100],
        "bytes": [0],
        "compute_ns": [90],
        "set_compute_ns": [50],
    }
    st = {k: np.asarray(v) for k, v in steps.items()}
    assert interference.figures(st, np.array([True]))["au_percentage"] == pytest.approx(50.0)
    assert interference.figures(st, np.array([False])) is None
