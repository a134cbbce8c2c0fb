"""What one rank reads to load its part of the model, and the requests that read it in each mode.

Who reads what (``model_load.spread``), rank r of a job of S ranks, groups of TP =
``model_load.tensor_parallel`` ranks (S / TP model replicas, tensor-parallel rank t = r mod TP):

  slice   tensor-parallel serving from Hugging Face shards (vLLM's and SGLang's default loaders): every
          rank opens every shard, reads its header, and reads its 1/TP of each tensor: a contiguous
          block of rows of a column-parallel tensor (q/k/v, gate/up, embedding, lm_head), one run of
          columns in every row of a row-parallel one (o_proj, down_proj: strided), the whole of a
          replicated one (norms). With TP 1 that is the whole model.
  whole   every rank reads every shard whole: a loader that builds the full state dict on each rank and
          slices it in memory (what users of many-rank jobs complain about: TP times the bytes).
  files   the shards are dealt to the ranks of a group (shard i to rank i mod TP), each read whole: a
          loader that reads each file once per group and sends the tensors over the interconnect.

The wanted byte ranges become requests by read mode:
  mmap    the pages that hold them (a strided slice touches every page a row's run falls in), merged
          when they touch, touched one load per page by the C mmap engine, as safetensors' mmap is
          faulted by the copy to the device; no madvise (safetensors makes none);
  read / odirect / io_uring  ranges whose gap is under ``transfer_size`` merged (a chunked reader
          reads through a small gap rather than issue a request per row), then cut into
          ``transfer_size`` requests; O_DIRECT ranges widened to the 4 KiB alignment (a tail stops at
          the end of the file).
"""

from __future__ import annotations

import dataclasses
from typing import List, Sequence, Tuple

import numpy as np

from dlio import _core
from dlio.modelload.models import unit_range
from dlio.modelload.shards import Shard

PAGE = 4096
DIO_ALIGN = 4096
EXTENT_DTYPE = np.dtype([("file", "<u4"), ("offset", "<u8"), ("length", "<u8")])
SPREADS = ("slice", "whole", "files")


@dataclasses.dataclass(frozen=True)
class RankPlan:
    """One rank's reads: the shard files it opens, the requests, and the bytes it wants."""

    files: List[int]  # indices into the model's shards, in the order the ops name them
    ops: np.ndarray  # _core.OP_DTYPE, ``file`` indexing ``files``
    wanted_bytes: int  # the tensors' (and headers') bytes this rank needs
    pages: int  # mmap: distinct pages touched (0 in the other modes)

    @property
    def bytes(self) -> int:
        return int(self.ops["length"].sum()) if len(self.ops) else 0


def _tensor_extents(shard: Shard, tp: int, tp_rank: int, itemsize: int) -> np.ndarray:
    """(offset, length) in the file of what rank tp_rank of a group of tp wants of one shard."""
    parts = [np.array([[0, len(shard.header)]], dtype=np.uint64)]
    for t, b, e in shard.tensors:
        lo, hi = unit_range(t, tp, tp_rank)
        if t.split is None or tp == 1 or (lo == 0 and hi == t.shape[t.split]):
            parts.append(np.array([[b, e - b]], dtype=np.uint64))
        elif t.split == 0:
            row = (e - b) // t.shape[0]
            parts.append(np.array([[b + lo * row, (hi - lo) * row]], dtype=np.uint64))
        else:  # a run of columns in every row
            row = (e - b) // t.shape[0]
            starts = b + np.arange(t.shape[0], dtype=np.uint64) * np.uint64(row) + np.uint64(lo * itemsize)
            parts.append(np.stack([starts, np.full_like(starts, (hi - lo) * itemsize)], axis=1))
    return np.concatenate(parts)


def wanted(shards: Sequence[Shard], spread: str, tp: int, tp_rank: int, itemsize: int) -> np.ndarray:
    """EXTENT_DTYPE records (file = shard index) of what the rank wants, sorted by file and offset."""
    pieces = []
    for i, s in enumerate(shards):
        if spread == "slice":
            x = _tensor_extents(s, tp, tp_rank, itemsize)
        elif spread == "whole" or (spread == "files" and i % tp == tp_rank):
            x = np.array([[0, s.size]], dtype=np.uint64)
        else:
            continue
        e = np.zeros(len(x), dtype=EXTENT_DTYPE)
        e["file"], e["offset"], e["length"] = i, x[:, 0], x[:, 1]
        pieces.append(e)
    out = np.concatenate(pieces) if pieces else np.zeros(0, dtype=EXTENT_DTYPE)
    return out[np.lexsort((out["offset"], out["file"]))]


def merge(starts: np.ndarray, ends: np.ndarray, gap: int) -> Tuple[np.ndarray, np.ndarray]:
    """Sorted ranges [starts, ends) of one file joined where the next starts within ``gap`` bytes of
    the end so far."""
    if not len(starts):
        return starts, ends
    reach = np.maximum.accumulate(ends.astype(np.int64))
    new = np.ones(len(starts), dtype=bool)
    new[1:] = starts[1:].astype(np.int64) > reach[:-1] + gap
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(starts)) - 1
    return starts[first], reach[last].astype(starts.dtype)


def _cut(file: int, starts: np.ndarray, ends: np.ndarray, transfer: int) -> np.ndarray:
    """OP_DTYPE reads covering each range in ``transfer``-byte requests (the last one shorter)."""
    lens = (ends - starts).astype(np.int64)
    counts = -(-lens // transfer)
    ops = np.zeros(int(counts.sum()), dtype=_core.OP_DTYPE)
    if not len(ops):
        return ops
    first = np.repeat(starts.astype(np.int64), counts)
    k = np.arange(len(ops)) - np.repeat(np.cumsum(counts) - counts, counts)
    off = first + k * transfer
    end = np.repeat(ends.astype(np.int64), counts)
    ops["file"] = file
    ops["op"] = _core.OP_READ
    ops["offset"] = off
    ops["length"] = np.minimum(off + transfer, end) - off
    return ops


def rank_plan(
    shards: Sequence[Shard], spread: str, tp: int, tp_rank: int, itemsize: int, mode: str, transfer: int
) -> RankPlan:
    """The requests of rank ``tp_rank`` of its group in read mode ``mode`` (see the module)."""
    ext = wanted(shards, spread, tp, tp_rank, itemsize)
    files = [int(f) for f in np.unique(ext["file"])]
    ops, pages = [], 0
    for k, f in enumerate(files):
        e = ext[ext["file"] == f]
        size = shards[f].size
        s = e["offset"].astype(np.int64)
        t = s + e["length"].astype(np.int64)
        if mode == "mmap":
            s, t = s // PAGE * PAGE, np.minimum(-(-t // PAGE) * PAGE, size)
            s, t = merge(s, t, 0)
            pages += int((-(-(t - s) // PAGE)).sum())
        else:
            if mode in ("odirect", "io_uring"):
                s, t = s // DIO_ALIGN * DIO_ALIGN, np.minimum(-(-t // DIO_ALIGN) * DIO_ALIGN, size)
            s, t = merge(s, t, transfer)
        ops.append(_cut(k, s, t, transfer))
    all_ops = np.concatenate(ops) if ops else np.zeros(0, dtype=_core.OP_DTYPE)
    return RankPlan(files, all_ops, int(ext["length"].sum()), pages)
