"""The section classes of ``Config``, generated from the schema rows: do not edit; after changing a row,
run ``python -m dlio.config.gen_sections``.

One frozen dataclass per section, its fields typed from the rows' types (dlio.config.gen_sections.TYPES),
in the order the loader fills them; each field's metadata names its row or its child section.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, Literal, Mapping, Optional, Tuple, Union

from dlio.config.schema import KEYS_BY_PATH
from dlio.config.timespec import TimeSpec

# the top-level framework key
Framework = Literal["tensorflow", "pytorch"]


def _key(path: str) -> Dict[str, Any]:
    return {"key": KEYS_BY_PATH[path], "help": KEYS_BY_PATH[path].help}


def _section(path: str) -> Dict[str, Any]:
    return {"section": path}


@dataclass(frozen=True)
class ModelParallelismConfig:
    """The model.parallelism section (its rows in dlio: config.keys.dlio)."""

    tensor: int = field(metadata=_key("model.parallelism.tensor"))
    pipeline: int = field(metadata=_key("model.parallelism.pipeline"))
    data: int = field(metadata=_key("model.parallelism.data"))
    zero_stage: int = field(metadata=_key("model.parallelism.zero_stage"))


@dataclass(frozen=True)
class ModelTransformerConfig:
    """The model.transformer section (its rows in dlio: config.keys.dlio)."""

    vocab_size: int = field(metadata=_key("model.transformer.vocab_size"))
    hidden_size: int = field(metadata=_key("model.transformer.hidden_size"))
    ffn_hidden_size: int = field(metadata=_key("model.transformer.ffn_hidden_size"))
    num_attention_heads: int = field(metadata=_key("model.transformer.num_attention_heads"))
    num_kv_heads: int = field(metadata=_key("model.transformer.num_kv_heads"))


@dataclass(frozen=True)
class ModelConfig:
    """The model section (its rows in dlio: config.keys.dlio)."""

    name: str = field(metadata=_key("model.name"))
    type: Optional[str] = field(metadata=_key("model.type"))
    model_size_bytes: int = field(metadata=_key("model.model_size_bytes"))
    model_datatype: Literal[
        "fp16",
        "bf16",
        "fp32",
        "fp64",
        "int8",
        "uint8",
    ] = field(metadata=_key("model.model_datatype"))
    optimizer_datatype: Literal[
        "fp16",
        "bf16",
        "fp32",
        "fp64",
        "int8",
        "uint8",
    ] = field(metadata=_key("model.optimizer_datatype"))
    num_layers: int = field(metadata=_key("model.num_layers"))
    layer_parameters: Tuple[int, ...] = field(metadata=_key("model.layer_parameters"))
    optimization_groups: Tuple[int, ...] = field(metadata=_key("model.optimization_groups"))
    parallelism: ModelParallelismConfig = field(metadata=_section("model.parallelism"))
    transformer: ModelTransformerConfig = field(metadata=_section("model.transformer"))


@dataclass(frozen=True)
class WorkflowConfig:
    """The workflow section (its rows in dlio: config.keys.dlio, kvcache.keys, modelload.keys, vdb.keys)."""

    generate_data: bool = field(metadata=_key("workflow.generate_data"))
    train: bool = field(metadata=_key("workflow.train"))
    evaluation: bool = field(metadata=_key("workflow.evaluation"))
    checkpoint: bool = field(metadata=_key("workflow.checkpoint"))
    profiling: bool = field(metadata=_key("workflow.profiling"))
    debug: bool = field(metadata=_key("workflow.debug"))
    query: Optional[str] = field(metadata=_key("workflow.query"))
    kvcache: bool = field(metadata=_key("workflow.kvcache"))
    model_load: bool = field(metadata=_key("workflow.model_load"))
    vdb: bool = field(metadata=_key("workflow.vdb"))


@dataclass(frozen=True)
class DatasetHdf5Config:
    """The dataset.hdf5 section (its rows in dlio: config.keys.dlio)."""

    chunk_dims: Tuple[int, ...] = field(metadata=_key("dataset.hdf5.chunk_dims"))
    num_dset_per_record: int = field(metadata=_key("dataset.hdf5.num_dset_per_record"))
    max_shape: Tuple[int, ...] = field(metadata=_key("dataset.hdf5.max_shape"))


@dataclass(frozen=True)
class DatasetParquetConfig:
    """The dataset.parquet section (its rows in dlio: config.keys.dlio)."""

    columns: Tuple[Mapping[Any, Any], ...] = field(metadata=_key("dataset.parquet.columns"))
    row_group_size: int = field(metadata=_key("dataset.parquet.row_group_size"))
    read_mode: Literal["default", "row_group"] = field(metadata=_key("dataset.parquet.read_mode"))
    generation_batch_size: int = field(metadata=_key("dataset.parquet.generation_batch_size"))
    partition_by: Optional[str] = field(metadata=_key("dataset.parquet.partition_by"))
    use_s3dlio_gen: bool = field(metadata=_key("dataset.parquet.use_s3dlio_gen"))


@dataclass(frozen=True)
class DatasetConfig:
    """The dataset section (its rows in dlio: config.keys.dlio)."""

    record_length_bytes: Union[int, float] = field(metadata=_key("dataset.record_length_bytes"))
    record_length_bytes_stdev: Union[int, float] = field(metadata=_key("dataset.record_length_bytes_stdev"))
    record_length_bytes_resize: Union[int, float] = field(metadata=_key("dataset.record_length_bytes_resize"))
    num_files_train: int = field(metadata=_key("dataset.num_files_train"))
    num_files_eval: int = field(metadata=_key("dataset.num_files_eval"))
    num_samples_per_file: int = field(metadata=_key("dataset.num_samples_per_file"))
    data_folder: str = field(metadata=_key("dataset.data_folder"))
    num_subfolders_train: int = field(metadata=_key("dataset.num_subfolders_train"))
    num_subfolders_eval: int = field(metadata=_key("dataset.num_subfolders_eval"))
    file_prefix: str = field(metadata=_key("dataset.file_prefix"))
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
    ] = field(metadata=_key("dataset.format"))
    compression: Literal[
        "none",
        "gzip",
        "lzf",
        "bz2",
        "zip",
        "xz",
        "snappy",
        "lz4",
        "zstd",
    ] = field(metadata=_key("dataset.compression"))
    compression_level: int = field(metadata=_key("dataset.compression_level"))
    enable_chunking: bool = field(metadata=_key("dataset.enable_chunking"))
    chunk_size: int = field(metadata=_key("dataset.chunk_size"))
    keep_files: bool = field(metadata=_key("dataset.keep_files"))
    generation_buffer_size: int = field(metadata=_key("dataset.generation_buffer_size"))
    record_dims: Tuple[int, ...] = field(metadata=_key("dataset.record_dims"))
    record_element_type: str = field(metadata=_key("dataset.record_element_type"))
    record_element_bytes: int = field(metadata=_key("dataset.record_element_bytes"))
    hdf5: DatasetHdf5Config = field(metadata=_section("dataset.hdf5"))
    parquet: DatasetParquetConfig = field(metadata=_section("dataset.parquet"))


@dataclass(frozen=True)
class ReaderConfig:
    """The reader section (its rows in dlio: config.keys.dlio)."""

    data_loader: Literal[
        "pytorch",
        "tensorflow",
        "dali",
        "native_dali",
        "synthetic",
    ] = field(metadata=_key("reader.data_loader"))
    batch_size: int = field(metadata=_key("reader.batch_size"))
    batch_size_eval: int = field(metadata=_key("reader.batch_size_eval"))
    read_threads: int = field(metadata=_key("reader.read_threads"))
    computation_threads: int = field(metadata=_key("reader.computation_threads"))
    prefetch_size: int = field(metadata=_key("reader.prefetch_size"))
    file_shuffle: Literal["off", "seed", "random"] = field(metadata=_key("reader.file_shuffle"))
    sample_shuffle: Literal["off", "seed", "random"] = field(metadata=_key("reader.sample_shuffle"))
    shuffle_size: int = field(metadata=_key("reader.shuffle_size"))
    read_type: Literal["on_demand", "memory"] = field(metadata=_key("reader.read_type"))
    file_access: Literal["multi", "shared", "collective", "mpio", "posix"] = field(metadata=_key("reader.file_access"))
    transfer_size: Optional[int] = field(metadata=_key("reader.transfer_size"))
    dont_use_mmap: bool = field(metadata=_key("reader.dont_use_mmap"))
    odirect: bool = field(metadata=_key("reader.odirect"))
    preprocess_time: TimeSpec = field(metadata=_key("reader.preprocess_time"))
    pin_memory: bool = field(metadata=_key("reader.pin_memory"))
    multiprocessing_context: Literal[
        "fork",
        "spawn",
        "forkserver",
    ] = field(metadata=_key("reader.multiprocessing_context"))
    reader_classname: Optional[str] = field(metadata=_key("reader.reader_classname"))
    data_loader_classname: Optional[str] = field(metadata=_key("reader.data_loader_classname"))
    data_loader_sampler: Literal[
        "iterative",
        "index",
        "none",
        None,
    ] = field(metadata=_key("reader.data_loader_sampler"))
    transformed_record_dims: Tuple[int, ...] = field(metadata=_key("reader.transformed_record_dims"))
    transformed_record_element_type: str = field(metadata=_key("reader.transformed_record_element_type"))


@dataclass(frozen=True)
class TrainConfig:
    """The train section (its rows in dlio: config.keys.dlio)."""

    epochs: int = field(metadata=_key("train.epochs"))
    computation_time: TimeSpec = field(metadata=_key("train.computation_time"))
    total_training_steps: int = field(metadata=_key("train.total_training_steps"))
    seed: int = field(metadata=_key("train.seed"))
    seed_change_epoch: bool = field(metadata=_key("train.seed_change_epoch"))


@dataclass(frozen=True)
class EvaluationConfig:
    """The evaluation section (its rows in dlio: config.keys.dlio)."""

    eval_time: TimeSpec = field(metadata=_key("evaluation.eval_time"))
    eval_after_epoch: int = field(metadata=_key("evaluation.eval_after_epoch"))
    epochs_between_evals: int = field(metadata=_key("evaluation.epochs_between_evals"))


@dataclass(frozen=True)
class CheckpointKsmConfig:
    """The checkpoint.ksm section (its rows in dlio: config.keys.dlio)."""

    madv_mergeable_id: int = field(metadata=_key("checkpoint.ksm.madv_mergeable_id"))
    high_ram_trigger: Union[int, float] = field(metadata=_key("checkpoint.ksm.high_ram_trigger"))
    low_ram_exit: Union[int, float] = field(metadata=_key("checkpoint.ksm.low_ram_exit"))
    await_time: int = field(metadata=_key("checkpoint.ksm.await_time"))


@dataclass(frozen=True)
class CheckpointConfig:
    """The checkpoint section (its rows in dlio: config.keys.dlio, config.keys.dlio_fast)."""

    checkpoint_folder: str = field(metadata=_key("checkpoint.checkpoint_folder"))
    checkpoint_after_epoch: int = field(metadata=_key("checkpoint.checkpoint_after_epoch"))
    epochs_between_checkpoints: int = field(metadata=_key("checkpoint.epochs_between_checkpoints"))
    steps_between_checkpoints: int = field(metadata=_key("checkpoint.steps_between_checkpoints"))
    type: Literal["rank_zero", "all_ranks"] = field(metadata=_key("checkpoint.type"))
    mode: Literal["default", "subset"] = field(metadata=_key("checkpoint.mode"))
    fsync: bool = field(metadata=_key("checkpoint.fsync"))
    time_between_checkpoints: Union[int, float] = field(metadata=_key("checkpoint.time_between_checkpoints"))
    num_checkpoints_write: int = field(metadata=_key("checkpoint.num_checkpoints_write"))
    num_checkpoints_read: int = field(metadata=_key("checkpoint.num_checkpoints_read"))
    recovery_rank_shift: bool = field(metadata=_key("checkpoint.recovery_rank_shift"))
    rank_sync: bool = field(metadata=_key("checkpoint.rank_sync"))
    randomize_tensor: bool = field(metadata=_key("checkpoint.randomize_tensor"))
    checkpoint_mechanism_classname: Optional[str] = field(metadata=_key("checkpoint.checkpoint_mechanism_classname"))
    async_save: bool = field(metadata=_key("checkpoint.async_save"))
    async_host_buffer_bytes: int = field(metadata=_key("checkpoint.async_host_buffer_bytes"))
    ksm: Optional[CheckpointKsmConfig] = field(metadata=_section("checkpoint.ksm"))


@dataclass(frozen=True)
class OutputMetricConfig:
    """The output.metric section (its rows in dlio: config.keys.dlio)."""

    exclude_start_steps: int = field(metadata=_key("output.metric.exclude_start_steps"))
    exclude_end_steps: int = field(metadata=_key("output.metric.exclude_end_steps"))


@dataclass(frozen=True)
class OutputConfig:
    """The output section (its rows in dlio: config.keys.dlio)."""

    folder: Optional[str] = field(metadata=_key("output.folder"))
    log_file: str = field(metadata=_key("output.log_file"))
    metric: OutputMetricConfig = field(metadata=_section("output.metric"))


@dataclass(frozen=True)
class MetricConfig:
    """The metric section (its rows in dlio: config.keys.dlio)."""

    au: float = field(metadata=_key("metric.au"))


@dataclass(frozen=True)
class ProfilingConfig:
    """The profiling section (its rows in dlio: config.keys.dlio)."""

    profiler: Literal["none", "iostat", "darshan", "tensorboard"] = field(metadata=_key("profiling.profiler"))
    iostat_devices: Tuple[str, ...] = field(metadata=_key("profiling.iostat_devices"))


@dataclass(frozen=True)
class StorageConfig:
    """The storage section (its rows in dlio: config.keys.dlio)."""

    storage_type: Literal["local_fs", "s3", "aistore"] = field(metadata=_key("storage.storage_type"))
    storage_root: str = field(metadata=_key("storage.storage_root"))
    storage_options: Optional[Mapping[Any, Any]] = field(metadata=_key("storage.storage_options"))
    endpoint_uris: Tuple[str, ...] = field(metadata=_key("storage.endpoint_uris"))
    use_mpi_endpoint_distribution: bool = field(metadata=_key("storage.use_mpi_endpoint_distribution"))


@dataclass(frozen=True)
class DlioFastConfig:
    """The dlio_fast section (its rows in dlio: config.keys.dlio_fast)."""

    engine: Literal["posix", "odirect", "io_uring", "mmap", "null", "s3dlio"] = field(metadata=_key("dlio_fast.engine"))
    qd: int = field(metadata=_key("dlio_fast.qd"))
    cache: Literal["keep", "drop", "drop-all"] = field(metadata=_key("dlio_fast.cache"))
    compute_mode: Literal["spin", "hybrid"] = field(metadata=_key("dlio_fast.compute_mode"))
    compat_dlio_order: bool = field(metadata=_key("dlio_fast.compat_dlio_order"))
    file_order: Literal["name", "path"] = field(metadata=_key("dlio_fast.file_order"))
    skip_bad_files: bool = field(metadata=_key("dlio_fast.skip_bad_files"))
    plots: bool = field(metadata=_key("dlio_fast.plots"))
    trace: bool = field(metadata=_key("dlio_fast.trace"))
    seed: int = field(metadata=_key("dlio_fast.seed"))
    mlperf_rules: Literal["enforce", "warn", "off"] = field(metadata=_key("dlio_fast.mlperf_rules"))
    results_dir: Optional[str] = field(metadata=_key("dlio_fast.results_dir"))
    dialect: Literal["2.0.0", "current", "auto"] = field(metadata=_key("dlio_fast.dialect"))
    null_delay_ns: int = field(metadata=_key("dlio_fast.null_delay_ns"))
    storage_timeout: Union[int, float] = field(metadata=_key("dlio_fast.storage_timeout"))
    create_bucket: bool = field(metadata=_key("dlio_fast.create_bucket"))


@dataclass(frozen=True)
class KvcacheConfig:
    """The kvcache section (its rows in dlio: kvcache.keys)."""

    model: str = field(metadata=_key("kvcache.model"))
    layers: int = field(metadata=_key("kvcache.layers"))
    kv_heads: int = field(metadata=_key("kvcache.kv_heads"))
    head_dim: int = field(metadata=_key("kvcache.head_dim"))
    dtype_bytes: int = field(metadata=_key("kvcache.dtype_bytes"))
    users: int = field(metadata=_key("kvcache.users"))
    workers: int = field(metadata=_key("kvcache.workers"))
    duration: float = field(metadata=_key("kvcache.duration"))
    seed: int = field(metadata=_key("kvcache.seed"))
    trials: int = field(metadata=_key("kvcache.trials"))
    trial_gap: float = field(metadata=_key("kvcache.trial_gap"))
    templates: Optional[Mapping[Any, Any]] = field(metadata=_key("kvcache.templates"))
    qos_interactive: float = field(metadata=_key("kvcache.qos_interactive"))
    qos_responsive: float = field(metadata=_key("kvcache.qos_responsive"))
    multiturn: bool = field(metadata=_key("kvcache.multiturn"))
    multiturn_end: float = field(metadata=_key("kvcache.multiturn_end"))
    max_turns: int = field(metadata=_key("kvcache.max_turns"))
    max_conversations: int = field(metadata=_key("kvcache.max_conversations"))
    decode_batch: int = field(metadata=_key("kvcache.decode_batch"))
    prefix_probe: float = field(metadata=_key("kvcache.prefix_probe"))
    prefill_only_tokens: int = field(metadata=_key("kvcache.prefill_only_tokens"))
    max_concurrent_allocs: int = field(metadata=_key("kvcache.max_concurrent_allocs"))
    cpu_bytes: str = field(metadata=_key("kvcache.cpu_bytes"))
    eviction_target: float = field(metadata=_key("kvcache.eviction_target"))
    eviction_skip: float = field(metadata=_key("kvcache.eviction_skip"))
    storage_capacity: str = field(metadata=_key("kvcache.storage_capacity"))
    io_mode: Literal["compat", "direct", "null"] = field(metadata=_key("kvcache.io_mode"))
    cache_dir: str = field(metadata=_key("kvcache.cache_dir"))
    chunk_tokens: int = field(metadata=_key("kvcache.chunk_tokens"))
    direct_chunk: str = field(metadata=_key("kvcache.direct_chunk"))
    direct_qd: int = field(metadata=_key("kvcache.direct_qd"))
    stage_bytes: str = field(metadata=_key("kvcache.stage_bytes"))
    generation_mode: Literal["none", "fast", "realistic"] = field(metadata=_key("kvcache.generation_mode"))
    trace: Optional[str] = field(metadata=_key("kvcache.trace"))
    trace_format: Literal["auto", "csv", "mooncake", "sharegpt"] = field(metadata=_key("kvcache.trace_format"))
    trace_timing: Literal["timestamps", "asap"] = field(metadata=_key("kvcache.trace_timing"))
    request_rate: float = field(metadata=_key("kvcache.request_rate"))
    block_tokens: int = field(metadata=_key("kvcache.block_tokens"))
    io_trace_log: Optional[str] = field(metadata=_key("kvcache.io_trace_log"))
    drop_check: int = field(metadata=_key("kvcache.drop_check"))


@dataclass(frozen=True)
class ModelLoadConfig:
    """The model_load section (its rows in dlio: modelload.keys)."""

    model: Literal[
        "llama3_8b",
        "llama3_70b",
        "llama3_405b",
        "transformer",
        "generic",
    ] = field(metadata=_key("model_load.model"))
    model_bytes: int = field(metadata=_key("model_load.model_bytes"))
    dtype: Literal["bf16", "fp16", "fp32", "fp8"] = field(metadata=_key("model_load.dtype"))
    shard_size: int = field(metadata=_key("model_load.shard_size"))
    tensor_parallel: int = field(metadata=_key("model_load.tensor_parallel"))
    spread: Literal["slice", "whole", "files"] = field(metadata=_key("model_load.spread"))
    read_mode: Literal[
        "auto",
        "mmap",
        "prefetch",
        "read",
        "odirect",
        "io_uring",
    ] = field(metadata=_key("model_load.read_mode"))
    cache: Literal["cold", "warm"] = field(metadata=_key("model_load.cache"))
    repeats: int = field(metadata=_key("model_load.repeats"))
    threads: int = field(metadata=_key("model_load.threads"))
    qd: int = field(metadata=_key("model_load.qd"))
    prefetch_threads: int = field(metadata=_key("model_load.prefetch_threads"))
    prefetch_block_size: int = field(metadata=_key("model_load.prefetch_block_size"))
    transfer_size: int = field(metadata=_key("model_load.transfer_size"))


@dataclass(frozen=True)
class VdbConfig:
    """The vdb section (its rows in dlio: vdb.keys)."""

    index: Literal["diskann", "aisaq_perf", "aisaq_scale", "hnsw"] = field(metadata=_key("vdb.index"))
    vectors: int = field(metadata=_key("vdb.vectors"))
    dimension: int = field(metadata=_key("vdb.dimension"))
    dtype_bytes: int = field(metadata=_key("vdb.dtype_bytes"))
    max_degree: int = field(metadata=_key("vdb.max_degree"))
    search_list: int = field(metadata=_key("vdb.search_list"))
    beam_width: int = field(metadata=_key("vdb.beam_width"))
    segment_max_mb: int = field(metadata=_key("vdb.segment_max_mb"))
    segments: int = field(metadata=_key("vdb.segments"))
    cache_ratio: float = field(metadata=_key("vdb.cache_ratio"))
    hot_fraction: float = field(metadata=_key("vdb.hot_fraction"))
    hot_share: float = field(metadata=_key("vdb.hot_share"))
    processes: int = field(metadata=_key("vdb.processes"))
    batch: int = field(metadata=_key("vdb.batch"))
    search_threads: int = field(metadata=_key("vdb.search_threads"))
    storage_only: bool = field(metadata=_key("vdb.storage_only"))
    top_k: int = field(metadata=_key("vdb.top_k"))
    duration: float = field(metadata=_key("vdb.duration"))
    queries: int = field(metadata=_key("vdb.queries"))
    runs: int = field(metadata=_key("vdb.runs"))
    cpu_per_hop_us: float = field(metadata=_key("vdb.cpu_per_hop_us"))
    inline_pq: int = field(metadata=_key("vdb.inline_pq"))
    pq_bytes: int = field(metadata=_key("vdb.pq_bytes"))
    pq_reads_per_hop: int = field(metadata=_key("vdb.pq_reads_per_hop"))
    trace: Optional[str] = field(metadata=_key("vdb.trace"))
    index_folder: str = field(metadata=_key("vdb.index_folder"))
    seed: int = field(metadata=_key("vdb.seed"))


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
