"""The CLI side of the S3 client: runs tasks in a worker process (dlio.storage.s3.worker) and turns
its failures into one-line errors."""

from __future__ import annotations

import atexit
import importlib.util
import json
import subprocess
import sys
import time
from typing import Dict, Optional, Tuple

from dlio.errors import DlioError, DlioRunError
from dlio.storage.s3.settings import S3Settings


def require_client() -> None:
    """Refuse early, with the fix, when the client library is not installed."""
    for mod in ("s3dlio", "zstandard"):
        if importlib.util.find_spec(mod) is None:
            raise DlioError(f"S3 needs the {mod} package: pip install 'dlio-fast[s3]'")


class WorkerFailed(DlioRunError):
    """A task failed in the worker; `kind` is auth, bucket, connect, missing or other."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


# A worker serves one task (s3dlio's op-log opens once per process), but its start (Python, numpy,
# s3dlio: ~0.2 CPU-s) need not be paid when the task arrives: after a task, the worker for the next
# one is started as a spare, imports everything and waits on stdin. Never during a task: even at
# SCHED_IDLE a starting process took 5 % of the GET bandwidth of a 2-core client (bench/vs_s3.py,
# 16 MiB objects: 0.93 -> 0.88 of s3dlio's own batch GET).
_SPARES: Dict[Tuple, subprocess.Popen] = {}
STARTS = {"cold": 0, "spare": 0}  # how the workers of this process were started (tests read it)


def _spawn(env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "dlio.storage.s3.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # Ctrl-C reaches the parent, which stops the worker itself
    )


def _key(env: dict) -> Tuple:
    return tuple(sorted(env.items()))


def start_worker(settings: S3Settings) -> subprocess.Popen:
    """A worker process for one task: the spare waiting for these settings, else a new one."""
    env = settings.child_env()
    p = _SPARES.pop(_key(env), None)
    if p is not None and p.poll() is None:
        STARTS["spare"] += 1
        return p
    STARTS["cold"] += 1
    return _spawn(env)


def prepare_spare(settings: S3Settings) -> None:
    """After a task: the spare for the next one, if none is waiting (one at most: a spare for other
    settings, an earlier command's, is stopped)."""
    env = settings.child_env()
    p = _SPARES.get(_key(env))
    if p is None or p.poll() is not None:
        _stop_spares()
        _SPARES[_key(env)] = _spawn(env)


@atexit.register
def _stop_spares() -> None:
    for p in _SPARES.values():
        if p.poll() is None:
            p.kill()  # it waits on stdin, idle: nothing to finish
            p.wait()
    _SPARES.clear()


def run_task(settings: S3Settings, task: dict, timeout: float = 3600) -> dict:
    """Run one task in a worker process; its answer (dict) or WorkerFailed. A stop signal noted
    meanwhile (a measured phase defers Ctrl-C / SIGTERM: dlio.execute.pending) stops the worker and
    raises its Interrupted."""
    from dlio.execute import pending

    if pending() is not None:
        raise pending()
    p = start_worker(settings)
    deadline = time.monotonic() + timeout
    text: Optional[str] = json.dumps(task) + "\n"
    while True:
        try:
            out, err = p.communicate(text, timeout=max(0.0, min(0.25, deadline - time.monotonic())))
            break
        except subprocess.TimeoutExpired:
            text = None  # sent: a retry only reads
            stopped = pending()
            if stopped is None and time.monotonic() < deadline:
                continue
            p.kill()
            p.communicate()
            if stopped is not None:
                raise stopped from None
            raise WorkerFailed(
                f"{settings.endpoint}: the S3 task {task['task']!r} did not finish in {timeout:.0f} s", "connect"
            ) from None
    prepare_spare(settings)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (err.strip().splitlines() or ["no output"])[-1]
        raise WorkerFailed(f"the S3 worker process failed (exit status {p.returncode}): {tail}", "other")
    out = json.loads(lines[-1])
    if "error" in out:
        raise WorkerFailed(out["error"], out["kind"])
    return out


def check_access(settings: S3Settings, bucket: str, prefix: str) -> None:
    """One listing under the prefix before any work: wrong keys, a missing bucket or an endpoint that
    does not answer become one-line errors (exit status 2)."""
    try:
        run_task(settings, {"task": "check", "bucket": bucket, "prefix": prefix}, timeout=120)
    except WorkerFailed as e:
        where = f"s3://{bucket}/{prefix}"
        if e.kind == "auth":
            raise DlioError(
                f"{where}: the server at {settings.endpoint} refused the credentials ({e}); check {settings.key_source}"
            ) from None
        if e.kind == "bucket":
            raise DlioError(
                f"{where}: bucket {bucket!r} does not exist at {settings.endpoint} (create it first, or check the name)"
            ) from None
        if e.kind == "connect":
            raise DlioError(
                f"{where}: cannot reach the S3 endpoint {settings.endpoint} ({e}); check --endpoint / AWS_ENDPOINT_URL"
            ) from None
        raise DlioError(f"{where}: {e}") from None
