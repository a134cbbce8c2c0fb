"""Every file a user hands dlio-fast is read here, within bounds: workload YAML, result documents read
back (`report`, `check`, `dlio_postprocessor`), the families' traces, manifests and model index.

A file is opened only if it is (after links) a regular file: a FIFO, a device or a folder is refused
before it is read, and a FIFO swapped in between the stat and the open is never waited on (O_NONBLOCK).
Its bytes (decompressed, for a gzip or zstd trace) are capped by a limit named for its kind, a line by
MAX_LINE, a JSON or YAML document's nesting by MAX_DEPTH (and a YAML's values by MAX_NODES: aliases
repeat a subtree without its bytes), and every number handed on is checked (finite, an integer where
one is meant, within its range). What fails is one line naming the file, the field and what to do.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import stat
import zlib
from typing import Any, BinaryIO, Callable, Iterator, Optional, TypeVar, Union

from dlio.base.errors import DlioError, os_error_message

# The caps, per kind of input (bytes; a compressed trace's are its decompressed bytes)
YAML_CAP = 16 << 20  # a workload or config file is a few KiB; 16 MiB is far past any real one
JSON_CAP = 256 << 20  # result documents with per-step records of long runs stay well below this
KV_TRACE_CAP = 512 << 20  # a KV-cache trace (CSV, Mooncake JSONL, ShareGPT JSON): millions of requests
VDB_TRACE_CAP = 256 << 20  # a vector-search capture: tens of thousands of searches
MANIFEST_CAP = 16 << 20  # a manifest or model index dlio-fast wrote (a 405B model's index is ~100 KiB)
MAX_LINE = 1 << 20  # bytes of one line of a line-based trace
MAX_DEPTH = 64  # our documents nest about 8 deep; a deeper one is not ours
MAX_NODES = 1 << 24  # values in one YAML document, aliases expanded
LIMIT = 1 << 62  # a count, size, id or time (ns) beyond this is not a real value

BLOCK = 1 << 20  # bytes read at a time
N = TypeVar("N", int, float)  # a checked number
GZIP_MAGIC, ZSTD_MAGIC = b"\x1f\x8b", b"\x28\xb5\x2f\xfd"

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
    stat.S_IFSOCK: "a socket",
}


class Bad(ValueError):
    """A value that is not a valid number / field (the caller says where)."""


def _where(path: str, key: Optional[str]) -> str:
    return f"{key} = {path}" if key else path


REGULAR = "give a regular file (links are followed)"


def _not_regular(path: str, mode: int, what: str, key: Optional[str], hint: str) -> DlioError:
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    return DlioError(f"{_where(path, key)}: is {kind}, not a {what}: {hint}")


def open_regular(path: str, what: str = "file", key: Optional[str] = None, hint: Optional[str] = None) -> BinaryIO:
    """path opened for reading if (after links) it is a regular file; else a one-line DlioError naming
    `key` (the config key that named the file) when given, and `hint` (what to do). O_NONBLOCK: opening a
    FIFO returns at once (no writer is waited for), and the fstat refuses it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise DlioError(os_error_message(e, _where(path, key), f"give a readable {what}")) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, st.st_mode, what, key, hint or REGULAR)
        os.set_blocking(fd, True)  # a regular file: reads block as they should (NFS, FUSE)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb", buffering=BLOCK)


def _too_big(
    path: str, cap: int, what: str, key: Optional[str], size: Optional[int] = None, hint: Optional[str] = None
) -> DlioError:
    have = f"{size:,} bytes is" if size is not None else "it holds"
    return DlioError(
        f"{_where(path, key)}: {have} more than the {_size(cap)} a {what} may have (dlio.base.inputs); "
        + (hint or "check the path, or cut the file")
    )


def _size(n: int) -> str:
    return f"{n >> 30} GiB" if n >= 1 << 30 and not n % (1 << 30) else f"{n >> 20} MiB"


def read_regular(path: str, cap: int, what: str, key: Optional[str] = None, hint: Optional[str] = None) -> bytes:
    """The bytes of `path` if it is a regular file of at most `cap` bytes, else DlioError."""
    with open_regular(path, what, key, hint) as f:
        size = os.fstat(f.fileno()).st_size
        if size > cap:
            raise _too_big(path, cap, what, key, size, hint)
        try:
            b = f.read(cap + 1)  # to the end, not st_size: a file still being written may have grown
        except OSError as e:
            raise DlioError(os_error_message(e, _where(path, key))) from None
    if len(b) > cap:
        raise _too_big(path, cap, what, key, None, hint)
    return b


