"""The CLI side of the S3 client: runs tasks in worker processes (dlio.storage.s3.worker) under a
deadline, and turns their failures into one-line errors.

Every task goes through a Session: the task is handed over as a file (a message of any size: a grid
point's keys at 64 threads x qd 1024 are megabytes), the worker's lines are read as they come, and the
wait is bounded by silence (dlio.storage.s3.deadline), not by total duration. A stop asks the worker
to finish (SIGTERM) and kills it after STOP_GRACE_S; what it measured is in files it wrote as it went.
"""

from __future__ import annotations

import atexit
import collections
import importlib.util
import json
import os
import queue
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple

from dlio.base.errors import DlioError, DlioRunError
from dlio.storage.s3 import shared
from dlio.storage.s3.deadline import Silence, silence_message
from dlio.storage.s3.settings import S3Settings

POLL_S = 0.25  # how often a waiting parent looks at the worker (deadline, signals, progress)
STOP_GRACE_S = 2.0  # a worker told to stop has this long to answer with what it measured, then is killed
# ... or this long, when it gave no sign of life since it was told (a request stalled on a silent server:
# it cannot answer, and waiting the whole grace only delays the stop)
STALLED_STOP_S = 0.75
# CPU (user, sys seconds) of the tasks run by this process's workers, less their emulated compute:
# the client's CPU, which a phase's counters add to this process's (dlio.storage.s3.backend.phase)
WORKER_CPU = [0.0, 0.0]
# what a task is doing, for the deadline's message (callers say more where they know more)
TASK_WORDS = {
    "check": "listing the prefix",
    "create_bucket": "creating the bucket",
    "put_objects": "creating the test objects",
    "delete": "removing the test objects",
    "delete_keys": "removing the run's objects",
    "list": "listing the prefix",
    "list_all": "listing the prefix",
    "point": "measuring an io point",
    "fetch": "fetching the dataset's manifests",
    "upload_tree": "uploading the dataset",
    "upload_stream": "uploading the generated dataset",
    "ckpt": "transferring checkpoint objects",
    "train": "GETs of training batches",
    "kv_relay": "relaying the KV cache's requests",
}


def require_client() -> None:
    """Refuse early, with the fix, when the client library is not installed."""
    for mod in ("s3dlio", "zstandard"):
        if importlib.util.find_spec(mod) is None:
            raise DlioError(f"S3 needs the {mod} package: pip install 'dlio-fast[s3]'")


class WorkerFailed(DlioRunError):
    """A task failed in the worker; `kind` is auth, bucket, connect, timeout, files, missing or other."""

    def __init__(self, message: str, kind: str, detail: Optional[str] = None):
        super().__init__(message)
        self.kind = kind
        self.detail = message if detail is None else detail  # the client library's own words


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


_EOF = object()


