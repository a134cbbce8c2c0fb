"""Where one rank's KV entries live, on the run's storage backend (dlio.storage.staging.kv_place): a
folder the C core's file stores write (kvcache.cache_dir/rank_N), or an object prefix
(s3://BUCKET/<cache_dir>/rank_N/) that the C core's relay store reaches through the backend's helper
process (Backend.kv_relay), the C engine still deciding and timing every request. Emptied of the run's
entries before the run and after each trial, as the reference empties its folder.

The two stores differ where the C core does: which C store runs (a file store checked against the folder,
or the relay, whose slots must fit in memory), the free space the storage tier may use, and what the
trial's attestation can say.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from dlio.base.errors import DlioError, DlioRunError, os_error_message
from dlio.kvcache import attest, engine
from dlio.kvcache.plan import Plan
from dlio.kvcache.settings import KvSettings
from dlio.storage import staging
from dlio.storage.base import Backend
from dlio.system import counters

ENTRIES = "kv_*.npy"  # the files a run leaves: the reference empties its folder the same way
OBJECTS = "kv_*.bin"  # the relay's objects (dlio.storage.s3.worker_kv.object_key)


class FolderStore:
    """The C core's file stores (kvcache.io_mode compat, direct, null) in a folder on this host."""

    relayed = False

    def __init__(self, backend: Backend, place: Any) -> None:
        self.backend, self.place, self.where = backend, place, place.where

    def prepare(self, s: KvSettings, largest: int) -> None:
        """Before any trial: the folder exists and holds no entry, and the store can run there."""
        self.place.claim(ENTRIES)
        engine.check_store(s, self.where, largest)

    def capacity(self, s: KvSettings) -> Optional[int]:
        """The storage tier's bytes (engine.storage_capacity: as configured, else of the folder's free space)."""
        return engine.storage_capacity(s, self.where)

    def relay(self, s: KvSettings, plan: Plan) -> Any:
        return None

    def target(self) -> Optional[counters.Target]:
        return self.place.target()

    def clear(self, failure: Optional[BaseException]) -> Optional[BaseException]:
        """After a trial: its entries removed (a folder turned into a link is not emptied: the run's failure)."""
        try:
            self.place.empty(ENTRIES)
        except OSError as e:
            return failure or DlioRunError(f"{os_error_message(e)}; the trial's entries were not removed")
        return failure

    def attestation(self, s: KvSettings, win: Any, result: Dict[str, Any], written: int) -> Dict[str, Any]:
        return attest.attest(s.io_mode, win, result["store"], written)


class RelayStore:
    """The C core's relay store: every request a PUT, GET or DELETE through the backend's helper process
    (none for kvcache.io_mode null, which measures the relay's own cost)."""

    relayed = True

    def __init__(self, backend: Backend, place: Any) -> None:
        self.backend, self.place, self.where = backend, place, place.where

    def prepare(self, s: KvSettings, largest: int) -> None:
        """Before any trial: the relay's slots fit in memory, and the prefix holds none of the run's objects."""
        engine.check_ram_tier(s)
        if s.io_mode != "null":
            engine.check_relay(s, largest)
            self.place.claim(OBJECTS)

    def capacity(self, s: KvSettings) -> Optional[int]:
        """As configured, else unlimited (an object store has no free space to read)."""
        return (s.storage_capacity or None) if s.io_mode != "null" else None

    def relay(self, s: KvSettings, plan: Plan) -> Any:
        """The helper for one trial (None for the null store)."""
        return None if s.io_mode == "null" else self.place.relay(s.workers, engine.relay_slot(s, plan))

    def target(self) -> Optional[counters.Target]:
        return self.place.target()

    def clear(self, failure: Optional[BaseException]) -> Optional[BaseException]:
        """After a trial: its objects removed. A failure to remove them is the run's, unless it failed already."""
        try:
            self.place.empty(OBJECTS)
        except (DlioError, DlioRunError) as e:
            return failure or DlioRunError(f"{self.where}: the trial's objects were not removed ({e})")
        return failure

    def attestation(self, s: KvSettings, win: Any, result: Dict[str, Any], written: int) -> Dict[str, Any]:
        return attest.object_store(written)


def store_for(backend: Backend, root: str, rank: int) -> Any:
    """A rank's store under ``root`` (kvcache.cache_dir as the backend places it)."""
    place = staging.kv_place(backend, root, rank)
    return (RelayStore if place.relayed else FolderStore)(backend, place)
