"""Sizes and durations as people type them (4k, 1MiB, 1.5GiB, 64m; 10s, 500ms, 2m), and as dlio-fast prints
them: the one place a figure gets its unit.

Printed sizes are binary (KiB, MiB, GiB: the unit DLIO's own "GB" fields hold too) with a precision that
fits the number (fmt_bytes: never "0.00 GiB", never 1.46601e+08); latencies take the unit that keeps
them short (fmt_ns: 850ns, 73.2us, 1.25ms, never 55836.7 us). DLIO's lines keep DLIO's word "GB"
for its GiB figures, labelled with DLIO_GB where dlio-fast prints them.
"""

import math
import re
from typing import Any

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


def parse_size(text: str | int) -> int:
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


def parse_duration_ns(text: str | float) -> int:
    """Nanoseconds in text ('10' and '10s' are seconds; ns, us, ms, s, m, h)."""
    m = _DUR.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a duration (examples: 10s, 500ms, 2m)")
    return int(float(m.group(1)) * _DUR_NS[m.group(2).lower()])


GiB = 1 << 30


def fmt_bytes(n: Any, sep: str = " ") -> str:
    """An amount of bytes, rounded to one decimal in binary units: '812 B', '1.5 GiB'. (n: a number; Any
    while report/verdict.py passes a counter it has not narrowed from Optional.)"""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024:
            return f"{n:.0f}{sep}{unit}" if unit == "B" else f"{n:.1f}{sep}{unit}"
        n /= 1024
    return f"{n:.1f}{sep}PiB"


# Said next to a figure of DLIO's own lines: DLIO's "GB" and "MB" are 2**30 and 2**20 bytes (it divides by
# 1024**3 and 1024**2), and its AU and samples/s are DLIO's formulas, not dlio-fast's exact figures.
DLIO_GB = "[DLIO's GB = GiB]"
DLIO_MB = "[DLIO's MB = MiB]"
DLIO_FORMULA = "[DLIO formula]"


def fmt_rate(bytes_per_s: float) -> str:
    """A rate in binary units scaled to it: '812 B/s', '71.7 MiB/s', '1.5 GiB/s' (fmt_bytes per second)."""
    return f"{fmt_bytes(bytes_per_s)}/s"


def dlio_line(line: str) -> str:
    """One of DLIO's console lines (its words and numbers kept), with what its figure is said after it:
    the formula of an AU or samples/s, the unit DLIO calls GB or MB. dlio.log keeps DLIO's lines bare."""
    labels = []
    if "[AU]" in line or "(samples/second)" in line:
        labels.append(DLIO_FORMULA)
    if re.search(r"\bGB\b", line):
        labels.append(DLIO_GB)
    if re.search(r"\bMB\b", line):
        labels.append(DLIO_MB)
    return " ".join([line.rstrip(), *labels]) if labels else line


def fmt_size(n: int) -> str:
    """1048576 -> '1MiB', 4096 -> '4KiB', 1000 -> '1000B'."""
    for unit, p in (("PiB", 5), ("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        if n >= 1024**p and n % 1024**p == 0:
            return f"{n // 1024**p}{unit}"
    return f"{n}B"


def fmt_ns(ns: float) -> str:
    """A latency for tables: '850ns', '73.2us', '1.25ms', '2.50s' (ms from 1,000 us on)."""
    ns = float(ns)
    if ns < 1e3:
        return f"{ns:.0f}ns"
    if ns < 1e6:
        return f"{ns / 1e3:.1f}us"
    if ns < 1e9:
        return f"{ns / 1e6:.2f}ms"
    return f"{ns / 1e9:.2f}s"


def fmt_num(x: float, digits: int = 6) -> str:
    """A number as people write it: 1,234, 0.162, 0.00002 (never 1e-05 or 1.46601e+08), to `digits`
    significant digits."""
    x = float(x)
    if x.is_integer() and abs(x) < 2**53:
        return f"{int(x):,}"
    lead = int(math.floor(math.log10(abs(x)))) if x else 0
    text = f"{x:,.{min(15, max(0, digits - 1 - lead))}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_figure(x: float, decimals: int = 1) -> str:
    """A figure in a fixed unit (a MiB/s column): `decimals` from 1 up, three significant digits below
    (0.432, not 0.0), 0 as 0."""
    return f"{x:,.{decimals}f}" if abs(x) >= 1 else fmt_num(x, 3)


def fmt_us(us: float) -> str:
    """A latency given in microseconds, as fmt_ns prints it."""
    return fmt_ns(float(us) * 1e3)
