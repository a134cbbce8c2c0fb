"""The KV-cache offload workload's keys (MLPerf Storage v3 KVCache; dlio.kvcache), with its
``workflow.kvcache`` flag.  The reference is mlcommons/storage kv_cache_benchmark, whose option names are
in the help.  Sizes are strings with units (4GiB) or byte counts."""

from __future__ import annotations

from typing import Tuple

from dlio.config.keys.row import Key

SECTION = "kvcache"  # its section and its workflow.kvcache flag (dlio.config.families)

KV_IO_MODES = ("compat", "direct", "null")
KV_TRACE_FORMATS = ("auto", "csv", "mooncake", "sharegpt")
KEYS: Tuple[Key, ...] = (
    Key(
        "workflow.kvcache",
        "bool",
        False,
        "run the KV-cache offload workload (kvcache.*) instead of training; set with workflow.train: false",
        io=True,
    ),
    Key(
        "kvcache.model",
        "str",
        "llama3.1-8b",
        "model whose KV bytes per token size the entries (dlio.kvcache.models: llama3.1-8b, llama3.1-70b-instruct, "
        "...); kvcache.layers/kv_heads/head_dim/dtype_bytes override it (--model)",
        io=True,
    ),
    Key(
        "kvcache.layers", "int", 0, "explicit model: transformer layers (0: the named model's)", lo=0, hi=4096, io=True
    ),
    Key("kvcache.kv_heads", "int", 0, "explicit model: key/value heads (0: the named model's)", lo=0, hi=4096, io=True),
    Key("kvcache.head_dim", "int", 0, "explicit model: head dimension (0: the named model's)", lo=0, hi=65536, io=True),
    Key(
        "kvcache.dtype_bytes", "int", 0, "explicit model: bytes per element (0: the named model's)", lo=0, hi=8, io=True
    ),
    Key("kvcache.users", "int", 100, "simulated users per rank (--num-users)", lo=1, hi=100000, io=True),
    Key(
        "kvcache.workers",
        "int",
        0,
        "request-processing threads per rank (0: min(users, 500), as the reference)",
        lo=0,
        hi=4096,
        io=True,
    ),
    Key(
        "kvcache.duration",
        "float",
        60.0,
        "seconds of requests per trial (--duration); a trace replay ends here or with the trace",
        lo=0.001,
        hi=86400,
        io=True,
    ),
    Key(
        "kvcache.seed",
        "int",
        42,
        "seed of the users, conversations and sizes (--seed); rank N draws its users from seed + N, as the "
        "reference's MPI wrapper seeds each client",
        lo=0,
        hi=2**32 - 1,
        io=True,
    ),
    Key("kvcache.trials", "int", 1, "trials per run, results averaged as the rules say (CLOSED: 3)", lo=1, hi=100),
    Key(
        "kvcache.trial_gap",
        "float",
        0.0,
        "seconds every rank idles before and after each trial (the reference's MLPerf wrapper: TEST_DELAY 90, so "
        "180 s between trials), letting the storage settle after the previous trial's deletes",
        lo=0,
        hi=86400,
    ),
    Key(
        "kvcache.templates",
        "map",
        None,
        "user templates {name: {context: [lo, hi], generation: [lo, hi], think: [lo, hi] seconds}} (default: the "
        "reference's chatbot, coding, document)",
        nullable=True,
        io=True,
    ),
    Key("kvcache.qos_interactive", "float", 0.15, "share of interactive users (priority 3)", lo=0, hi=1, io=True),
    Key(
        "kvcache.qos_responsive",
        "float",
        0.35,
        "share of responsive users (priority 2); the rest are batch",
        lo=0,
        hi=1,
        io=True,
    ),
    Key("kvcache.multiturn", "bool", True, "multi-turn conversations (--disable-multi-turn: false)", io=True),
    Key(
        "kvcache.multiturn_end",
        "float",
        0.2,
        "probability that a conversation ends before each next turn",
        lo=0,
        hi=1,
        io=True,
    ),
    Key("kvcache.max_turns", "int", 50, "turns after which a conversation ends", lo=1, hi=100000, io=True),
    Key(
        "kvcache.max_conversations",
        "int",
        1000,
        "conversations remembered, the least recently used forgotten (config.yaml conversation.max_conversations): "
        "a later turn served after its conversation was forgotten reads no earlier turn, and a user continuing a "
        "forgotten conversation stops, as in the reference; 0: remember every conversation",
        lo=0,
        hi=2**32 - 2,
        io=True,
    ),
    Key(
        "kvcache.decode_batch",
        "int",
        32,
        "tokens per decode read: a request reads its entry 1 + ceil(gen/batch) times",
        lo=1,
        hi=1 << 20,
        io=True,
    ),
    Key(
        "kvcache.prefix_probe",
        "float",
        0.2,
        "probability of the system-prompt probe (a lookup that misses)",
        lo=0,
        hi=1,
        io=True,
    ),
    Key(
        "kvcache.prefill_only_tokens",
        "int",
        10000,
        "requests with at least this many context tokens only write (no decode reads)",
        lo=1,
        io=True,
    ),
    Key(
        "kvcache.max_concurrent_allocs",
        "int",
        0,
        "allocations (writes, with their demotions and evictions) at once (0: unlimited, one per worker)",
        lo=0,
        hi=4096,
        io=True,
    ),
    Key("kvcache.cpu_bytes", "str", "0", "RAM tier per rank, e.g. 4GiB (0: none; --cpu-mem-gb)", io=True),
    Key(
        "kvcache.eviction_target",
        "float",
        0.8,
        "a tier above the bottom one is kept under this share",
        lo=0.01,
        hi=1,
        io=True,
    ),
    Key(
        "kvcache.eviction_skip",
        "float",
        0.95,
        "an entry over this share of such a tier skips it",
        lo=0.01,
        hi=1,
        io=True,
    ),
    Key(
        "kvcache.storage_capacity",
        "str",
        "0",
        "storage tier per rank, e.g. 500GiB (0: the smaller of 64 GiB and half the cache folder's free space; the "
        "reference's 95% fills a shared disk; --storage-capacity-gb)",
        io=True,
    ),
    Key(
        "kvcache.io_mode",
        "enum",
        "compat",
        "compat: the reference's buffered syscalls (write + fsync; fadvise DONTNEED + read); direct: O_DIRECT "
        "through io_uring (the device's figures); null: no I/O, the decisions only (the reference's trace mode)",
        choices=KV_IO_MODES,
        io=True,
    ),
    Key(
        "kvcache.cache_dir",
        "str",
        "./kvcache",
        "cache folder on the storage under test; each rank uses rank_N/ in it",
        io=True,
    ),
    Key(
        "kvcache.chunk_tokens",
        "int",
        0,
        "chunked layout: one file per this many tokens of an entry (LMCache: 256; 0: one file per entry)",
        lo=0,
        hi=1 << 24,
        io=True,
    ),
    Key(
        "kvcache.direct_chunk", "str", "8MiB", "direct mode: bytes per O_DIRECT transfer (a multiple of 4 KiB)", io=True
    ),
    Key("kvcache.direct_qd", "int", 4, "direct mode: transfers in flight per worker", lo=1, hi=256, io=True),
    Key(
        "kvcache.stage_bytes",
        "str",
        "auto",
        "compat mode: staging buffer per allocation, where an entry is made before its one write(); a larger "
        "entry is written in pieces of this size (auto: the largest entry, within a quarter of the host's RAM)",
        io=True,
    ),
    Key(
        "kvcache.generation_mode",
        "enum",
        "none",
        "emulated token generation after a request's I/O: none 0, fast 2 ms, realistic 30 ms per token",
        choices=("none", "fast", "realistic"),
        io=True,
    ),
    Key(
        "kvcache.trace",
        "str",
        None,
        "replay a trace instead of synthetic users: the reference's --io-trace-log CSV[.gz|.zst], a Mooncake JSONL, "
        "or a ShareGPT JSON",
        nullable=True,
        io=True,
    ),
    Key(
        "kvcache.trace_format",
        "enum",
        "auto",
        "the trace's format (auto: from its name and first bytes)",
        choices=KV_TRACE_FORMATS,
    ),
    Key(
        "kvcache.trace_timing",
        "enum",
        "timestamps",
        "replay at the trace's timestamps, or asap (every request queued at the start)",
        choices=("timestamps", "asap"),
        io=True,
    ),
    Key("kvcache.request_rate", "float", 0.0, "ShareGPT: requests per second (0: as fast as possible)", lo=0, io=True),
    Key("kvcache.block_tokens", "int", 512, "Mooncake: tokens per block hash id", lo=1, hi=1 << 20, io=True),
    Key(
        "kvcache.io_trace_log",
        "str",
        None,
        "also write this run's operations as the reference's --io-trace-log CSV (Timestamp,Operation,...)",
        nullable=True,
    ),
    Key(
        "kvcache.drop_check", "int", 16, "compat: check every Nth read's page-cache drop with mincore (0: never)", lo=0
    ),
)
