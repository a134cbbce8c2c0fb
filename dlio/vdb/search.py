"""The search phase: the chains (the model's, or a capture's), the node cache, and one timed C run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from dlio import _core
from dlio.system.counters import Phase
from dlio.vdb import model, trace
from dlio.vdb.config import VdbSpec
from dlio.vdb.model import Chains


@dataclass(frozen=True)
class Plan:
    chains: Chains
    source: str  # "model" or the trace file
    beam_width: int  # the run's (a capture may have wider hops than vdb.beam_width)
    cache: Optional[np.ndarray]  # bitmap over node ids
    cached_nodes: int


def _scaled(tr: trace.Trace, nodes: int) -> Tuple[np.ndarray, int]:
    """A capture's node ids on a segment of `nodes` nodes: stretched, so the medoid and hot region keep their place."""
    n0 = int(tr.params.get("vectors") or (tr.nodes.max() + 1))
    if n0 == nodes:
        return tr.nodes.astype(np.uint32), tr.medoid
    return (tr.nodes * nodes // n0).astype(np.uint32), tr.medoid * nodes // n0


def plan(spec: VdbSpec) -> Plan:
    """The pool of segment searches the runs take in turn, and the node cache."""
    nodes = spec.layout.nodes_in(0)
    cache_n = int(spec.cache_ratio * nodes)
    if spec.trace:
        tr = trace.load(spec.trace)
        ids, medoid = _scaled(tr, nodes)
        chains = Chains(tr.hop_first.astype(np.uint64), tr.read_first.astype(np.uint64), ids, medoid)
        cache = None
        if cache_n:  # DiskANN's cache from sample queries: the nodes the searches read most
            top = np.argsort(-np.bincount(ids.astype(np.int64), minlength=nodes), kind="stable")[:cache_n]
            cache = np.zeros((nodes + 7) // 8, dtype=np.uint8)
            np.bitwise_or.at(cache, top >> 3, (1 << (top & 7)).astype(np.uint8))
        return Plan(chains, spec.trace, max(spec.beam_width, chains.max_hop), cache, cache_n)
    hint = spec.queries * spec.runs
    size = model.pool_size(hint, spec.layout.segments, spec.search_list, spec.beam_width)  # bounded
    chains = model.plan(
        size,
        spec.search_list,
        spec.beam_width,
        nodes,
        spec.layout.degree,
        spec.hot_fraction,
        spec.hot_share,
        spec.seed,
    )
    cache = model.cache_bitmap(nodes, chains.medoid, cache_n) if cache_n else None
    return Plan(chains, "model", spec.beam_width, cache, cache_n)


def timed_run(
    spec: VdbSpec,
    p: Plan,
    index_paths: List[str],
    pq_paths: List[str],
    run: int,
    on_tick: Optional[Callable[[Any], None]] = None,
    rank: int = 0,
    size: int = 1,
) -> Tuple[Optional[Dict[str, Any]], Optional[BaseException], Dict[str, Any]]:
    """One timed run: (C result, failure, the phase's counters). Runs start at different chains of the pool
    (p: this rank's share of it, dlio.vdb.ranks.share); rank `rank` of `size` searches its part of a query
    budget, its clients seeded apart from every other rank's and run's."""
    from dlio.system.execute import execute_partial
    from dlio.vdb.ranks import queries_of

    lay = spec.layout
    c = p.chains
    phase = Phase(index_paths + pq_paths, spec.engine, residency=False)
    vr = _core.VdbRun(
        spec.engine,
        index_paths,
        [lay.nodes_in(s) for s in range(lay.segments)],
        c.hop_first,
        c.read_first,
        c.nodes,
        beam_width=p.beam_width,
        read_bytes=lay.read_bytes,
        nodes_per_sector=lay.nodes_per_sector,
        direct=spec.direct,
        pq_paths=pq_paths or None,
        pq_pages=[lay.pq_file_bytes(s) // 4096 for s in range(lay.segments)] if pq_paths else None,
        pq_reads_per_hop=spec.pq_reads_per_hop,
        cached=p.cache,
        cached_bits=lay.nodes_in(0) if p.cache is not None else 0,
        first_search=(run * 7919) % c.searches,
        cpu_per_hop_ns=spec.cpu_per_hop_ns,
        compute_mode=spec.compute_mode,
        seed=spec.seed + run + rank * spec.runs,
        clients=spec.processes,
        batch=spec.batch,
        search_threads=spec.search_threads,
        queries=queries_of(spec.queries, rank, size),
        runtime_ns=int(spec.duration_s * 1e9) if not spec.queries else 0,
        delay_ns=spec.null_delay_ns,
        # registered buffers and files: no page pinning or file lookup per read
        eng_flags=_core.ENG_REGBUFS | _core.ENG_REGFILES if spec.engine == "io_uring" else 0,
    )
    res, failure = execute_partial(vr, on_tick)
    counters = {}
    if res is not None:
        counters = phase.end(res["bytes"], res["reads"], res["search_cpu_ns"] / 1e9, spec.search_threads)
    return res, failure, counters
