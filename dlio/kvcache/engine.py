"""One trial of one rank through the C engine (dlio._core.KvRun): the store checked, the staging
sized, the run executed off the main thread (Ctrl-C keeps what was measured), the result returned."""

from __future__ import annotations

import functools
import os
import shutil
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from dlio import _core
from dlio.base.errors import DlioError
from dlio.base.same_names import same_named
from dlio.base.units import fmt_bytes
from dlio.kvcache.plan import Plan
from dlio.kvcache.settings import KvSettings
from dlio.system import memcheck
from dlio.system.execute import execute_partial

STAGE_RAM_SHARE = 0.25  # the staging buffers may take this share of the memory this rank may use at most
MIN_STAGE = 64 << 20  # auto staging is never smaller than this
RAM_TIER_SHARE = 0.5  # the RAM tier may take this share of it at most
MEMORY_SHARE = 0.75  # staging, the RAM tier and the relay's slots together: the rest is the plan, Python, the OS
# The storage tier when kvcache.storage_capacity is 0: the smaller of this and DEFAULT_FREE_SHARE of the cache
# folder's free space (the reference takes 95 % of it, which on a shared disk fills the disk for everyone)
DEFAULT_CAPACITY = 64 << 30
DEFAULT_FREE_SHARE = 0.5
DRAIN_S = 2.0  # after the duration, each worker in turn is waited for this long at most (the reference's join)
LOG_CAP = 5_000_000  # operations recorded for kvcache.io_trace_log, at most (24 B each)
# The settings KvRun takes under their own names (the others it takes are derived in run_trial).
ENGINE_SETTINGS = (
    "alloc_slots",
    "duration_s",
    "bytes_per_token",
    "decode_batch",
    "chunk_bytes",
    "gen_ns_per_token",
    "cpu_bytes",
    "seed",
    "direct_chunk",
    "direct_qd",
    "drop_check",
)


@functools.lru_cache(maxsize=1)
def memory_limit() -> Tuple[int, str]:
    """(bytes, which limit) this rank may still allocate: the tightest of the host's available memory, the
    address-space limit (ulimit -v) and the control group's memory.max (dlio.system.memcheck); (0, "") when
    nothing says. Read once, before the run: the page cache its writes fill counts in a control group's usage
    and would make a later trial's figure smaller than what the run may really use."""
    return memcheck.available() or (0, "")


def _over(total: int, share: float, what: str, fix: str) -> None:
    mem, where = memory_limit()
    if mem and total > share * mem:
        raise DlioError(
            f"kvcache: {what} = {fmt_bytes(total)}, over {share:.0%} of the {fmt_bytes(mem)} this rank may use "
            f"({where}): {fix}"
        )


def largest_object(s: KvSettings, plan: Plan) -> int:
    largest = int(plan.entries["bytes"].max()) if len(plan.entries) else 4096
    return min(largest, s.chunk_bytes) if s.chunk_bytes else largest


