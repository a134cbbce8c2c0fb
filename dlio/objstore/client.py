"""The CLI side of the S3 client: runs tasks in a worker process (dlio.objstore.worker) and turns
its failures into one-line errors."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

from dlio.errors import DlioError, DlioRunError
from dlio.objstore.settings import S3Settings


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


def run_task(settings: S3Settings, task: dict, timeout: float = 3600) -> dict:
    """Run one task in a fresh worker process; its answer (dict) or WorkerFailed."""
    try:
        p = subprocess.run(
            [sys.executable, "-m", "dlio.objstore.worker"],
            input=json.dumps(task),
            capture_output=True,
            text=True,
            env=settings.child_env(),
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise WorkerFailed(
            f"{settings.endpoint}: the S3 task {task['task']!r} did not finish in {timeout:.0f} s", "connect"
        ) from None
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
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
                f"{where}: the server at {settings.endpoint} refused the credentials ({e}); "
                "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"
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
