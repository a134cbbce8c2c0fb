"""The vdb.* keys of a resolved config -> a VdbSpec: the layout, the segments, the beam, the load, the files."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

from dlio.base.errors import ConfigError
from dlio.base.same_names import build_from
from dlio.config import Config
from dlio.config.engines import resolve as resolve_engine
from dlio.config.sections import VdbConfig
from dlio.system.counters import usable_cores
from dlio.vdb.layout import Layout

PQ_RATIO = 0.125  # Milvus PQCodeBudgetGBRatio: PQ bytes per vector = 0.125 x the raw vector
MAX_SEGMENT_NODES = 2**32 - 1  # node ids are uint32 in DiskANN and here
MAX_FILES = 100_000


@dataclass(frozen=True)
class VdbSpec:
    layout: Layout
    search_list: int
    beam_width: int
    beam_width_note: str
    cache_ratio: float
    hot_fraction: float
    hot_share: float
    processes: int
    batch: int
    search_threads: int
    top_k: int
    duration_s: float
    queries: int
    runs: int
    cpu_per_hop_ns: int
    cpu_note: str  # where the CPU per hop comes from: "set", "storage-only", or the scaled measurement
    pq_reads_per_hop: int
    trace: Optional[str]
    folder: str
    seed: int
    engine: str  # C engine
    direct: bool
    null_delay_ns: int
    compute_mode: int

    @property
    def searches(self) -> bool:
        """HNSW searches in memory: its run is the index's write and load only."""
        return self.layout.kind != "hnsw"

    def index_paths(self) -> List[str]:
        name = "_hnsw.index" if self.layout.kind == "hnsw" else "_disk.index"
        return [os.path.join(self.folder, f"segment_{s:05d}", name) for s in range(self.layout.segments)]

    def pq_paths(self) -> List[str]:
        if self.layout.kind != "aisaq_scale":
            return []
        return [
            os.path.join(self.folder, f"segment_{s:05d}", "_pq_rearranged.bin") for s in range(self.layout.segments)
        ]


# Milvus's search pool for disk indexes: GOMAXPROCS x queryNode.segcore.knowhereThreadPoolNumRatio (4)
SEARCH_POOL_RATIO = 4
# DiskANN's CPU per hop (the PQ distances of W x R neighbours and the full ones), measured with diskannpy 0.7.0
# at 1536-d, R=64 (bench/vdb_vs_diskann.py prints it for a host); it scales with dimension x R
CPU_PER_HOP_US, CPU_PER_HOP_SHAPE = 55.0, 1536 * 64


def cpu_per_hop_us(cfg: Config, layout: Layout) -> Tuple[float, str]:
    """The CPU spun after each hop and where it comes from: vdb.cpu_per_hop_us as set, none for storage-only
    chains, else DiskANN's measured figure scaled to this index's dimension x R."""
    v = cfg.section(VdbConfig)
    if v.storage_only:
        if v.cpu_per_hop_us > 0:
            raise _bad("vdb.cpu_per_hop_us", v.cpu_per_hop_us, "vdb.storage_only chains spin no CPU per hop; set one")
        return 0.0, "storage-only"
    if v.cpu_per_hop_us >= 0:
        return float(v.cpu_per_hop_us), "set"
    us = CPU_PER_HOP_US * layout.dimension * layout.degree / CPU_PER_HOP_SHAPE
    return us, (
        f"DiskANN's {CPU_PER_HOP_US:g} us measured at 1536-d R=64 (diskannpy on a 2-core VM) scaled to "
        f"{layout.dimension}-d R={layout.degree}: {us:.1f} us (vdb.cpu_per_hop_us sets this host's; "
        "bench/vdb_vs_diskann.py measures it)"
    )


def _bad(key: str, value: Any, problem: str) -> ConfigError:
    return ConfigError(f"{key} = {value}: {problem}", key, value)


def vdb_spec(cfg: Config) -> VdbSpec:
    """The VdbSpec of a resolved config with workflow.vdb; ConfigError (one line, the key) when it cannot run."""
    v = cfg.section(VdbConfig)
    raw = v.vectors * v.dimension * v.dtype_bytes
    segments = v.segments or max(1, math.ceil(raw / (v.segment_max_mb * 2**20)))
    if segments > min(v.vectors, MAX_FILES):
        raise _bad("vdb.segments", segments, f"more segments than vectors or than {MAX_FILES} files")
    if -(-v.vectors // segments) > MAX_SEGMENT_NODES:
        raise _bad("vdb.segments", segments, "a segment would hold more than 2^32 - 1 nodes; use more segments")
    pq = v.pq_bytes or max(1, math.ceil(v.dimension * v.dtype_bytes * PQ_RATIO))
    inline = v.max_degree if v.inline_pq < 0 else v.inline_pq
    if inline > v.max_degree:
        raise _bad("vdb.inline_pq", inline, f"more inline PQ codes than neighbours (vdb.max_degree {v.max_degree})")
    layout = Layout(v.index, v.vectors, v.dimension, v.dtype_bytes, v.max_degree, segments, inline, pq)
    cores = usable_cores()
    cpu_us, cpu_note = cpu_per_hop_us(cfg, layout)
    if v.beam_width:
        w, note = v.beam_width, "vdb.beam_width"
    else:  # milvus internal/util/indexparams/disk_index_params.go: min(16, nCPU x BeamWidthRatio 4.0)
        w, note = min(16, 4 * cores), f"Milvus's min(16, 4 x {cores} cores)"
    if v.index != "hnsw" and not v.duration and not v.queries:
        raise _bad("vdb.duration", 0, "with vdb.queries 0 nothing ends a run; give one of them")
    engine, direct = resolve_engine(cfg.dlio_fast.engine)
    if engine == "mmap":
        raise _bad("dlio_fast.engine", cfg.dlio_fast.engine, "DiskANN reads its index with O_DIRECT; use io_uring")
    folder = os.path.join(
        v.index_folder,
        f"{v.index}-n{v.vectors}-d{v.dimension}x{v.dtype_bytes}-r{v.max_degree}-s{segments}"
        + (f"-pq{pq}" if v.index.startswith("aisaq") else "")
        + (f"-i{inline}" if v.index == "aisaq_perf" else ""),
    )
    # every other field is the vdb key of its name, as loaded
    return build_from(
        VdbSpec,
        v,
        layout=layout,
        beam_width=w,
        beam_width_note=note,
        search_threads=v.search_threads or SEARCH_POOL_RATIO * cores,
        duration_s=v.duration,
        cpu_per_hop_ns=int(round(cpu_us * 1000)),
        cpu_note=cpu_note,
        pq_reads_per_hop=v.pq_reads_per_hop if v.index == "aisaq_scale" else 0,
        folder=folder,
        engine=engine,
        direct=engine != "null",  # DiskANN opens its index O_DIRECT whatever the engine word says
        null_delay_ns=cfg.dlio_fast.null_delay_ns,
        compute_mode=1 if cfg.dlio_fast.compute_mode == "hybrid" else 0,
    )
