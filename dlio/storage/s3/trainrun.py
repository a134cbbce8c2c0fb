"""A training run on S3 with the C run's interface (execute, request_stop, progress, paths), so
that the train loop (dlio.train.loop) plans, stops, reports and computes metrics exactly as on a
filesystem. The steps run in a worker process (dlio.storage.s3.worker_train); this side hands it the
plan's arrays and turns what it measured into the C run's result dict: per-step times, the
request latencies (timed by the client library, one entry per GET) in the C core's histograms,
bytes, requests and errors.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import tempfile
from typing import Callable, Optional, Sequence

import numpy as np

from dlio import _core
from dlio.storage.s3 import client, oplog
from dlio.storage.s3.settings import S3Settings


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
    ):
        self.settings = settings
        self.paths = list(uris)
        self.dir = tempfile.mkdtemp(prefix="dlio-fast-s3run-")
        np.save(os.path.join(self.dir, "ops.npy"), np.ascontiguousarray(ops, dtype=_core.OP_DTYPE))
        np.save(os.path.join(self.dir, "steps.npy"), np.ascontiguousarray(steps, dtype=_core.STEP_DTYPE))
        np.save(os.path.join(self.dir, "sizes.npy"), np.asarray(sizes, dtype=np.uint64))
        with open(os.path.join(self.dir, "uris.txt"), "w") as f:
            f.write("\n".join(self.paths))
        np.zeros(3, np.uint64).tofile(os.path.join(self.dir, "progress.u64"))
        self.inflight = max(1, threads) * max(1, qd)
        self.nsteps = len(steps)
        probe = self.paths[0] if self.paths else ""
        self.task = {
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
        }
        self.step_hook = step_hook  # called after each step's compute, inside the step (the C trainer's hook)
        self.proc: Optional[subprocess.Popen] = None
        self.stop_requested = False

    def request_stop(self) -> None:
        self.stop_requested = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def progress(self):
        """(requests, bytes, steps) so far, as the worker counts them after each step."""
        try:
            p = np.fromfile(os.path.join(self.dir, "progress.u64"), dtype=np.uint64, count=3)
            return int(p[0]), int(p[1]), int(p[2])
        except (OSError, ValueError, IndexError):
            return 0, 0, 0

    def execute(self) -> dict:
        """Run the steps; the result dict of a C train run. An S3 failure raises _core.RunError
        carrying what was measured up to it."""
        try:
            self.proc = client.start_worker(self.settings)  # a spare, started after the last task
            if self.stop_requested:
                self.proc.send_signal(signal.SIGTERM)
            if self.step_hook is None:
                out, err = self.proc.communicate(json.dumps(self.task) + "\n")
            else:
                out, err = self._converse()
            lines = [ln for ln in out.splitlines() if ln.startswith("{")]
            answer = json.loads(lines[-1]) if lines else None
            if answer is None or "steps_done" not in answer:
                if self.stop_requested:  # stopped before the worker could listen
                    answer = {"steps_done": 0, "stopped": True, "error": None, "cpu_ns": 0, "t_start": 0, "t_end": 0}
                else:
                    why = answer["error"] if answer else (err.strip().splitlines() or ["no output"])[-1]
                    raise _core.RunError(errno.EIO, f"S3 training run failed: {why}", what="S3 run")
            result = self._result(answer)
            if answer["error"]:
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

    def _converse(self):
        """Hand over the task, then answer each step's line ('S<i>') after the step hook (the ranks'
        barrier); 'stop' when the hook fails (Ctrl-C, a rank gone). Returns (stdout, stderr)."""
        p = self.proc
        p.stdin.write(json.dumps(self.task) + "\n")
        p.stdin.flush()
        rest = []
        for line in p.stdout:
            if line.startswith("S") and line[1:].strip().isdigit():
                try:
                    self.step_hook(int(line[1:]))
                    word = "go"
                except Exception:
                    word = "stop"
                    self.stop_requested = True
                try:
                    p.stdin.write(word + "\n")
                    p.stdin.flush()
                except OSError:
                    pass
            else:
                rest.append(line)
        p.stdin.close()
        err = p.stderr.read()
        p.wait()
        return "".join(rest), err

    def _result(self, answer: dict) -> dict:
        tpath = os.path.join(self.dir, "times.npy")
        times = np.load(tpath) if os.path.exists(tpath) else np.zeros((0, 5), np.uint64)
        log = self.task["oplog"]
        if os.path.exists(log):
            rows = oplog.read(log)
        else:
            rows = oplog.parse("\t".join(oplog.COLUMNS).encode())
        ok = rows["error"] == ""
        lat = _core.hist_from_array(np.asarray(rows["duration"][ok], dtype=np.uint64))
        ops, nbytes, errors = int(ok.sum()), int(rows["bytes"][ok].sum()), int((~ok).sum())
        return {
            "t_start": answer["t_start"],
            "t_end": answer["t_end"],
            "ops": ops,
            "bytes": nbytes,
            "errors": errors,
            "steps_done": int(answer["steps_done"]),
            "stopped": bool(answer["stopped"]),
            "lat": lat,
            # one GET per sample (whole object or the sample's range): a sample's latency is its request's
            "sample_lat": dict(lat),
            "threads": [{"ops": ops, "bytes": nbytes, "errors": errors, "cpu_ns": answer["cpu_ns"], "fsync_ns": 0}],
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
