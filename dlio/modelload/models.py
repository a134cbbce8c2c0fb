"""The model whose weights are loaded: its tensors (names, shapes, dtype) and how tensor parallelism
splits each one, computed from the model's configuration.

Llama 3 (``llama3_8b``, ``llama3_70b``, ``llama3_405b``: Hugging Face's ``config.json`` values;
``llama3-8b`` is read the same) and any Llama-shaped ``transformer`` from DLIO's ``model.transformer.*``
keys and ``model.num_layers`` carry Hugging Face's tensor names (``model.layers.N.self_attn.q_proj.weight``
...) and shapes ([out, in] per linear layer, as ``nn.Linear`` stores them). A ``generic`` model is
``model_load.model_bytes`` of 2-D tensors (``model.weights.N``, GENERIC_TENSOR bytes each, the last one
smaller), split on rows.

Each tensor says how a tensor-parallel server (vLLM, SGLang: Megatron's layout) divides it among the
ranks of a group: ``split`` 0 (rows: column-parallel q/k/v/gate/up, the vocabulary-parallel embedding
and lm_head), 1 (columns: row-parallel o_proj, down_proj) or None (replicated: the norms), in units of
``unit`` rows or columns (a head's head_dim for q/k/v/o, one row or column otherwise). When a group has
more ranks than units (8 kv heads, TP 16), ranks share a unit, as vLLM replicates kv heads.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple

import numpy as np

from dlio.base.errors import ConfigError
from dlio.config import Config
from dlio.config.sections import ModelLoadConfig

# safetensors' dtype names and their sizes
DTYPES: Dict[str, Tuple[str, int]] = {
    "bf16": ("BF16", 2),
    "fp16": ("F16", 2),
    "fp32": ("F32", 4),
    "fp8": ("F8_E4M3", 1),
}

# Hugging Face config.json of each Llama 3 model (meta-llama/Meta-Llama-3-8B, -70B, Llama-3.1-405B)
LLAMA3: Dict[str, Dict[str, int]] = {
    "llama3_8b": dict(hidden=4096, layers=32, heads=32, kv_heads=8, ffn=14336, vocab=128256),
    "llama3_70b": dict(hidden=8192, layers=80, heads=64, kv_heads=8, ffn=28672, vocab=128256),
    "llama3_405b": dict(hidden=16384, layers=126, heads=128, kv_heads=8, ffn=53248, vocab=128256),
}
MODELS = tuple(LLAMA3) + ("transformer", "generic")
GENERIC_TENSOR = 256 << 20  # bytes per tensor of a generic model (the last one smaller)


@dataclasses.dataclass(frozen=True)
class Tensor:
    name: str
    shape: Tuple[int, ...]
    split: Optional[int]  # 0 rows, 1 columns, None replicated
    unit: int = 1  # rows (columns) per unit of the split

    def elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclasses.dataclass(frozen=True)
class Model:
    name: str
    dtype: str  # safetensors' name (BF16 ...)
    itemsize: int
    tensors: Tuple[Tensor, ...]  # in the state dict's order (what save_pretrained shards by)
    config: Dict[str, int]

    @property
    def nbytes(self) -> int:
        return sum(t.elements() for t in self.tensors) * self.itemsize

    @property
    def parameters(self) -> int:
        return sum(t.elements() for t in self.tensors)


def llama_tensors(hidden: int, layers: int, heads: int, kv_heads: int, ffn: int, vocab: int) -> List[Tensor]:
    """LlamaForCausalLM's state dict (untied embeddings, as Llama 3 ships), in its order."""
    if hidden % heads:
        raise ConfigError(
            f"model.transformer.hidden_size = {hidden} is not a multiple of num_attention_heads = {heads}",
            "model.transformer.hidden_size",
            hidden,
        )
    hd = hidden // heads
    out = [Tensor("model.embed_tokens.weight", (vocab, hidden), 0)]
    for i in range(layers):
        p = f"model.layers.{i}."
        out += [
            Tensor(p + "self_attn.q_proj.weight", (heads * hd, hidden), 0, hd),
            Tensor(p + "self_attn.k_proj.weight", (kv_heads * hd, hidden), 0, hd),
            Tensor(p + "self_attn.v_proj.weight", (kv_heads * hd, hidden), 0, hd),
            Tensor(p + "self_attn.o_proj.weight", (hidden, heads * hd), 1, hd),
            Tensor(p + "mlp.gate_proj.weight", (ffn, hidden), 0),
            Tensor(p + "mlp.up_proj.weight", (ffn, hidden), 0),
            Tensor(p + "mlp.down_proj.weight", (hidden, ffn), 1),
            Tensor(p + "input_layernorm.weight", (hidden,), None),
            Tensor(p + "post_attention_layernorm.weight", (hidden,), None),
        ]
    out += [Tensor("model.norm.weight", (hidden,), None), Tensor("lm_head.weight", (vocab, hidden), 0)]
    return out


def generic_tensors(nbytes: int, itemsize: int, width: int = 4096) -> List[Tensor]:
    """``nbytes`` of [rows, width] tensors of GENERIC_TENSOR bytes (the last one the rest, at least a
    row), split on rows."""
    row = width * itemsize
    rows_total = max(1, nbytes // row)
    per = max(1, GENERIC_TENSOR // row)
    return [
        Tensor(f"model.weights.{i}", (int(min(per, rows_total - at)), width), 0)
        for i, at in enumerate(range(0, rows_total, per))
    ]


def model_of(cfg: Config) -> Model:
    """The model_load.model of a config, with model_load.dtype."""
    ml = cfg.section(ModelLoadConfig)
    dtype, itemsize = DTYPES[ml.dtype]
    if ml.model in LLAMA3:
        c = dict(LLAMA3[ml.model])
        tensors = llama_tensors(**c)
    elif ml.model == "transformer":
        t = cfg.model.transformer
        if cfg.model.num_layers < 1:
            raise ConfigError(
                "model_load.model = transformer needs model.num_layers >= 1 (and model.transformer.*)",
                "model.num_layers",
                cfg.model.num_layers,
            )
        c = dict(
            hidden=t.hidden_size,
            layers=cfg.model.num_layers,
            heads=t.num_attention_heads,
            kv_heads=t.num_kv_heads,
            ffn=t.ffn_hidden_size,
            vocab=t.vocab_size,
        )
        tensors = llama_tensors(**c)
    else:
        c = {"bytes": int(ml.model_bytes)}
        tensors = generic_tensors(int(ml.model_bytes), itemsize)
    return Model(ml.model, dtype, itemsize, tuple(tensors), c)


def unit_range(t: Tensor, tp: int, tp_rank: int) -> Tuple[int, int]:
    """[first, end) rows (split 0) or columns (split 1) of tensor ``t`` that rank ``tp_rank`` of a
    group of ``tp`` reads; the whole extent for a replicated tensor or a group of one."""
    if t.split is None or tp == 1:
        return 0, t.shape[t.split or 0]
    n_units = t.shape[t.split] // t.unit
    if n_units >= tp:
        lo, hi = tp_rank * n_units // tp, (tp_rank + 1) * n_units // tp
    else:  # fewer units (kv heads) than ranks: each unit replicated over tp / n_units ranks
        lo = tp_rank * n_units // tp
        hi = lo + 1
    return lo * t.unit, hi * t.unit
