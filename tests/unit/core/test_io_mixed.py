"""Mixed read/write io points (fio's randrw / readwrite with rwmixread): the plan's draw, and the C run's
per-direction counts checked against a file whose every block tells whether it was written."""

import numpy as np
import pytest

from dlio import _core
from dlio.fsbench import points
from dlio.fsbench.testfiles import FileSet

BS = 4096
NBLOCKS = 2048


def zeroed_file(tmp_path):
    path = tmp_path / "f.dat"
    path.write_bytes(bytes(BS * NBLOCKS))
    return FileSet([str(path)], [BS * NBLOCKS])


def test_randrw_plan_draws_the_share_of_writes_over_every_block():
    fs = FileSet(["/nonexistent"], [BS * NBLOCKS])
    ops, first = points.build_plan(points.Point("randrw", BS, "posix", 1, 1, False, rwmixread=70), fs)
    assert sorted(ops["offset"].tolist()) == list(range(0, BS * NBLOCKS, BS))  # fio's random map: each once
    share = float((ops["op"] == _core.OP_WRITE).mean())
    assert abs(share - 0.30) < 0.04, share  # 2048 draws: 4 standard deviations
    assert list(first) == [0, NBLOCKS]
    rd, _ = points.build_plan(points.Point("randrw", BS, "posix", 1, 1, False, rwmixread=100), fs)
    wr, _ = points.build_plan(points.Point("randrw", BS, "posix", 1, 1, False, rwmixread=0), fs)
    assert (rd["op"] == 0).all() and (wr["op"] == _core.OP_WRITE).all()


def test_readwrite_keeps_a_position_per_direction():
    """fio's readwrite: the reads walk the blocks from the first in order, and so do the writes."""
    fs = FileSet(["/nonexistent"], [BS * NBLOCKS])
    ops, _ = points.build_plan(points.Point("readwrite", BS, "posix", 1, 1, False, rwmixread=70), fs)
    w = ops["op"] == _core.OP_WRITE
    assert ops["offset"][~w].tolist() == list(range(0, int((~w).sum()) * BS, BS))
    assert ops["offset"][w].tolist() == list(range(0, int(w.sum()) * BS, BS))


@pytest.mark.parametrize("engine,qd", [("posix", 1), ("io_uring", 8)])
def test_mixed_point_counts_each_direction(tmp_path, engine, qd):
    """One pass over a zeroed file: every written block carries its offset stamp (dlio-fast's unique
    content), every read block is still zero, and the record's read and write sections count exactly
    those blocks (ops, bytes, latencies) and add up to the totals."""
    ok = {n: (avail, why) for n, _, avail, why in _core.engines()}
    if not ok[engine][0]:
        pytest.skip(f"{engine} unavailable here: {ok[engine][1]}")
    fs = zeroed_file(tmp_path)
    pt = points.Point("randrw", BS, engine, qd, 1, False, rwmixread=70)
    rec = points.run_point(pt, fs, points.Budget(), "keep")
    data = np.fromfile(fs.paths[0], dtype=np.uint64).reshape(NBLOCKS, BS // 8)
    # a written block starts with its offset and the time it was issued (never 0)
    written = (data[:, 0] == np.arange(NBLOCKS, dtype=np.uint64) * BS) & (data[:, 1] != 0)
    untouched = ~data.any(axis=1)
    assert (written | untouched).all()  # nothing half-written
    nw = int(written.sum())
    assert rec["rwmixread"] == 70 and rec["ops"] == NBLOCKS
    assert rec["write"]["ops"] == nw and rec["read"]["ops"] == NBLOCKS - nw
    assert rec["write"]["bytes"] == nw * BS and rec["read"]["bytes"] == (NBLOCKS - nw) * BS
    assert rec["read"]["lat_ns"]["count"] == NBLOCKS - nw and rec["write"]["lat_ns"]["count"] == nw
    assert rec["read"]["iops"] + rec["write"]["iops"] == pytest.approx(rec["iops"])
    assert rec["lat_ns"]["max"] == max(rec["read"]["lat_ns"]["max"], rec["write"]["lat_ns"]["max"])
    assert 0.25 < nw / NBLOCKS < 0.35
