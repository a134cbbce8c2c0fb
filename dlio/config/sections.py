"""The section classes of ``Config``, generated from the schema rows: do not edit; after changing a row,
run ``python -m dlio.config.gen_sections``.

One frozen dataclass per section, its fields typed from the rows' types (dlio.config.gen_sections.TYPES),
in the order the loader fills them; a field is named as its row (section.name) or its child section.
"""

from dataclasses import dataclass
from typing import Any, Dict, Literal, Mapping, Optional, Tuple, Union

from dlio.config.timespec import TimeSpec

# a num row's value: an int stays an int, a float a float
Number = Union[int, float]

# the top-level framework key
Framework = Literal["tensorflow", "pytorch"]


@dataclass(frozen=True)
class ModelParallelismConfig:
    """The model.parallelism section (its rows in dlio: config.keys.dlio)."""

    tensor: int
    pipeline: int
    data: int
    zero_stage: int


@dataclass(frozen=True)
class ModelTransformerConfig:
    """The model.transformer section (its rows in dlio: config.keys.dlio)."""

    vocab_size: int
    hidden_size: int
    ffn_hidden_size: int
    num_attention_heads: int
    num_kv_heads: int


@dataclass(frozen=True)
class ModelConfig:
    """The model section (its rows in dlio: config.keys.dlio)."""

    name: str
    type: Optional[str]
    model_size_bytes: int
    model_datatype: Literal["fp16", "bf16", "fp32", "fp64", "int8", "uint8"]
    optimizer_datatype: Literal["fp16", "bf16", "fp32", "fp64", "int8", "uint8"]
    num_layers: int
    layer_parameters: Tuple[int, ...]
    optimization_groups: Tuple[int, ...]
    parallelism: ModelParallelismConfig
    transformer: ModelTransformerConfig


@dataclass(frozen=True)
class WorkflowConfig:
    """The workflow section (its rows in dlio: config.keys.dlio, kvcache.keys, modelload.keys, vdb.keys)."""

    generate_data: bool
    train: bool
    evaluation: bool
    checkpoint: bool
    profiling: bool
    debug: bool
    query: Optional[str]
    kvcache: bool
    model_load: bool
    vdb: bool


@dataclass(frozen=True)
class DatasetHdf5Config:
    """The dataset.hdf5 section (its rows in dlio: config.keys.dlio)."""

    chunk_dims: Tuple[int, ...]
    num_dset_per_record: int
    max_shape: Tuple[int, ...]


@dataclass(frozen=True)
class DatasetParquetConfig:
    """The dataset.parquet section (its rows in dlio: config.keys.dlio)."""

    columns: Tuple[Mapping[Any, Any], ...]
    row_group_size: int
    read_mode: Literal["default", "row_group"]
    generation_batch_size: int
    partition_by: Optional[str]
    use_s3dlio_gen: bool


@dataclass(frozen=True)
class DatasetConfig:
    """The dataset section (its rows in dlio: config.keys.dlio)."""

    record_length_bytes: Number
    record_length_bytes_stdev: Number
    record_length_bytes_resize: Number
    num_files_train: int
    num_files_eval: int
    num_samples_per_file: int
    data_folder: str
    num_subfolders_train: int
    num_subfolders_eval: int
    file_prefix: str
    format: Literal[
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
        "parquet",
    ]
    compression: Literal["none", "gzip", "lzf", "bz2", "zip", "xz", "snappy", "lz4", "zstd"]
    compression_level: int
    enable_chunking: bool
    chunk_size: int
    keep_files: bool
    generation_buffer_size: int
    record_dims: Tuple[int, ...]
    record_element_type: str
    record_element_bytes: int
    hdf5: DatasetHdf5Config
    parquet: DatasetParquetConfig


