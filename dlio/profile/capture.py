"""Run a command under the interposer (dlio._interpose, LD_PRELOAD) and keep its records.

The recorder writes as the job goes (src/dlio_profile/interpose.c), so the capture survives the
job's death by any signal or crash. Ctrl-C / SIGTERM to `profile` stops the job (the signal is
passed on, then SIGKILL after STOP_GRACE seconds or at a second signal) and the capture made so
far is kept for analysis; the caller learns which signal stopped it."""

import glob
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from dlio import user_env
from dlio.base.errors import DlioError

STOP_GRACE = 10.0  # seconds a stopped job gets to end on its own before SIGKILL


@dataclass
class Captured:
    rc: int  # the job's exit status; -N: killed by signal N (subprocess's convention)
    seconds: float
    raw: str  # the capture folder
    interrupted: Optional[int] = None  # the signal that stopped `profile` itself, if any

    def failure(self) -> Optional[str]:
        """How the job failed, or None if it exited 0."""
        if self.rc < 0:
            try:
                name = signal.Signals(-self.rc).name
            except ValueError:
                name = f"signal {-self.rc}"
            return f"the job was killed by {name}"
        return f"the job failed with exit status {self.rc}" if self.rc else None


def interposer_path() -> str:
    """The built dlio._interpose library in the package folder."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = sorted(glob.glob(os.path.join(here, "_interpose*.so")))
    if not found:
        raise DlioError(
            f"the capture library dlio/_interpose*.so is not built in {here}: reinstall dlio-fast "
            "(pip install -e .) with a C compiler"
        )
    return found[0]


def capture_env(raw_dir: str, env: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment that records into raw_dir (LD_PRELOAD first, so it wraps libc)."""
    env = dict(user_env() if env is None else env)
    pre = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = interposer_path() + (" " + pre if pre else "")
    env["DLIO_PROFILE_DIR"] = os.path.abspath(raw_dir)
    return env


def _terminal_sent_it(signum: int) -> bool:
    """A Ctrl-C at the terminal reaches the job too (same foreground process group): passing it
    on would make it two."""
    if signum != signal.SIGINT:
        return False
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


def _wait_stopping(proc: subprocess.Popen) -> Optional[int]:
    """proc's exit status; a SIGINT/SIGTERM meanwhile is passed on to it, SIGKILL follows after
    STOP_GRACE seconds or at a second signal. Returns the first signal (None: none)."""
    got: List[int] = []

    def handler(signum: int, frame: Any) -> None:
        got.append(signum)
        try:
            if len(got) > 1:
                proc.kill()
            elif not _terminal_sent_it(signum):
                proc.send_signal(signum)
        except ProcessLookupError:
            pass

    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    deadline = None
    try:
        while proc.poll() is None:
            if got and deadline is None:
                deadline = time.monotonic() + STOP_GRACE
            if deadline is not None and time.monotonic() > deadline:
                proc.kill()
            try:
                proc.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                pass
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return got[0] if got else None


def run_captured(cmd: List[str], out_dir: str) -> Captured:
    """Run cmd with its whole process tree recorded into out_dir/raw. The job's own
    stdout/stderr pass through."""
    if not cmd:
        raise DlioError("no command to profile: give it after `--`, e.g. dlio-fast profile -- python train.py")
    raw = os.path.join(out_dir, "raw")
    try:
        os.makedirs(raw, exist_ok=True)
    except OSError as e:
        raise DlioError(f"{raw}: cannot create the capture folder: {e.strerror}")
    if glob.glob(os.path.join(raw, "ev-*.bin")):
        raise DlioError(f"{raw} already holds a capture: give another --output folder")
    env = capture_env(raw)
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, env=env)
    except FileNotFoundError:
        raise DlioError(f"{cmd[0]}: command not found")
    except PermissionError:
        raise DlioError(f"{cmd[0]}: not executable")
    sig = _wait_stopping(proc)
    return Captured(proc.returncode, time.perf_counter() - t0, raw, sig)
