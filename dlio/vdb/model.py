"""The hop and node-id model of a DiskANN search, fitted to real DiskANN, and the chains it plans.

Measured with diskannpy 0.7.0 on uniform L2-normalised vectors (vdbbench's data; inference-storage.md §2.4 at
20k x 1536, R=64, and tests/data/vdb at 5k x 1536, R=32), one query at a time, no node cache:

  - reads per segment search = L + OVERSHOOT * W^0.75 * (100 / L)^0.3 * (1 - exp(-N / N_SAT)): the L best
    candidates are all expanded, plus the expansions that later fell out of the list, more of them the wider
    the beam and the larger the graph (§2.4 at N=20k: 63/111/207 reads at W=4 and L=50/100/200, 86/133/225 at
    W=16, the model 64/111/209 and 88/131/225; at N=5k, R=32: 74.1, 94.3, 134.3, 153.1, 79.2 reads at
    (L, W) = (64, 4), (64, 16), (128, 4), (128, 16), (64, 8), the model 74.2, 92.9, 136.3, 151.5, 81.2; at
    N=2k: 69.1, the model 70.1; at N=1k, R=16, L=32: 37.0, the model 36.4);
  - hops = reads / W + TAIL_A * log2(W) + TAIL_B: the first hop reads the medoid alone, the middle hops W nodes
    each, and the search ends with a few short hops as the list runs out of unexpanded candidates;
  - the first read of every search is the medoid; the second hop reads W of the medoid's R neighbours; later
    reads go to a hot region (hot_fraction of the nodes) with probability hot_share, else anywhere.

A chain is planned per segment search: its read count drawn around the mean (READ_CV), its hops
[1, W, W, ..., W, k, 1, ...] as captured, its nodes as ranks (0 = the medoid, 1..R its neighbours, then the hot
region, then the rest) mapped onto node ids by a fixed permutation of the segment, so that hot nodes lie
scattered over the file as DiskANN's do. The node cache holds the lowest ranks (the nodes most searches visit,
as DiskANN's cache from sample queries does). All in numpy: no Python per read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

OVERSHOOT = 3.9
N_SAT = 3000.0  # the overshoot's growth with the segment's node count saturates past ~10k nodes
TAIL_A, TAIL_B = 0.8, 0.6
FITTED_NODES = 20_000  # the largest segment the model was fitted on (diskannpy, inference-storage.md §2.4)
READ_CV = 0.07  # per-search spread of the read count (the capture: 5.3 / 74.1)
PLAN_READS = 2 << 20  # at most this many reads in a planned pool (8 MiB of node ids; ~1 s to plan): runs cycle


def reads_per_search(L: int, W: int, nodes: float = math.inf) -> float:
    """Mean node reads of one segment search of a segment of `nodes` nodes (no cache)."""
    return L + OVERSHOOT * W**0.75 * (100.0 / L) ** 0.3 * -math.expm1(-nodes / N_SAT)


def hops_per_search(L: int, W: int, nodes: float = math.inf) -> float:
    """Mean hops of one segment search."""
    r = reads_per_search(L, W, nodes)
    if W == 1:
        return r
    return min(r, max(1 + math.ceil((r - 1) / W), r / W + TAIL_A * math.log2(W) + TAIL_B))


@dataclass(frozen=True)
class Chains:
    """Segment searches as flat arrays: search s has hops hop_first[s] .. hop_first[s+1], hop h reads
    nodes[read_first[h] .. read_first[h+1]]."""

    hop_first: np.ndarray  # uint64
    read_first: np.ndarray  # uint64
    nodes: np.ndarray  # uint32
    medoid: int

    @property
    def searches(self) -> int:
        return len(self.hop_first) - 1

    def reads(self) -> np.ndarray:
        return np.diff(self.read_first[self.hop_first.astype(np.int64)]).astype(np.int64)

    def hops(self) -> np.ndarray:
        return np.diff(self.hop_first).astype(np.int64)

    @property
    def max_hop(self) -> int:
        return int(np.diff(self.read_first).max())


def medoid_of(nodes: int, seed: int) -> int:
    return int((seed * 2654435761 + 12345) % nodes)


def _stride(nodes: int) -> int:
    """A step coprime with the node count: rank -> node id is a permutation that scatters the ranks."""
    p = int(nodes * 0.6180339887) | 1
    while math.gcd(p, nodes) != 1:
        p += 2
    return p % nodes or 1


def rank_to_node(ranks: np.ndarray, nodes: int, medoid: int) -> np.ndarray:
    r = np.asarray(ranks, dtype=np.uint64) % np.uint64(nodes)
    return ((np.uint64(medoid) + r * np.uint64(_stride(nodes))) % np.uint64(nodes)).astype(np.uint32)


def hop_sizes(reads: np.ndarray, hops: np.ndarray, W: int) -> np.ndarray:
    """Reads per hop, search after search: [1, W, ..., W, k, 1, ..., 1] (the medoid, full beams, the short
    tail). reads[s] >= hops[s] >= 1 + ceil((reads[s] - 1) / W)."""
    reads = np.asarray(reads, dtype=np.int64)
    hops = np.asarray(hops, dtype=np.int64)
    extra = reads - hops  # reads beyond one per hop, spread front-first, W - 1 more per hop at most
    full = extra // (W - 1) if W > 1 else np.zeros_like(extra)
    rem = extra - full * (W - 1) if W > 1 else np.zeros_like(extra)
    has_rem = (rem > 0).astype(np.int64)
    ones = hops - 1 - full - has_rem
    values = np.stack([np.ones_like(reads), np.full_like(reads, W), 1 + rem, np.ones_like(reads)], axis=1)
    counts = np.stack([np.ones_like(reads), full, has_rem, ones], axis=1)
    return np.repeat(values.ravel(), counts.ravel())


def plan(
    searches: int,
    L: int,
    W: int,
    nodes: int,
    degree: int,
    hot_fraction: float,
    hot_share: float,
    seed: int,
) -> Chains:
    """A pool of `searches` segment searches on a segment of `nodes` nodes."""
    rng = np.random.default_rng([seed, 28])
    mean_r, mean_h = reads_per_search(L, W, nodes), hops_per_search(L, W, nodes)
    reads = np.maximum(1, np.rint(mean_r * (1 + READ_CV * rng.standard_normal(searches)))).astype(np.int64)
    lo = 1 + -(-(reads - 1) // W)
    hops = np.clip(np.rint(reads / W + (mean_h - mean_r / W)).astype(np.int64), lo, reads)
    sizes = hop_sizes(reads, hops, W)
    hop_first = np.zeros(searches + 1, dtype=np.uint64)
    hop_first[1:] = np.cumsum(hops)
    read_first = np.zeros(len(sizes) + 1, dtype=np.uint64)
    read_first[1:] = np.cumsum(sizes)

    # Each read's position in its search, and which hop of it: hop 0 is the medoid, hop 1 its neighbours.
    n = int(read_first[-1])
    search_of_read = np.repeat(np.arange(searches), reads)
    pos = np.arange(n) - np.repeat(read_first[hop_first[:-1].astype(np.int64)].astype(np.int64), reads)
    second = (pos >= 1) & (pos < 1 + np.repeat(sizes[hop_first[:-1].astype(np.int64) + 1 * (hops > 1)], reads))
    second &= np.repeat(hops > 1, reads)
    R = max(1, min(degree, nodes - 1))
    start = rng.integers(0, R, searches)
    ranks = np.zeros(n, dtype=np.int64)
    ranks[second] = 1 + (start[search_of_read[second]] + pos[second] - 1) % R
    later = pos >= 1
    later &= ~second
    rest = max(1, nodes - 1 - R)
    u = rng.random(n)
    hot = rng.random(n) < hot_share
    span = np.where(hot, max(1.0, hot_fraction * rest), rest)
    ranks[later] = 1 + R + (u[later] * span[later]).astype(np.int64) % rest
    medoid = medoid_of(nodes, seed)
    return Chains(hop_first, read_first, rank_to_node(ranks, nodes, medoid), medoid)


def pool_size(queries_hint: int, segments: int, L: int, W: int) -> int:
    """Searches to plan: enough for the run's segment searches, bounded by PLAN_READS reads."""
    cap = max(64, int(PLAN_READS // max(1.0, reads_per_search(L, W))))
    return int(max(1, min(cap, queries_hint * segments if queries_hint else cap)))


def cache_bitmap(nodes: int, medoid: int, cached: int) -> np.ndarray:
    """The node cache: the `cached` lowest ranks (the medoid and the nodes most searches visit) as a bitmap."""
    bits = np.zeros((nodes + 7) // 8, dtype=np.uint8)
    if cached > 0:
        ids = rank_to_node(np.arange(min(cached, nodes)), nodes, medoid).astype(np.int64)
        np.bitwise_or.at(bits, ids >> 3, (1 << (ids & 7)).astype(np.uint8))
    return bits
