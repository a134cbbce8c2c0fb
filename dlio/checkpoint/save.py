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

from dlio.checkpoint.layout import CheckpointPlan, plan_checkpoint, step_folder
from dlio.checkpoint.record import finish_record, new_record
from dlio.checkpoint.transfers import TRANSFER, set_content
from dlio.config import engines
from dlio.progress import phase_of
from dlio.storage import backend_for
from dlio.storage.base import FSYNC, Backend, SetOptions
from dlio.system.mpi import Comm


def save(
    cfg: Any,
    comm: Optional[Comm],
    epoch: int,
    step: int,
    engine: Optional[str] = None,
    direct: Optional[bool] = None,
    qd: Optional[int] = None,
    threads: Optional[int] = None,
    fsync: Optional[bool] = None,
    transfer: int = TRANSFER,
    plan: Optional[CheckpointPlan] = None,
    barrier: bool = False,
    backend: Optional[Backend] = None,
    progress: Any = None,
    delay_ns: int = 0,
) -> Dict[str, Any]:
    """Write this rank's checkpoint files of ``global_epoch{epoch}_step{step}``; returns the record.

    ``barrier``: a barrier just before the window (checkpoint-only mode). ``plan`` avoids recomputing the
    layout. ``engine`` / ``direct`` override the config's (file backends). ``delay_ns``: the null engine's
    busy-wait per request (an asynchronous save's emulated storage, dlio.checkpoint.async_save)."""
    comm = comm if comm is not None else Comm()
    backend = backend if backend is not None else backend_for(cfg)
    plan = plan if plan is not None else plan_checkpoint(cfg, comm.rank, comm.size)
    if engine is None:
        eng, o_direct = backend.engine_spec(cfg, checkpoint=True)
        o_direct = o_direct if direct is None else bool(direct)
    else:
        eng, o_direct = engines.resolve(engine, direct, checkpoint=True)
    randomize = bool(cfg.checkpoint.randomize_tensor)
    do_fsync = bool(cfg.checkpoint.fsync if fsync is None else fsync)
    files = list(plan.files)
    folder = backend.join(backend.checkpoint_root(cfg), step_folder(epoch, step))
    total = int(sum(f.nbytes for f in files))
    with phase_of(progress, "save", f"saving {step_folder(epoch, step)}", total, "B", counts=False) as ph:
        res = backend.write_set(
            [backend.join(folder, f.name) for f in files],
            [f.nbytes for f in files],
            set_content(files, randomize),
            SetOptions(
                engine=eng,
                direct=o_direct,
                qd=int(qd if qd is not None else cfg.dlio_fast.qd),
                threads=threads,
                transfer=transfer,
                fsync=do_fsync,
                before_window=comm.barrier if barrier else None,
                on_bytes=lambda n: ph.update(min(n, total), nbytes=n),
                delay_ns=delay_ns,
            ),
        )
    rec = new_record(
        "save",
        comm,
        epoch,
        step,
        folder,
        plan.dlio_size_GiB,
        files,
        bytes=res.bytes,
        bytes_issued=res.bytes_issued,
        prepare_s=res.prepare_s,
        io_s=res.io_s,
        io_window_s=res.io_window_s,
        fsync_s=res.fsync_s,
        sync_s=0.0,
        engine=res.engine,
        direct=res.direct,
        threads=res.threads,
        qd=res.qd,
        transfer_size=res.transfer_size,
        fsync=do_fsync and backend.has(FSYNC),
        cache=res.cache,
        randomize_tensor=randomize,
    )
    return finish_record(rec, res.wall_start_s, res.m0, res.m1)
