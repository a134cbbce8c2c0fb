"""The measured generation rate of a data folder, and --dry-run's estimate from it: a real generation
records how fast it wrote (bytes and files per second), `generate --dry-run` scales it to the full
size and says what it would write."""

import json
import os
import time
from typing import List, Optional, TypedDict

from dlio.base.units import fmt_bytes
from dlio.dataset.spec import MANIFEST_DIR, DatasetSpec, dataset_bytes, file_paths
from dlio.system.output import atomic_path

RATE_FILE = "generation-rate.json"


class _Measured(TypedDict):
    bytes: int
    files: int
    seconds: float
    bytes_per_s: float
    files_per_s: float


class Rate(_Measured, total=False):
    """A measured generation, as RATE_FILE holds it: the figures, and how it ran (which a file an older
    version wrote may lack: read with .get)."""

    format: str
    threads: int
    ranks: int
    fsync: bool
    direct: bool
    when: str  # local time, %Y-%m-%dT%H:%M:%S


def record_rate(
    spec: DatasetSpec,
    nbytes: int,
    nfiles: int,
    seconds: float,
    threads: int,
    ranks: int,
    fsync: bool = False,
    direct: bool = False,
) -> None:
    """Remember how fast this data folder's filesystem took a real generation (bytes and files per
    second of the whole command), so --dry-run can estimate a full-size generation."""
    if nfiles <= 0 or seconds <= 0:
        return
    rec: Rate = {
        "format": spec.format,
        "bytes": int(nbytes),
        "files": int(nfiles),
        "seconds": seconds,
        "bytes_per_s": nbytes / seconds,
        "files_per_s": nfiles / seconds,
        "threads": int(threads),
        "ranks": int(ranks),
        "fsync": bool(fsync),
        "direct": bool(direct),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    path = os.path.join(spec.data_folder, MANIFEST_DIR, RATE_FILE)
    try:
        with atomic_path(path) as tmp, open(tmp, "w") as f:
            json.dump(rec, f)
    except OSError:
        pass  # an estimate for later, never worth failing a generation


def measured_rate(spec: DatasetSpec) -> Optional[Rate]:
    """The rate record_rate() saved in this data folder, or None."""
    try:
        with open(os.path.join(spec.data_folder, MANIFEST_DIR, RATE_FILE)) as f:
            rec: Rate = json.load(f)
        return rec if rec.get("bytes_per_s", 0) > 0 and rec.get("files_per_s", 0) > 0 else None
    except (OSError, ValueError):
        return None


def estimate_seconds(rec: Rate, nbytes: int, nfiles: int) -> float:
    """Time to write nbytes in nfiles at a measured rate: bound by whichever of bytes/s and files/s
    the measured run was limited by (its time is bytes/bps = files/fps: scale the larger share)."""
    return max(nbytes / rec["bytes_per_s"], nfiles / rec["files_per_s"])


def estimate_text(spec: DatasetSpec, nbytes: int, nfiles: int) -> str:
    """--dry-run's line on how long generating nbytes in nfiles would take here, and from what."""
    rec = measured_rate(spec)
    if rec is None:
        return (
            f"no generation measured in {spec.data_folder} yet (a small one, e.g. dlio-fast generate "
            "--scale 0.01, records its rate for this estimate)"
        )
    secs = estimate_seconds(rec, nbytes, nfiles)
    text = (
        f"~{_duration(secs)} at the rate measured here on {rec.get('when', '?')}: "
        f"{rec['bytes_per_s'] / 2**20:.0f} MiB/s, {rec['files_per_s']:.0f} files/s "
        f"({rec['files']} {rec.get('format', '')} files, {rec.get('threads', '?')} threads x "
        f"{rec.get('ranks', 1)} ranks{', O_DIRECT' if rec.get('direct') else ''}; {MANIFEST_DIR}/{RATE_FILE})"
    )
    ram = _ram_bytes()
    if not rec.get("fsync") and not rec.get("direct") and ram and rec["bytes"] < ram < nbytes:
        text += (
            f"; that run ({fmt_bytes(rec['bytes'])}) fits in this host's {fmt_bytes(ram)} of RAM, "
            "so its rate may be the page cache's: a dataset larger than RAM can take longer"
        )
    return text


def dry_run_lines(spec: DatasetSpec, ranks: int, threads: int, direct: bool = False) -> List[str]:
    """`generate --dry-run`: what would be written, and the time it would take at the rate measured here."""
    nbytes = dataset_bytes(spec)
    nfiles = spec.num_files_train + spec.num_files_eval
    paths = file_paths(spec, "train")[-1:] + file_paths(spec, "valid")[-1:]
    present = bool(paths) and all(os.path.exists(p) for p in paths)
    return [
        f"data folder         {spec.data_folder} ({'present: complete files are kept' if present else 'to write'})",
        f"format              {spec.format}, {spec.num_files_train} train + {spec.num_files_eval} eval files, "
        f"{spec.num_samples_per_file} samples per file",
        f"size on disk        {fmt_bytes(nbytes)}",
        f"writers             {ranks} rank(s) x {threads} threads{', O_DIRECT' if direct else ''}",
        f"generation time     {estimate_text(spec, nbytes, nfiles)}",
    ]


def _ram_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    except (OSError, StopIteration, ValueError):
        return 0


def _duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"
