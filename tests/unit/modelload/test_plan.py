"""What each rank reads (dlio.modelload.plan), checked against byte maps of the shards built here from
the tensors' shapes: a rank's slice of every tensor, the pages mmap touches, the requests of the read
modes."""

import numpy as np
import pytest

from dlio.config import load_config
from dlio.modelload import models, shards
from dlio.modelload.plan import PAGE, rank_plan, wanted

SETS = [
    "model_load.model=transformer",
    "model.num_layers=2",
    "model.transformer.hidden_size=512",
    "model.transformer.ffn_hidden_size=1024",
    "model.transformer.vocab_size=1024",
    "model.transformer.num_attention_heads=8",
    "model.transformer.num_kv_heads=2",
    "model_load.shard_size=2000000",
]


@pytest.fixture(scope="module")
def layout():
    m = models.model_of(load_config(workload="load_llama3_8b", env={}, sets=SETS))
    return m, shards.layout(m, 2000000)


def expected_maps(m, layout, tp, r):
    """Per shard, a byte map of what rank r of tp wants: its rows of a row-split tensor, its columns of
    every row of a column-split one (by index arithmetic on a 2-D view), all of a replicated one."""
    maps = []
    for s in layout:
        want = np.zeros(s.size, dtype=bool)
        want[: len(s.header)] = True
        for t, b, e in s.tensors:
            view = want[b:e].reshape(t.shape[0], -1) if len(t.shape) == 2 else want[b:e]
            if t.split is None:
                view[...] = True
                continue
            units = t.shape[t.split] // t.unit
            if units >= tp:
                lo, hi = units * r // tp * t.unit, units * (r + 1) // tp * t.unit
            else:  # kv heads shared by tp / units ranks
                lo = (r * units // tp) * t.unit
                hi = lo + t.unit
            if t.split == 0:
                view[lo:hi, :] = True
            else:
                view[:, lo * m.itemsize : hi * m.itemsize] = True
        maps.append(want)
    return maps


def covered(layout, ext):
    maps = [np.zeros(s.size, dtype=bool) for s in layout]
    for f, off, n in zip(ext["file"].tolist(), ext["offset"].tolist(), ext["length"].tolist()):
        maps[f][off : off + n] = True
    return maps


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_a_rank_wants_its_slice_of_every_tensor(layout, tp):
    m, lay = layout
    union = [np.zeros(s.size, dtype=bool) for s in lay]
    for r in range(tp):
        got = covered(lay, wanted(lay, "slice", tp, r, m.itemsize))
        for g, w, u in zip(got, expected_maps(m, lay, tp, r), union):
            assert np.array_equal(g, w)
            u |= g
    assert all(u.all() for u in union)  # the group reads every byte of the model


def test_whole_and_files(layout):
    m, lay = layout
    assert all(c.all() for c in covered(lay, wanted(lay, "whole", 2, 1, m.itemsize)))
    for r in range(3):
        got = covered(lay, wanted(lay, "files", 3, r, m.itemsize))
        assert [c.all() for c in got] == [i % 3 == r for i in range(len(lay))]
        assert [not c.any() for c in got] == [i % 3 != r for i in range(len(lay))]


@pytest.mark.parametrize("tp, r", [(1, 0), (4, 3)])
def test_mmap_touches_the_pages_of_the_wanted_bytes(layout, tp, r):
    m, lay = layout
    p = rank_plan(lay, "slice", tp, r, m.itemsize, "mmap", 1 << 20)
    want = expected_maps(m, lay, tp, r)
    pages = 0
    for k, f in enumerate(p.files):
        w = want[f]
        page_wanted = np.add.reduceat(w, np.arange(0, len(w), PAGE)) > 0
        ops = p.ops[p.ops["file"] == k]
        touched = np.zeros(len(page_wanted), dtype=bool)
        for off, n in zip(ops["offset"].tolist(), ops["length"].tolist()):
            assert off % PAGE == 0 and n <= 1 << 20
            touched[off // PAGE : -(-(off + n) // PAGE)] = True
        assert np.array_equal(touched, page_wanted)
        pages += int(page_wanted.sum())
    assert p.pages == pages
    assert p.wanted_bytes == sum(int(w.sum()) for w in want)


@pytest.mark.parametrize("mode", ["read", "odirect", "io_uring"])
def test_read_modes_cover_the_wanted_bytes_in_transfers(layout, mode):
    m, lay = layout
    transfer = 64 << 10
    p = rank_plan(lay, "slice", 4, 1, m.itemsize, mode, transfer)
    want = expected_maps(m, lay, 4, 1)
    for k, f in enumerate(p.files):
        ops = p.ops[p.ops["file"] == k]
        got = np.zeros(lay[f].size, dtype=bool)
        for off, n in zip(ops["offset"].tolist(), ops["length"].tolist()):
            assert 0 < n <= transfer and off + n <= lay[f].size
            if mode != "read":  # O_DIRECT: aligned, but for the tail at the end of the file
                assert off % 4096 == 0 and (n % 4096 == 0 or off + n == lay[f].size)
            got[off : off + n] = True
        assert not (want[f] & ~got).any()
        assert np.all(np.diff(ops["offset"].astype(np.int64)) > 0)
    # a strided slice is read through: more than wanted, never more than the files
    assert p.wanted_bytes <= p.bytes <= sum(s.size for s in lay)
