"""A checkpoint load of one rank, timed, on any storage backend.

A load first drops the files' cached pages (posix_fadvise DONTNEED after fdatasync, outside the window,
checked with mincore; DLIO reads straight back from the page cache) where the backend has a page cache,
then reads every byte of the files in the same requests as a save (dlio.storage.base ``read_set``).
With ``checkpoint.recovery_rank_shift`` rank r reads the files of rank ``(r + ranks_per_node) % size``
(DLIO's intent; its typo disables it). The record is ``dlio.checkpoint.record``'s.
"""

from __future__ import annotations

import socket
from typing import Any, Dict, Optional

from dlio.base.errors import DlioError
from dlio.checkpoint.layout import CheckpointPlan, rank_files, step_folder
from dlio.checkpoint.record import finish_record, new_record, set_fields
from dlio.checkpoint.transfers import CkptSet, TransferOptions
from dlio.config import Config
from dlio.progress import Progress, phase_of
from dlio.storage.base import Backend
from dlio.system.mpi import Comm


def ranks_per_node(comm: Comm) -> int:
    """Ranks on this rank's host (collective: every rank must call it)."""
    hosts = comm.allgather(socket.gethostname())
    return max(1, hosts.count(hosts[comm.rank]))


def recovery_source(rank: int, size: int, ppn: int) -> int:
    """The rank whose files ``rank`` reads with recovery_rank_shift: (rank + ppn) % size."""
    return (rank + ppn) % size


def default_drop(cfg: Config) -> bool:
    """Checkpoint loads drop the page cache unless dlio_fast.cache was set to keep explicitly."""
    return not (cfg.dlio_fast.cache == "keep" and cfg.origin("dlio_fast.cache") != "default")


def load(
    cfg: Config,
    comm: Optional[Comm],
    epoch: int,
    step: int,
    opts: Optional[TransferOptions] = None,
    plan: Optional[CheckpointPlan] = None,
    backend: Optional[Backend] = None,
    progress: Optional[Progress] = None,
    ranks_per_node_: Optional[int] = None,
) -> Dict[str, Any]:
    """Read back the checkpoint files of ``global_epoch{epoch}_step{step}``; returns the record.

    ``opts``: how the files move (``TransferOptions``; its ``drop`` drops the files' cached pages first,
    default: yes, see ``default_drop``). With ``checkpoint.recovery_rank_shift`` the files of rank
    ``(rank + ranks_per_node) % size`` are read; ``ranks_per_node_`` gives the ranks per node, else it is
    found collectively (all ranks call load)."""
    cs = CkptSet.of(cfg, comm, epoch, step, opts, plan, backend)
    comm = cs.comm
    src = comm.rank
    if cfg.checkpoint.recovery_rank_shift:
        ppn = ranks_per_node_ if ranks_per_node_ is not None else ranks_per_node(comm)
        src = recovery_source(comm.rank, comm.size, ppn)
    files = list(cs.plan.files) if src == comm.rank else rank_files(cfg, src, comm.size)
    total = int(sum(f.nbytes for f in files))
    drop = default_drop(cfg) if cs.opts.drop is None else bool(cs.opts.drop)
    try:
        with phase_of(progress, "load", f"loading {step_folder(epoch, step)}", total, "B", counts=False) as ph:
            res = cs.backend.read_set(
                cs.paths(files),
                [f.nbytes for f in files],
                cs.options(cfg, lambda n: ph.update(min(n, total), nbytes=n), drop=drop),
            )
    except DlioError as e:
        if type(e) is not DlioError:  # a run's I/O error (DlioRunError) stays what it is
            raise
        raise DlioError(
            f"{e}: rank {src}'s checkpoint file of {step_folder(epoch, step)}; write the checkpoint first "
            "(a shorter file was written with another model configuration)"
        ) from None
    rec = new_record(
        "load",
        comm,
        epoch,
        step,
        cs.folder,
        cs.plan.dlio_size_GiB,
        files,
        source_rank=src,
        bytes=res.bytes,
        prepare_s=0.0,
        io_s=res.io_s,
        io_window_s=res.io_window_s,
        fsync_s=0.0,
        sync_s=0.0,
        **set_fields(res),
        fsync=False,
        cache=res.cache,
        randomize_tensor=bool(cfg.checkpoint.randomize_tensor),
    )
    if res.writer is not None:
        rec["writer"] = res.writer
    return finish_record(rec, res.wall_start_s, res.m0, res.m1)
