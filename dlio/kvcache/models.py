"""KV bytes per token of the models the reference benchmark knows (kv_cache/models.py):
2 x layers x kv_heads x head_dim x dtype bytes (K and V per layer and head). The rules' options use
llama3.1-8b (131,072 B/token) and llama3.1-70b-instruct (327,680 B/token); the docs' 4,096 and
16,384 are wrong, the code is right (inference-storage.md 1.1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

from dlio.base.errors import ConfigError


@dataclass(frozen=True)
class KvModel:
    name: str
    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int = 2

    @property
    def bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes


# head_dim = hidden / heads unless the model's config says otherwise (qwen3, gpt-oss).
MODELS: Dict[str, KvModel] = {
    m.name: m
    for m in (
        KvModel("tiny-1b", 12, 4, 128),
        KvModel("mistral-7b", 32, 8, 128),
        KvModel("llama2-7b", 32, 32, 128),
        KvModel("llama3.1-8b", 32, 8, 128),
        KvModel("llama3.1-70b-instruct", 80, 8, 128),
        KvModel("qwen3-32b", 64, 8, 128),
        KvModel("gpt-oss-120b", 36, 8, 64),
        KvModel("gpt-oss-20b", 24, 8, 64),
    )
}
ALIASES = {"llama3.1-70b": "llama3.1-70b-instruct", "llama3-8b": "llama3.1-8b", "llama3-70b": "llama3.1-70b-instruct"}


def resolve_model(kv: Any) -> KvModel:
    """The model of a config's kvcache section: the named one, with any explicit dimension given."""
    name = ALIASES.get(kv.model, kv.model)
    base = MODELS.get(name)
    explicit = (kv.layers, kv.kv_heads, kv.head_dim)
    if base is None and not all(explicit):
        raise ConfigError(
            f"kvcache.model = {kv.model!r}: unknown model; known: {', '.join(MODELS)}, or give "
            "kvcache.layers, kvcache.kv_heads and kvcache.head_dim",
            "kvcache.model",
            kv.model,
        )
    b = base or KvModel(name, 1, 1, 1)
    return KvModel(
        name,
        kv.layers or b.layers,
        kv.kv_heads or b.kv_heads,
        kv.head_dim or b.head_dim,
        kv.dtype_bytes or b.dtype_bytes,
    )
