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
FORMATS = ("tfrecord", "hdf5", "csv", "npz", "npy", "jpeg", "png", "indexed_binary", "mmap_indexed_binary", "synthetic")
FRAMEWORKS = ("tensorflow", "pytorch")
DATA_LOADERS = ("pytorch", "tensorflow", "dali", "native_dali", "synthetic")
SHUFFLES = ("off", "seed", "random")
DATATYPES = ("fp16", "bf16", "fp32", "fp64", "int8", "uint8")
COMPRESSIONS = ("none", "gzip", "lzf", "bz2", "zip", "xz")
PROFILERS = ("none", "iostat", "darshan", "tensorboard")
STORAGE_TYPES = ("local_fs", "s3", "aistore")
TIME_TYPES = ("normal", "uniform", "gamma", "exponential", "poisson")

# YAML 1.1 reads `off`/`no` as False and `on`/`yes` as True; for these keys that means the named value.
_SHUFFLE_ALIASES = MappingProxyType({"false": "off", "true": "seed", "none": "off", "0": "off"})
_NONE_ALIASES = MappingProxyType({"false": "none", "off": "none", "no": "none"})

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
    K("storage.storage_type", "enum", "local_fs", "storage backend", choices=STORAGE_TYPES, io=True),
    K("storage.storage_root", "str", "./", "directory or bucket", io=True),
    K("storage.storage_options", "map", None, "backend options (S3 endpoint, credentials ...)", nullable=True),
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
