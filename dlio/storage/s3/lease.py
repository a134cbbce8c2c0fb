"""A lock on an object prefix (a KV cache's rank_N/, a model's or an index's prefix): S3 has no flock, so
the lock is an object made with a conditional PUT (``If-None-Match: *``: the gateway refuses it with 412
when the object exists; Ceph RGW 16 honours it). The object names its holder (host, pid, start) and when
its lease ends; a thread rewrites it every REFRESH_S seconds with a new end, so the lock of a run that
died (SIGKILL, a lost host) ends LEASE_S seconds later and the next run takes it over with a note.
Released (deleted) at the end of the run, also on Ctrl-C (dlio.storage.places.Claimed.release).

A stale lease is taken over by deleting it, then the conditional PUT: two runs taking over the same
expired lease in the same instant could both delete and both PUT (RGW 16 refuses ``If-Match`` on PUT,
so the takeover cannot be made conditional on the stale object); each then reads the lock back and is
refused when it does not find itself named, which catches most such races, not all.

A run paused longer than its lease (SIGSTOP, a frozen VM) may find, when it goes on, that another run took
the lock over (or took it and released it): each refresh reads the lock first, and a holder that no longer
finds itself named stops its run as a stop signal would (dlio.system.execute.watch_peers), results kept and
marked incomplete with the reason, and neither rewrites nor deletes the other run's lock.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from typing import Any, Dict, Optional, Tuple

from dlio.base.errors import DlioError
from dlio.storage.s3.listing import boto_client
from dlio.storage.s3.settings import S3Settings, parse_uri
from dlio.system.execute import watch_peers

LEASE_S = 30.0  # how long a lock outlives its last refresh (DLIO_FAST_LEASE_S)
LEASE_BOUNDS = (2.0, 86400.0)
REFRESHES_PER_LEASE = 6  # a lease survives five failed refreshes in a row


def lease_seconds(env: Optional[Dict[str, str]] = None) -> float:
    """The lease from DLIO_FAST_LEASE_S (seconds), LEASE_S when unset; a bad value is refused by name."""
    word = (os.environ if env is None else env).get("DLIO_FAST_LEASE_S", "").strip()
    if not word:
        return LEASE_S
    lo, hi = LEASE_BOUNDS
    try:
        s = float(word)
    except ValueError:
        s = float("nan")
    if not lo <= s <= hi:  # NaN fails too
        raise DlioError(
            f"DLIO_FAST_LEASE_S = {word!r}: expected seconds from {lo:g} to {hi:g} (how long an S3 lock outlives "
            f"its holder); unset it for the default of {LEASE_S:g}"
        )
    return s


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _holder(doc: Dict[str, Any]) -> str:
    return f"host {doc.get('host', '?')}, pid {doc.get('pid', '?')}, started {_when(float(doc.get('started', 0)))}"


class Lease:
    """The lock object ``uri`` held by this process (``take``), refreshed until ``release``."""

    def __init__(self, settings: S3Settings, uri: str, what: str, key: str) -> None:
        self.uri, self.what, self.key = uri, what, key
        self.bucket, name = parse_uri(uri)
        self.name = name.rstrip("/")  # an object's key, not a prefix
        self.s3 = boto_client(settings)
        self.started = time.time()
        self.me = {"host": socket.gethostname(), "pid": os.getpid(), "started": self.started}
        self.lease_s = lease_seconds()
        self.note: Optional[str] = None
        self.lost: Optional[str] = None  # why the lock is no longer this run's (set by the refresh thread)
        self.stop = threading.Event()
        self.thread: Optional[threading.Thread] = None
        self.unwatch = lambda: None

    def _body(self) -> bytes:
        return json.dumps(dict(self.me, expires=time.time() + self.lease_s)).encode()

    def _names_me(self, doc: Optional[Dict[str, Any]]) -> bool:
        return doc is not None and all(doc.get(k) == v for k, v in self.me.items())

    def _read(self) -> Optional[Dict[str, Any]]:
        from botocore.exceptions import ClientError

        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=self.name)["Body"].read(65536)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        try:
            doc = json.loads(body)
            return doc if isinstance(doc, dict) else {}
        except ValueError:
            return {}  # not a lease's document: taken as expired

    def _put_new(self) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.s3.put_object(Bucket=self.bucket, Key=self.name, Body=self._body(), IfNoneMatch="*")
            return True
        except ClientError as e:
            if e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") in (409, 412):
                return False
            raise

    def _refuse(self, doc: Dict[str, Any]) -> DlioError:
        ends = float(doc.get("expires", 0))
        return DlioError(
            f"{self.uri}: another dlio-fast run ({_holder(doc)}) is using this {self.what} ({self.key}); its lease "
            f"ends at {_when(ends)} (in {max(0, ends - time.time()):.0f} s) unless it is refreshed: wait for it "
            f"to finish or choose another {self.key}"
        )

    def take(self) -> "Lease":
        """The lock taken (a stale one taken over with ``note`` set), or DlioError naming the holder."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            for _ in range(3):
                if self._put_new():
                    doc = self._read()
                    if self._names_me(doc):
                        break
                    raise self._refuse(doc or {})
                doc = self._read()
                if doc is None:
                    continue  # released between our PUT and the read: try again
                if float(doc.get("expires", 0)) > time.time():
                    raise self._refuse(doc)
                self.note = (
                    f"note: {self.uri}: the lock of a dlio-fast run that is gone ({_holder(doc)}; its lease ended "
                    f"at {_when(float(doc.get('expires', 0)))}) is taken over"
                )
                self.s3.delete_object(Bucket=self.bucket, Key=self.name)
            else:
                raise DlioError(f"{self.uri}: the lock could not be taken (it kept changing); try again")
        except (ClientError, BotoCoreError) as e:
            raise DlioError(f"{self.uri}: the lock of this {self.what} ({self.key}) could not be taken: {e}") from None
        self.thread = threading.Thread(target=self._refresh, name="dlio-fast-lease", daemon=True)
        self.thread.start()
        self.unwatch = watch_peers(self._stop_if_lost)
        return self

    def _refresh(self) -> None:
        while not self.stop.wait(self.lease_s / REFRESHES_PER_LEASE):
            try:
                doc = self._read()
                if not self._names_me(doc):
                    self.lost = (
                        f"the lock of {self.uri} was taken over by another run ({_holder(doc)})"
                        if doc
                        else f"the lock of {self.uri} was removed by another run"
                    ) + f" while this one was paused past its {self.lease_s:g} s lease (DLIO_FAST_LEASE_S)"
                    return
                self.s3.put_object(Bucket=self.bucket, Key=self.name, Body=self._body())
            except Exception:  # a gateway that fails now fails the run's own requests too: they report it
                pass

    def _stop_if_lost(self) -> Optional[Tuple[int, str]]:
        """Polled where stop signals are looked for: a lost lock stops the run as SIGTERM would, with why."""
        return None if self.lost is None else (signal.SIGTERM, self.lost)

    def release(self) -> None:
        self.unwatch()
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=2 * (self.s3.meta.config.read_timeout or 10))
        try:
            if self.lost is None and self._names_me(self._read()):  # never another run's lock
                self.s3.delete_object(Bucket=self.bucket, Key=self.name)
        except Exception:
            pass  # its lease ends on its own


def take(settings: S3Settings, uri: str, what: str, key: str) -> Lease:
    return Lease(settings, uri, what, key).take()
