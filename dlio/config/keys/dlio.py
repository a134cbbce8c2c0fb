"""DLIO's own sections: every key DLIO's current main branch parses (``LoadConfig`` in ``utils/config.py``),
under its current dotted name, with DLIO's *code* default (not the docs' one), the allowed values and a
one-line help.  Rows marked ``io=True`` change the I/O that reaches storage (DLIO's ★); the others are
parsed, kept and written back, and change nothing for the I/O (labels, plugin class names, DLIO's unused
keys)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Tuple

from dlio.config.keys.row import Key

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

KEYS: Tuple[Key, ...] = (
    # ---- framework (top-level scalar) ----
    Key(
        "framework",
        "enum",
        "tensorflow",
        "tensorflow or pytorch: selects the checkpoint mechanism (tf_save / pt_save)",
        choices=FRAMEWORKS,
    ),
    # ---- model (drives checkpoint size only) ----
    Key("model.name", "str", "default", "model label (DLIO's hydra log dir)"),
    Key(
        "model.type",
        "str",
        None,
        "model kind label; 'transformer' sizes the checkpoint from model.transformer",
        nullable=True,
    ),
    Key(
        "model.model_size_bytes",
        "int",
        10240,
        "size of the int8 'model' tensor of a non-transformer checkpoint",
        lo=0,
        io=True,
        note="the legacy model.model_size is honoured (DLIO ignores it)",
    ),
    Key("model.model_datatype", "enum", "fp16", "dtype of transformer model state", choices=DATATYPES, io=True),
    Key("model.optimizer_datatype", "enum", "fp32", "dtype of optimizer state", choices=DATATYPES, io=True),
    Key("model.num_layers", "int", -1, "transformer layers (-1: none)", lo=-1, io=True),
    Key("model.layer_parameters", "ints", (), "legacy explicit per-layer tensor sizes", lo=0, io=True),
    Key("model.optimization_groups", "ints", (), "legacy explicit optimizer group sizes", lo=0, io=True),
    Key("model.parallelism.tensor", "int", 1, "tensor parallelism", lo=1, io=True),
    Key("model.parallelism.pipeline", "int", 1, "pipeline parallelism", lo=1, io=True),
    Key(
        "model.parallelism.data",
        "int",
        -1,
        "data parallelism (subset checkpoint mode only; -1: derived)",
        lo=-1,
        io=True,
    ),
    Key("model.parallelism.zero_stage", "int", 0, "DeepSpeed ZeRO stage", lo=0, hi=3, io=True),
    Key("model.transformer.vocab_size", "int", 32000, "vocabulary size", lo=1, io=True),
    Key("model.transformer.hidden_size", "int", 2048, "hidden size H", lo=1, io=True),
    Key(
        "model.transformer.ffn_hidden_size",
        "int",
        8192,
        "FFN hidden size (code default 8192; DLIO docs say 8196)",
        lo=1,
        io=True,
    ),
    Key("model.transformer.num_attention_heads", "int", 32, "attention heads", lo=1, io=True),
    Key("model.transformer.num_kv_heads", "int", 8, "key/value heads", lo=1, io=True),
    # ---- workflow ----
    Key("workflow.generate_data", "bool", False, "generate the dataset before training", io=True),
    Key("workflow.train", "bool", True, "run the epoch loop (False + checkpoint: checkpoint-only run)", io=True),
    Key("workflow.evaluation", "bool", False, "run evaluation after epochs", io=True),
    Key("workflow.checkpoint", "bool", False, "write checkpoints (or run checkpoint-only)", io=True),
    Key("workflow.profiling", "bool", False, "start profiling.profiler"),
    Key("workflow.debug", "bool", False, "unused by DLIO"),
    Key("workflow.query", "str", None, "read only by dlio_benchmark_query", nullable=True),
    # ---- dataset ----
    Key("dataset.record_length_bytes", "num", 65536, "nominal sample size in bytes (floats allowed)", lo=1, io=True),
    Key("dataset.record_length_bytes_stdev", "num", 0, "stdev of the sample size in bytes", lo=0, io=True),
    Key("dataset.record_length_bytes_resize", "num", 0, "shape of DLIO's returned fake tensor; no I/O effect", lo=0),
    Key("dataset.num_files_train", "int", 8, "training files", lo=0, io=True, env="DLIO_FAST_NUM_FILES_TRAIN"),
    Key("dataset.num_files_eval", "int", 0, "evaluation files", lo=0, io=True),
    Key("dataset.num_samples_per_file", "int", 1, "samples in each file", lo=1, io=True),
    Key(
        "dataset.data_folder",
        "str",
        "./data/",
        "dataset root (train/, valid/ below it); trailing / stripped",
        io=True,
        env="DLIO_FAST_DATA_FOLDER",
    ),
    Key(
        "dataset.num_subfolders_train",
        "int",
        0,
        "spread train files round-robin into this many subfolders (0: flat)",
        lo=0,
        io=True,
    ),
    Key("dataset.num_subfolders_eval", "int", 0, "same for eval files", lo=0, io=True),
    Key("dataset.file_prefix", "str", "img", "file name prefix", io=True),
    Key("dataset.format", "enum", "tfrecord", "file format", choices=FORMATS, io=True),
    Key(
        "dataset.compression",
        "enum",
        "none",
        "compression (hdf5 gzip/lzf)",
        choices=COMPRESSIONS,
        io=True,
        aliases=_NONE_ALIASES,
        note="compared as a value: DLIO keeps the raw string and never applies npz zip",
    ),
    Key("dataset.compression_level", "int", 4, "compression level", lo=0, hi=9),
    Key("dataset.enable_chunking", "bool", False, "unused by DLIO (hdf5 chunking is dataset.hdf5.chunk_dims)"),
    Key("dataset.chunk_size", "int", 0, "unused by DLIO", lo=0),
    Key("dataset.keep_files", "bool", True, "keep the dataset after the run"),
    Key("dataset.generation_buffer_size", "int", 2 * 1073741824, "indexed_binary generator buffer in bytes", lo=1),
    Key("dataset.record_dims", "ints", (), "explicit N-D sample shape; overrides record_length_bytes", lo=1, io=True),
    Key("dataset.record_element_type", "str", "uint8", "numpy dtype of a sample element", io=True),
    Key("dataset.record_element_bytes", "int", 4, "recomputed from record_element_type by DLIO; ignored", lo=1),
    Key("dataset.hdf5.chunk_dims", "ints", (), "hdf5 chunk shape ([]: contiguous)", lo=1, io=True),
    Key("dataset.hdf5.num_dset_per_record", "int", 1, "hdf5 datasets a record is split into", lo=1, io=True),
    Key("dataset.hdf5.max_shape", "ints", (), "hdf5 maxshape", lo=1),
    # parquet (MLPerf Storage's DLIO; dlio.dataset.formats.parquet)
    Key(
        "dataset.parquet.columns",
        "records",
        (),
        "typed columns: [{name, dtype, size (elements per row, 1), read (true)}]; none: one uint8 list column "
        "'data' of the record's size",
        io=True,
        note="only the columns with read: true are read (MLPerf Storage's DLIO reads them all, or "
        "storage.storage_options.columns)",
    ),
    Key("dataset.parquet.row_group_size", "int", 1024, "rows per row group", lo=1, io=True),
    Key(
        "dataset.parquet.read_mode",
        "enum",
        "default",
        "default: a file's read columns when a reader first opens it; row_group: a sample's row group when a "
        "reader first needs it",
        choices=("default", "row_group"),
        io=True,
    ),
    Key(
        "dataset.parquet.generation_batch_size",
        "int",
        0,
        "rows written per write_table call (0: row_group_size); a row group never spans two",
        lo=0,
        io=True,
    ),
    Key("dataset.parquet.partition_by", "str", None, "hive partitioning column (not supported)", nullable=True),
    Key("dataset.parquet.use_s3dlio_gen", "bool", False, "DLIO's s3dlio generation path; same files here"),
    # ---- reader (alias data_reader) ----
    Key(
        "reader.data_loader",
        "enum",
        "pytorch",
        "data loader whose access pattern is emulated",
        choices=DATA_LOADERS,
        io=True,
        note="DLIO's default is the raw string 'tensorflow', which crashes unless set; ours is pytorch",
    ),
    Key(
        "reader.batch_size", "int", 1, "samples per training step (per rank)", lo=1, io=True, env="DLIO_FAST_BATCH_SIZE"
    ),
    Key("reader.batch_size_eval", "int", 1, "samples per evaluation step (per rank)", lo=1, io=True),
    Key(
        "reader.read_threads",
        "int",
        1,
        "reader threads (torch num_workers; 0: in the main loop)",
        lo=0,
        hi=1024,
        io=True,
        env="DLIO_FAST_READ_THREADS",
    ),
    Key("reader.computation_threads", "int", 1, "TFRecord map parallelism", lo=0),
    Key(
        "reader.prefetch_size",
        "int",
        2,
        "batches prefetched ahead of the trainer (code default 2; docs say 0)",
        lo=0,
        io=True,
    ),
    Key(
        "reader.file_shuffle",
        "enum",
        "off",
        "shuffle the file list",
        choices=SHUFFLES,
        aliases=_SHUFFLE_ALIASES,
        io=True,
        note="'off' means off (DLIO compares a raw string with an Enum, so YAML off shuffles)",
    ),
    Key("reader.sample_shuffle", "enum", "off", "shuffle samples", choices=SHUFFLES, aliases=_SHUFFLE_ALIASES, io=True),
    Key("reader.shuffle_size", "int", 1024, "TF shuffle buffer / DALI initial_fill", lo=1, io=True),
    Key(
        "reader.read_type",
        "enum",
        "on_demand",
        "on_demand: open/read/close per sample; memory: keep open",
        choices=("on_demand", "memory"),
        io=True,
        note="compared as a value (DLIO's raw string turns on_demand into per-worker caching)",
    ),
    Key(
        "reader.file_access",
        "enum",
        "multi",
        "unused by DLIO",
        choices=("multi", "shared", "collective", "mpio", "posix"),
    ),
    Key("reader.transfer_size", "int", None, "TFRecordDataset read buffer in bytes", lo=1, nullable=True, io=True),
    Key("reader.dont_use_mmap", "bool", False, "native DALI readers only"),
    Key("reader.odirect", "bool", False, "O_DIRECT reads (DLIO: npy/npz only)", io=True),
    Key("reader.preprocess_time", "time", None, "seconds of work per sample inside the reader"),
    Key("reader.preprocess_time_stdev", "stdev", None, "legacy sibling: stdev of preprocess_time", lo=0, nullable=True),
    Key("reader.pin_memory", "bool", True, "torch pin_memory"),
    Key(
        "reader.multiprocessing_context",
        "enum",
        "fork",
        "torch worker start method",
        choices=("fork", "spawn", "forkserver"),
    ),
    Key("reader.reader_classname", "str", None, "plugin reader class (not emulated)", nullable=True),
    Key("reader.data_loader_classname", "str", None, "plugin data loader class (not emulated)", nullable=True),
    Key(
        "reader.data_loader_sampler",
        "enum",
        None,
        "sampler of a plugin data loader",
        nullable=True,
        choices=("iterative", "index", "none"),
    ),
    Key("reader.transformed_record_dims", "ints", (), "shape of the returned fake tensor; no I/O effect", lo=1),
    Key("reader.transformed_record_element_type", "str", "uint8", "dtype of the returned fake tensor; no I/O effect"),
    # ---- train ----
    Key("train.epochs", "int", 1, "training epochs", lo=1, io=True, env="DLIO_FAST_EPOCHS"),
    Key("train.computation_time", "time", None, "emulated accelerator seconds per step"),
    Key(
        "train.computation_time_stdev", "stdev", None, "legacy sibling: stdev of computation_time", lo=0, nullable=True
    ),
    Key("train.total_training_steps", "int", -1, "per-epoch step cap (-1: none)", lo=-1, io=True),
    Key("train.seed", "int", 123, "shuffle seed", lo=0, hi=2**32 - 1),
    Key("train.seed_change_epoch", "bool", True, "add the epoch number to the seed"),
    # ---- evaluation ----
    Key("evaluation.eval_time", "time", None, "emulated accelerator seconds per eval step"),
    Key("evaluation.eval_time_stdev", "stdev", None, "legacy sibling: stdev of eval_time", lo=0, nullable=True),
    Key("evaluation.eval_after_epoch", "int", 1, "first epoch followed by an evaluation", lo=0),
    Key("evaluation.epochs_between_evals", "int", 1, "epochs between evaluations", lo=1),
    # ---- checkpoint ----
    Key("checkpoint.checkpoint_folder", "str", "./checkpoints/", "checkpoint root; trailing / stripped", io=True),
    Key("checkpoint.checkpoint_after_epoch", "int", 1, "first epoch that checkpoints (epoch mode)", lo=0, io=True),
    Key("checkpoint.epochs_between_checkpoints", "int", 1, "epochs between checkpoints (epoch mode)", lo=1, io=True),
    Key("checkpoint.steps_between_checkpoints", "int", -1, ">= 0 switches to step mode", lo=-1, io=True),
    Key("checkpoint.type", "enum", "rank_zero", "unused by DLIO's core", choices=("rank_zero", "all_ranks")),
    Key(
        "checkpoint.mode",
        "enum",
        "default",
        "subset: checkpoint a target data-parallel size",
        choices=("default", "subset"),
        io=True,
    ),
    Key(
        "checkpoint.fsync",
        "bool",
        False,
        "fsync each checkpoint file",
        io=True,
        note="honoured (DLIO's typo checkpoint_sync means it never applies)",
    ),
    Key("checkpoint.time_between_checkpoints", "num", -1, "checkpoint-only: seconds slept before each op (abs())"),
    Key("checkpoint.num_checkpoints_write", "int", -1, "checkpoint-only: checkpoints written", lo=-1, io=True),
    Key("checkpoint.num_checkpoints_read", "int", -1, "checkpoint-only: checkpoints read back", lo=-1, io=True),
    Key(
        "checkpoint.recovery_rank_shift",
        "bool",
        False,
        "read another node's checkpoint files",
        io=True,
        note="honoured (DLIO's typo checkpoint_recover_rank_shift means it never applies)",
    ),
    Key("checkpoint.rank_sync", "bool", False, "barrier after each save/load (checkpoint-only)"),
    Key("checkpoint.randomize_tensor", "bool", True, "random tensor content (False: all ones, compressible)", io=True),
    Key(
        "checkpoint.checkpoint_mechanism_classname",
        "str",
        None,
        "plugin checkpoint class (not emulated)",
        nullable=True,
    ),
    Key("checkpoint.ksm.madv_mergeable_id", "int", 12, "madvise MADV_MERGEABLE value", lo=0),
    Key("checkpoint.ksm.high_ram_trigger", "num", 30.0, "RAM % that triggers KSM waiting", lo=0, hi=100),
    Key("checkpoint.ksm.low_ram_exit", "num", 15, "RAM % at which the wait ends", lo=0, hi=100),
    Key("checkpoint.ksm.await_time", "int", 200, "seconds to wait for KSM", lo=0),
    # ---- output ----
    Key(
        "output.folder",
        "str",
        None,
        "output folder (None: DLIO's hydra run dir)",
        nullable=True,
        env="DLIO_FAST_OUTPUT",
    ),
    Key("output.log_file", "str", "dlio.log", "log file name in the output folder"),
    Key("output.metric.exclude_start_steps", "int", 1, "steps excluded at the start of each block", lo=0),
    Key("output.metric.exclude_end_steps", "int", 0, "steps excluded at the end of each block", lo=0),
    # ---- metric ----
    Key("metric.au", "float", 0.90, "target accelerator utilisation (fraction)", lo=0, hi=1),
    # ---- profiling ----
    Key(
        "profiling.profiler",
        "enum",
        "iostat",
        "profiler when workflow.profiling",
        choices=PROFILERS,
        aliases=_NONE_ALIASES,
    ),
    Key("profiling.iostat_devices", "strs", (), "devices for iostat (a string is one device)"),
    # ---- storage ----
    Key(
        "storage.storage_type",
        "enum",
        "local_fs",
        "storage backend",
        choices=STORAGE_TYPES,
        io=True,
        aliases=MappingProxyType({"s3dlio": "s3"}),  # MLPerf Storage's s3dlio configs: S3 through s3dlio
    ),
    Key("storage.storage_root", "str", "./", "directory or bucket", io=True),
    Key("storage.storage_options", "map", None, "backend options (S3 endpoint, credentials ...)", nullable=True),
    # MLPerf Storage's DLIO (s3dlio): several S3 endpoints, one per group of ranks (refused: config/validate.py)
    Key("storage.endpoint_uris", "strs", (), "S3 endpoints spread over the ranks (not supported yet)", io=True),
    Key(
        "storage.use_mpi_endpoint_distribution", "bool", False, "ranks split over endpoint_uris by rank (not supported)"
    ),
)