def read_if_there(path: str, cap: int, what: str, hint: Optional[str] = None) -> Optional[bytes]:
    """read_regular, or None when nothing is at path (a manifest not written yet)."""
    if not os.path.lexists(path):
        return None
    return read_regular(path, cap, what, None, hint)


class _Capped(io.RawIOBase):
    """A (decompressed) byte stream that refuses to give more than `cap` bytes in all."""

    def __init__(self, inner: BinaryIO, raw: BinaryIO, path: str, cap: int, what: str, key: Optional[str]):
        self.inner, self.raw, self.path, self.cap, self.what, self.key = inner, raw, path, cap, what, key
        self.n = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        try:
            data = self.inner.read1(min(len(b), BLOCK))  # type: ignore[attr-defined]
        except (OSError, EOFError, zlib.error) as e:
            raise DlioError(f"{_where(self.path, self.key)}: a damaged or cut compressed stream ({e})") from None
        except Exception as e:  # zstandard's ZstdError
            raise DlioError(f"{_where(self.path, self.key)}: a damaged compressed stream ({e})") from None
        self.n += len(data)
        if self.n > self.cap:
            raise _too_big(self.path, self.cap, self.what, self.key)
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()
        self.raw.close()  # a GzipFile leaves its file object open
        super().close()


def open_stream(path: str, cap: int, what: str, key: Optional[str] = None) -> BinaryIO:
    """A regular file's bytes, decompressed when they are gzip or zstd (told by the first bytes, not the
    name), refused past `cap` bytes."""
    raw = open_regular(path, what, key)
    try:
        magic = raw.peek(4)[:4]  # type: ignore[attr-defined]
        inner: Any = raw
        if magic[:2] == GZIP_MAGIC:
            inner = gzip.GzipFile(fileobj=raw, mode="rb")
        elif magic == ZSTD_MAGIC:
            try:
                import zstandard
            except ImportError:
                raise DlioError(f"{_where(path, key)}: a .zst file needs the zstandard package (pip install zstandard)")
            inner = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
    except BaseException:
        raw.close()
        raise
    return io.BufferedReader(_Capped(inner, raw, path, cap, what, key), BLOCK)


def read_text(path: str, cap: int, what: str, key: Optional[str] = None) -> str:
    """The whole (decompressed) text of a file, within `cap` bytes."""
    with open_stream(path, cap, what, key) as f:
        b = f.read()
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DlioError(f"{_where(path, key)}: not UTF-8 text ({e.reason} at byte {e.start}); give a {what}") from None


def lines(path: str, cap: int, what: str, key: Optional[str] = None) -> Iterator[str]:
    """The lines of a (decompressed) text file, each with its newline, at most MAX_LINE bytes each and
    `cap` in all. The file is closed when the iteration ends or the generator is dropped."""
    with open_stream(path, cap, what, key) as f:
        n = 0
        while True:
            b = f.readline(MAX_LINE + 1)
            if not b:
                return
            n += 1
            if len(b) > MAX_LINE:
                raise DlioError(
                    f"{_where(path, key)}: line {n} is longer than {MAX_LINE >> 20} MiB: not a {what} "
                    "(or a damaged one)"
                )
            try:
                yield b.decode("utf-8")
            except UnicodeDecodeError:
                raise DlioError(f"{_where(path, key)}: line {n} is not UTF-8 text; give a {what}") from None


# ------------------------------------------------------------------------------------ documents


def loads_json(text: Union[str, bytes], where: str, what: str) -> Any:
    """JSON with no NaN or Infinity (not JSON; a figure computed from one is NaN too) and bounded nesting."""

    def refuse(word: str) -> Any:
        raise ValueError(f"{word} is not a number JSON allows")

    try:
        doc = json.loads(text, parse_constant=refuse)
    except RecursionError:
        raise DlioError(
            f"{where}: not a valid {what} JSON document (nested too deeply: more than {MAX_DEPTH} levels)"
        ) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise DlioError(f"{where}: not a valid {what} JSON document ({str(e).splitlines()[0]})") from None
    _bounded(doc, where, what, "JSON")
    return doc


