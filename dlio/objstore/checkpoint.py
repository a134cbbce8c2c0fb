"""Checkpoints on S3 (storage.storage_type s3, as DLIO current's S3 checkpointing): one rank's save
PUTs its checkpoint files (dlio.checkpoint.layout's plan, the same names and sizes as on a
filesystem) as objects under CHECKPOINT_PREFIX/global_epoch{E}_step{S}/, a load GETs them back.

checkpoint.checkpoint_folder is s3://BUCKET/PREFIX, or a prefix inside storage.storage_root's
bucket. The window is timed in the worker process from the first request to the last completion:
objects are written by up to MAX_THREADS threads at once, each object of MULTIPART_MIN bytes or
more as a multipart upload with PART_INFLIGHT parts in flight (what s3torchconnector's checkpoint
writer and the AWS CRT do), smaller ones with one PUT. The content (random, or tensors of ones with
randomize_tensor: false) is made before the window; a .pt object is torch.save's zip container
(dlio.checkpoint.torchzip), byte for byte the file a filesystem save writes, so torch.load opens
a downloaded object.
"""

from __future__ import annotations

import base64
from typing import Any, Dict, List, Optional, Tuple

from dlio.checkpoint.layout import CheckpointPlan, CkptFile, plan_checkpoint, step_folder
from dlio.checkpoint.transfers import MAX_THREADS
from dlio.errors import ConfigError, DlioRunError
from dlio.objstore import client
from dlio.objstore.settings import parse_uri, resolve

PART_INFLIGHT = 8


def location(cfg: Any) -> Tuple[str, str]:
    """(bucket, prefix) of checkpoint.checkpoint_folder on S3."""
    folder = str(cfg.checkpoint.checkpoint_folder or "").strip()
    if folder.startswith("s3://"):
        return parse_uri(folder)
    root = str(cfg.storage.storage_root or "").strip().strip("/")
    if root in ("", "."):
        raise ConfigError(
            "checkpoints on S3 need checkpoint.checkpoint_folder=s3://BUCKET/PREFIX or the bucket in "
            "storage.storage_root",
            "checkpoint.checkpoint_folder",
            folder,
        )
    rel = folder
    while rel.startswith("./"):
        rel = rel[2:]
    return parse_uri(f"s3://{root}/{rel.strip('/')}")


def _uri(cfg: Any, epoch: int, step: int, name: str = "") -> str:
    bucket, prefix = location(cfg)
    return f"s3://{bucket}/{prefix}{step_folder(epoch, step)}/{name}"


def count(cfg: Any) -> int:
    """How many checkpoints (global_epoch*_step* folders) are under the prefix."""
    bucket, prefix = location(cfg)
    uris = client.run_task(
        resolve(None, cfg.storage.storage_options), {"task": "list_all", "bucket": bucket, "prefix": prefix}
    )["uris"]
    cut = len(f"s3://{bucket}/{prefix}")
    return len({u[cut:].split("/", 1)[0] for u in uris if "/" in u[cut:]})


def containers(files: List[CkptFile]) -> Tuple[List[List[List[Any]]], List[Optional[int]]]:
    """The distinct torch.save containers of the files ([[offset, base64 literal], ...] each, from
    dlio.checkpoint.torchzip, as the C core overlays them on a filesystem) and, per file, the index
    of its own (None for a raw file: tensorflow's)."""
    table: List[List[List[Any]]] = []
    index: Dict[Any, int] = {}
    of: List[Optional[int]] = []
    for f in files:
        tf = f.torch_file
        if tf is None:
            of.append(None)
            continue
        if tf.segments not in index:
            index[tf.segments] = len(table)
            table.append([[int(o), base64.b64encode(b).decode()] for o, b in tf.segments])
        of.append(index[tf.segments])
    return table, of


def _run(
    cfg: Any,
    comm: Any,
    kind: str,
    epoch: int,
    step: int,
    plan: CheckpointPlan,
    barrier: bool,
    source_rank: Optional[int] = None,
) -> Dict[str, Any]:
    from dlio.checkpoint.record import finish_record, new_record
    from dlio.checkpoint.transfers import ones_pattern

    settings = resolve(None, cfg.storage.storage_options)
    files = list(plan.files)
    randomize = bool(cfg.checkpoint.randomize_tensor)
    overlays, overlay_of = containers(files)
    task = {
        "task": "ckpt",
        "kind": kind,
        "items": [[_uri(cfg, epoch, step, f.name), int(f.nbytes)] for f in files],
        "fills": None if randomize else [ones_pattern(f.dtype) for f in files],
        "overlays": overlays,
        "overlay_of": overlay_of,
        "threads": min(MAX_THREADS, max(1, len(files))),
        "part_inflight": PART_INFLIGHT,
    }
    if barrier:
        comm.barrier()
    try:
        out = client.run_task(settings, task)
    except client.WorkerFailed as e:
        raise DlioRunError(f"checkpoint {kind} to {_uri(cfg, epoch, step)}: {e}") from None
    m0 = 0
    m1 = out["window_ns"]
    rec = new_record(
        kind,
        comm,
        epoch,
        step,
        _uri(cfg, epoch, step).rstrip("/"),
        plan.dlio_size_GiB,
        files,
        bytes=int(out["bytes"]),
        bytes_issued=int(out["bytes"]),
        prepare_s=0.0,
        io_s=m1 / 1e9,
        io_window_s=m1 / 1e9,
        fsync_s=0.0,
        sync_s=0.0,
        engine="s3dlio",
        direct=False,
        threads=task["threads"],
        qd=PART_INFLIGHT,
        transfer_size=out["part_size"],
        fsync=False,
        cache="n/a (object store)",
        randomize_tensor=randomize,
    )
    if source_rank is not None:
        rec["source_rank"] = source_rank
    return finish_record(rec, out["start_wall_ns"] / 1e9, m0, m1)


def save(
    cfg: Any, comm: Any, epoch: int, step: int, plan: Optional[CheckpointPlan] = None, barrier: bool = False
) -> Dict[str, Any]:
    plan = plan if plan is not None else plan_checkpoint(cfg, comm.rank, comm.size)
    return _run(cfg, comm, "save", epoch, step, plan, barrier)


def load(
    cfg: Any,
    comm: Any,
    epoch: int,
    step: int,
    plan: Optional[CheckpointPlan] = None,
    barrier: bool = False,
    ranks_per_node_: Optional[int] = None,
) -> Dict[str, Any]:
    """A rank's files read back whole; with checkpoint.recovery_rank_shift those of rank
    (rank + ranks per node) % size, as on a filesystem (ranks_per_node_ given, else found
    collectively: every rank calls load)."""
    from dlio.checkpoint.load import ranks_per_node, recovery_source

    src = comm.rank
    if cfg.checkpoint.recovery_rank_shift:
        ppn = ranks_per_node_ if ranks_per_node_ is not None else ranks_per_node(comm)
        src = recovery_source(comm.rank, comm.size, ppn)
    if src != comm.rank or plan is None:
        plan = plan_checkpoint(cfg, src, comm.size)
    return _run(cfg, comm, "load", epoch, step, plan, barrier, source_rank=src)
