"""The C core's request buffers outlive a run: the next run of the process takes them instead of having
128 MiB of fresh pages faulted in (qd 8 x 16 MiB, ~50 ms of a 512 MiB model load's time to ready, where
fio sets its buffers up before its clock: issue 42). Counted through _core.buffers_reused, with real
files read through the model-load path (file_sets.read_ranges) and their bytes checked."""

import numpy as np
import pytest

from dlio import _core
from dlio.storage import file_sets
from dlio.storage.base import SetOptions

MiB = 1 << 20
TAIL = 128  # a safetensors shard: whole MiBs of tensors and a header's odd bytes


def engine():
    return "io_uring" if any(n == "io_uring" and ok for n, _, ok, _ in _core.engines()) else "posix"


@pytest.fixture
def shards(tmp_path):
    rng = np.random.default_rng(42)
    paths, data = [], []
    for i in range(2):
        b = rng.integers(0, 256, 8 * MiB + TAIL, dtype=np.uint8).tobytes()
        p = tmp_path / f"model-{i}.safetensors"
        p.write_bytes(b)
        paths.append(str(p))
        data.append(b)
    return paths, data


def whole_reads(sizes, transfer):
    """Each file front to back in ``transfer`` requests, the files one after the other (spread whole)."""
    rows = [(f, off, min(transfer, size - off)) for f, size in enumerate(sizes) for off in range(0, size, transfer)]
    ops = np.zeros(len(rows), dtype=_core.OP_DTYPE)
    ops["file"], ops["offset"], ops["length"] = zip(*rows)
    ops["op"] = _core.OP_READ
    return ops


def load(paths, sizes, transfer, qd=8):
    opts = SetOptions(engine=engine(), direct=True, qd=qd, threads=1, transfer=transfer)
    return file_sets.read_ranges(paths, sizes, whole_reads(sizes, transfer), opts)


def test_a_second_load_takes_the_first_loads_buffers(shards):
    paths, data = shards
    sizes = [len(b) for b in data]
    _core.trim_buffers()
    before = _core.buffers_reused()
    first = load(paths, sizes, 2 * MiB)
    assert _core.buffers_reused() == before  # nothing parked yet: fresh buffers
    second = load(paths, sizes, 2 * MiB)
    assert _core.buffers_reused() == before + 1  # the one thread's pool, taken from the park
    # the whole files both times, tails included (a 4 KiB aligned read of 128 bytes)
    assert first.bytes == second.bytes == sum(sizes)


def test_a_pool_of_another_size_is_not_taken_and_trim_frees_the_park(shards):
    paths, data = shards
    sizes = [len(b) for b in data]
    _core.trim_buffers()
    load(paths, sizes, 1 * MiB)  # parks 8 x 1 MiB
    before = _core.buffers_reused()
    load(paths, sizes, 4 * MiB)  # wants 8 x 4 MiB: the parked one is too small
    assert _core.buffers_reused() == before
    load(paths, sizes, 1 * MiB)  # both are parked now: the 1 MiB pool fits, the 4 MiB one is over twice
    assert _core.buffers_reused() == before + 1
    _core.trim_buffers()
    load(paths, sizes, 1 * MiB)
    assert _core.buffers_reused() == before + 1  # nothing was left to take
