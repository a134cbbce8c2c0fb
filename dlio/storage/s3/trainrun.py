"""A training run on S3 with the C run's interface (execute, request_stop, progress, paths), so
that the train loop (dlio.train.loop) plans, stops, reports and computes metrics exactly as on a
filesystem. The steps run in a worker process (dlio.storage.s3.worker_train); this side hands it the
plan's arrays and turns what it measured into the C run's result dict: per-step times, the
request latencies (timed by the client library, one entry per GET) in the C core's histograms,
bytes, requests and errors. The worker writes each step's times as the step ends, so a worker killed
at the deadline (a server that stopped answering) or after a stop still leaves the steps it measured.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
import tempfile
from typing import Callable, Optional, Sequence, Tuple

import numpy as np

from dlio import _core
from dlio.storage.s3 import client, oplog
from dlio.storage.s3.failures import classify
from dlio.storage.s3.settings import S3Settings
from dlio.storage.s3.worker_train import TIMES_COLUMNS


class S3Run:
    """One block of training steps on S3. uris[i] is the object of plan file i, sizes[i] its size."""

    def __init__(
        self,
        settings: S3Settings,
        uris: Sequence[str],
        sizes: np.ndarray,
        ops: np.ndarray,
        steps: np.ndarray,
        *,
        threads: int,
        qd: int,
        prefetch: int,
        compute_mode: int = 0,
        preprocess_ns: int = 0,
        step_hook: Optional[Callable[[int], None]] = None,
        files: int = 0,
    ):
        self.settings = settings
        self.paths = list(uris)
        self.dir = tempfile.mkdtemp(prefix="dlio-fast-s3run-")
        np.save(os.path.join(self.dir, "ops.npy"), np.ascontiguousarray(ops, dtype=_core.OP_DTYPE))
        np.save(os.path.join(self.dir, "steps.npy"), np.ascontiguousarray(steps, dtype=_core.STEP_DTYPE))
        np.save(os.path.join(self.dir, "sizes.npy"), np.asarray(sizes, dtype=np.uint64))
        with open(os.path.join(self.dir, "uris.txt"), "w") as f:
            f.write("\n".join(self.paths))
        # each step's times, written by the worker as the step ends (at least one row: a valid map)
        np.zeros((max(1, len(steps)), TIMES_COLUMNS), np.uint64).tofile(os.path.join(self.dir, "times.u64"))
        self.inflight = max(1, threads) * max(1, qd)
        self.nsteps = len(steps)
        probe = self.paths[0] if self.paths else ""
        self.task: dict = {
            "task": "train",
            "dir": self.dir,
            "oplog": os.path.join(self.dir, "oplog.tsv.zst"),
            "probe": probe.rsplit("/", 1)[0] + "/" if probe else "",
            "inflight": self.inflight,
            "threads": threads,
            "prefetch": prefetch,
            "compute_mode": compute_mode,
            "preprocess_ns": int(preprocess_ns),
            "step_sync": step_hook is not None,
            "files": files,
        }
        self.step_hook = step_hook  # called after each step's compute, inside the step (the C trainer's hook)
        self.session: Optional[client.Session] = None
        self.stop_requested = False
        self.last = (0, 0, 0)  # progress as last seen: it stays once the worker is gone
        self.started = 0
        self.ended = 0  # the last step's t_end, kept once the run is over (its folder is then removed)

    def request_stop(self) -> None:
        """Stop the steps (Ctrl-C / SIGTERM): the worker ends its step and answers, or is killed after
        client.STOP_GRACE_S; the steps done are kept either way."""
        self.stop_requested = True
        if self.session is not None:
            self.session.request_stop()

    def progress(self) -> Tuple[int, int, int]:
        """(requests, bytes, steps) so far, as the worker counts them after each step; the final counts
        once the run is over (a finished epoch's display keeps them)."""
        if self.session is not None:
            self.last = self.session.progress()
        return self.last

    def started_ns(self) -> int:
        """now_ns() when the first step began fetching (the worker's t_fetch of step 0, in the times file
        the parent made; 0 until that step ends): the live display's clock starts there, as the exact
        figures' window does, not at the worker's start-up."""
        if not self.started:
            try:
                with open(os.path.join(self.dir, "times.u64"), "rb") as f:
                    self.started = int.from_bytes(f.read(8), sys.byteorder)
            except OSError:  # not made yet, or removed with the finished run's folder
                pass
        return self.started

    def last_end_ns(self) -> int:
        """now_ns() when the latest step counted in progress() ended (its t_end in the times file), 0
        before the first: the live display's final row ends its window there, as the exact figures do."""
        steps = self.last[2]
        if self.ended or not steps:
            return self.ended
        try:
            with open(os.path.join(self.dir, "times.u64"), "rb") as f:
                f.seek(((steps - 1) * TIMES_COLUMNS + 2) * 8)
                return int.from_bytes(f.read(8), sys.byteorder)
        except OSError:  # removed with the finished run's folder
            return 0

    def execute(self) -> dict:
        """Run the steps; the result dict of a C train run. An S3 failure (an error, a server silent past
        the timeout) raises _core.RunError carrying what was measured up to it."""
        failure = None
        try:
            # a spare worker, started after the last task; its deadline is on silence, not duration
            self.session = s = client.Session(self.settings, self.task, "GETs of training batches")
            if self.stop_requested:
                s.request_stop()
            try:
                answer = s.reply(on_line=self._step_line)
            except client.WorkerFailed as e:
                answer, failure = None, e
            finally:
                s.close()
            self.last = s.progress()
            result = self._result(answer, s)
            if failure is not None:
                code = errno.ETIMEDOUT if failure.kind == "timeout" else errno.EIO
                raise _core.RunError(code, f"S3 training run failed: {failure}", what="S3 run", result=result)
            if answer is not None and answer["error"]:
                kind = classify(answer["error"])
                if kind in ("timeout", "files"):  # in this tool's words: the key to raise, this host's limit
                    msg = s.failure(answer["error"], kind)
                    raise _core.RunError(errno.ETIMEDOUT, msg, what="S3 GET", result=result)
                raise _core.RunError(
                    errno.EIO,
                    f"GET from {self.settings.endpoint} failed: {answer['error']}",
                    what="S3 GET",
                    result=result,
                )
            return result
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            if not self.stop_requested:
                client.prepare_spare(self.settings)  # the next block's worker starts now, between blocks

    def _step_line(self, line: str) -> None:
        """A step's line ('S<i>'): the step hook (the ranks' barrier), then 'go', or 'stop' when the hook
        fails (Ctrl-C, a rank gone). The worker waits meanwhile: not the server's silence."""
        s = self.session
        if not (line.startswith("S") and line[1:].strip().isdigit()) or self.step_hook is None:
            return
        try:
            self.step_hook(int(line[1:]))
            word = "go"
        except Exception:
            word = "stop"
            self.stop_requested = True
        # a step's line comes from the session that is running: set in start()
        s.silence.reset()  # type: ignore[union-attr]
        s.send(word)  # type: ignore[union-attr]

    def _result(self, answer: Optional[dict], s: "client.Session") -> dict:
        """The C result dict from the files the worker wrote; `answer` None: it was stopped or killed
        before answering (its steps, counted as they ended, are kept; the op-log as far as it got)."""
        ops_done, bytes_done, done = s.progress()
        if answer is not None:
            done = int(answer["steps_done"])
        times = np.fromfile(os.path.join(self.dir, "times.u64"), dtype=np.uint64).reshape(-1, TIMES_COLUMNS)[:done]
        self.started = self.started or (int(times[0, 0]) if done else 0)
        self.ended = int(times[done - 1, 2]) if done else 0
        log = self.task["oplog"]
        rows = oplog.read(log) if os.path.exists(log) else oplog.parse("\t".join(oplog.COLUMNS).encode())
        ok = rows["error"] == ""
        lat = _core.hist_from_array(np.asarray(rows["duration"][ok], dtype=np.uint64))
        ops, nbytes, errors = int(ok.sum()), int(rows["bytes"][ok].sum()), int((~ok).sum())
        if answer is None:  # the op-log may end early: the steps' own counts
            ops, nbytes = max(ops, ops_done), max(nbytes, bytes_done)
            # the reading's CPU: the task's (its rusage at exit) less the compute's spin
            cpu_ns = int(sum(s.cpu or (0.0, 0.0)) * 1e9)
            t_start = int(times[0, 0]) if done else 0
            t_end = int(times[done - 1, 2]) if done else 0
        else:
            cpu_ns, t_start, t_end = answer["cpu_ns"], answer["t_start"], answer["t_end"]
        return {
            "t_start": t_start,
            "t_end": t_end,
            "ops": ops,
            "bytes": nbytes,
            "errors": errors,
            "steps_done": done,
            "stopped": answer is None or bool(answer["stopped"]),
            "lat": lat,
            # one GET per sample (whole object or the sample's range): a sample's latency is its request's
            "sample_lat": dict(lat),
            "threads": [{"ops": ops, "bytes": nbytes, "errors": errors, "cpu_ns": cpu_ns, "fsync_ns": 0}],
            "qd_used": self.inflight,
            "eng_flags_used": 0,
            "step_times": {
                "t_fetch": times[:, 0],
                "t_ready": times[:, 1],
                "t_end": times[:, 2],
                "compute_ns": times[:, 3],
                "bytes": times[:, 4],
            },
        }
