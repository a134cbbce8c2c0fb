"""Which loader path a model load emulates (``model_load.read_mode``), and ``auto``: vLLM's own choice.

vLLM's default safetensors loader (vllm/model_executor/model_loader/weight_utils.py,
``safetensors_weights_iterator`` with ``--safetensors-load-strategy`` unset; NFS since vLLM PR #37673,
Lustre since PR #39422, both 2026) maps every shard lazily (each rank faults in its tensor-parallel
slice), and first starts ``_prefetch_all_checkpoints`` when both hold:

  - the filesystem of the first shard (``_get_fs_type``: its real path's longest-prefix mount in
    /proc/mounts) is ``nfs``, ``nfs4`` or ``lustre``; nothing else (wekafs, ceph, virtiofs, ext4, xfs ...);
  - the shards' total size is at most 90 % of the available RAM (``_get_available_ram_bytes``: psutil's
    available memory, capped by the control group's limit minus its usage).

Here the same two facts decide ``auto``: the mount of the model's folder (dlio.system.counters.resolve,
from /proc/self/mountinfo) and MemAvailable capped by the control group (dlio.base.limits.memory_left).
An object store has no file to map: ``auto`` is ``read`` there (each range a GET).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, Optional

from dlio.base import limits
from dlio.base.units import fmt_bytes
from dlio.system import counters
from dlio.system.memcheck import mem_available

# vLLM's list (weight_utils.safetensors_weights_iterator: is_net_fs); others only on request
PREFETCH_FILESYSTEMS = ("nfs", "nfs4", "lustre")
# vLLM's ram_threshold_pct: the checkpoint must fit in this share of the available RAM
RAM_SHARE = 0.9


@dataclasses.dataclass(frozen=True)
class Choice:
    """The read mode a load runs, and why (recorded in dlio-fast.json and printed)."""

    configured: str  # model_load.read_mode as set
    mode: str  # what runs: mmap, prefetch, read, odirect or io_uring
    why: str
    fstype: Optional[str] = None  # auto: the model folder's filesystem
    checkpoint_bytes: Optional[int] = None
    available_ram: Optional[int] = None  # auto: what vLLM would compare against

    def to_json(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def available_ram() -> Optional[int]:
    """vLLM's available RAM: the host's (MemAvailable) capped by what the control group still allows."""
    host = mem_available()
    group = limits.memory_left()
    left = [n for n in (host, group[0] if group else None) if n is not None]
    return min(left) if left else None


def folder_fstype(root: str, mountinfo: Optional[str] = None) -> str:
    """The filesystem type of the mount holding ``root`` (it need not exist yet), as vLLM's
    _get_fs_type finds it: the longest mount point that is a prefix of the real path."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo") as f:
                mountinfo = f.read()
        except OSError:
            mountinfo = ""
    m = counters.mount_of(os.path.realpath(root), counters.parse_mountinfo(mountinfo))
    return m.fstype if m is not None else ""


def choose_auto(fstype: str, checkpoint_bytes: int, ram: Optional[int]) -> Choice:
    """vLLM's rule for an unset --safetensors-load-strategy, on these facts."""
    fits = ram is not None and checkpoint_bytes <= RAM_SHARE * ram
    ram_words = "unknown" if ram is None else fmt_bytes(ram)
    size = f"the checkpoint ({fmt_bytes(checkpoint_bytes)})"
    ninety = f"90% of the available RAM ({ram_words})"
    if fstype in PREFETCH_FILESYSTEMS and fits:
        why = f"{fstype} is a network filesystem vLLM prefetches on and {size} fits in {ninety}"
        mode = "prefetch"
    elif fstype in PREFETCH_FILESYSTEMS:
        why = f"{fstype} is a network filesystem but {size} exceeds {ninety}: vLLM skips the prefetch"
        mode = "mmap"
    else:
        why = f"{fstype or 'an unknown filesystem'} is not NFS or Lustre: vLLM maps the shards without prefetching"
        mode = "mmap"
    return Choice("auto", mode, why, fstype, checkpoint_bytes, ram)


def choose(
    read_mode: str,
    on_files: bool,
    checkpoint_bytes: int,
    root: str,
    mountinfo: Optional[str] = None,
    ram: Optional[int] = None,
) -> Choice:
    """The read mode of a load: the one set, or ``auto`` resolved for the model's folder (``mountinfo``
    and ``ram`` stand in for the host's when given)."""
    if read_mode != "auto":
        return Choice(read_mode, read_mode, "set in model_load.read_mode")
    if not on_files:
        return Choice(
            "auto", "read", "objects have no mapping or page cache: each range is a GET", None, checkpoint_bytes
        )
    fstype = folder_fstype(root, mountinfo)
    return choose_auto(fstype, checkpoint_bytes, ram if ram is not None else available_ram())