class Session:
    """One task in a worker process: handed over, its lines read under the silence deadline, stopped
    on request, reaped with its CPU counted (WORKER_CPU)."""

    def __init__(self, settings: S3Settings, task: dict, doing: Optional[str] = None) -> None:
        self.settings = settings
        self.doing = doing or TASK_WORDS.get(task["task"], f"the task {task['task']!r}")
        self.dir = tempfile.mkdtemp(prefix="dlio-fast-s3task-")
        self.counters = shared.Counters(shared.create(self.dir))
        path = os.path.join(self.dir, "task.json")
        with open(path, "w") as f:
            json.dump({**task, "counters": os.path.join(self.dir, shared.FILE)}, f)
        self.proc = start_worker(settings)
        self.lines: "queue.Queue[Any]" = queue.Queue()
        self.err: "collections.deque[str]" = collections.deque(maxlen=20)
        for stream, put, eof in ((self.proc.stdout, self.lines.put, True), (self.proc.stderr, self.err.append, False)):
            threading.Thread(target=self._drain, args=(stream, put, eof), daemon=True).start()
        self.stop_at: Optional[float] = None
        self.cpu: Optional[Tuple[float, float]] = None  # the task's (user, sys) once reaped
        self.silence = Silence(self.proc.pid, self.counters)
        self.send("@" + path)  # one short line, whatever the task's size: never blocks

    @staticmethod
    def _drain(stream: Any, put: Callable[[Any], None], eof: bool) -> None:
        """A pipe's lines into `put` (a thread per pipe: neither can fill up and block the worker)."""
        try:
            for line in stream:
                put(line.rstrip("\n"))
        except (OSError, ValueError):
            pass
        finally:
            if eof:  # stdout: tell the reader it ended
                put(_EOF)

    def send(self, line: str) -> None:
        """A line to the worker's stdin (a gone worker is seen at its end of output). New work: the
        silence counts from now (the worker waited for the parent, not for the server)."""
        self.silence.reset()
        try:
            # the worker's stdin is a pipe (start_worker), never None
            self.proc.stdin.write(line + "\n")  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except (OSError, ValueError):
            pass

    def progress(self) -> Tuple[int, int, int]:
        """(requests, bytes, steps) the worker has done so far."""
        return self.counters.progress()

    def request_stop(self) -> None:
        """Ask the worker to stop (SIGTERM: it answers with what it measured); killed after STOP_GRACE_S, or
        after STALLED_STOP_S when it stays silent (stalled on the server)."""
        if self.stop_at is None:
            self.stop_at = time.monotonic()
            if self.proc.poll() is None:
                try:
                    self.proc.send_signal(signal.SIGTERM)
                except OSError:
                    pass

    def next_line(
        self, stop: Optional[Callable[[], Optional[BaseException]]] = None, on_tick: Optional[Callable] = None
    ) -> Optional[str]:
        """The worker's next line; None when its output ended. stop() returning an exception kills the
        worker and raises it (a signal noted by the parent). A worker silent for the timeout is killed:
        WorkerFailed (kind 'timeout') naming the endpoint, what it was doing, and how to raise it."""
        timeout = self.settings.timeout_s
        while True:
            try:
                line = self.lines.get(timeout=POLL_S)
            except queue.Empty:
                line = None
            if line is _EOF:
                return None
            if line is not None:
                return line
            if stop is not None:
                exc = stop()
                if exc is not None:
                    self.close(kill=True)
                    raise exc
            if on_tick is not None:
                on_tick(self)
            if self.stop_at is not None:
                told = time.monotonic() - self.stop_at
                stalled = told > STALLED_STOP_S and self.silence.seconds() >= told
                if told > STOP_GRACE_S or stalled:
                    self.close(kill=True)  # its output ends: the caller reads what it wrote
            elif self.silence.seconds() > timeout:
                self.close(kill=True)
                raise WorkerFailed(
                    silence_message(self.settings.endpoint, timeout, self.doing, self.settings.timeout_key),
                    "timeout",
                )

    def reply(
        self,
        stop: Optional[Callable[[], Optional[BaseException]]] = None,
        on_tick: Optional[Callable] = None,
        on_line: Optional[Callable[[str], None]] = None,
    ) -> Optional[dict]:
        """The worker's next JSON line (other lines go to on_line). Its error is raised as WorkerFailed;
        a worker that ended without a word: None when it was told to stop, else WorkerFailed."""
        while True:
            line = self.next_line(stop, on_tick)
            if line is None:
                if self.stop_at is not None:
                    return None
                self.close()
                tail = (list(self.err) or ["no output"])[-1]
                status = self.proc.returncode
                raise WorkerFailed(f"the S3 worker process failed (exit status {status}): {tail}", "other")
            if line.startswith("{"):
                out = json.loads(line)
                if "kind" in out:  # a task that failed: {"error", "kind"} (the train task's own "error" differs)
                    raise WorkerFailed(self.failure(out["error"], out["kind"]), out["kind"], out["error"])
                return out
            if on_line is not None:
                on_line(line)

    def failure(self, error: str, kind: str) -> str:
        """A worker's error as the user reads it: a timeout in this tool's terms (not s3dlio's variable),
        a file limit as this host's."""
        s = self.settings
        if kind == "timeout":
            return silence_message(s.endpoint, s.timeout_s, self.doing, s.timeout_key)
        if kind == "connect":
            return f"cannot reach {s.endpoint} while {self.doing}: {error}"
        if kind == "files":
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            return (
                f"this host ran out of open files while {self.doing} ({error}); not the endpoint's doing: raise "
                f"`ulimit -n` (now {soft}) or lower the requests in flight"
            )
        return error

    def close(self, kill: bool = False) -> None:
        """End the conversation: the worker reaped (killed first when `kill`, or when it does not exit
        within STOP_GRACE_S), its task's CPU counted, the task's folder removed."""
        if self.cpu is not None:
            return
        p = self.proc
        if kill and p.returncode is None:
            try:
                p.kill()
            except OSError:
                pass
        try:
            p.stdin.close()  # type: ignore[union-attr]  # a pipe (start_worker)
        except (OSError, ValueError):
            pass
        status = ru = None
        end = time.monotonic() + STOP_GRACE_S
        try:
            while True:
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > end:
                    p.kill()
                    _, status, ru = os.wait4(p.pid, 0)
                    break
                time.sleep(0.01)
            p.returncode = os.waitstatus_to_exitcode(status)
        except ChildProcessError:  # already reaped (Popen.poll): its CPU is not known
            p.wait()
        self.cpu = self.counters.task_cpu(ru.ru_utime, ru.ru_stime) if ru is not None else (0.0, 0.0)
        WORKER_CPU[0] += self.cpu[0]
        WORKER_CPU[1] += self.cpu[1]
        shutil.rmtree(self.dir, ignore_errors=True)


