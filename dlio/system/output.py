"""Writing result files: atomically (temp file + rename), one valid document each."""

import contextlib
import csv
import io
import json
import os
import platform
import socket
import stat
import sys
import threading
import time
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

import numpy as np

import dlio
from dlio import _core
from dlio.base import tmpclaim
from dlio.base.errors import DlioError
from dlio.base.tmpclaim import TMP_MARK  # ".{name}.tmp-{pid}-{thread}", or a claim's token


def _default(o: object) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


@contextlib.contextmanager
def atomic_path(final: str, fsync: bool = False, claim_root: Optional[str] = None) -> Iterator[str]:
    """Yield a temporary name beside `final` to write; on success (fsynced when asked) it is renamed
    to `final`, on any error removed: nothing half-written ever carries the final name. With
    `claim_root` the name carries this process's claim on that folder (dlio.base.tmpclaim), so that a later
    run can prove the file is a leftover of ours and remove it."""
    d, name = os.path.split(os.path.abspath(final))
    if claim_root is not None:
        with tmpclaim.claimed(claim_root) as suffix:
            with _renamed(final, os.path.join(d, f".{name}{suffix}-{threading.get_ident()}"), fsync) as tmp:
                yield tmp
        return
    with _renamed(final, os.path.join(d, f".{name}{TMP_MARK}{os.getpid()}-{threading.get_ident()}"), fsync) as tmp:
        yield tmp


@contextlib.contextmanager
def _renamed(final: str, tmp: str, fsync: bool) -> Iterator[str]:
    try:
        yield tmp
        if fsync:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _is_special(path: str) -> bool:
    """True for an existing target that is neither absent, a regular file nor a folder (a device,
    a FIFO, a socket): such a target is written through, never replaced by a regular file."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode))


@contextlib.contextmanager
def result_path(path: str) -> Iterator[str]:
    """Where to write a result file `path`: a temporary name renamed over it (atomic) when `path` is
    absent or a regular file; the link's target when `path` is a symlink; `path` itself, written
    through, when it is a device or FIFO (`--json /dev/stdout`, `/dev/null`)."""
    final = os.path.realpath(path) if os.path.islink(path) else path
    if _is_special(final):
        yield final
        return
    folder = os.path.dirname(os.path.abspath(final))
    tmpclaim.sweep(folder)  # leftovers of a run that died while writing here, proven ours by its claim
    with atomic_path(final, fsync=True, claim_root=folder) as tmp:
        yield tmp


STDOUT = "-"  # a result path of "-" means standard output, in every command


def atomic_write_text(path: str, text: str) -> None:
    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    with result_path(path) as tmp:
        with open(tmp, "w") as f:
            f.write(text)


def write_json(path: str, doc: Any) -> None:
    atomic_write_text(path, json.dumps(doc, indent=2, default=_default, allow_nan=False) + "\n")


# A text cell a spreadsheet would run as a formula starts with one of these (OWASP's CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_value(v: Any) -> Any:
    """One CSV cell: true/false (not Python's True/False), floats rounded to 3 decimals (whole
    numbers without a decimal point), None empty; text that a spreadsheet would run as a formula (a
    path or a label that starts with =, +, -, @) gets a leading ' so it is shown as text."""
    if v is None:
        return ""
    if isinstance(v, str):
        return "'" + v if v.startswith(FORMULA_START) else v
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if v != v or v in (float("inf"), float("-inf")):
            return str(v)
        return str(int(v)) if v.is_integer() and abs(v) < 2**53 else repr(round(v, 3))
    return v


def write_csv(path: str, rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(columns)
    for r in rows:
        w.writerow([csv_value(r.get(c, "")) for c in columns])
    atomic_write_text(path, buf.getvalue())


def check_output_path(path: str) -> None:
    """Fail before measuring if a result file could not be written."""
    if path == STDOUT:
        return
    if _is_special(path):
        if not os.access(path, os.W_OK):
            raise DlioError(f"{path}: not writable (choose another output path)")
        return
    folder = os.path.dirname(os.path.abspath(os.path.realpath(path))) or "."
    if not os.path.isdir(folder):
        raise DlioError(f"{path}: folder {folder} does not exist (create it first)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise DlioError(f"{path}: folder {folder} is not writable (choose another output path)")


def environment() -> dict[str, Any]:
    """Where and with what a result was measured."""
    return {
        "dlio_fast_version": dlio.__version__,
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "clock": _core.timer_source(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
