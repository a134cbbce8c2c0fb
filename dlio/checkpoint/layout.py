"""Checkpoint sizes, rank layout and file names, from the model section: pure functions, no I/O.

Everything follows DLIO's ``checkpointing/base_checkpointing.py`` (docs/dlio-facts.md §6), formula for formula:

* Rank layout: ``MP = TP*PP``; ``DP = comm_size // MP`` (or ``model.parallelism.data`` in subset mode);
  ``tp = rank % TP``, ``pp = (rank // TP) % PP``, ``dp = rank // MP``, ``mp = rank % MP``.
  ZeRO 0: only ranks ``< MP`` write; ZeRO >= 1: every rank writes.  A 2.0.0 config's ``checkpoint.type``
  decides instead, as in DLIO 2.0.0: ``rank_zero`` (its default) rank 0 alone, ``all_ranks`` every rank;
  current DLIO ignores the key.
* Transformer layers ``0 .. L+2`` (0 = embedding, 1..L = transformer layers, L+1 = lm_head, L+2 = final
  norm) split over the pipeline stages with DLIO's remainder rule; tensor sizes per layer from
  ``get_layer_parameters`` (integer divisions by TP and, for ZeRO-3, by DP), in ``model_datatype``.
  ZeRO-1 ranks with ``dp != 0`` hold no model state.
* Optimizer state: ``[n, 5H, n, 5H, n, 5H]`` in ``optimizer_datatype`` with ``n = nparam // (DP*MP)``
  (ZeRO >= 1) or ``nparam // MP`` (ZeRO 0).
* Legacy ``layer_parameters`` (int8, ``p // TP`` per layer, layers 1..L over the stages) and
  ``optimization_groups`` (int8 ``a`` and ``b`` per group plus a ``combined`` tensor of their sum).
* Non-transformer models (``model.type != transformer``) with ``model_size_bytes > 0``: one int8
  tensor, file ``model_states-{rank}``.  dlio-fast honours ``model.model_size`` (DLIO ignores it).
* File names under ``global_epoch{E}_step{S}/``: ``model_states-{rank}``,
  ``layer_{i}-model_{mp}_model_states`` (ZeRO 1/2, PP > 1), ``model_{mp}_model_states`` (ZeRO 1/2,
  PP = 1), ``zero_pp_rank_{dp}_mp_rank_{mp}_model_states`` (ZeRO 0/3) and
  ``zero_pp_rank_{dp}_mp_rank_{mp}_optim_states``; suffix ``.pt`` (pytorch).  For tensorflow each
  state is ``{name}.pb-1.data-00000-of-00001`` (the tensors) plus ``{name}.pb-1.index``, and rank 0
  writes the folder's ``checkpoint`` file, as ``tf.train.Checkpoint.save`` does.

Each file holds one dtype (every DLIO state file does).  A ``.pt`` file is what ``torch.save`` of
DLIO's state dict writes (``dlio.checkpoint.torchzip``: the zip container ``torch.load`` opens, the
tensors' bytes as its storages); ``CkptFile.nbytes`` is its size on disk, ``tensor_bytes`` the
tensors' share.  The state's structure is DLIO's: ``{"a": model}``, ``{layer: {index: tensor}}``,
``{group: tensor}``, legacy ``{group: {"a", "b"}, "combined"}``; DLIO's legacy ``layer_parameters``
puts one dict object under every layer, which torch stores once.  For tensorflow the tensors are
written back to back and TF's index is not emulated: it is ``TF_INDEX_BASE + TF_INDEX_PER_TENSOR
* tensors`` bytes, the ``checkpoint`` file ``TF_CHECKPOINT_BYTES``.

Two totals are given: ``dlio_size_GiB`` is DLIO's ``checkpoint_size`` (what its summary calls
``checkpoint_size_GB`` and divides by the duration), with its quirks (legacy tensors are not counted;
ZeRO-2 counts model state that ``dp != 0`` ranks never write; a non-transformer model counts
``model_size`` only); ``total_bytes`` is what really goes to storage over all ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from dlio.base.errors import ConfigError
from dlio.base.units import GiB
from dlio.checkpoint import torchzip
from dlio.config import Config

DTYPE_BYTES = {"int8": 1, "uint8": 1, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}
# numpy view of one element of each dtype (bf16 has no numpy dtype: its 1.0 is 0x3F80 as uint16)
ONE_BYTES = {
    "int8": b"\x01",
    "uint8": b"\x01",
    "fp16": b"\x00\x3c",
    "bf16": b"\x80\x3f",
    "fp32": b"\x00\x00\x80\x3f",
    "fp64": b"\x00\x00\x00\x00\x00\x00\xf0\x3f",
}

TF_INDEX_BASE = 64
TF_INDEX_PER_TENSOR = 48
TF_CHECKPOINT_BYTES = 128
EXT = {"pytorch": "pt", "tensorflow": "pb"}


# --------------------------------------------------------------------------------------------------
# data


@dataclass(frozen=True)
class Layout:
    """Where one rank sits: parallelism degrees and its coordinates (DLIO's names)."""

    tp: int
    pp: int
    dp: int
    mp: int  # TP * PP
    zero: int
    tp_rank: int
    pp_rank: int
    dp_rank: int
    mp_rank: int
    subset: bool

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CkptFile:
    """One file a rank writes: ``name`` relative to the ``global_epoch{E}_step{S}`` folder."""

    name: str
    nbytes: int
    dtype: str  # element type of every tensor in it (ones are written in it)
    kind: str  # model_state | layers | layer | optimizer | tf_index | tf_checkpoint
    tensors: int = 1
    tensor_bytes: int = 0  # the tensors' bytes in it (nbytes less the container)
    state: Optional[torchzip.Sig] = field(default=None, repr=False, compare=False)  # .pt: torchzip.signature

    @property
    def torch_file(self) -> Optional[torchzip.TorchFile]:
        """The torch.save container of a .pt file (cached per shape), None for a raw file."""
        return torchzip.container(self.state, self.dtype) if self.state is not None else None

    def to_dict(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "bytes": self.nbytes,
            "tensor_bytes": self.tensor_bytes,
            "dtype": self.dtype,
            "kind": self.kind,
            "tensors": self.tensors,
        }


@dataclass(frozen=True)
class CheckpointPlan:
    """What one rank writes per checkpoint, and the totals over all ranks."""

    rank: int
    comm_size: int
    layout: Layout
    files: Tuple[CkptFile, ...]  # this rank's files (names relative to the step folder)
    writers: Tuple[int, ...]  # ranks that write at least one file
    total_bytes: int  # bytes all ranks write per checkpoint (files' sizes on disk)
    total_files: int
    model_bytes: int  # DLIO's allreduced model state bytes (see module doc)
    optimizer_bytes: int  # DLIO's allreduced optimizer state bytes
    dlio_size_GiB: float  # DLIO's checkpoint_size (its "GB" are GiB)
    num_parameters: int
    ext: str
    per_rank_bytes: Tuple[int, ...] = field(repr=False, default=())
    total_tensor_bytes: int = 0  # the tensors' share of total_bytes (less the .pt containers)

    @property
    def rank_bytes(self) -> int:
        return sum(f.nbytes for f in self.files)

    @property
    def writes(self) -> bool:
        return bool(self.files)

    @property
    def total_GiB(self) -> float:
        return self.total_bytes / GiB

    def to_dict(self) -> Dict[str, Any]:
        return {
            "rank": self.rank,
            "comm_size": self.comm_size,
            "layout": self.layout.to_dict(),
            "files": [f.to_dict() for f in self.files],
            "rank_bytes": self.rank_bytes,
            "writers": list(self.writers),
            "total_bytes": self.total_bytes,
            "total_tensor_bytes": self.total_tensor_bytes,
            "total_files": self.total_files,
            "model_bytes": self.model_bytes,
            "optimizer_bytes": self.optimizer_bytes,
            "dlio_size_GiB": self.dlio_size_GiB,
            "num_parameters": self.num_parameters,
            "ext": self.ext,
        }


def step_folder(epoch: int, step: int) -> str:
    """DLIO's checkpoint id: ``global_epoch{E}_step{S}``."""
    return f"global_epoch{int(epoch)}_step{int(step)}"


# --------------------------------------------------------------------------------------------------
# DLIO's formulas


def model_of(cfg: Config) -> Dict[str, Any]:
    """The model section as DLIO's formulas below read it (one dict, DLIO's short names)."""
    m = cfg.model
    t = m.transformer
    return dict(
        type=m.type,
        model_size=m.model_size_bytes,
        mdt=m.model_datatype,
        odt=m.optimizer_datatype,
        L=m.num_layers,
        layer_parameters=tuple(m.layer_parameters),
        optimization_groups=tuple(m.optimization_groups),
        tp=m.parallelism.tensor,
        pp=m.parallelism.pipeline,
        data=m.parallelism.data,
        zero=m.parallelism.zero_stage,
        V=t.vocab_size,
        H=t.hidden_size,
        FFN=t.ffn_hidden_size,
        heads=t.num_attention_heads,
        kv=t.num_kv_heads,
        subset=cfg.checkpoint.mode == "subset",
        framework=cfg.framework,
        # DLIO 2.0.0 reads checkpoint.type (default rank_zero: only rank 0 saves); current DLIO never does
        location=cfg.checkpoint.type if cfg.dlio_fast.dialect == "2.0.0" else None,
    )


def num_parameters(m: Dict[str, Any]) -> int:
    """DLIO's ``get_num_parameters`` (0 without transformer layers)."""
    L, H, V, FFN = m["L"], m["H"], m["V"], m["FFN"]
    if L <= 0:
        return 0
    dkv = (H // m["heads"]) * m["kv"]
    emb = V * H
    per_layer = H + H * (H + 2 * dkv) + H * H + H + FFN * 2 * H + FFN * H
    return emb + per_layer * L + H + emb


def layout(m: Dict[str, Any], rank: int, comm_size: int) -> Layout:
    tp, pp = m["tp"], m["pp"]
    mp = tp * pp
    if m["subset"]:
        dp = m["data"]
        if dp <= 0:
            raise ConfigError(
                "checkpoint.mode = 'subset' needs model.parallelism.data >= 1", "model.parallelism.data", dp
            )
        if dp * mp < comm_size:
            raise ConfigError(
                f"subset checkpointing: data {dp} x tensor {tp} x pipeline {pp} = {dp * mp} "
                f"is less than the {comm_size} ranks",
                "model.parallelism.data",
                dp,
            )
    else:
        if comm_size % mp:
            raise ConfigError(
                f"the checkpoint layout needs a multiple of tensor {tp} x pipeline {pp} = {mp} ranks, not "
                f"{comm_size}: run with mpiexec -n {mp} (or a multiple), or emulate a part of it with "
                f"checkpoint.mode=subset model.parallelism.data=1",
                "model.parallelism",
                mp,
            )
        dp = comm_size // mp
    return Layout(
        tp=tp,
        pp=pp,
        dp=dp,
        mp=mp,
        zero=m["zero"],
        tp_rank=rank % tp,
        pp_rank=(rank // tp) % pp,
        dp_rank=rank // mp,
        mp_rank=rank % mp,
        subset=m["subset"],
    )


def layer_index_range(m: Dict[str, Any], pp_rank: int, predefined: bool) -> Tuple[int, int]:
    """DLIO's ``get_layer_index``: (start, end) inclusive for a pipeline stage."""
    L, pp = m["L"], m["pp"]
    per, rem = L // pp, L % pp
    if pp_rank < rem:
        start = pp_rank * (per + 1) + 1
        end = start + per
    else:
        start = rem * (per + 1) + (pp_rank - rem) * per + 1
        end = start + per - 1
    if not predefined:
        if pp_rank == pp - 1:
            end = L + 2
        if pp_rank == 0:
            start = 0
    return start, end


def layer_parameters(m: Dict[str, Any], lay: Layout, index: int) -> List[int]:
    """DLIO's ``get_layer_parameters`` (transformer layers; elements, not bytes)."""
    L, H, V, FFN, tp = m["L"], m["H"], m["V"], m["FFN"], lay.tp
    if L <= 0:
        return []
    dkv = (H // m["heads"]) * m["kv"]
    sf = lay.dp if lay.zero >= 3 else 1
    if index == 0 or index == L + 1:
        return [H * V // tp // sf]
    if index == L + 2:
        return [H // sf]
    return [
        H // sf,
        H * (H + 2 * dkv) // tp // sf,
        H * H // tp // sf,
        H // sf,
        H * 2 * FFN // tp // sf,
        H * FFN // tp // sf,
    ]


def optimizer_groups(m: Dict[str, Any], lay: Layout) -> List[int]:
    """DLIO's ``get_optimization_groups`` for the computed (non-legacy) case."""
    if m["L"] <= 0:
        return []
    nparam = num_parameters(m)
    n = nparam // (lay.dp * lay.mp) if lay.zero > 0 else nparam // lay.mp
    if n <= 0:
        return []
    h5 = m["H"] * 5
    return [n, h5, n, h5, n, h5]


def dlio_model_GiB(m: Dict[str, Any], model_bytes: int) -> float:
    """DLIO's model size in GiB: the model state's bytes, or ``model_size`` alone for a
    non-transformer model (see the module doc)."""
    if m["type"] != "transformer" and m["model_size"] > 0:
        return m["model_size"] / GiB
    return model_bytes / GiB


def _writes(m: Dict[str, Any], lay: Layout, rank: int) -> bool:
    """Whether `rank` saves anything.  DLIO 2.0.0: rank 0 alone under rank_zero, every rank under
    all_ranks; current DLIO: under ZeRO 0 the model-parallel ranks < MP, else every rank."""
    if m.get("location") == "rank_zero":
        return rank == 0
    if m.get("location") == "all_ranks":
        return True
    return rank < lay.mp if lay.zero == 0 else True


def _state(stem: str, tree: torchzip.Tree, dtype: str, kind: str) -> Tuple[str, int, str, str, int, torchzip.Sig]:
    """(stem, tensor bytes, dtype, kind, tensors, state signature) of a state dict DLIO saves."""
    sig = torchzip.signature(tree)
    numels = torchzip.tensor_numels(sig)  # each distinct tensor once, as torch.save stores them
    return stem, sum(numels) * DTYPE_BYTES[dtype], dtype, kind, len(numels), sig


StateFile = Tuple[str, int, str, str, int, torchzip.Sig]  # _state's (stem, bytes, dtype, kind, tensors, sig)


def _rank_state(m: Dict[str, Any], rank: int, comm_size: int) -> Tuple["Layout", List[StateFile], int, int]:
    """(layout, files without extension, dlio model bytes, dlio optimizer bytes) of one rank; each
    file is ``_state``'s tuple, its tree the dict DLIO builds (keys and order as in DLIO)."""
    lay = layout(m, rank, comm_size)
    files: List[StateFile] = []
    model_b = opt_b = 0
    if not _writes(m, lay, rank):
        return lay, files, 0, 0
    dp_r, mp_r = lay.dp_rank, lay.mp_rank
    zname = f"zero_pp_rank_{dp_r}_mp_rank_{mp_r}"
    # model state (non-transformer): written first
    if m["model_size"] > 0 and m["type"] != "transformer":
        files.append(_state(f"model_states-{rank}", {"a": m["model_size"]}, "int8", "model_state"))
    # layer state: {layer index: {tensor index: elements}}
    predefined = len(m["layer_parameters"]) > 0
    layers: Dict[int, torchzip.Tree] = {}
    ldt = "int8"
    start, end = layer_index_range(m, lay.pp_rank, predefined)
    if predefined:
        # DLIO builds this dict once and puts the same object under every layer
        shared = {str(j): p // lay.tp for j, p in enumerate(m["layer_parameters"]) if p > 0}
        for i in range(start, end + 1):
            layers[i] = shared
    elif m["L"] > 0 and not (lay.zero == 1 and dp_r != 0):
        ldt = m["mdt"]
        for i in range(start, end + 1):
            layers[i] = {str(j): p for j, p in enumerate(layer_parameters(m, lay, i)) if p > 0}
            model_b += sum(layers[i].values()) * DTYPE_BYTES[ldt]
    if layers:
        everything = {str(i): layers[i] for i in range(start, end + 1)}
        if 0 < lay.zero < 3:
            if dp_r == 0 and m["L"] > 0:
                if lay.pp > 1:
                    for i in range(start, end + 1):
                        files.append(_state(f"layer_{i}-model_{mp_r}_model_states", layers[i], ldt, "layer"))
                else:
                    files.append(_state(f"model_{mp_r}_model_states", everything, ldt, "layers"))
        else:
            files.append(_state(f"{zname}_model_states", everything, ldt, "layers"))
    # optimizer state
    if m["optimization_groups"]:
        # a and b per group, plus 'combined' (their sum), int8; DLIO does not count it in its size
        tree: torchzip.Tree = {str(j): {"a": g, "b": g} for j, g in enumerate(m["optimization_groups"]) if g > 0}
        tree["combined"] = sum(g for g in m["optimization_groups"] if g > 0)
        files.append(_state(f"{zname}_optim_states", tree, "int8", "optimizer"))
    else:
        groups = {str(j): g for j, g in enumerate(optimizer_groups(m, lay)) if g > 0}
        if groups:
            opt_b += sum(groups.values()) * DTYPE_BYTES[m["odt"]]
            files.append(_state(f"{zname}_optim_states", groups, m["odt"], "optimizer"))
    return lay, files, model_b, opt_b


def _named(m: Dict[str, Any], rank: int, stems: Sequence[StateFile]) -> List[CkptFile]:
    out: List[CkptFile] = []
    if m["framework"] == "tensorflow":
        for stem, nb, dt, kind, nt, _ in stems:
            out.append(CkptFile(f"{stem}.pb-1.data-00000-of-00001", nb, dt, kind, nt, nb))
            out.append(CkptFile(f"{stem}.pb-1.index", TF_INDEX_BASE + TF_INDEX_PER_TENSOR * nt, "uint8", "tf_index", 0))
        if rank == 0 and stems:
            out.append(CkptFile("checkpoint", TF_CHECKPOINT_BYTES, "uint8", "tf_checkpoint", 0))
    else:
        for stem, nb, dt, kind, nt, sig in stems:
            size = torchzip.container(sig, dt).size  # torch.save's file: the tensors in its zip container
            out.append(CkptFile(f"{stem}.{EXT['pytorch']}", size, dt, kind, nt, nb, sig))
    return out


def _check_rank(rank: Any, comm_size: Any) -> Tuple[int, int]:
    for name, v in (("rank", rank), ("comm_size", comm_size)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{name} = {v!r}: expected an integer", name, v)
    if comm_size < 1 or not 0 <= rank < comm_size:
        raise ConfigError(f"rank {rank} of {comm_size}: expected 0 <= rank < comm_size >= 1", "rank", rank)
    return rank, comm_size


def rank_files(cfg: Config, rank: int, comm_size: int) -> List[CkptFile]:
    """Just the files ``rank`` writes (cheap: no loop over the other ranks)."""
    rank, comm_size = _check_rank(rank, comm_size)
    m = model_of(cfg)
    _, stems, _, _ = _rank_state(m, rank, comm_size)
    return _named(m, rank, stems)


def plan_checkpoint(cfg: Config, rank: int, comm_size: int) -> CheckpointPlan:
    """The checkpoint of ``rank`` among ``comm_size`` ranks, with totals over all ranks.

    Loops over every rank (a few microseconds each), so a 4096-rank plan takes a fraction of a
    second; ``rank_files`` gives one rank's files alone."""
    rank, comm_size = _check_rank(rank, comm_size)
    m = model_of(cfg)
    if m["zero"] >= 3 and m["pp"] > 1:
        raise ConfigError(
            "ZeRO stage 3 is not compatible with pipeline parallelism > 1", "model.parallelism.zero_stage", m["zero"]
        )
    mine: List[CkptFile] = []
    lay_mine: Optional[Layout] = None
    per_rank: List[int] = []
    writers: List[int] = []
    nfiles = 0
    model_b = opt_b = 0
    # Ranks of one (writes, pp stage, dp == 0, rank 0) class have identical sizes; memoise on that.
    memo: Dict[Tuple, Tuple[int, int, int, int, int]] = {}
    tensor_total = 0
    for r in range(comm_size):
        lay0 = layout(m, r, comm_size)
        writes = _writes(m, lay0, r)
        key = (writes, lay0.pp_rank, lay0.dp_rank == 0, r == 0)  # sizes do not depend on tp_rank
        if r == rank or key not in memo:
            lay, stems, mb, ob = _rank_state(m, r, comm_size)
            files = _named(m, r, stems)
            memo[key] = (sum(f.nbytes for f in files), len(files), mb, ob, sum(f.tensor_bytes for f in files))
            if r == rank:
                mine, lay_mine = files, lay
        nb, nf, mb, ob, tb = memo[key]
        per_rank.append(nb)
        tensor_total += tb
        nfiles += nf
        model_b += mb
        opt_b += ob
        if nf:
            writers.append(r)
    assert lay_mine is not None  # rank is in range(comm_size) (_check_rank)
    return CheckpointPlan(
        rank=rank,
        comm_size=comm_size,
        layout=lay_mine,
        files=tuple(mine),
        writers=tuple(writers),
        total_bytes=sum(per_rank),
        total_files=nfiles,
        model_bytes=model_b,
        optimizer_bytes=opt_b,
        dlio_size_GiB=dlio_model_GiB(m, model_b) + opt_b / GiB,
        num_parameters=num_parameters(m),
        ext=EXT.get(m["framework"], "pt"),
        per_rank_bytes=tuple(per_rank),
        total_tensor_bytes=tensor_total,
    )
