"""vLLM's prefetch load (``model_load.read_mode: prefetch``): its reads and its mmap pass at once.

What vLLM does (vllm/model_executor/model_loader/weight_utils.py): ``safetensors_weights_iterator``
calls ``_prefetch_all_checkpoints``, which starts a daemon thread reading the rank's shards
(sorted_files[rank::world_size]) on a pool of ``--safetensors-prefetch-num-threads`` (8) threads, each
shard whole through ``f.read(block_size)`` (``--safetensors-prefetch-block-size``, 16 MiB) and thrown
away, then returns at once: the iterator goes on to ``safe_open`` every shard and the weight loaders
fault in the rank's slice while the prefetch runs ahead. A page the prefetch has not reached yet is
faulted from the storage by the mmap pass itself (the later read hits it in the page cache).

Here both run at once, as there: the prefetch is one C run of the buffered engine (its ops, the
dealt shards in ``block``-byte reads, ``threads`` threads), started on its own Python thread just
before the mmap pass (one C run of the mmap engine, the rank's slice) on the calling one. Both
C runs release the GIL; no request goes through Python.

Time to ready is when the mmap pass ends, as vLLM's loader returns then (it does not wait for its
prefetch thread); ``prefetch.done_s`` says when the prefetch's own reads ended, and the next load
starts only after both.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

from dlio.base.units import fmt_bytes, fmt_size
from dlio.modelload.figures import GiB
from dlio.modelload.plan import RankPlan
from dlio.modelload.shards import Shard
from dlio.storage.base import SetOptions, SetResult

ENGINE = "posix"  # f.read(): buffered read(2)s through the page cache


@dataclasses.dataclass(frozen=True)
class Both:
    """The two C runs of one prefetch load."""

    mapped: SetResult  # the mmap pass
    fetched: SetResult  # the prefetch
    ready_s: float  # the mmap pass's end, from the start of both
    done_s: float  # the prefetch's end, from the start of both

    @property
    def threads(self) -> int:
        return int(self.mapped.threads) + int(self.fetched.threads)


def run(stored: Any, mine: RankPlan, pre: RankPlan, opts: SetOptions, threads: int, block: int) -> Both:
    """The prefetch's reads on a thread of their own while this thread runs the mmap pass ``mine``
    with ``opts``; both timed from one start."""
    backend = stored.backend
    fetch_opts = SetOptions(engine=ENGINE, direct=False, qd=1, threads=threads, transfer=block)
    box: Dict[str, Any] = {}

    def fetch() -> None:
        try:
            box["res"] = backend.read_ranges(
                [stored.names[i] for i in pre.files], [stored.sizes[i] for i in pre.files], pre.ops, fetch_opts
            )
        except BaseException as e:  # handed to the calling thread
            box["error"] = e
        box["t"] = time.monotonic_ns()

    t0 = time.monotonic_ns()
    worker = threading.Thread(target=fetch, name="dlio-fast-prefetch", daemon=True)
    worker.start()
    try:
        mapped = backend.read_ranges(
            [stored.names[i] for i in mine.files], [stored.sizes[i] for i in mine.files], mine.ops, opts
        )
        ready = time.monotonic_ns()
    finally:
        # a stopped mmap pass stops the prefetch too (dlio.system.execute: its run sees the stop)
        worker.join()
    if "error" in box:
        raise box["error"]
    return Both(mapped, box["res"], (ready - t0) / 1e9, (box["t"] - t0) / 1e9)


def with_prefetch(rec: Dict[str, Any], both: Both, pre: RankPlan) -> Dict[str, Any]:
    """The load record of the mmap pass, with the prefetch's reads as the rank's bytes."""
    fetched = both.fetched
    rec = dict(rec)
    rec["map_bytes"] = rec["bytes"]
    rec["bytes"] = fetched.bytes
    ready = rec["time_to_ready_s"]
    rec["GiB_per_second"] = fetched.bytes / GiB / ready if ready > 0 else 0.0
    rec["prefetch"] = {
        "files": len(pre.files),
        "bytes": fetched.bytes,
        "requests": len(pre.ops),
        "threads": fetched.threads,
        "block_size": int(fetched.transfer_size),
        "engine": fetched.engine,
        "done_s": both.done_s,
        "io_s": fetched.io_s,
    }
    return rec


def plan_record(pre: RankPlan, shards: Sequence[Shard]) -> Dict[str, Any]:
    """What the rank's prefetch reads, for dlio-fast.json's plans."""
    return {"files": [shards[i].name for i in pre.files], "bytes": pre.bytes, "requests": len(pre.ops)}


def plan_line(pre: RankPlan, nshards: int, world: int, threads: int, block: int) -> str:
    """The banner's line of the prefetch (rank 0's share)."""
    return (
        f"prefetch            shards dealt over the {world} rank(s) as vLLM deals them (files[rank::{world}]): "
        f"rank 0 reads {len(pre.files)} of {nshards} whole ({fmt_bytes(pre.bytes)}) in {len(pre.ops):,} "
        f"read(s) of {fmt_size(block)} on up to {threads} thread(s), beside its mmap pass"
    )


def summary_line(ranks: List[Dict[str, Any]]) -> Optional[str]:
    """The console's line on the prefetch of the last timed load, or None when there was none."""
    pre = [r for r in ranks if r.get("prefetch") and r.get("kind") == "timed"]
    if not pre:
        return None
    last = [r for r in pre if r["pass"] == pre[-1]["pass"]]
    done = max(r["prefetch"]["done_s"] for r in last)
    ready = max(r["time_to_ready_s"] for r in last)
    nbytes = sum(r["prefetch"]["bytes"] for r in last)
    return (
        f"Prefetch (vLLM's), load {last[0]['pass']}: {fmt_bytes(nbytes)} read whole by the {len(last)} rank(s) in "
        f"{fmt_size(last[0]['prefetch']['block_size'])} reads, the last ending at {done:.3f} s; the last mmap pass "
        f"ended at {ready:.3f} s (time to ready)"
    )
