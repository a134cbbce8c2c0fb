"""Sizes and durations as people type them: 4k, 1MiB, 1.5GiB, 64m; 10s, 500ms, 2m."""

import re

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgtp]?)(i?b?)\s*$", re.I)
_POW = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
_DUR = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ns|us|ms|s|m|h|)\s*$", re.I)
_DUR_NS = {
    "ns": 1,
    "us": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}


def parse_size(text):
    """Bytes in text. Suffixes k/m/g/t/p are powers of 1024 (as fio reads them), with or without
    'iB'/'B'. Raises ValueError with the text when it is not a size."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size (examples: 4k, 128KiB, 1m, 1.5GiB)")
    value = float(m.group(1)) * 1024 ** _POW[m.group(2).lower()]
    if value != int(value):
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(value)


def parse_duration_ns(text):
    """Nanoseconds in text ('10' and '10s' are seconds; ns, us, ms, s, m, h)."""
    m = _DUR.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a duration (examples: 10s, 500ms, 2m)")
    return int(float(m.group(1)) * _DUR_NS[m.group(2).lower()])


GiB = 1 << 30


def fmt_bytes(n, sep=" "):
    """An amount of bytes, rounded to one decimal in binary units: '812 B', '1.5 GiB'."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f}{sep}{unit}" if unit == "B" else f"{n:.1f}{sep}{unit}"
        n /= 1024


def fmt_size(n):
    """1048576 -> '1MiB', 4096 -> '4KiB', 1000 -> '1000B'."""
    for unit, p in (("PiB", 5), ("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        if n >= 1024**p and n % 1024**p == 0:
            return f"{n // 1024**p}{unit}"
    return f"{n}B"


def fmt_ns(ns):
    """A latency for tables: '850ns', '73.2us', '1.25ms', '2.50s'."""
    ns = float(ns)
    if ns < 1e3:
        return f"{ns:.0f}ns"
    if ns < 1e6:
        return f"{ns / 1e3:.1f}us"
    if ns < 1e9:
        return f"{ns / 1e6:.2f}ms"
    return f"{ns / 1e9:.2f}s"
