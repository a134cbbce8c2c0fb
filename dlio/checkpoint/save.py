"""A checkpoint save of one rank, timed, on any storage backend.

A save of rank r writes the files of ``checkpoint.plan_checkpoint`` under
``{checkpoint_folder}/global_epoch{E}_step{S}/`` as one set (dlio.storage.base ``write_set``): on a
filesystem through the C core in ``TRANSFER`` (16 MiB) sequential requests with ``min(4, files)``
threads, the window holding mkdir/create, the writes and (``checkpoint.fsync: true``) one fsync per file
(``fsync_s``); on S3 as PUTs (multipart for large objects). The window does not contain tensor
generation: the content is made before it (DLIO's ``torch.rand`` runs at init; its pickling/CRC inside the
window is not storage). A save that cannot fit is refused before the window; one that fails leaves no
half-written files.

Deviations, all recorded in the record (``dlio.checkpoint.record``):
  * ``randomize_tensor: false`` writes tensors of ones in each file's dtype (0x01 for int8, 1.0 for
    fp16/bf16/fp32/fp64) through the same path, compressible and dedupable as DLIO means them to be.
  * Random content: every 4 KiB block written is unique (offset and issue time stamped on files).
  * Engines: ``odirect`` is posix + O_DIRECT, ``mmap`` cannot write and is replaced by posix.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from dlio.checkpoint.layout import CheckpointPlan, step_folder
from dlio.checkpoint.record import finish_record, new_record, set_fields
from dlio.checkpoint.transfers import CkptSet, TransferOptions, set_content
from dlio.config import Config
from dlio.progress import Progress, phase_of
from dlio.storage.base import FSYNC, Backend
from dlio.system.mpi import Comm


def save(
    cfg: Config,
    comm: Optional[Comm],
    epoch: int,
    step: int,
    opts: Optional[TransferOptions] = None,
    plan: Optional[CheckpointPlan] = None,
    backend: Optional[Backend] = None,
    progress: Optional[Progress] = None,
) -> Dict[str, Any]:
    """Write this rank's checkpoint files of ``global_epoch{epoch}_step{step}``; returns the record.

    ``opts``: how the files move (``TransferOptions``: engine, fsync, a barrier before the window ...;
    None: the config's). ``plan`` avoids recomputing the layout."""
    cs = CkptSet.of(cfg, comm, epoch, step, opts, plan, backend)
    randomize = bool(cfg.checkpoint.randomize_tensor)
    do_fsync = bool(cfg.checkpoint.fsync if cs.opts.fsync is None else cs.opts.fsync)
    files = list(cs.plan.files)
    total = int(sum(f.nbytes for f in files))
    with phase_of(progress, "save", f"saving {step_folder(epoch, step)}", total, "B", counts=False) as ph:
        res = cs.backend.write_set(
            cs.paths(files),
            [f.nbytes for f in files],
            set_content(files, randomize),
            cs.options(cfg, lambda n: ph.update(min(n, total), nbytes=n), fsync=do_fsync),
        )
    rec = new_record(
        "save",
        cs.comm,
        epoch,
        step,
        cs.folder,
        cs.plan.dlio_size_GiB,
        files,
        bytes=res.bytes,
        bytes_issued=res.bytes_issued,
        prepare_s=res.prepare_s,
        io_s=res.io_s,
        io_window_s=res.io_window_s,
        fsync_s=res.fsync_s,
        sync_s=0.0,
        **set_fields(res),
        fsync=do_fsync and cs.backend.has(FSYNC),
        cache=res.cache,
        randomize_tensor=randomize,
    )
    return finish_record(rec, res.wall_start_s, res.m0, res.m1)
