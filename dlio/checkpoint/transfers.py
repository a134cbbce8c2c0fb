"""A checkpoint's files as a set for the storage backend (dlio.storage.base: ``write_set`` / ``read_set``):
their names, sizes, content and the options of the transfer.

The files go out in sequential ``TRANSFER`` (16 MiB) requests, each file written (read) start to end by
one of ``min(4, files)`` threads (dlio.storage.file_sets on a filesystem). A ``.pt`` file is written as
torch.save lays it out (``dlio.checkpoint.torchzip``): the same requests cover the whole file, and the
container's literal bytes (zip headers, pickle, central directory: a few hundred bytes per tensor,
planned once per file shape) are laid over the content that covers them (``file_overlays``);
``torch.load`` opens the files. ``ones_pattern`` is the content of a tensor of ones
(``randomize_tensor: false``).
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from dlio.checkpoint.layout import ONE_BYTES, CkptFile
from dlio.storage.base import SetContent

TRANSFER = 16 << 20


def file_overlays(files: Sequence[CkptFile]) -> Optional[List[Any]]:
    """Per file, the literal ranges of its container (torch.save's zip records), or None when no
    file has one (raw files: tensorflow)."""
    out = [f.torch_file.segments if f.state is not None else None for f in files]
    return out if any(x is not None for x in out) else None


def ones_pattern(dtype: str) -> int:
    """The 8-byte pattern of a tensor of ones in dtype (1.0 in fp16/bf16/fp32/fp64, 1 in int8)."""
    one = ONE_BYTES.get(dtype, b"\x01")
    return int(np.frombuffer(one * (8 // len(one)), dtype=np.uint64)[0])


def set_content(files: Sequence[CkptFile], randomize: bool) -> SetContent:
    """Random tensors (every 4 KiB block unique), or tensors of ones in each file's dtype, with each
    file's container laid over them."""
    return SetContent(
        fills=None if randomize else [ones_pattern(f.dtype) for f in files],
        overlays=file_overlays(files),
    )
