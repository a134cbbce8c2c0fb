"""Model loading's keys (dlio.modelload): ``workflow.model_load`` runs it instead of training."""

from __future__ import annotations

from typing import Tuple

from dlio.config.keys.row import Key

SECTION = "model_load"  # its section and its workflow.model_load flag (dlio.config.families)

KEYS: Tuple[Key, ...] = (
    Key("workflow.model_load", "bool", False, "load a model's weights (model_load.*) instead of training", io=True),
    Key(
        "model_load.model",
        "enum",
        "llama3_8b",
        "the model: a Llama 3 (Hugging Face's config), transformer (model.transformer.* and model.num_layers), "
        "or generic (model_load.model_bytes of tensors)",
        choices=("llama3_8b", "llama3_70b", "llama3_405b", "transformer", "generic"),
        io=True,
    ),
    Key("model_load.model_bytes", "bytes", 16 * 2**30, "size of a generic model in bytes", lo=4096, hi=2**50, io=True),
    Key("model_load.dtype", "enum", "bf16", "dtype of the weights", choices=("bf16", "fp16", "fp32", "fp8"), io=True),
    Key(
        "model_load.shard_size",
        "int",
        5 * 10**9,
        "safetensors shard size in bytes, as save_pretrained(max_shard_size) splits (Hugging Face's 5GB)",
        lo=4096,
        hi=2**42,
        io=True,
    ),
    Key(
        "model_load.tensor_parallel",
        "int",
        0,
        "ranks per tensor-parallel group (0: all the job's ranks); the job holds ranks / this many replicas",
        lo=0,
        hi=65536,
        io=True,
    ),
    Key(
        "model_load.spread",
        "enum",
        "slice",
        "what each rank reads: slice (its tensor-parallel part of every tensor, vLLM's way), whole (every shard: "
        "every rank the whole model), files (the shards dealt to the ranks of a group)",
        choices=("slice", "whole", "files"),
        io=True,
    ),
    Key(
        "model_load.read_mode",
        "enum",
        "auto",
        "auto (vLLM's default: prefetch on NFS / Lustre when the checkpoint fits in 90% of the available RAM, "
        "else mmap), mmap (safetensors' way: map and fault every page), prefetch (vLLM's: the shards dealt "
        "to the ranks read whole into the page cache while the mmap pass runs), read (buffered pread), "
        "odirect (pread with O_DIRECT), io_uring (O_DIRECT, model_load.qd in flight)",
        choices=("auto", "mmap", "prefetch", "read", "odirect", "io_uring"),
        io=True,
    ),
    Key(
        "model_load.cache",
        "enum",
        "cold",
        "cold: the shards' pages dropped (checked with mincore) before each load; warm: a first load fills the page "
        "cache, the timed ones read from it (the page cache's figure)",
        choices=("cold", "warm"),
        io=True,
    ),
    Key("model_load.repeats", "int", 3, "timed loads", lo=1, hi=1000, io=True),
    Key(
        "model_load.threads", "int", 1, "reader threads per rank (a shard is read by one thread)", lo=1, hi=256, io=True
    ),
    Key("model_load.qd", "int", 8, "reads in flight per thread in io_uring mode", lo=1, hi=1024, io=True),
    Key(
        "model_load.prefetch_threads",
        "int",
        8,
        "prefetch: reader threads per rank, one shard each at a time (vLLM's --safetensors-prefetch-num-threads, 8)",
        lo=1,
        hi=256,
        io=True,
    ),
    Key(
        "model_load.prefetch_block_size",
        "int",
        16 << 20,
        "prefetch: bytes per read() of a shard (vLLM's --safetensors-prefetch-block-size, 16 MiB)",
        lo=4096,
        hi=1 << 30,
        io=True,
    ),
    Key(
        "model_load.transfer_size",
        "int",
        16 << 20,
        "bytes per request (mmap: pages touched per request)",
        lo=4096,
        hi=1 << 30,
        io=True,
    ),
)
