"""Where one rank's KV entries live, on the run's storage backend: a folder the C core's file stores
write (kvcache.cache_dir/rank_N), or an object prefix (s3://BUCKET/<cache_dir>/rank_N/) that the C core's
relay store reaches through the backend's helper process (Backend.kv_relay), the C engine still deciding
and timing every request. Emptied of the run's entries before the run and after each trial, as the
reference empties its folder.
"""

from __future__ import annotations

import glob
import os
from typing import Any, Optional

from dlio.base.errors import DlioError, DlioRunError
from dlio.kvcache import engine
from dlio.kvcache.plan import Plan
from dlio.kvcache.settings import KvSettings
from dlio.storage.base import Backend
from dlio.system import counters

OBJECT_STORE_WHY = "an object store: no page cache on the client, and its devices are not visible from it"


def clear_entries(folder: str) -> None:
    """Remove the entries a run leaves (kv_*.npy): the reference empties its folder the same way."""
    for p in glob.glob(os.path.join(folder, "kv_*.npy")):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


class Store:
    def __init__(self, backend: Backend, where: str, local: bool) -> None:
        self.backend, self.where, self.local = backend, where, local

    def prepare(self, s: KvSettings, largest: int) -> None:
        """Before any trial: the place exists and holds no entry, and the store can run there."""
        if self.local:
            os.makedirs(self.where, exist_ok=True)
            clear_entries(self.where)
            engine.check_store(s, self.where, largest)
            return
        engine.check_ram_tier(s)
        if s.io_mode != "null":
            engine.check_relay(s, largest)
            self.backend.remove_tree(self.where)

    def capacity(self, s: KvSettings) -> Optional[int]:
        """The storage tier's bytes: a folder's as engine.storage_capacity; an object store's as
        configured, else unlimited (it has no free space to read)."""
        if self.local:
            return engine.storage_capacity(s, self.where)
        return (s.storage_capacity or None) if s.io_mode != "null" else None

    def relay(self, s: KvSettings, plan: Plan) -> Any:
        """An object store's helper for one trial (None on files, and for the null store)."""
        if self.local or s.io_mode == "null":
            return None
        return self.backend.kv_relay(self.where, s.workers, engine.relay_slot(s, plan))

    def target(self) -> Optional[counters.Target]:
        """What the trial's counters look at: the folder's device, or nothing countable (an object store)."""
        if self.local:
            return None
        return counters.Target(self.where, "s3", "object store", "none", why=OBJECT_STORE_WHY)

    def clear(self, failure: Optional[BaseException]) -> Optional[BaseException]:
        """After a trial: its entries removed. A failure to remove them is the run's, unless it failed already."""
        if self.local:
            clear_entries(self.where)
            return failure
        try:
            self.backend.remove_tree(self.where)
        except (DlioError, DlioRunError) as e:
            return failure or DlioRunError(f"{self.where}: the trial's objects were not removed ({e})")
        return failure
