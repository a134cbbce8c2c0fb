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
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence, Set

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


_swept: Set[str] = set()  # folders this process swept for leftovers (result_path)


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
    if folder not in _swept:  # leftovers of a run that died while writing here, proven ours by its claim
        tmpclaim.sweep(folder)  # once per folder: a sweep lists it, and rank 0 writes a file per rank there
        _swept.add(folder)
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
    atomic_write_text(path, json_text(doc))


_ONE_LINE = json.JSONEncoder(default=_default, allow_nan=False)  # no indent: json's C encoder


def json_text(doc: Any) -> str:
    """doc as JSON text, indented by two spaces as json.dumps(indent=2) does, except that a list whose
    first item is a plain value (a per-step array: thousands of numbers) stays on one line. json's
    indenting encoder is pure Python (its C encoder takes no indent): rank 0 writing every rank's
    per-step arrays spent 6.4 of 7.2 s in it at 512 ranks, and it grows with the ranks."""
    return _json_text(doc, "\n") + "\n"


def _json_text(v: Any, pad: str) -> str:
    t = type(v)
    if t is str:  # the common leaves first, without the encoder's per-call set-up
        return _json_str(v)
    if t is bool or v is None:
        return _JSON_WORDS[v]
    if t is int:
        return int.__repr__(v)
    if t is float and v - v == 0:  # finite (nan and inf go to the encoder, which refuses them)
        return float.__repr__(v)
    inner = pad + "  "
    if isinstance(v, dict) and v:
        return "{" + ",".join(f"{inner}{_json_key(k)}: {_json_text(x, inner)}" for k, x in v.items()) + pad + "}"
    if isinstance(v, (list, tuple)) and v and isinstance(v[0], (dict, list, tuple)):
        return "[" + ",".join(inner + _json_text(x, inner) for x in v) + pad + "]"
    return _ONE_LINE.encode(v)


_JSON_WORDS = {True: "true", False: "false", None: "null"}
_json_str = json.encoder.encode_basestring_ascii  # json.dumps's own (C) string escaping


def _json_key(k: Any) -> str:
    """A key as json writes it: text as is, a number, true/false or null as its text."""
    return _json_str(k if isinstance(k, str) else _ONE_LINE.encode(k))


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