@dataclass(frozen=True)
class ReaderConfig:
    """The reader section (its rows in dlio: config.keys.dlio)."""

    data_loader: Literal["pytorch", "tensorflow", "dali", "native_dali", "synthetic"]
    batch_size: int
    batch_size_eval: int
    read_threads: int
    computation_threads: int
    prefetch_size: int
    file_shuffle: Literal["off", "seed", "random"]
    sample_shuffle: Literal["off", "seed", "random"]
    shuffle_size: int
    read_type: Literal["on_demand", "memory"]
    file_access: Literal["multi", "shared", "collective", "mpio", "posix"]
    transfer_size: Optional[int]
    dont_use_mmap: bool
    odirect: bool
    preprocess_time: TimeSpec
    pin_memory: bool
    multiprocessing_context: Literal["fork", "spawn", "forkserver"]
    reader_classname: Optional[str]
    data_loader_classname: Optional[str]
    data_loader_sampler: Literal["iterative", "index", "none", None]
    transformed_record_dims: Tuple[int, ...]
    transformed_record_element_type: str


@dataclass(frozen=True)
class TrainConfig:
    """The train section (its rows in dlio: config.keys.dlio)."""

    epochs: int
    computation_time: TimeSpec
    total_training_steps: int
    seed: int
    seed_change_epoch: bool


@dataclass(frozen=True)
class EvaluationConfig:
    """The evaluation section (its rows in dlio: config.keys.dlio)."""

    eval_time: TimeSpec
    eval_after_epoch: int
    epochs_between_evals: int


@dataclass(frozen=True)
class CheckpointKsmConfig:
    """The checkpoint.ksm section (its rows in dlio: config.keys.dlio)."""

    madv_mergeable_id: int
    high_ram_trigger: Number
    low_ram_exit: Number
    await_time: int


@dataclass(frozen=True)
class CheckpointConfig:
    """The checkpoint section (its rows in dlio: config.keys.dlio, config.keys.dlio_fast)."""

    checkpoint_folder: str
    checkpoint_after_epoch: int
    epochs_between_checkpoints: int
    steps_between_checkpoints: int
    type: Literal["rank_zero", "all_ranks"]
    mode: Literal["default", "subset"]
    fsync: bool
    time_between_checkpoints: Number
    num_checkpoints_write: int
    num_checkpoints_read: int
    recovery_rank_shift: bool
    rank_sync: bool
    randomize_tensor: bool
    checkpoint_mechanism_classname: Optional[str]
    async_save: bool
    async_host_buffer_bytes: int
    ksm: Optional[CheckpointKsmConfig]


@dataclass(frozen=True)
class OutputMetricConfig:
    """The output.metric section (its rows in dlio: config.keys.dlio)."""

    exclude_start_steps: int
    exclude_end_steps: int


@dataclass(frozen=True)
class OutputConfig:
    """The output section (its rows in dlio: config.keys.dlio)."""

    folder: Optional[str]
    log_file: str
    metric: OutputMetricConfig


@dataclass(frozen=True)
class MetricConfig:
    """The metric section (its rows in dlio: config.keys.dlio)."""

    au: float


@dataclass(frozen=True)
class ProfilingConfig:
    """The profiling section (its rows in dlio: config.keys.dlio)."""

    profiler: Literal["none", "iostat", "darshan", "tensorboard"]
    iostat_devices: Tuple[str, ...]


@dataclass(frozen=True)
class StorageConfig:
    """The storage section (its rows in dlio: config.keys.dlio)."""

    storage_type: Literal["local_fs", "s3", "aistore"]
    storage_root: str
    storage_options: Optional[Mapping[Any, Any]]
    endpoint_uris: Tuple[str, ...]
    use_mpi_endpoint_distribution: bool


@dataclass(frozen=True)
class DlioFastConfig:
    """The dlio_fast section (its rows in dlio: config.keys.dlio_fast)."""

    engine: Literal["posix", "odirect", "io_uring", "mmap", "null", "s3dlio"]
    qd: int
    cache: Literal["keep", "drop", "drop-all"]
    compute_mode: Literal["spin", "hybrid"]
    compat_dlio_order: bool
    file_order: Literal["name", "path"]
    skip_bad_files: bool
    plots: bool
    trace: bool
    seed: int
    mlperf_rules: Literal["enforce", "warn", "off"]
    results_dir: Optional[str]
    dialect: Literal["2.0.0", "current", "auto"]
    null_delay_ns: int
    storage_timeout: Number
    create_bucket: bool


