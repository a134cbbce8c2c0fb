"""Writing a run's result files when the output folder cannot take them (a full disk, a quota,
out of inodes): what was measured is written elsewhere, and the message says where and which
files the output folder lost. Nothing measured is thrown away for want of a few KiB."""

import os
import tempfile
import time
from typing import Callable, List, Optional, Tuple

from dlio.base.errors import os_error_message
from dlio.system.output import TMP_MARK


def _written_since(folder: str, t0: float) -> List[str]:
    try:
        return sorted(
            e
            for e in os.listdir(folder)
            if TMP_MARK not in e and not e.startswith(".") and os.path.getmtime(os.path.join(folder, e)) >= t0
        )
    except OSError:
        return []


def _fallback_folders() -> List[str]:
    out = [tempfile.gettempdir(), os.path.expanduser("~"), os.getcwd()]
    return [d for i, d in enumerate(out) if d and d not in out[:i]]


def write_with_fallback(write: Callable[[str], None], folder: str) -> Tuple[str, Optional[str]]:
    """write(folder); on OSError write(a fresh folder elsewhere). Returns (where the results are,
    None) or (where, the one-line problem naming what the output folder lost)."""
    t0 = time.time() - 1
    try:
        write(folder)
        return folder, None
    except OSError as e:
        first = os_error_message(e, e.filename or folder)
    kept = _written_since(folder, t0)
    kept_text = f"; kept there: {', '.join(kept)}" if kept else ""
    for base in _fallback_folders():
        try:
            alt = tempfile.mkdtemp(prefix="dlio-fast-results-", dir=base)
            write(alt)
        except OSError:
            continue
        return alt, (
            f"cannot write the results into {folder} ({first}){kept_text}; all result files were "
            f"written to {alt} instead"
        )
    return (
        folder,
        f"cannot write the results into {folder} ({first}){kept_text}; no other folder could take "
        "them: the other result files are lost (the figures are printed above)",
    )