def run_task(settings: S3Settings, task: dict, doing: Optional[str] = None, on_tick: Optional[Callable] = None) -> dict:
    """Run one task in a worker process; its answer (dict) or WorkerFailed (a silence past the timeout
    among them). A stop signal noted meanwhile (a measured phase defers Ctrl-C / SIGTERM:
    dlio.system.execute.pending) kills the worker and raises its Interrupted. on_tick(session): a few times a
    second while it runs (the live display reads session.progress())."""
    from dlio.system.execute import pending

    if pending() is not None:
        raise pending()  # type: ignore[misc]  # not None: checked on the line above
    s = Session(settings, task, doing)
    try:
        out = s.reply(stop=pending, on_tick=on_tick)
        if on_tick is not None:
            on_tick(s)  # the last state (100 %), drawn before the display's phase ends
    finally:
        s.close()
    prepare_spare(settings)
    return out  # type: ignore[return-value]  # reply is None only after request_stop, never called on s


def bucket_help(bucket: str, endpoint: str) -> str:
    """How to create a bucket, in the words of the tools people have at hand."""
    return (
        f"add --create-bucket, or create it with: aws s3 mb s3://{bucket} --endpoint-url {endpoint}  or  "
        f"python -c \"import boto3; boto3.client('s3', endpoint_url='{endpoint}').create_bucket(Bucket='{bucket}')\""
    )


def check_access(settings: S3Settings, bucket: str, prefix: str, create: bool = False) -> None:
    """One listing under the prefix before any work: wrong keys, a missing bucket or an endpoint that
    does not answer become one-line errors (exit status 2). create: a missing bucket is created."""
    where = f"s3://{bucket}/{prefix}"
    try:
        run_task(settings, {"task": "check", "bucket": bucket, "prefix": prefix}, f"listing {where}")
        return
    except WorkerFailed as e:
        if e.kind == "bucket" and create:
            try:
                run_task(settings, {"task": "create_bucket", "bucket": bucket}, f"creating bucket {bucket!r}")
            except WorkerFailed as c:
                raise DlioError(f"{where}: could not create bucket {bucket!r} at {settings.endpoint}: {c}") from None
            return check_access(settings, bucket, prefix)
        if e.kind == "auth":
            raise DlioError(
                f"{where}: the server at {settings.endpoint} refused the credentials ({e.detail}); "
                f"check {settings.key_source}"
            ) from None
        if e.kind == "bucket":
            raise DlioError(
                f"{where}: bucket {bucket!r} does not exist at {settings.endpoint}; "
                f"{bucket_help(bucket, settings.endpoint)}"
            ) from None
        if e.kind == "connect":
            raise DlioError(
                f"{where}: cannot reach the S3 endpoint {settings.endpoint} ({e.detail}); "
                "check --endpoint / AWS_ENDPOINT_URL"
            ) from None
        raise DlioError(f"{where}: {e}") from None