@dataclass(frozen=True)
class KvcacheConfig:
    """The kvcache section (its rows in dlio: kvcache.keys)."""

    model: str
    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    users: int
    workers: int
    duration: float
    seed: int
    trials: int
    trial_gap: float
    templates: Optional[Mapping[Any, Any]]
    qos_interactive: float
    qos_responsive: float
    multiturn: bool
    multiturn_end: float
    max_turns: int
    max_conversations: int
    decode_batch: int
    prefix_probe: float
    prefill_only_tokens: int
    max_concurrent_allocs: int
    cpu_bytes: str
    eviction_target: float
    eviction_skip: float
    storage_capacity: str
    io_mode: Literal["compat", "direct", "null"]
    cache_dir: str
    chunk_tokens: int
    direct_chunk: str
    direct_qd: int
    stage_bytes: str
    generation_mode: Literal["none", "fast", "realistic"]
    trace: Optional[str]
    trace_format: Literal["auto", "csv", "mooncake", "sharegpt"]
    trace_timing: Literal["timestamps", "asap"]
    request_rate: float
    block_tokens: int
    io_trace_log: Optional[str]
    drop_check: int


@dataclass(frozen=True)
class ModelLoadConfig:
    """The model_load section (its rows in dlio: modelload.keys)."""

    model: Literal["llama3_8b", "llama3_70b", "llama3_405b", "transformer", "generic"]
    model_bytes: int
    dtype: Literal["bf16", "fp16", "fp32", "fp8"]
    shard_size: int
    tensor_parallel: int
    spread: Literal["slice", "whole", "files"]
    read_mode: Literal["auto", "mmap", "prefetch", "read", "odirect", "io_uring"]
    cache: Literal["cold", "warm"]
    repeats: int
    threads: int
    qd: int
    prefetch_threads: int
    prefetch_block_size: int
    transfer_size: int


@dataclass(frozen=True)
class VdbConfig:
    """The vdb section (its rows in dlio: vdb.keys)."""

    index: Literal["diskann", "aisaq_perf", "aisaq_scale", "hnsw"]
    vectors: int
    dimension: int
    dtype_bytes: int
    max_degree: int
    search_list: int
    beam_width: int
    segment_max_mb: int
    segments: int
    cache_ratio: float
    hot_fraction: float
    hot_share: float
    processes: int
    batch: int
    search_threads: int
    storage_only: bool
    top_k: int
    duration: float
    queries: int
    runs: int
    cpu_per_hop_us: float
    inline_pq: int
    pq_bytes: int
    pq_reads_per_hop: int
    trace: Optional[str]
    index_folder: str
    seed: int


# section path -> its class
CLASSES: Dict[str, type] = {
    "model": ModelConfig,
    "model.parallelism": ModelParallelismConfig,
    "model.transformer": ModelTransformerConfig,
    "workflow": WorkflowConfig,
    "dataset": DatasetConfig,
    "dataset.hdf5": DatasetHdf5Config,
    "dataset.parquet": DatasetParquetConfig,
    "reader": ReaderConfig,
    "train": TrainConfig,
    "evaluation": EvaluationConfig,
    "checkpoint": CheckpointConfig,
    "checkpoint.ksm": CheckpointKsmConfig,
    "output": OutputConfig,
    "output.metric": OutputMetricConfig,
    "metric": MetricConfig,
    "profiling": ProfilingConfig,
    "storage": StorageConfig,
    "dlio_fast": DlioFastConfig,
    "kvcache": KvcacheConfig,
    "model_load": ModelLoadConfig,
    "vdb": VdbConfig,
}
