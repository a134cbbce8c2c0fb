"""Operations as the reference's --io-trace-log CSV has them (Timestamp, Operation, Object_Size_Bytes,
Tier, Key, Phase), read from such a file or from the C engine's log, and their op mix: object sizes,
reads per write, read:write bytes, key reuse. Tier-0 is the GPU, Tier-1 the CPU, Tier-2 storage."""

from __future__ import annotations

import csv
import gzip
import io
import os
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from dlio.base import inputs
from dlio.base.errors import ConfigError, DlioError, os_error_message
from dlio.system.output import atomic_write_text

OPS_DTYPE = np.dtype([("t", "<f8"), ("op", "u1"), ("size", "<u8"), ("tier", "u1"), ("key", "<u8"), ("phase", "u1")])
HEADER = ["Timestamp", "Operation", "Object_Size_Bytes", "Tier", "Key", "Phase"]
OPS = {"Read": 0, "Write": 1}
PHASES = {"Prefill": 0, "Decode": 1, "Evict": 2}
MAX_ROWS = 50_000_000
MAX_OBJECT = 64 << 30  # an object of a trace larger than this is a broken trace
T_MAX = inputs.LIMIT / 1e9  # a time (s) whose ns do not fit in 62 bits is not one


def trace_lines(path: str, key: Optional[str] = None) -> Iterator[str]:
    """A trace file's lines (plain, gzip or zstd, told by its first bytes) within dlio.base.inputs' bounds:
    a regular file, KV_TRACE_CAP bytes decompressed, MAX_LINE bytes a line."""
    return inputs.lines(path, inputs.KV_TRACE_CAP, "KV-cache trace", key)


def read_csv(path: str, key: Optional[str] = None) -> Tuple[np.ndarray, np.ndarray]:
    """(ops array, key names: an array of str) of a reference --io-trace-log CSV; keys index the names.
    Every number is checked: a time finite and >= 0, a size a whole number of at most MAX_OBJECT bytes."""
    where = f"{key} = {path}" if key else path
    cols: List[List[str]] = [[] for _ in HEADER]
    r = csv.reader(trace_lines(path, key))
    try:
        head = next(r, None)
        if head is None or [h.strip() for h in head[: len(HEADER)]] != HEADER:
            raise DlioError(f"{where}: not a KV-cache --io-trace-log CSV (expected the header {','.join(HEADER)})")
        for n, row in enumerate(r, 2):
            if len(row) < len(HEADER):
                raise DlioError(f"{where}: line {n}: {len(row)} columns, expected {len(HEADER)}")
            for c, v in zip(cols, row):
                c.append(v)
            if n > MAX_ROWS:
                raise DlioError(f"{where}: more than {MAX_ROWS:,} operations; cut the trace")
    except csv.Error as e:
        raise DlioError(f"{where}: line {r.line_num}: not a CSV row ({e}); give a --io-trace-log CSV") from None
    names, keys = np.unique(np.array(cols[4], dtype=object).astype(str), return_inverse=True)
    ops = np.zeros(len(keys), OPS_DTYPE)
    ops["t"] = _column(cols[0], where, "Timestamp", T_MAX, whole=False)
    ops["size"] = _column(cols[2], where, "Object_Size_Bytes", MAX_OBJECT, whole=True)
    for col, table, what in ((1, OPS, "Operation"), (5, PHASES, "Phase")):
        vals = np.array(cols[col], dtype=object)
        bad = ~np.isin(vals, list(table))
        if bad.any():
            raise DlioError(f"{where}: {what} {vals[bad][0]!r} unknown (expected {', '.join(table)})")
        ops["op" if col == 1 else "phase"] = np.vectorize(table.get, otypes=[np.uint8])(vals) if len(vals) else 0
    tiers = np.array(cols[3], dtype=object)
    good = np.isin(tiers, ["Tier-0", "Tier-1", "Tier-2"])
    if len(tiers) and not good.all():
        raise DlioError(f"{where}: Tier {tiers[~good][0]!r} unknown (expected Tier-0, Tier-1, Tier-2)")
    ops["tier"] = np.array([int(x[-1]) for x in tiers], dtype=np.uint8) if len(tiers) else 0
    ops["key"] = keys
    return ops, names


def _column(text: List[str], where: str, field: str, hi: float, whole: bool) -> np.ndarray:
    """A CSV column of numbers, each finite, in [0, hi] and (whole) an integer; else one line naming the
    first bad row (line numbers count the header)."""
    try:
        v = np.array(text, dtype=np.float64)
    except ValueError as e:
        raise DlioError(f"{where}: a {field} is not a number ({e}); fix the trace") from None
    bad = ~np.isfinite(v) | (v < 0) | (v > hi)
    if whole:
        bad |= v != np.floor(v)
    if bad.any():
        i = int(np.argmax(bad))
        kind = "a whole number " if whole else "a finite number "
        raise DlioError(
            f"{where}: line {i + 2}: {field} = {text[i].strip()[:40]} is not {kind}in [0, {hi:.0f}]; fix the trace"
        )
    return v


def from_log(oplog: np.ndarray, n: int, t0_epoch: float = 0.0) -> np.ndarray:
    """The C engine's operation log (KV_LOG_DTYPE, first n records) as ops, in time order."""
    rec = np.sort(oplog[:n], order="t_ns", kind="stable")
    ops = np.zeros(len(rec), OPS_DTYPE)
    ops["t"] = t0_epoch + rec["t_ns"] / 1e9
    ops["op"] = rec["op"]
    ops["size"] = rec["bytes"]
    ops["tier"] = rec["tier"]
    ops["key"] = rec["entry"]
    ops["phase"] = rec["phase"]
    return ops


