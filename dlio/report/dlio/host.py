"""This host as DLIO's result files describe it: ``host_cpuinfo`` / ``host_meminfo`` (its
``lines_to_dict`` over /proc/cpuinfo and /proc/meminfo) and ``host_processor_name``
(``platform.processor()``, "" on most Linux builds). Read from /proc directly: no psutil."""

from __future__ import annotations

import os
import platform
from typing import Any, Dict, Optional

CPUINFO = "/proc/cpuinfo"
MEMINFO = "/proc/meminfo"


def lines_to_dict(text: str) -> Dict[str, str]:
    """DLIO's parser (statscounter.lines_to_dict), quirks kept: a line is taken when it splits on ':'
    into exactly two parts; a later CPU's fields overwrite an earlier one's (so /proc/cpuinfo gives
    the last CPU), `processor` is left out, and a line that does not split (a blank line, a value
    holding ':') re-stores the previous key's value."""
    out: Dict[str, str] = {}
    k: Optional[str] = None
    v = ""
    for line in text.split("\n"):
        parts = line.split(":")
        if len(parts) == 2:
            k, v = parts[0].strip(), parts[1].strip()
        if k is not None and k != "processor":
            out[k] = v
    return out


def _read(path: str) -> Optional[Dict[str, str]]:
    try:
        with open(path) as f:
            return lines_to_dict(f.read())
    except OSError:
        return None


def meminfo(path: str = MEMINFO) -> Optional[Dict[str, str]]:
    """DLIO's host_meminfo now (None without /proc/meminfo: DLIO then leaves the field out)."""
    return _read(path)


def proc_info(cpuinfo_path: str = CPUINFO, meminfo_path: str = MEMINFO) -> Dict[str, Any]:
    """The host fields DLIO derives at the start of a run: {"cpuinfo", "meminfo", "platform_processor"};
    cpuinfo/meminfo are absent when /proc does not have them (DLIO leaves them out then)."""
    out: Dict[str, Any] = {"platform_processor": platform.processor()}
    if os.path.exists(cpuinfo_path):
        out["cpuinfo"] = _read(cpuinfo_path) or {}
    if os.path.exists(meminfo_path):
        out["meminfo"] = _read(meminfo_path) or {}
    return out
