"""A checkpoint's files as a set for the storage backend (dlio.storage.base: ``write_set`` / ``read_set``):
their names, sizes, content and the options of the transfer (``TransferOptions``, made into the backend's
``SetOptions`` by ``CkptSet.options``).

The files go out in sequential ``TRANSFER`` (16 MiB) requests, each file written (read) start to end by
one of ``min(4, files)`` threads (dlio.storage.file_sets on a filesystem). A ``.pt`` file is written as
torch.save lays it out (``dlio.checkpoint.torchzip``): the same requests cover the whole file, and the
container's literal bytes (zip headers, pickle, central directory: a few hundred bytes per tensor,
planned once per file shape) are laid over the content that covers them (``file_overlays``);
``torch.load`` opens the files. ``ones_pattern`` is the content of a tensor of ones
(``randomize_tensor: false``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from dlio.checkpoint.layout import ONE_BYTES, CheckpointPlan, CkptFile, plan_checkpoint, step_folder
from dlio.config import Config, engines
from dlio.storage import backend_for
from dlio.storage.base import Backend, SetContent, SetOptions
from dlio.system.mpi import Comm

TRANSFER = 16 << 20


@dataclasses.dataclass(frozen=True)
class TransferOptions:
    """How a checkpoint save or load moves its files; None takes the config's.

    ``engine`` / ``direct`` override the config's (file backends); ``qd`` dlio_fast.qd; ``threads`` None:
    one per file, up to 4; ``fsync`` (saves) checkpoint.fsync; ``drop`` (loads) drops the files' cached
    pages first (default: dlio.checkpoint.load ``default_drop``); ``barrier``: a barrier just before the
    window (checkpoint-only mode); ``delay_ns``: the null engine's busy-wait per request (an asynchronous
    save's emulated storage, dlio.checkpoint.async_save); ``temp_names``: each file written under a temporary
    name and renamed at the end (an asynchronous save killed mid-write leaves no half-written checkpoint)."""

    engine: Optional[str] = None
    direct: Optional[bool] = None
    qd: Optional[int] = None
    threads: Optional[int] = None
    transfer: int = TRANSFER
    fsync: Optional[bool] = None
    drop: Optional[bool] = None
    barrier: bool = False
    temp_names: bool = False
    delay_ns: int = 0


@dataclasses.dataclass(frozen=True)
class CkptSet:
    """What a save and a load of one checkpoint step on one rank share: the rank, the backend, the
    layout, the step's folder and the engine its files go through."""

    comm: Comm
    backend: Backend
    plan: CheckpointPlan
    folder: str
    engine: str
    direct: bool
    opts: TransferOptions

    @classmethod
    def of(
        cls,
        cfg: Config,
        comm: Optional[Comm],
        epoch: int,
        step: int,
        opts: Optional[TransferOptions],
        plan: Optional[CheckpointPlan],
        backend: Optional[Backend],
    ) -> "CkptSet":
        """The set of ``global_epoch{epoch}_step{step}``: ``comm``, ``backend``, ``plan`` and ``opts``
        default to one rank, the config's backend, the config's layout and the config's options."""
        comm = comm if comm is not None else Comm()
        backend = backend if backend is not None else backend_for(cfg)
        plan = plan if plan is not None else plan_checkpoint(cfg, comm.rank, comm.size)
        opts = opts if opts is not None else TransferOptions()
        if opts.engine is None:
            eng, o_direct = backend.engine_spec(cfg, checkpoint=True)
            o_direct = o_direct if opts.direct is None else bool(opts.direct)
        else:
            eng, o_direct = engines.resolve(opts.engine, opts.direct, checkpoint=True)
        folder = backend.join(backend.checkpoint_root(cfg), step_folder(epoch, step))
        return cls(comm, backend, plan, folder, eng, o_direct, opts)

    def paths(self, files: Sequence[CkptFile]) -> List[str]:
        return [self.backend.join(self.folder, f.name) for f in files]

    def options(self, cfg: Config, on_bytes: Callable[[int], None], **kind: Any) -> SetOptions:
        """The backend's options of the transfer; ``kind``: ``fsync`` (a save) or ``drop`` (a load)."""
        o = self.opts
        return SetOptions(
            engine=self.engine,
            direct=self.direct,
            qd=int(o.qd if o.qd is not None else cfg.dlio_fast.qd),
            threads=o.threads,
            transfer=o.transfer,
            before_window=self.comm.barrier if o.barrier else None,
            on_bytes=on_bytes,
            delay_ns=o.delay_ns,
            temp_names=o.temp_names,
            **kind,
        )


def file_overlays(files: Sequence[CkptFile]) -> Optional[List[Any]]:
    """Per file, the literal ranges of its container (torch.save's zip records), or None when no
    file has one (raw files: tensorflow)."""
    tfs = [f.torch_file for f in files]
    out = [tf.segments if tf is not None else None for tf in tfs]
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
