"""A stream of staged files PUT as objects: one upload worker process for a whole generation; batches
go in on its stdin (parallel PUTs, multipart for large objects: dlio.storage.s3.worker_data), one answer
line per batch comes back, so the caller removes a batch's files once they are up."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from typing import List, Optional, Tuple

from dlio.storage.s3 import client
from dlio.storage.s3.settings import S3Settings


class Uploader:
    """One upload worker process for a whole generation: batches go in on its stdin, one answer line
    per batch comes back."""

    def __init__(self, settings: S3Settings, bucket: str, prefix: str, multipart_min: Optional[int] = None):
        self.settings = settings
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dlio.storage.s3.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
            env=settings.child_env(),
        )
        task = {"task": "upload_stream", "bucket": bucket, "prefix": prefix}
        if multipart_min:
            task["multipart_min"] = multipart_min
        self._send(task)

    def _send(self, obj) -> None:
        try:
            self.proc.stdin.write(json.dumps(obj) + "\n")
            self.proc.stdin.flush()
        except OSError:
            self._fail()

    def _fail(self):
        """The worker answered with an error or died: WorkerFailed with its words."""
        out = self.proc.stdout.read() if self.proc.stdout else ""
        self.proc.wait()
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if lines and "error" in json.loads(lines[-1]):
            a = json.loads(lines[-1])
            raise client.WorkerFailed(a["error"], a["kind"])
        self.err.seek(0)
        tail = (self.err.read().strip().splitlines() or ["no output"])[-1]
        raise client.WorkerFailed(f"the S3 upload worker failed (exit status {self.proc.returncode}): {tail}", "other")

    def send(self, files: List[Tuple[str, str, int]]) -> None:
        self._send([list(f) for f in files])

    def wait(self) -> int:
        """The bytes of the batch sent last, once it is up."""
        line = self.proc.stdout.readline()
        a = json.loads(line) if line.startswith("{") else {}
        if "done" not in a:
            if "error" in a:
                self.proc.wait()
                raise client.WorkerFailed(a["error"], a["kind"])
            self._fail()
        return int(a["done"])

    def close(self) -> None:
        self.proc.stdin.close()
        out = self.proc.stdout.read()
        self.proc.wait()
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if not lines or "error" in json.loads(lines[-1]):
            self._fail()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