def loads_yaml(text: Union[str, bytes], where: str, what: str) -> Any:
    """YAML (safe_load) with bounded nesting and values; None for an empty document."""
    import yaml

    try:
        doc = yaml.safe_load(text)
    except RecursionError:
        raise DlioError(
            f"{where}: not a valid {what} YAML document (nested too deeply: more than {MAX_DEPTH} levels)"
        ) from None
    except yaml.YAMLError as e:
        raise DlioError(f"{where}: not a valid {what} ({' '.join(str(e).split())})") from None
    except UnicodeDecodeError as e:
        raise DlioError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start}); give a {what}") from None
    _bounded(doc, where, what, "YAML")
    return doc


def _bounded(doc: Any, where: str, what: str, kind: str) -> None:
    """Nesting and value count, walked iteratively (a recursive walk is what a hostile file would
    overflow; YAML's aliases make a small file a huge tree, so values are counted too)."""
    stack, seen = [(doc, 1)], 0
    while stack:
        node, d = stack.pop()
        seen += 1
        if d > MAX_DEPTH:
            raise DlioError(
                f"{where}: not a valid {what} {kind} document (nested too deeply: more than {MAX_DEPTH} levels)"
            )
        if seen > MAX_NODES:
            raise DlioError(f"{where}: not a valid {what} (more than {MAX_NODES:,} values, aliases expanded)")
        if isinstance(node, dict):
            stack.extend((v, d + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, d + 1) for v in node)
        elif isinstance(node, float) and not math.isfinite(node):
            raise DlioError(f"{where}: not a valid {what} ({node} is not a number dlio-fast takes)")


# ------------------------------------------------------------------------------------ numbers


def as_int(v: Any, lo: int = 0, hi: int = LIMIT) -> int:
    """v as an int in [lo, hi]: an int, an integral finite float, or a string of at most 20 digits."""
    if type(v) is int and lo <= v <= hi:  # the common case first: this runs per field per event
        return v
    if isinstance(v, bool):
        raise Bad(f"{v!r} is not a number")
    if isinstance(v, str):
        s = v.strip()
        if not (0 < len(s.lstrip("-")) <= 20) or not s.lstrip("-").isdigit():
            raise Bad(f"{v[:40]!r} is not an integer")
        v = int(s)
    elif isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            raise Bad(f"{v!r} is not an integer")
        v = int(v)
    elif not isinstance(v, int):
        raise Bad(f"{v!r} is not a number")
    if not lo <= v <= hi:
        raise Bad(f"{v if len(str(v)) < 30 else str(v)[:24] + '...'} is out of range [{lo}, {hi}]")
    return v


def as_real(v: Any, lo: float = 0.0, hi: float = float(LIMIT)) -> float:
    """v as a finite float in [lo, hi] (an int, a float, or a short decimal string)."""
    if isinstance(v, bool):
        raise Bad(f"{v!r} is not a number")
    if isinstance(v, str):
        if len(v) > 40:
            raise Bad(f"{v[:40]!r}... is not a number")
        try:
            v = float(v)
        except ValueError:
            raise Bad(f"{v!r} is not a number") from None
    elif isinstance(v, int):
        if abs(v) > LIMIT:
            raise Bad(f"{str(v)[:24]}... is out of range")
        v = float(v)
    elif not isinstance(v, float):
        raise Bad(f"{v!r} is not a number")
    if not math.isfinite(v) or not lo <= v <= hi:
        raise Bad(f"{v!r} is not finite or out of range [{lo:g}, {hi:g}]")
    return v


def _field(v: Any, where: str, field: str, what: str, check: Callable[[Any], N]) -> N:
    """check(v) of a document's value that is not text (a document that has "7" where 7 goes is not ours),
    or a one-line DlioError naming the file (or line) and the field."""
    try:
        if isinstance(v, str):
            raise Bad(f"{v[:40]!r} is not {what}")
        return check(v)
    except Bad as e:
        raise DlioError(f"{where}: {field}: {e}; fix the file") from None


def field_int(v: Any, where: str, field: str, lo: int = 0, hi: int = LIMIT) -> int:
    """A document's whole number (not text) in [lo, hi], or a one-line DlioError naming the field."""
    return _field(v, where, field, "an integer", lambda x: as_int(x, lo, hi))


def field_real(v: Any, where: str, field: str, lo: float = 0.0, hi: float = float(LIMIT)) -> float:
    """A document's finite number (not text) in [lo, hi], or a one-line DlioError naming the field."""
    return _field(v, where, field, "a number", lambda x: as_real(x, lo, hi))
