"""A stream of staged files PUT as objects: one upload worker process for a whole generation; batches
go in on its stdin (parallel PUTs, multipart for large objects: dlio.storage.s3.worker_data), one answer
line per batch comes back, so the caller removes a batch's files once they are up. Every wait for an
answer has the silence deadline of every worker (dlio.storage.s3.client.Session)."""

from __future__ import annotations

import json
from typing import List, Optional, Tuple

from dlio.storage.s3 import client
from dlio.storage.s3.settings import S3Settings


class Uploader:
    """One upload worker process for a whole generation: batches go in on its stdin, one answer line
    per batch comes back."""

    def __init__(self, settings: S3Settings, bucket: str, prefix: str, multipart_min: Optional[int] = None):
        self.settings = settings
        task: dict = {"task": "upload_stream", "bucket": bucket, "prefix": prefix}
        if multipart_min:
            task["multipart_min"] = multipart_min
        self.session = client.Session(settings, task, f"uploading the generated dataset to s3://{bucket}/{prefix}")

    def send(self, files: List[Tuple[str, str, int]]) -> None:
        self.session.send(json.dumps([list(f) for f in files]))

    def wait(self) -> int:
        """The bytes of the batch sent last, once it is up."""
        try:
            a = self.session.reply()
        except client.WorkerFailed:
            self.session.close(kill=True)
            raise
        if a is None or "done" not in a:
            self.session.close(kill=True)
            raise client.WorkerFailed("the S3 upload worker ended before its batch was up", "other")
        return int(a["done"])

    def close(self) -> None:
        """No more batches: the worker's totals, once everything is up."""
        s = self.session
        try:
            s.proc.stdin.close()  # type: ignore[union-attr]  # the worker's stdin is a pipe (start_worker)
        except (OSError, ValueError):
            pass
        try:
            s.reply()
        finally:
            s.close()
        client.prepare_spare(self.settings)  # the next task's worker starts now, after the upload

    def kill(self) -> None:
        self.session.close(kill=True)
