"""Run a command under the interposer (dlio._interpose, LD_PRELOAD) and keep its records."""

import glob
import os
import subprocess
import time
from typing import List, Tuple

from dlio.errors import DlioError


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


def capture_env(raw_dir: str, env=None) -> dict:
    """The environment that records into raw_dir (LD_PRELOAD first, so it wraps libc)."""
    env = dict(os.environ if env is None else env)
    pre = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = interposer_path() + (" " + pre if pre else "")
    env["DLIO_PROFILE_DIR"] = os.path.abspath(raw_dir)
    return env


def run_captured(cmd: List[str], out_dir: str) -> Tuple[int, float, str]:
    """Run cmd with its whole process tree recorded into out_dir/raw. Returns (exit status,
    wall seconds, raw folder). The job's own stdout/stderr pass through."""
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
        rc = subprocess.call(cmd, env=env)
    except FileNotFoundError:
        raise DlioError(f"{cmd[0]}: command not found")
    except PermissionError:
        raise DlioError(f"{cmd[0]}: not executable")
    return rc, time.perf_counter() - t0, raw
