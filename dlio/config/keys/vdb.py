"""Vector search's keys (dlio.vdb): Milvus's DiskANN / AISAQ / HNSW indexes on storage, run with
``workflow.vdb`` (MLPerf Storage v3 §5)."""

from __future__ import annotations

from typing import Tuple

from dlio.config.keys.row import Key

VDB_INDEXES = ("diskann", "aisaq_perf", "aisaq_scale", "hnsw")

# the flag, among DLIO's workflow keys in the resolved config (after workflow.query)
WORKFLOW = Key(
    "workflow.vdb", "bool", False, "vector search on storage (the vdb.* keys; MLPerf Storage v3 §5)", io=True
)

KEYS: Tuple[Key, ...] = (
    Key(
        "vdb.index",
        "enum",
        "diskann",
        "index kind; hnsw touches storage only to write and load it",
        choices=VDB_INDEXES,
        io=True,
    ),
    Key("vdb.vectors", "int", 1_000_000, "vectors in the collection", lo=1, hi=1e11, io=True),
    Key("vdb.dimension", "int", 1536, "vector dimension", lo=1, hi=65536, io=True),
    Key("vdb.dtype_bytes", "int", 4, "bytes per vector element (4 float32, 2 float16, 1 int8)", lo=1, hi=8, io=True),
    Key("vdb.max_degree", "int", 64, "graph degree R (neighbour ids per node)", lo=1, hi=1024, io=True),
    Key(
        "vdb.search_list",
        "int",
        200,
        "search list size L (Milvus search_list, vdbbench --search-ef)",
        lo=1,
        hi=100000,
        io=True,
    ),
    Key(
        "vdb.beam_width",
        "int",
        0,
        "beam width W: node reads per hop (0: Milvus's min(16, 4 x cores))",
        lo=0,
        hi=512,
        io=True,
    ),
    Key(
        "vdb.segment_max_mb",
        "int",
        2048,
        "Milvus dataCoord.segment.diskSegmentMaxSize: raw MiB per segment",
        lo=1,
        hi=2**30,
        io=True,
    ),
    Key(
        "vdb.segments",
        "int",
        0,
        "index segments (0: raw vectors / segment_max_mb, rounded up)",
        lo=0,
        hi=100000,
        io=True,
    ),
    Key(
        "vdb.cache_ratio",
        "float",
        0.0,
        "share of each segment's nodes in the node cache (RAM): the most visited, near the medoid",
        lo=0,
        hi=1,
        io=True,
    ),
    Key(
        "vdb.hot_fraction",
        "float",
        0.1,
        "locality: the hot region's share of the nodes (the medoid is always hot)",
        lo=0,
        hi=1,
        io=True,
    ),
    Key(
        "vdb.hot_share",
        "float",
        0.3,
        "locality: share of the reads past the second hop that go to the hot region (0: uniform)",
        lo=0,
        hi=1,
        io=True,
    ),
    Key("vdb.processes", "int", 1, "query processes P (vdbbench --processes)", lo=1, hi=4096, io=True),
    Key("vdb.batch", "int", 1, "queries per search() call of each process", lo=1, hi=65536, io=True),
    Key(
        "vdb.search_threads",
        "int",
        0,
        "the query node's search pool (0: Milvus's for disk indexes, 4 x usable cores)",
        lo=0,
        hi=4096,
        io=True,
    ),
    Key(
        "vdb.storage_only",
        "bool",
        False,
        "storage-only chains: no CPU per hop, so the QPS is the storage's ceiling for these chains, not Milvus's",
        io=True,
    ),
    Key("vdb.top_k", "int", 10, "neighbours returned per query (no I/O of its own)", lo=1, hi=100000),
    Key("vdb.duration", "float", 60.0, "seconds per timed run (0: vdb.queries decides)", lo=0, hi=1e6, io=True),
    Key("vdb.queries", "int", 0, "queries per timed run (0: vdb.duration decides)", lo=0, hi=1e12, io=True),
    Key("vdb.runs", "int", 5, "timed runs (MLPerf Storage's rules want 5)", lo=1, hi=1000, io=True),
    Key(
        "vdb.cpu_per_hop_us",
        "float",
        -1.0,
        "CPU spun after each hop (distance computations), microseconds (-1: DiskANN's, 55 us measured at "
        "1536-d R=64, scaled by dimension x R; vdb.storage_only: none)",
        lo=-1,
        hi=1e7,
        io=True,
    ),
    Key(
        "vdb.inline_pq",
        "int",
        -1,
        "aisaq_perf: neighbours whose PQ codes are in the node (-1: max_degree)",
        lo=-1,
        hi=1024,
        io=True,
    ),
    Key(
        "vdb.pq_bytes",
        "int",
        0,
        "PQ code bytes per vector (0: Milvus's budget, 0.125 x the raw vector)",
        lo=0,
        hi=65536,
        io=True,
    ),
    Key(
        "vdb.pq_reads_per_hop",
        "int",
        2,
        "aisaq_scale: PQ page reads per hop (knowhere vectors_beamwidth)",
        lo=0,
        hi=64,
        io=True,
    ),
    Key(
        "vdb.trace",
        "str",
        None,
        "replay this capture of real DiskANN (bench/vdb_capture.py) instead of the model",
        nullable=True,
        io=True,
    ),
    Key(
        "vdb.index_folder",
        "str",
        "data/vdb",
        "where the index files are written (kept between runs when they match)",
        io=True,
    ),
    Key("vdb.seed", "int", 42, "seed of the model's chains and the index content", lo=0, hi=2**32 - 1),
)
