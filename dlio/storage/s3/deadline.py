"""When a worker process counts as stuck: the deadline is on silence, not on total duration.

A long io point or a long epoch is fine while requests complete. A worker is silent while it receives
no byte (/proc/PID/io rchar: the server's answers, and its reads of local files) and its shared
counters (dlio.storage.s3.shared: requests, bytes, steps, the beat it gives while busy on its own) do
not move. s3dlio bounds each request too (S3DLIO_OPERATION_TIMEOUT_SECS, set from the same timeout:
dlio.storage.s3.settings), but a frozen server still takes a request's retries (each a full timeout,
and each resend writes bytes), and a task can wait elsewhere; the silence deadline bounds them all.
"""

from __future__ import annotations

import time
from typing import Any, Optional, Tuple


def _rchar(pid: int) -> Optional[int]:
    """Bytes the process has read (any read or recv); None when /proc does not say."""
    try:
        with open(f"/proc/{pid}/io", "rb") as f:
            for line in f:
                if line.startswith(b"rchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


class Silence:
    """Seconds since a worker last gave a sign of life (polled by its parent, a few times a second)."""

    def __init__(self, pid: int, counters: Any = None) -> None:
        self.pid = pid
        self.counters = counters  # dlio.storage.s3.shared.Counters, or None
        self.last = self._signs()
        self.since = time.monotonic()

    def _signs(self) -> Tuple[Any, ...]:
        sig = self.counters.signature() if self.counters is not None else ()
        return (_rchar(self.pid), *sig)

    def seconds(self) -> float:
        now = time.monotonic()
        signs = self._signs()
        if signs != self.last:
            self.last, self.since = signs, now
        return now - self.since

    def reset(self) -> None:
        """The parent itself kept the worker waiting (the ranks' step barrier): not the server's silence."""
        self.last, self.since = self._signs(), time.monotonic()


def silence_message(endpoint: str, timeout_s: float, doing: str, key: str) -> str:
    """The one line of a worker stopped at its deadline (or of s3dlio's own request deadline)."""
    return (
        f"{endpoint} did not answer for {timeout_s:g} s while {doing}; if the server is only slow, raise "
        f"{key} (now {timeout_s:g} s)"
    )