def relay_slot(s: KvSettings, plan: Plan) -> int:
    """A C worker's slot in the relay's shared memory: the largest object, in whole pages."""
    return max(4096, (largest_object(s, plan) + 4095) // 4096 * 4096)


def check_relay(s: KvSettings, largest: int) -> None:
    """The relay holds one object per worker in memory: within STAGE_RAM_SHARE of the host's."""
    if s.chunk_bytes:
        largest = min(largest, s.chunk_bytes)
    slot = max(4096, (largest + 4095) // 4096 * 4096)
    _over(
        s.workers * slot,
        STAGE_RAM_SHARE,
        f"{s.workers} workers x {fmt_bytes(slot)} (the largest object, held in memory per worker for its PUT or GET)",
        "set kvcache.chunk_tokens (objects of that many tokens) or lower kvcache.workers",
    )


def stage_regions(s: KvSettings) -> int:
    """Staging regions the C engine makes: one per worker when there are fewer workers than allocation
    slots (a worker writes one entry at a time), else one per slot (src/dlio_core/kvcache/run.c)."""
    return min(s.workers, s.alloc_slots)


def stage_bytes(s: KvSettings, plan: Plan, relay: bool = False) -> int:
    """Bytes of each staging region (stage_regions): direct mode's chunks in flight, compat's write() size
    (no bigger than the largest object), the null store's none; the relay's a page (it stamps its
    payloads in its own slots)."""
    if s.io_mode == "null":
        return 0
    if relay:
        return 4096
    if s.io_mode == "direct":
        return s.direct_chunk * s.direct_qd
    largest = int(plan.entries["bytes"].max()) if len(plan.entries) else 4096
    if s.chunk_bytes:
        largest = min(largest, s.chunk_bytes)
    largest = (largest + 4095) // 4096 * 4096
    if s.stage_bytes:
        return max(4096, min(s.stage_bytes, largest))
    # auto: room for the largest entry (one write() each, as the reference), within a quarter of the memory this
    # rank may use (the control group's, ulimit -v, the host's)
    # (MIN_STAGE when nothing says; smaller when the limit is tight: larger entries then go out in pieces, noted)
    mem = memory_limit()[0]
    room = int(STAGE_RAM_SHARE * mem) // max(1, stage_regions(s)) // (2 << 20) * (2 << 20)
    return max(4096, min(largest, room if mem else MIN_STAGE))


def check_memory(s: KvSettings, stage: int) -> None:
    """The staging regions within STAGE_RAM_SHARE, and with the RAM tier within MEMORY_SHARE, of the memory this
    rank may use: refused with one line naming the limit, never an OOM kill."""
    regions = stage_regions(s)
    key = "kvcache.direct_chunk / direct_qd" if s.io_mode == "direct" else "kvcache.stage_bytes"
    what = f"{regions} staging regions (the fewer of workers and allocation slots) x {fmt_bytes(stage)}"
    _over(regions * stage, STAGE_RAM_SHARE, what, f"lower {key}, kvcache.workers or kvcache.max_concurrent_allocs")
    if s.cpu_bytes:
        _over(
            regions * stage + s.cpu_bytes,
            MEMORY_SHARE,
            f"{what} and the RAM tier's {fmt_bytes(s.cpu_bytes)} (kvcache.cpu_bytes)",
            "lower kvcache.cpu_bytes or the staging",
        )


def check_ram_tier(s: KvSettings) -> None:
    _over(
        s.cpu_bytes,
        RAM_TIER_SHARE,
        "kvcache.cpu_bytes (the RAM tier holds its entries in memory)",
        "lower kvcache.cpu_bytes",
    )


def free_space(folder: str) -> int:
    """The free bytes of the filesystem that holds folder (or would: its nearest existing ancestor)."""
    path = os.path.abspath(folder)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free


def storage_capacity(s: KvSettings, folder: str) -> Optional[int]:
    """The storage tier's bytes: as configured, else the smaller of DEFAULT_CAPACITY and DEFAULT_FREE_SHARE of
    the folder's free space (the reference takes 95 % of it); None (unlimited) for the null store, which holds
    nothing."""
    if s.io_mode == "null":
        return None
    if s.storage_capacity:
        return s.storage_capacity
    return min(DEFAULT_CAPACITY, int(free_space(folder) * DEFAULT_FREE_SHARE))


def check_disk(s: KvSettings, folder: str, largest: int) -> None:
    """The storage tier keeps to its capacity (an entry larger than it alone): the capacity and the largest entry
    must fit in the free space."""
    cap = storage_capacity(s, folder)
    if cap is None:
        return
    free = free_space(folder)
    if cap + largest > free:
        raise DlioError(
            f"kvcache.storage_capacity = {fmt_bytes(cap)} per rank, plus the largest entry ({fmt_bytes(largest)}) the "
            f"tier may hold beyond it, is more than the {fmt_bytes(free)} free in {folder}: lower "
            "kvcache.storage_capacity or use another kvcache.cache_dir"
        )


def limit_lines(s: KvSettings, plan: Plan, folder: str, relayed: bool) -> List[str]:
    """What the run will take against the limits, for the plan: the largest entry, the memory (staging, RAM
    tier) and the disk (the storage tier's capacity, plus one entry)."""
    largest = int(plan.entries["bytes"].max()) if len(plan.entries) else 0
    mem, where = memory_limit()
    stage = stage_bytes(s, plan, relayed)
    regions = stage_regions(s) if stage else 0
    memory = regions * stage + s.cpu_bytes
    held = (
        f"{regions} staging x {fmt_bytes(stage)} + RAM tier {fmt_bytes(s.cpu_bytes)} = {fmt_bytes(memory)}"
        if stage
        else f"RAM tier {fmt_bytes(s.cpu_bytes)}"
    )
    out = [
        f"  limits per rank: largest entry {fmt_bytes(largest)}; memory {held}"
        + (f" of {fmt_bytes(mem)} this rank may use ({where})" if mem else "")
    ]
    if s.io_mode != "null" and not relayed:
        cap = storage_capacity(s, folder)
        how = (
            "kvcache.storage_capacity"
            if s.storage_capacity
            else (f"the smaller of {fmt_bytes(DEFAULT_CAPACITY)} and {DEFAULT_FREE_SHARE:.0%} of the free space")
        )
        out.append(
            f"  disk per rank: at most {fmt_bytes((cap or 0) + largest)} (the storage tier's {fmt_bytes(cap or 0)}, "
            f"{how}, plus one entry) of {fmt_bytes(free_space(folder))} free"
        )
    return out


def check_store(s: KvSettings, folder: str, largest: int) -> None:
    check_ram_tier(s)
    if s.io_mode == "null":
        return
    check_disk(s, folder, largest)
    why = _core.kv_store_check(s.io_mode, folder, largest, s.direct_chunk, s.direct_qd)
    if why is not None:
        raise DlioError(f"kvcache.io_mode = {s.io_mode}: {why}")


def check_room(plan: Plan, capacity: Optional[int], folder: str) -> None:
    """A replayed trace's writes are its own decisions (no eviction): they must fit in the folder."""
    st = plan.steps
    forced = ((st["kind"] == _core.KV_WRITE) & (st["tier"] == _core.KV_TIER_STORAGE)) | (st["kind"] == _core.KV_DEMOTE)
    if capacity is None or not forced.any():
        return
    need = int(plan.entries["bytes"][np.unique(st["entry"][forced])].sum())
    if need > capacity:
        raise DlioError(
            f"the trace writes {fmt_bytes(need)} to storage and deletes nothing; {folder} has room for "
            f"{fmt_bytes(capacity)}: use a larger kvcache.cache_dir or a shorter trace"
        )


def run_trial(
    s: KvSettings,
    plan: Plan,
    folder: str,
    capacity: Optional[int],
    on_tick: Optional[Callable[[Any], None]] = None,
    log: bool = False,
    relay: Any = None,
) -> Tuple[Optional[Dict[str, Any]], Optional[BaseException], Optional[Any]]:
    """(result, failure, oplog) of one trial in folder (which exists and is empty), or through relay
    (Backend.kv_relay: an object store's helper) when given."""
    stage = stage_bytes(s, plan, relay is not None)
    check_memory(s, stage)
    m = s.model
    run = _core.KvRun(
        plan.reqs,
        plan.steps,
        plan.entries,
        plan.conv_first,
        plan.conv_reqs,
        store="relay" if relay is not None else s.io_mode,
        folder="" if relay is not None else folder,
        relay=relay.paths if relay is not None else None,
        workers=1 if s.io_mode == "null" else s.workers,
        drain_s=DRAIN_S,
        **same_named(s, ENGINE_SETTINGS),
        storage_bytes=capacity,
        target_ratio=s.eviction_target,
        skip_ratio=s.eviction_skip,
        asap=plan.asap,
        drain=plan.drain,
        stage_bytes=stage,
        model=(m.layers, m.kv_heads, m.head_dim, m.dtype_bytes),
        log_cap=min(LOG_CAP, 64 + plan.nreqs * 64) if log else 0,
        virtual=s.io_mode == "null",  # decisions only: in virtual time, as fast as the CPU goes
        conv_user=plan.conv_user,
        # the reference remembers conversations only when it has them (multi-turn on)
        max_conversations=s.max_conversations if s.multiturn and plan.conv_user is not None else 0,
    )
    tick = on_tick
    if relay is not None:  # the helper's deadline is watched from the waiting thread too

        def tick(r: Any) -> None:
            relay.watch(r)
            if on_tick is not None:
                on_tick(r)

    result, failure = execute_partial(run, tick)
    if result is not None:
        result["stage_bytes"] = stage
        # null: virtual time, so the trial lasted its duration (the offered load), not the CPU's time
        result["virtual_s"] = s.duration_s if s.io_mode == "null" else None
    return result, failure, run.oplog
