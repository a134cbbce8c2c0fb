"""The parent's side of the KV relay: the helper process (worker task `kv_relay`,
dlio.storage.s3.worker_kv) that issues the C relay store's requests (src/dlio_core/kvcache/relay.c)
to S3, for one C run.

Started and ready before the run (client built, connection open, slots made, socket listening);
watched while it runs (the silence deadline of every S3 task: a helper with requests outstanding and
nothing completing for the timeout is killed, and the C workers waiting on it fail with EPIPE); told
the run is over and reaped after it, with its tally of requests and bytes and its CPU.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Dict, Optional, Tuple

from dlio.base.errors import DlioRunError
from dlio.storage.s3 import client
from dlio.storage.s3.deadline import silence_message
from dlio.storage.s3.settings import S3Settings, parse_uri
from dlio.storage.s3.worker_kv import SLOTS, SOCKET

SHM = "/dev/shm"  # the slots are shared memory when it has room (else a file in the temporary folder)


def _slots_folder(nbytes: int) -> Optional[str]:
    try:
        st = os.statvfs(SHM)
    except OSError:
        return None
    return SHM if st.f_bavail * st.f_frsize > 2 * nbytes and os.access(SHM, os.W_OK) else None


class KvRelay:
    """One C run's helper. ``paths``: what _core.KvRun(store="relay", relay=...) takes."""

    def __init__(self, settings: S3Settings, root: str, workers: int, slot_len: int, null: bool = False) -> None:
        from dlio.system.execute import pending

        bucket, prefix = parse_uri(root)
        self.settings, self.root = settings, root
        self.dir = tempfile.mkdtemp(prefix="dlio-fast-kvrelay-", dir=_slots_folder(workers * slot_len))
        self.timed_out = False
        self.tally: Optional[Dict[str, Any]] = None
        task = {
            "task": "kv_relay",
            "dir": self.dir,
            "workers": workers,
            "slot_len": slot_len,
            "bucket": bucket,
            "prefix": prefix,
            "null": null,
        }
        self.session = client.Session(settings, task, f"relaying the KV cache's requests to {root}")
        try:
            self.session.reply(stop=pending)  # {"ready": ...}
        except BaseException:
            self._end(kill=True)
            raise
        self.paths: Tuple[str, str, int] = (os.path.join(self.dir, SOCKET), os.path.join(self.dir, SLOTS), slot_len)

    def watch(self, run: Any) -> None:
        """A few times a second while the C run goes: the silence deadline."""
        s = self.session
        if not self.timed_out and s.proc.poll() is None and s.silence.seconds() > self.settings.timeout_s:
            self.timed_out = True
            run.request_stop()
            s.close(kill=True)  # the workers waiting on it get EPIPE: the run ends with what it measured

    def failure(self, err: BaseException) -> BaseException:
        """The C run's error in the helper's words (the S3 error behind an errno), or the deadline's."""
        if self.timed_out:
            s = self.settings
            return DlioRunError(silence_message(s.endpoint, s.timeout_s, self.session.doing, s.timeout_key))
        words = (self.tally or {}).get("first_error")
        if words:
            return DlioRunError(f"{self.root}: {words}")
        return err

    def finish(self) -> Dict[str, Any]:
        """The run is over: the helper's tally (requests, bytes, first error) and its CPU seconds."""
        if self.tally is None:
            self.tally = {}
            if not self.timed_out and self.session.proc.poll() is None:
                self.session.send("end")
                try:
                    self.tally = self.session.reply() or {}
                except client.WorkerFailed as e:
                    self.tally = {"first_error": str(e), "first_kind": e.kind}
            self._end()
            cpu = self.session.cpu or (0.0, 0.0)
            self.tally["cpu_s"] = cpu[0] + cpu[1]
        return self.tally

    def _end(self, kill: bool = False) -> None:
        self.session.close(kill=kill)
        shutil.rmtree(self.dir, ignore_errors=True)
        if not kill:
            client.prepare_spare(self.settings)
