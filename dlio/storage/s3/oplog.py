"""s3dlio's op-log (one zstd-compressed TSV row per request, timed in Rust) as numpy arrays.

The client library records each request's start, first byte and end itself, so no Python runs per
request while measuring; this module reads the rows afterwards, column-wise with numpy.
"""

from __future__ import annotations

import io

import numpy as np

COLUMNS = (
    "idx",
    "thread",
    "op",
    "client_id",
    "n_objects",
    "bytes",
    "endpoint",
    "file",
    "error",
    "start",
    "first_byte",
    "end",
    "duration_ns",
)


def _times(col: np.ndarray) -> np.ndarray:
    """RFC 3339 UTC strings ('...Z') -> ns since the epoch (int64), vectorised."""
    if not len(col):
        return np.zeros(0, dtype=np.int64)
    return np.char.rstrip(col, "Z").astype("datetime64[ns]").astype(np.int64)


def parse(raw: bytes) -> dict:
    """Decompressed op-log text -> {'op', 'bytes', 'error', 'start', 'first_byte', 'end', 'duration'}
    (numpy arrays, one entry per request; times in ns, wall clock)."""
    lines = raw.split(b"\n", 1)
    header = lines[0].decode().split("\t") if lines and lines[0] else []
    if tuple(header) != COLUMNS:
        raise ValueError(f"unexpected s3dlio op-log header {header!r}")
    body = lines[1] if len(lines) > 1 else b""
    if not body.strip():
        rows = np.zeros((0, len(COLUMNS)), dtype=str)
    else:
        rows = np.loadtxt(
            io.BytesIO(body), delimiter="\t", dtype=str, comments=None, ndmin=2, quotechar=None, encoding="utf-8"
        )
    col = {name: rows[:, i] for i, name in enumerate(COLUMNS)}
    return {
        "op": col["op"],
        "bytes": col["bytes"].astype(np.int64),
        "error": col["error"],
        "start": _times(col["start"]),
        "first_byte": _times(col["first_byte"]),
        "end": _times(col["end"]),
        "duration": col["duration_ns"].astype(np.int64),
    }


def read(path: str) -> dict:
    """The op-log file's rows. A log cut short (its worker killed at a deadline) gives the rows that
    were written whole: a truncated zstd frame decodes as far as it goes, the partial last row is dropped."""
    import zstandard

    with open(path, "rb") as f:
        data = f.read()
    raw = b""
    while data:  # frame after frame
        d = zstandard.ZstdDecompressor().decompressobj()
        try:
            raw += d.decompress(data)
        except zstandard.ZstdError:
            break
        data = d.unused_data
    if not raw:
        return parse("\t".join(COLUMNS).encode())
    if not raw.endswith(b"\n") and b"\n" in raw:
        raw = raw[: raw.rindex(b"\n") + 1]
    return parse(raw)
