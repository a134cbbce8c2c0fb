"""The DLIO workload schema, declared once, as data.

Every key DLIO's current main branch parses (``LoadConfig`` in ``utils/config.py``) is one ``Key`` row
here, under its current dotted name, with DLIO's *code* default (not the docs' one), the allowed values
and a one-line help.  ``config.py`` builds the frozen section dataclasses, the validation, the
environment table and the resolved-config writer from this table and from nothing else.

Rows marked ``io=True`` change the I/O that reaches storage (DLIO's ★); the others are parsed, kept
and written back, and change nothing for the I/O (labels, plugin class names, DLIO's unused keys).

The 2.0.0 dialect (DLIO's PyPI release, what MLPerf Storage v1 ran) is ``LEGACY``: old dotted name ->
current dotted name.  ``model.model_size`` is in that table too: DLIO's current code ignores it (its
key is ``model_size_bytes``), so unet3d's checkpoint is 10 KB in DLIO; dlio-fast honours it.

Types:
  int, float      numbers; ``num`` keeps an int an int and a float a float (record sizes)
  bool, str
  enum            one of ``choices``, compared case-insensitively, normalised to the spelling here
  ints, strs      lists (``strs`` also accepts one string)
  map             a mapping (or null)
  records         a list of mappings (parquet's columns)
  time            a DLIO time distribution (scalar, {mean[, stdev]}, {type: ...}), see dlio.config.timespec.TimeSpec
  stdev           DLIO's ``*_stdev`` sibling of a time key; folded into it, not a field of its own
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Optional, Tuple

from dlio.config import engines

_EMPTY: Mapping[str, str] = MappingProxyType({})

# The two DLIO versions whose configs, data and result files dlio-fast interchanges with.
DIALECTS = ("2.0.0", "current")


@dataclass(frozen=True)
class Key:
    """One configuration key.  ``path`` is its current dotted name, e.g. ``dataset.num_files_train``."""

    path: str
    type: str
    default: Any
    help: str
    choices: Tuple[str, ...] = ()
    lo: Optional[float] = None  # inclusive lower bound (numbers, and each list element)
    hi: Optional[float] = None  # inclusive upper bound
    nullable: bool = False  # None (YAML null) is a valid value
    env: Optional[str] = None  # environment variable that sets it
    io: bool = False  # changes the I/O that reaches storage
    aliases: Mapping[str, str] = field(default_factory=lambda: _EMPTY)  # extra enum spellings -> canonical
    note: str = ""  # where dlio-fast deliberately differs from DLIO

    @property
    def section(self) -> str:
        return self.path.rpartition(".")[0]

    @property
    def name(self) -> str:
        return self.path.rpartition(".")[2]

    @property
    def hidden(self) -> bool:
        """Folded into another key: no attribute, not written by ``to_dict``."""
        return self.type == "stdev"


# Enum value sets (DLIO's Enums, minus the members that have no implementation).
FORMATS = (
    "tfrecord",
    "hdf5",
    "csv",
    "npz",
    "npy",
    "jpeg",
    "png",
    "indexed_binary",
    "mmap_indexed_binary",
    "synthetic",
    "parquet",  # MLPerf Storage's DLIO (mlcommons/DLIO_local_changes): dlrm_b200, flux_b200
)
FRAMEWORKS = ("tensorflow", "pytorch")
DATA_LOADERS = ("pytorch", "tensorflow", "dali", "native_dali", "synthetic")
SHUFFLES = ("off", "seed", "random")
DATATYPES = ("fp16", "bf16", "fp32", "fp64", "int8", "uint8")
COMPRESSIONS = ("none", "gzip", "lzf", "bz2", "zip", "xz", "snappy", "lz4", "zstd")  # the last three: parquet's
PROFILERS = ("none", "iostat", "darshan", "tensorboard")
STORAGE_TYPES = ("local_fs", "s3", "aistore")
TIME_TYPES = ("normal", "uniform", "gamma", "exponential", "poisson")

# YAML 1.1 reads `off`/`no` as False and `on`/`yes` as True; for these keys that means the named value.
_SHUFFLE_ALIASES = MappingProxyType({"false": "off", "true": "seed", "none": "off", "0": "off"})
_NONE_ALIASES = MappingProxyType({"false": "none", "off": "none", "no": "none"})


# The KV-cache workload's keys (dlio.kvcache; the reference is mlcommons/storage kv_cache_benchmark, whose
# option names are in the help). Sizes are strings with units (4GiB) or byte counts.
KV_IO_MODES = ("compat", "direct", "null")
KV_TRACE_FORMATS = ("auto", "csv", "mooncake", "sharegpt")
KVCACHE_KEYS: Tuple[Key, ...] = (
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
    Key("kvcache.seed", "int", 42, "seed of the users, conversations and sizes (--seed)", lo=0, hi=2**32 - 1, io=True),
    Key("kvcache.trials", "int", 1, "trials per run, results averaged as the rules say (CLOSED: 3)", lo=1, hi=100),
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
        "storage tier per rank, e.g. 500GiB (0: 95% of the cache folder's free space; --storage-capacity-gb)",
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

K = Key
KEYS: Tuple[Key, ...] = (
    # ---- framework (top-level scalar) ----
    K(
        "framework",
        "enum",
        "tensorflow",
        "tensorflow or pytorch: selects the checkpoint mechanism (tf_save / pt_save)",
        choices=FRAMEWORKS,
    ),
    # ---- model (drives checkpoint size only) ----
    K("model.name", "str", "default", "model label (DLIO's hydra log dir)"),
    K(
        "model.type",
        "str",
        None,
        "model kind label; 'transformer' sizes the checkpoint from model.transformer",
        nullable=True,
    ),
    K(
        "model.model_size_bytes",
        "int",
        10240,
        "size of the int8 'model' tensor of a non-transformer checkpoint",
        lo=0,
        io=True,
        note="the legacy model.model_size is honoured (DLIO ignores it)",
    ),
    K("model.model_datatype", "enum", "fp16", "dtype of transformer model state", choices=DATATYPES, io=True),
    K("model.optimizer_datatype", "enum", "fp32", "dtype of optimizer state", choices=DATATYPES, io=True),
    K("model.num_layers", "int", -1, "transformer layers (-1: none)", lo=-1, io=True),
    K("model.layer_parameters", "ints", (), "legacy explicit per-layer tensor sizes", lo=0, io=True),
    K("model.optimization_groups", "ints", (), "legacy explicit optimizer group sizes", lo=0, io=True),
    K("model.parallelism.tensor", "int", 1, "tensor parallelism", lo=1, io=True),
    K("model.parallelism.pipeline", "int", 1, "pipeline parallelism", lo=1, io=True),
    K(
        "model.parallelism.data",
        "int",
        -1,
        "data parallelism (subset checkpoint mode only; -1: derived)",
        lo=-1,
        io=True,
    ),
    K("model.parallelism.zero_stage", "int", 0, "DeepSpeed ZeRO stage", lo=0, hi=3, io=True),
    K("model.transformer.vocab_size", "int", 32000, "vocabulary size", lo=1, io=True),
    K("model.transformer.hidden_size", "int", 2048, "hidden size H", lo=1, io=True),
    K(
        "model.transformer.ffn_hidden_size",
        "int",
        8192,
        "FFN hidden size (code default 8192; DLIO docs say 8196)",
        lo=1,
        io=True,
    ),
    K("model.transformer.num_attention_heads", "int", 32, "attention heads", lo=1, io=True),
    K("model.transformer.num_kv_heads", "int", 8, "key/value heads", lo=1, io=True),
    # ---- workflow ----
    K("workflow.generate_data", "bool", False, "generate the dataset before training", io=True),
    K("workflow.train", "bool", True, "run the epoch loop (False + checkpoint: checkpoint-only run)", io=True),
    K("workflow.evaluation", "bool", False, "run evaluation after epochs", io=True),
    K("workflow.checkpoint", "bool", False, "write checkpoints (or run checkpoint-only)", io=True),
    K("workflow.profiling", "bool", False, "start profiling.profiler"),
    K("workflow.debug", "bool", False, "unused by DLIO"),
    K("workflow.query", "str", None, "read only by dlio_benchmark_query", nullable=True),
    K("workflow.vdb", "bool", False, "vector search on storage (the vdb.* keys; MLPerf Storage v3 §5)", io=True),
    # ---- dataset ----
    K("dataset.record_length_bytes", "num", 65536, "nominal sample size in bytes (floats allowed)", lo=1, io=True),
    K("dataset.record_length_bytes_stdev", "num", 0, "stdev of the sample size in bytes", lo=0, io=True),
    K("dataset.record_length_bytes_resize", "num", 0, "shape of DLIO's returned fake tensor; no I/O effect", lo=0),
    K("dataset.num_files_train", "int", 8, "training files", lo=0, io=True, env="DLIO_FAST_NUM_FILES_TRAIN"),
    K("dataset.num_files_eval", "int", 0, "evaluation files", lo=0, io=True),
    K("dataset.num_samples_per_file", "int", 1, "samples in each file", lo=1, io=True),
    K(
        "dataset.data_folder",
        "str",
        "./data/",
        "dataset root (train/, valid/ below it); trailing / stripped",
        io=True,
        env="DLIO_FAST_DATA_FOLDER",
    ),
    K(
        "dataset.num_subfolders_train",
        "int",
        0,
        "spread train files round-robin into this many subfolders (0: flat)",
        lo=0,
        io=True,
    ),
    K("dataset.num_subfolders_eval", "int", 0, "same for eval files", lo=0, io=True),
    K("dataset.file_prefix", "str", "img", "file name prefix", io=True),
    K("dataset.format", "enum", "tfrecord", "file format", choices=FORMATS, io=True),
    K(
        "dataset.compression",
        "enum",
        "none",
        "compression (hdf5 gzip/lzf)",
        choices=COMPRESSIONS,
        io=True,
        aliases=_NONE_ALIASES,
        note="compared as a value: DLIO keeps the raw string and never applies npz zip",
    ),
    K("dataset.compression_level", "int", 4, "compression level", lo=0, hi=9),
    K("dataset.enable_chunking", "bool", False, "unused by DLIO (hdf5 chunking is dataset.hdf5.chunk_dims)"),
    K("dataset.chunk_size", "int", 0, "unused by DLIO", lo=0),
    K("dataset.keep_files", "bool", True, "keep the dataset after the run"),
    K("dataset.generation_buffer_size", "int", 2 * 1073741824, "indexed_binary generator buffer in bytes", lo=1),
    K("dataset.record_dims", "ints", (), "explicit N-D sample shape; overrides record_length_bytes", lo=1, io=True),
    K("dataset.record_element_type", "str", "uint8", "numpy dtype of a sample element", io=True),
    K("dataset.record_element_bytes", "int", 4, "recomputed from record_element_type by DLIO; ignored", lo=1),
    K("dataset.hdf5.chunk_dims", "ints", (), "hdf5 chunk shape ([]: contiguous)", lo=1, io=True),
    K("dataset.hdf5.num_dset_per_record", "int", 1, "hdf5 datasets a record is split into", lo=1, io=True),
    K("dataset.hdf5.max_shape", "ints", (), "hdf5 maxshape", lo=1),
    # parquet (MLPerf Storage's DLIO; dlio.dataset.formats.parquet)
    K(
        "dataset.parquet.columns",
        "records",
        (),
        "typed columns: [{name, dtype, size (elements per row, 1), read (true)}]; none: one uint8 list column "
        "'data' of the record's size",
        io=True,
        note="only the columns with read: true are read (MLPerf Storage's DLIO reads them all, or "
        "storage.storage_options.columns)",
    ),
    K("dataset.parquet.row_group_size", "int", 1024, "rows per row group", lo=1, io=True),
    K(
        "dataset.parquet.read_mode",
        "enum",
        "default",
        "default: a file's read columns when a reader first opens it; row_group: a sample's row group when a "
        "reader first needs it",
        choices=("default", "row_group"),
        io=True,
    ),
    K(
        "dataset.parquet.generation_batch_size",
        "int",
        0,
        "rows written per write_table call (0: row_group_size); a row group never spans two",
        lo=0,
        io=True,
    ),
    K("dataset.parquet.partition_by", "str", None, "hive partitioning column (not supported)", nullable=True),
    K("dataset.parquet.use_s3dlio_gen", "bool", False, "DLIO's s3dlio generation path; same files here"),
    # ---- reader (alias data_reader) ----
    K(
        "reader.data_loader",
        "enum",
        "pytorch",
        "data loader whose access pattern is emulated",
        choices=DATA_LOADERS,
        io=True,
        note="DLIO's default is the raw string 'tensorflow', which crashes unless set; ours is pytorch",
    ),
    K("reader.batch_size", "int", 1, "samples per training step (per rank)", lo=1, io=True, env="DLIO_FAST_BATCH_SIZE"),
    K("reader.batch_size_eval", "int", 1, "samples per evaluation step (per rank)", lo=1, io=True),
    K(
        "reader.read_threads",
        "int",
        1,
        "reader threads (torch num_workers; 0: in the main loop)",
        lo=0,
        hi=1024,
        io=True,
        env="DLIO_FAST_READ_THREADS",
    ),
    K("reader.computation_threads", "int", 1, "TFRecord map parallelism", lo=0),
    K(
        "reader.prefetch_size",
        "int",
        2,
        "batches prefetched ahead of the trainer (code default 2; docs say 0)",
        lo=0,
        io=True,
    ),
    K(
        "reader.file_shuffle",
        "enum",
        "off",
        "shuffle the file list",
        choices=SHUFFLES,
        aliases=_SHUFFLE_ALIASES,
        io=True,
        note="'off' means off (DLIO compares a raw string with an Enum, so YAML off shuffles)",
    ),
    K("reader.sample_shuffle", "enum", "off", "shuffle samples", choices=SHUFFLES, aliases=_SHUFFLE_ALIASES, io=True),
    K("reader.shuffle_size", "int", 1024, "TF shuffle buffer / DALI initial_fill", lo=1, io=True),
    K(
        "reader.read_type",
        "enum",
        "on_demand",
        "on_demand: open/read/close per sample; memory: keep open",
        choices=("on_demand", "memory"),
        io=True,
        note="compared as a value (DLIO's raw string turns on_demand into per-worker caching)",
    ),
    K(
        "reader.file_access",
        "enum",
        "multi",
        "unused by DLIO",
        choices=("multi", "shared", "collective", "mpio", "posix"),
    ),
    K("reader.transfer_size", "int", None, "TFRecordDataset read buffer in bytes", lo=1, nullable=True, io=True),
    K("reader.dont_use_mmap", "bool", False, "native DALI readers only"),
    K("reader.odirect", "bool", False, "O_DIRECT reads (DLIO: npy/npz only)", io=True),
    K("reader.preprocess_time", "time", None, "seconds of work per sample inside the reader"),
    K("reader.preprocess_time_stdev", "stdev", None, "legacy sibling: stdev of preprocess_time", lo=0, nullable=True),
    K("reader.pin_memory", "bool", True, "torch pin_memory"),
    K(
        "reader.multiprocessing_context",
        "enum",
        "fork",
        "torch worker start method",
        choices=("fork", "spawn", "forkserver"),
    ),
    K("reader.reader_classname", "str", None, "plugin reader class (not emulated)", nullable=True),
    K("reader.data_loader_classname", "str", None, "plugin data loader class (not emulated)", nullable=True),
    K(
        "reader.data_loader_sampler",
        "enum",
        None,
        "sampler of a plugin data loader",
        nullable=True,
        choices=("iterative", "index", "none"),
    ),
    K("reader.transformed_record_dims", "ints", (), "shape of the returned fake tensor; no I/O effect", lo=1),
    K("reader.transformed_record_element_type", "str", "uint8", "dtype of the returned fake tensor; no I/O effect"),
    # ---- train ----
    K("train.epochs", "int", 1, "training epochs", lo=1, io=True, env="DLIO_FAST_EPOCHS"),
    K("train.computation_time", "time", None, "emulated accelerator seconds per step"),
    K("train.computation_time_stdev", "stdev", None, "legacy sibling: stdev of computation_time", lo=0, nullable=True),
    K("train.total_training_steps", "int", -1, "per-epoch step cap (-1: none)", lo=-1, io=True),
    K("train.seed", "int", 123, "shuffle seed", lo=0, hi=2**32 - 1),
    K("train.seed_change_epoch", "bool", True, "add the epoch number to the seed"),
    # ---- evaluation ----
    K("evaluation.eval_time", "time", None, "emulated accelerator seconds per eval step"),
    K("evaluation.eval_time_stdev", "stdev", None, "legacy sibling: stdev of eval_time", lo=0, nullable=True),
    K("evaluation.eval_after_epoch", "int", 1, "first epoch followed by an evaluation", lo=0),
    K("evaluation.epochs_between_evals", "int", 1, "epochs between evaluations", lo=1),
    # ---- checkpoint ----
    K("checkpoint.checkpoint_folder", "str", "./checkpoints/", "checkpoint root; trailing / stripped", io=True),
    K("checkpoint.checkpoint_after_epoch", "int", 1, "first epoch that checkpoints (epoch mode)", lo=0, io=True),
    K("checkpoint.epochs_between_checkpoints", "int", 1, "epochs between checkpoints (epoch mode)", lo=1, io=True),
    K("checkpoint.steps_between_checkpoints", "int", -1, ">= 0 switches to step mode", lo=-1, io=True),
    K("checkpoint.type", "enum", "rank_zero", "unused by DLIO's core", choices=("rank_zero", "all_ranks")),
    K(
        "checkpoint.mode",
        "enum",
        "default",
        "subset: checkpoint a target data-parallel size",
        choices=("default", "subset"),
        io=True,
    ),
    K(
        "checkpoint.fsync",
        "bool",
        False,
        "fsync each checkpoint file",
        io=True,
        note="honoured (DLIO's typo checkpoint_sync means it never applies)",
    ),
    K("checkpoint.time_between_checkpoints", "num", -1, "checkpoint-only: seconds slept before each op (abs())"),
    K("checkpoint.num_checkpoints_write", "int", -1, "checkpoint-only: checkpoints written", lo=-1, io=True),
    K("checkpoint.num_checkpoints_read", "int", -1, "checkpoint-only: checkpoints read back", lo=-1, io=True),
    K(
        "checkpoint.recovery_rank_shift",
        "bool",
        False,
        "read another node's checkpoint files",
        io=True,
        note="honoured (DLIO's typo checkpoint_recover_rank_shift means it never applies)",
    ),
    K("checkpoint.rank_sync", "bool", False, "barrier after each save/load (checkpoint-only)"),
    K("checkpoint.randomize_tensor", "bool", True, "random tensor content (False: all ones, compressible)", io=True),
    K(
        "checkpoint.checkpoint_mechanism_classname",
        "str",
        None,
        "plugin checkpoint class (not emulated)",
        nullable=True,
    ),
    K("checkpoint.ksm.madv_mergeable_id", "int", 12, "madvise MADV_MERGEABLE value", lo=0),
    K("checkpoint.ksm.high_ram_trigger", "num", 30.0, "RAM % that triggers KSM waiting", lo=0, hi=100),
    K("checkpoint.ksm.low_ram_exit", "num", 15, "RAM % at which the wait ends", lo=0, hi=100),
    K("checkpoint.ksm.await_time", "int", 200, "seconds to wait for KSM", lo=0),
    # ---- output ----
    K(
        "output.folder",
        "str",
        None,
        "output folder (None: DLIO's hydra run dir)",
        nullable=True,
        env="DLIO_FAST_OUTPUT",
    ),
    K("output.log_file", "str", "dlio.log", "log file name in the output folder"),
    K("output.metric.exclude_start_steps", "int", 1, "steps excluded at the start of each block", lo=0),
    K("output.metric.exclude_end_steps", "int", 0, "steps excluded at the end of each block", lo=0),
    # ---- metric ----
    K("metric.au", "float", 0.90, "target accelerator utilisation (fraction)", lo=0, hi=1),
    # ---- profiling ----
    K(
        "profiling.profiler",
        "enum",
        "iostat",
        "profiler when workflow.profiling",
        choices=PROFILERS,
        aliases=_NONE_ALIASES,
    ),
    K("profiling.iostat_devices", "strs", (), "devices for iostat (a string is one device)"),
    # ---- storage ----
    K(
        "storage.storage_type",
        "enum",
        "local_fs",
        "storage backend",
        choices=STORAGE_TYPES,
        io=True,
        aliases=MappingProxyType({"s3dlio": "s3"}),  # MLPerf Storage's s3dlio configs: S3 through s3dlio
    ),
    K("storage.storage_root", "str", "./", "directory or bucket", io=True),
    K("storage.storage_options", "map", None, "backend options (S3 endpoint, credentials ...)", nullable=True),
    # MLPerf Storage's DLIO (s3dlio): several S3 endpoints, one per group of ranks (refused: config/validate.py)
    K("storage.endpoint_uris", "strs", (), "S3 endpoints spread over the ranks (not supported yet)", io=True),
    K("storage.use_mpi_endpoint_distribution", "bool", False, "ranks split over endpoint_uris by rank (not supported)"),
    # ---- dlio-fast's own keys (DLIO ignores unknown top-level sections) ----
    K(
        "dlio_fast.engine",
        "enum",
        "posix",
        "I/O engine",
        choices=engines.CONFIG_ENGINES,
        env="DLIO_FAST_ENGINE",
        io=True,
        aliases=engines.ALIASES,
    ),
    K("dlio_fast.qd", "int", 1, "queue depth per reader thread", lo=1, hi=1024, env="DLIO_FAST_QD", io=True),
    K(
        "dlio_fast.cache",
        "enum",
        "keep",
        "page cache: keep; drop each file's pages before every epoch (no root needed, checked with mincore); "
        "drop-all: the whole host's page cache, once per node, root only",
        choices=("keep", "drop", "drop-all"),
        env="DLIO_FAST_CACHE",
        io=True,
    ),
    K(
        "dlio_fast.compute_mode",
        "enum",
        "spin",
        "emulated compute: busy-spin, or sleep then spin the end",
        choices=("spin", "hybrid"),
    ),
    K(
        "dlio_fast.compat_dlio_order",
        "bool",
        False,
        "true: DLIO's index-loader order (contiguous, ascending, unshuffled per rank); false: honour the shuffles",
        io=True,
    ),
    K(
        "dlio_fast.file_order",
        "enum",
        "name",
        "the file list before shuffling: name = DLIO's (sorted by file name, so round-robin subfolders "
        "interleave); path = sorted by full path (one subfolder after another, as a job that sorts its "
        "paths reads them)",
        choices=("name", "path"),
        io=True,
    ),
    K(
        "dlio_fast.skip_bad_files",
        "bool",
        False,
        "leave out files that are missing, unreadable or changed since generation (counted), instead of stopping",
    ),
    K("dlio_fast.plots", "bool", False, "write PNG plots into the output folder after the run"),
    K(
        "dlio_fast.trace",
        "bool",
        False,
        "write a DFTracer trace per rank (trace-{rank}-of-{size}.pfw.gz: JSON lines; opens in Perfetto)",
    ),
    K(
        "dlio_fast.seed",
        "int",
        10,
        "seed of the generated files' content (shapes use DLIO's fixed seed 10, so DLIO and dlio-fast agree on sizes)",
        lo=0,
        hi=2**32 - 1,
    ),
    K(
        "dlio_fast.mlperf_rules",
        "enum",
        "enforce",
        "a workload CLOSED under MLPerf Storage (dlio.mlperf.rules): enforce refuses a dataset smaller than its "
        "Rules 3.1.2 minimum, warn prints it, off skips it",
        choices=("enforce", "warn", "off"),
    ),
    K(
        "dlio_fast.results_dir",
        "str",
        None,
        "MLPerf Storage results tree: without --output the run goes to RESULTS_DIR/training|checkpointing/MODEL/"
        "run/TIMESTAMP, with a provenance.json (code commit, resolved config and its SHA-256, host)",
        nullable=True,
    ),
    K(
        "dlio_fast.dialect",
        "enum",
        "auto",
        "which DLIO the run interchanges with: 2.0.0 (PyPI; MLPerf Storage v1) or current (main); auto: 2.0.0 when "
        "the config spells a key the 2.0.0 way (dataset.record_length, checkpoint.num_layers, `model: NAME`), else "
        "current. Decides the data layout written (HDF5 dataset names, CSV header) and the throughput formula",
        choices=DIALECTS + ("auto",),
    ),
    K(
        "dlio_fast.null_delay_ns",
        "int",
        0,
        "busy-wait per request of the null engine: a storage of known latency (tests, dlio-fast maxacc)",
        lo=0,
    ),
    K(
        "dlio_fast.storage_timeout",
        "num",
        60.0,
        "seconds an object store may go without answering (S3: each request's deadline, and a worker with no "
        "reply for this long is stopped); the run then ends with what it measured",
        lo=1,
        hi=86400,
    ),
    K(
        "dlio_fast.create_bucket",
        "bool",
        False,
        "S3: create the bucket when it does not exist (generate, and run when it generates)",
    ),
    # ---- the KV-cache offload workload (MLPerf Storage v3 KVCache; dlio/kvcache), with workflow.kvcache ----
    *KVCACHE_KEYS,
    # ---- asynchronous checkpoints (PyTorch DCP's async_save) ----
    K(
        "checkpoint.async_save",
        "bool",
        False,
        "checkpoints during training as PyTorch DCP's async_save: the step blocks for a copy of the rank's state "
        "into host memory, a writer thread saves it while training goes on (one save in flight)",
        io=True,
    ),
    K(
        "checkpoint.async_host_buffer_bytes",
        "int",
        0,
        "async_save's host buffer: 0 holds the rank's whole state, capped at half the available memory; a smaller "
        "buffer is a staging buffer the state is copied through in chunks (said in the record)",
        lo=0,
        hi=2**50,
    ),
    # ---- model loading (dlio.modelload): workflow.model_load runs it instead of training ----
    K("workflow.model_load", "bool", False, "load a model's weights (model_load.*) instead of training", io=True),
    K(
        "model_load.model",
        "enum",
        "llama3_8b",
        "the model: a Llama 3 (Hugging Face's config), transformer (model.transformer.* and model.num_layers), "
        "or generic (model_load.model_bytes of tensors)",
        choices=("llama3_8b", "llama3_70b", "llama3_405b", "transformer", "generic"),
        io=True,
    ),
    K("model_load.model_bytes", "int", 16 * 2**30, "size of a generic model in bytes", lo=4096, hi=2**50, io=True),
    K("model_load.dtype", "enum", "bf16", "dtype of the weights", choices=("bf16", "fp16", "fp32", "fp8"), io=True),
    K(
        "model_load.shard_size",
        "int",
        5 * 10**9,
        "safetensors shard size in bytes, as save_pretrained(max_shard_size) splits (Hugging Face's 5GB)",
        lo=4096,
        hi=2**42,
        io=True,
    ),
    K(
        "model_load.tensor_parallel",
        "int",
        0,
        "ranks per tensor-parallel group (0: all the job's ranks); the job holds ranks / this many replicas",
        lo=0,
        hi=65536,
        io=True,
    ),
    K(
        "model_load.spread",
        "enum",
        "slice",
        "what each rank reads: slice (its tensor-parallel part of every tensor, vLLM's way), whole (every shard: "
        "every rank the whole model), files (the shards dealt to the ranks of a group)",
        choices=("slice", "whole", "files"),
        io=True,
    ),
    K(
        "model_load.read_mode",
        "enum",
        "mmap",
        "mmap (safetensors' way: map and fault every page), read (buffered pread), odirect (pread with O_DIRECT), "
        "io_uring (O_DIRECT, model_load.qd in flight)",
        choices=("mmap", "read", "odirect", "io_uring"),
        io=True,
    ),
    K(
        "model_load.cache",
        "enum",
        "cold",
        "cold: the shards' pages dropped (checked with mincore) before each load; warm: a first load fills the page "
        "cache, the timed ones read from it (the page cache's figure)",
        choices=("cold", "warm"),
        io=True,
    ),
    K("model_load.repeats", "int", 3, "timed loads", lo=1, hi=1000, io=True),
    K("model_load.threads", "int", 1, "reader threads per rank (a shard is read by one thread)", lo=1, hi=256, io=True),
    K("model_load.qd", "int", 8, "reads in flight per thread in io_uring mode", lo=1, hi=1024, io=True),
    K(
        "model_load.transfer_size",
        "int",
        16 << 20,
        "bytes per request (mmap: pages touched per request)",
        lo=4096,
        hi=1 << 30,
        io=True,
    ),
)

# ---- vector search (workflow.vdb): Milvus's DiskANN / AISAQ / HNSW indexes on storage (dlio.vdb) ----
VDB_INDEXES = ("diskann", "aisaq_perf", "aisaq_scale", "hnsw")
KEYS += (
    K(
        "vdb.index",
        "enum",
        "diskann",
        "index kind; hnsw touches storage only to write and load it",
        choices=VDB_INDEXES,
        io=True,
    ),
    K("vdb.vectors", "int", 1_000_000, "vectors in the collection", lo=1, hi=1e11, io=True),
    K("vdb.dimension", "int", 1536, "vector dimension", lo=1, hi=65536, io=True),
    K("vdb.dtype_bytes", "int", 4, "bytes per vector element (4 float32, 2 float16, 1 int8)", lo=1, hi=8, io=True),
    K("vdb.max_degree", "int", 64, "graph degree R (neighbour ids per node)", lo=1, hi=1024, io=True),
    K(
        "vdb.search_list",
        "int",
        200,
        "search list size L (Milvus search_list, vdbbench --search-ef)",
        lo=1,
        hi=100000,
        io=True,
    ),
    K(
        "vdb.beam_width",
        "int",
        0,
        "beam width W: node reads per hop (0: Milvus's min(16, 4 x cores))",
        lo=0,
        hi=512,
        io=True,
    ),
    K(
        "vdb.segment_max_mb",
        "int",
        2048,
        "Milvus dataCoord.segment.diskSegmentMaxSize: raw MiB per segment",
        lo=1,
        hi=2**30,
        io=True,
    ),
    K(
        "vdb.segments",
        "int",
        0,
        "index segments (0: raw vectors / segment_max_mb, rounded up)",
        lo=0,
        hi=100000,
        io=True,
    ),
    K(
        "vdb.cache_ratio",
        "float",
        0.0,
        "share of each segment's nodes in the node cache (RAM): the most visited, near the medoid",
        lo=0,
        hi=1,
        io=True,
    ),
    K(
        "vdb.hot_fraction",
        "float",
        0.1,
        "locality: the hot region's share of the nodes (the medoid is always hot)",
        lo=0,
        hi=1,
        io=True,
    ),
    K(
        "vdb.hot_share",
        "float",
        0.3,
        "locality: share of the reads past the second hop that go to the hot region (0: uniform)",
        lo=0,
        hi=1,
        io=True,
    ),
    K("vdb.processes", "int", 1, "query processes P (vdbbench --processes)", lo=1, hi=4096, io=True),
    K("vdb.batch", "int", 1, "queries per search() call of each process", lo=1, hi=65536, io=True),
    K("vdb.search_threads", "int", 0, "the query node's search pool (0: usable cores)", lo=0, hi=4096, io=True),
    K("vdb.top_k", "int", 10, "neighbours returned per query (no I/O of its own)", lo=1, hi=100000),
    K("vdb.duration", "float", 60.0, "seconds per timed run (0: vdb.queries decides)", lo=0, hi=1e6, io=True),
    K("vdb.queries", "int", 0, "queries per timed run (0: vdb.duration decides)", lo=0, hi=1e12, io=True),
    K("vdb.runs", "int", 5, "timed runs (MLPerf Storage's rules want 5)", lo=1, hi=1000, io=True),
    K(
        "vdb.cpu_per_hop_us",
        "float",
        0.0,
        "CPU spun after each hop (distance computations), microseconds",
        lo=0,
        hi=1e7,
        io=True,
    ),
    K(
        "vdb.inline_pq",
        "int",
        -1,
        "aisaq_perf: neighbours whose PQ codes are in the node (-1: max_degree)",
        lo=-1,
        hi=1024,
        io=True,
    ),
    K(
        "vdb.pq_bytes",
        "int",
        0,
        "PQ code bytes per vector (0: Milvus's budget, 0.125 x the raw vector)",
        lo=0,
        hi=65536,
        io=True,
    ),
    K(
        "vdb.pq_reads_per_hop",
        "int",
        2,
        "aisaq_scale: PQ page reads per hop (knowhere vectors_beamwidth)",
        lo=0,
        hi=64,
        io=True,
    ),
    K(
        "vdb.trace",
        "str",
        None,
        "replay this capture of real DiskANN (bench/vdb_capture.py) instead of the model",
        nullable=True,
        io=True,
    ),
    K(
        "vdb.index_folder",
        "str",
        "data/vdb",
        "where the index files are written (kept between runs when they match)",
        io=True,
    ),
    K("vdb.seed", "int", 42, "seed of the model's chains and the index content", lo=0, hi=2**32 - 1),
)

KEYS_BY_PATH: Mapping[str, Key] = MappingProxyType({k.path: k for k in KEYS})

# 2.0.0 (and DLIO's ignored model.model_size) -> current name.
LEGACY: Mapping[str, str] = MappingProxyType(
    {
        "dataset.record_length": "dataset.record_length_bytes",
        "dataset.record_length_stdev": "dataset.record_length_bytes_stdev",
        "dataset.record_length_resize": "dataset.record_length_bytes_resize",
        "checkpoint.model_size": "model.model_size_bytes",
        "model.model_size": "model.model_size_bytes",
        "checkpoint.num_layers": "model.num_layers",
        "checkpoint.layer_parameters": "model.layer_parameters",
        "checkpoint.optimization_groups": "model.optimization_groups",
        "checkpoint.tensor_parallelism": "model.parallelism.tensor",
        "checkpoint.pipeline_parallelism": "model.parallelism.pipeline",
    }
)

# Spellings that only DLIO 2.0.0 wrote; seeing one makes `dlio_fast.dialect: auto` resolve to 2.0.0.
# model.model_size is not one: current DLIO's own workload files still carry it.
LEGACY_ONLY = frozenset(k for k in LEGACY if k != "model.model_size")

# Whole sections spelled another way.
SECTION_ALIASES: Mapping[str, str] = MappingProxyType({"data_reader": "reader"})

# Sections whose mere presence means something (DLIO: a `ksm:` section enables KSM); None when absent.
OPTIONAL_SECTIONS = frozenset({"checkpoint.ksm"})

# Environment variables that are not a key.
ENV_SCALE = "DLIO_FAST_SCALE"

ENV: Mapping[str, str] = MappingProxyType({k.env: k.path for k in KEYS if k.env})


def sections() -> Tuple[str, ...]:
    """Every section path ('model', 'model.parallelism', ...), parents before children."""
    out = []
    for k in KEYS:
        parts = k.path.split(".")[:-1]
        for i in range(1, len(parts) + 1):
            s = ".".join(parts[:i])
            if s not in out:
                out.append(s)
    return tuple(out)


SECTIONS = frozenset(sections())