def write_csv(path: str, ops: np.ndarray, key_of: Optional[Callable[[np.ndarray], Sequence[str]]]) -> None:
    """ops as the reference's CSV (key_of: key ids -> names)."""
    names = key_of(ops["key"]) if key_of else [str(k) for k in ops["key"]]
    op_w = {v: k for k, v in OPS.items()}
    ph_w = {v: k for k, v in PHASES.items()}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(HEADER)
    for o, name in zip(ops.tolist(), names):
        w.writerow([f"{o[0]:.6f}", op_w[o[1]], o[2], f"Tier-{o[3]}", name, ph_w[o[5]]])
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write_text(path, buf.getvalue())


def write_trace(path: str, ops: np.ndarray, key_of: Optional[Callable[[np.ndarray], Sequence[str]]]) -> Optional[str]:
    """write_csv, or the one-line problem when the file cannot be written (a full disk, a folder at its
    name): the trial's results are written all the same."""
    try:
        write_csv(path, ops, key_of)
    except OSError as e:
        return f"kvcache.io_trace_log: {os_error_message(e, e.filename or path)}; the operation log was not written"
    return None


def check_trace_path(path: Optional[str]) -> None:
    """Before the run: the operation log's name is no folder (its trials' logs would be lost at the end)."""
    if path and os.path.isdir(path):
        raise ConfigError(
            f"kvcache.io_trace_log = {path}: a folder; give a file name for the operation log (CSV)",
            "kvcache.io_trace_log",
            path,
        )


def ks_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov distance: the largest gap between the empirical CDFs."""
    if not len(a) or not len(b):
        return 1.0 if len(a) != len(b) else 0.0
    a, b = np.sort(a), np.sort(b)
    v = np.concatenate([a, b])
    return float(np.max(np.abs(np.searchsorted(a, v, "right") / len(a) - np.searchsorted(b, v, "right") / len(b))))


KEYS_DTYPE = np.dtype(
    [("key", "<u8"), ("tier", "u1"), ("size", "<u8"), ("writes", "<u4"), ("evict_writes", "<u4"), ("reads", "<u4")]
)
KEYS_HEADER = ["Key", "Tier", "Object_Size_Bytes", "Writes", "Evict_Writes", "Reads"]


def per_key(ops: np.ndarray) -> np.ndarray:
    """ops summed per (key, tier): the object's size, its writes (of which demotions) and reads. All
    an op mix needs, a fraction of the trace's size (the fidelity test's reference data)."""
    if not len(ops):
        return np.zeros(0, KEYS_DTYPE)
    kt = ops["key"].astype(np.uint64) * np.uint64(4) + ops["tier"]
    uniq, inv = np.unique(kt, return_inverse=True)
    out = np.zeros(len(uniq), KEYS_DTYPE)
    out["key"], out["tier"] = uniq // 4, uniq % 4
    np.maximum.at(out["size"], inv, ops["size"])
    w = ops["op"] == 1
    out["writes"] = np.bincount(inv, weights=w, minlength=len(uniq))
    out["evict_writes"] = np.bincount(inv, weights=w & (ops["phase"] == PHASES["Evict"]), minlength=len(uniq))
    out["reads"] = np.bincount(inv, weights=~w, minlength=len(uniq))
    return out


def write_keys_csv(path: str, keys: np.ndarray) -> None:
    rows = [KEYS_HEADER] + [[f"k{k[0]}", f"Tier-{k[1]}", *k[2:]] for k in keys.tolist()]
    text = "\n".join(",".join(map(str, r)) for r in rows) + "\n"
    if path.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        atomic_write_text(path, text)


def read_keys_csv(path: str) -> np.ndarray:
    r = csv.reader(trace_lines(path))
    if next(r, None) != KEYS_HEADER:
        raise DlioError(f"{path}: expected the header {','.join(KEYS_HEADER)}")
    try:
        rows = [
            (int(k[1:]), int(t[-1]), inputs.as_int(sz), *(inputs.as_int(x, 0, 2**32 - 1) for x in (w, ew, rd)))
            for k, t, sz, w, ew, rd in r
        ]
    except (ValueError, csv.Error) as e:
        raise DlioError(f"{path}: line {r.line_num}: not a per-key row ({e})") from None
    return np.array(rows, dtype=KEYS_DTYPE)


def mix(data: np.ndarray, tier: Optional[int] = 2) -> Dict[str, Any]:
    """The op mix on one tier (None: all) of ops or of their per_key() sums: counts, reads per write,
    read:write bytes, the write sizes (for a KS distance), and key reuse (reads per key read)."""
    k = data if data.dtype == KEYS_DTYPE else per_key(data)
    if tier is not None:
        k = k[k["tier"] == tier]
    w, r = k["writes"].astype(np.int64), k["reads"].astype(np.int64)
    size = k["size"].astype(np.float64)
    return {
        "reads": int(r.sum()),
        "writes": int(w.sum()),
        "evict_writes": int(k["evict_writes"].sum()),
        "reads_per_write": float(r.sum() / max(1, w.sum())),
        "read_write_bytes": float((r * size).sum() / max(1.0, (w * size).sum())),
        "reads_per_key": float(r.sum() / max(1, (r > 0).sum())),
        "write_sizes": np.repeat(k["size"], w),
    }


def compare(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, float]:
    """Relative differences of two mixes (b against a) and the KS distance of their write sizes."""

    def rel(k: str) -> float:
        return abs(b[k] - a[k]) / a[k] if a[k] else float(b[k] != a[k])

    return {
        "reads_per_write": rel("reads_per_write"),
        "read_write_bytes": rel("read_write_bytes"),
        "reads_per_key": rel("reads_per_key"),
        "size_ks": ks_distance(a["write_sizes"], b["write_sizes"]),
    }
