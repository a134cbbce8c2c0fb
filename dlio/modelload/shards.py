"""A model's weights as Hugging Face publishes them: safetensors shards and their index.

Sharding follows ``save_pretrained(max_shard_size=...)`` (huggingface_hub's
``split_state_dict_into_shards``): the tensors in state-dict order, a new shard when the next tensor
would take the current one past ``shard_size`` (a tensor larger than that gets a shard of its own);
files ``model-00001-of-0000N.safetensors`` (``model.safetensors`` when there is one) and
``model.safetensors.index.json`` (``metadata.total_size``, ``weight_map``).

A shard is the safetensors format (https://github.com/huggingface/safetensors, "Format"): an 8-byte
little-endian header length N, N bytes of JSON ({"__metadata__": {"format": "pt"}, name: {"dtype",
"shape", "data_offsets": [begin, end]}}, padded with spaces to a multiple of 8), then the tensors'
bytes, contiguous, in the order safetensors' ``serialize`` writes them (by name, one dtype). The
header is laid over the file's first bytes when it is written (dlio.storage.base ``SetContent``), the
tensors are random bytes.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from typing import Dict, List, Tuple

from dlio.modelload.models import Model, Tensor

INDEX = "model.safetensors.index.json"
# every name a Hugging Face model's weights take (dlio.storage.places: a folder holding one that no run made
# holds someone's model)
MODEL_NAMES = (INDEX, "model.safetensors", "model-*-of-*.safetensors")


@dataclasses.dataclass(frozen=True)
class Shard:
    """One safetensors file: its tensors with their byte range in the file."""

    name: str
    header: bytes  # the 8-byte length and the JSON, padded
    tensors: Tuple[Tuple[Tensor, int, int], ...]  # (tensor, begin, end) in the file, by offset
    size: int


def split(model: Model, shard_size: int) -> List[List[Tensor]]:
    """The tensors of each shard, as save_pretrained groups them."""
    shards: List[List[Tensor]] = [[]]
    used = 0
    for t in model.tensors:
        n = t.elements() * model.itemsize
        if shards[-1] and used + n > shard_size:
            shards.append([])
            used = 0
        shards[-1].append(t)
        used += n
    return shards


def header_bytes(tensors: List[Tensor], dtype: str, itemsize: int) -> Tuple[bytes, List[Tuple[Tensor, int, int]]]:
    """The header of a shard holding ``tensors`` and their data ranges (relative to the data)."""
    meta: Dict[str, object] = {"__metadata__": {"format": "pt"}}
    ranges, at = [], 0
    for t in sorted(tensors, key=lambda t: t.name):
        n = t.elements() * itemsize
        meta[t.name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [at, at + n]}
        ranges.append((t, at, at + n))
        at += n
    text = json.dumps(meta, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text, ranges


def shard_name(i: int, n: int) -> str:
    return "model.safetensors" if n == 1 else f"model-{i + 1:05d}-of-{n:05d}.safetensors"


def layout(model: Model, shard_size: int) -> List[Shard]:
    """Every shard of the model: name, header, tensors at their file offsets, size."""
    groups = split(model, shard_size)
    out = []
    for i, g in enumerate(groups):
        head, ranges = header_bytes(g, model.dtype, model.itemsize)
        h = len(head)
        out.append(
            Shard(
                shard_name(i, len(groups)),
                head,
                tuple((t, h + b, h + e) for t, b, e in ranges),
                h + (ranges[-1][2] if ranges else 0),
            )
        )
    return out


def index_text(model: Model, shards: List[Shard]) -> bytes:
    """model.safetensors.index.json as huggingface_hub writes it (indent 2, keys sorted)."""
    weight_map = {t.name: s.name for s in shards for t, _, _ in s.tensors}
    doc = {"metadata": {"total_size": model.nbytes}, "weight_map": weight_map}
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
