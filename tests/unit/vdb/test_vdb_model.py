"""The hop model against real DiskANN's numbers (inference-storage.md §2.4: diskannpy 0.7.0, 20k x 1536 uniform
vectors, R=64, one query at a time), and the chains it plans."""

import numpy as np
import pytest

from dlio.vdb import model

# (L, W): (reads, hops) per search, measured with strace on io_submit.
MEASURED = {
    (50, 4): (63, 18),
    (100, 4): (111, 30),
    (200, 4): (207, 54),
    (50, 16): (86, 9.3),
    (100, 16): (133, 12),
    (200, 16): (225, 18),
}

# Measured here the same way (bench/vdb_capture.py, 30 queries each): (N, R, L, W): (reads, hops) per search.
MEASURED_SMALL = {
    (5000, 32, 64, 4): (74.1, 20.74),
    (5000, 32, 64, 16): (94.3, 9.33),
    (5000, 32, 128, 4): (134.3, 35.43),
    (5000, 32, 128, 16): (153.1, 12.9),
    (5000, 32, 32, 4): (43.1, 12.9),
    (5000, 32, 64, 8): (79.2, 12.67),
    (2000, 32, 64, 4): (69.1, 18.87),
    (5000, 16, 64, 4): (76.8, 21.53),
    (5000, 64, 64, 4): (70.0, 19.10),
    (1000, 16, 32, 4): (37.0, 11.23),
}


@pytest.mark.parametrize("nrlw", sorted(MEASURED_SMALL))
def test_model_within_10_percent_on_small_indexes(nrlw):
    n, _, L, W = nrlw
    reads, hops = MEASURED_SMALL[nrlw]
    assert model.reads_per_search(L, W, n) == pytest.approx(reads, rel=0.10)
    assert model.hops_per_search(L, W, n) == pytest.approx(hops, rel=0.10)


@pytest.mark.parametrize("lw", sorted(MEASURED))
def test_model_within_10_percent_of_diskann(lw):
    reads, hops = MEASURED[lw]
    assert model.reads_per_search(*lw, 20_000) == pytest.approx(reads, rel=0.10)
    assert model.hops_per_search(*lw, 20_000) == pytest.approx(hops, rel=0.10)


def test_planned_chains_have_diskann_shape():
    L, W, n = 100, 8, 20_000
    ch = model.plan(3000, L, W, n, 64, 0.1, 0.3, 7)
    sizes = np.diff(ch.read_first).astype(np.int64)
    first_hop = ch.hop_first[:-1].astype(np.int64)
    assert (sizes[first_hop] == 1).all()  # the medoid alone
    assert sizes.max() == W and sizes.min() >= 1
    first_read = ch.read_first[first_hop].astype(np.int64)
    assert (ch.nodes[first_read] == ch.medoid).all()
    assert ch.reads().mean() == pytest.approx(model.reads_per_search(L, W, n), rel=0.02)
    assert ch.hops().mean() == pytest.approx(model.hops_per_search(L, W, n), rel=0.02)
    assert ch.nodes.max() < n and ch.reads().sum() == len(ch.nodes)


def test_hop_sizes_hold_every_read():
    sizes = model.hop_sizes(np.array([1, 9, 10, 13]), np.array([1, 3, 4, 6]), 4)
    assert list(sizes) == [1, 1, 4, 4, 1, 4, 4, 1, 1, 4, 4, 2, 1, 1]


def test_the_second_hop_reads_the_medoids_neighbours_and_locality():
    n, R = 50_000, 32
    ch = model.plan(500, 64, 4, n, R, 0.1, 0.5, 1)
    first_hop = ch.hop_first[:-1].astype(np.int64)
    second = ch.read_first[first_hop + 1].astype(np.int64)
    neighbours = set(model.rank_to_node(np.arange(1, R + 1), n, ch.medoid).tolist())
    assert set(ch.nodes[second].tolist()) <= neighbours
    hot = set(model.rank_to_node(np.arange(0, R + 1 + int(0.1 * n)), n, ch.medoid).tolist())
    share = np.isin(ch.nodes, list(hot)).mean()
    assert 0.5 < share < 0.75  # the medoid, hop 2, and half of the rest in a tenth of the nodes


def test_cache_bitmap_holds_the_lowest_ranks():
    bits = model.cache_bitmap(1000, 17, 100)
    ids = np.nonzero(np.unpackbits(bits, bitorder="little"))[0]
    assert len(ids) == 100 and 17 in ids
    assert set(ids) == set(model.rank_to_node(np.arange(100), 1000, 17).tolist())


def test_rank_to_node_is_a_permutation():
    for n in (7, 1000, 4096, 99_991):
        assert len(np.unique(model.rank_to_node(np.arange(n), n, 3))) == n
