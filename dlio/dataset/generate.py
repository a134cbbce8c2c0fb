"""Dataset generation: resumable (complete files are kept), each file written atomically (temp +
rename), the manifest saved once at the end.

Three steps: gen_plan.plan() finds what is left to write; gen_write.write_all() writes it from the C
core on `threads` threads (each takes the next batch of files, describes them as segment programs in
Python, then writes them with the GIL released: dlio.dataset.formats.program); gen_manifest records
sample ranges, checksums and the manifest. A format without programs for some layout (hdf5 with
chunks or compression, synthetic) is written file by file by its own write(). A generation that
wrote files records its rate (gen_rate, for --dry-run's estimate)."""

import time
from dataclasses import dataclass
from typing import Callable, Optional

from dlio.base.errors import DatasetError, InsufficientSpace
from dlio.base.limits import usable_cpus
from dlio.dataset.gen_manifest import ranges_and_crcs, save_manifests
from dlio.dataset.gen_plan import plan
from dlio.dataset.gen_rate import estimate_seconds, measured_rate, record_rate
from dlio.dataset.gen_write import write_all
from dlio.dataset.manifest import Manifest, load_manifest, manifest_path, resolve_paths, scan_manifest
from dlio.dataset.spec import DatasetSpec, all_dims, dataset_bytes, file_dims, file_paths, split_folder


@dataclass
class GenerateResult:
    files_total: int = 0  # files of this rank
    files_written: int = 0
    files_skipped: int = 0
    bytes_written: int = 0
    seconds: float = 0.0


def generate(
    spec: DatasetSpec,
    threads: Optional[int] = None,
    rank: int = 0,
    size: int = 1,
    progress: Optional[Callable[[int, int], None]] = None,
    checksum: bool = False,
    fsync: bool = False,
    barrier: Optional[Callable[[], object]] = None,
    direct: bool = False,
) -> GenerateResult:
    """Generate this rank's files (rank_files: byte-balanced runs of train-then-eval) on `threads`
    threads (default: the CPUs); direct: write with O_DIRECT (the files of formats the C core writes).

    Complete files (size recorded in a matching manifest, or valid for the format) are skipped;
    others are written under a temporary name and renamed. progress(bytes, files) is called with
    this rank's running totals (skipped files included). With size > 1, each rank saves its part of
    the manifest; when `barrier` (a callable) is given, rank 0 merges the parts after it, else
    load_manifest() merges them later. A generation that wrote files records its rate in the data
    folder (measured_rate()).
    """
    t0 = time.perf_counter()
    pl = plan(spec, rank, size)
    if progress is not None and pl.skipped:
        progress(pl.present_bytes, len(pl.skipped))
    nthreads = int(threads) if threads else max(1, round(usable_cpus()))
    wbytes = write_all(pl, nthreads, progress, fsync, direct)
    ranges_and_crcs(pl, pl.todo, checksum)
    save_manifests(pl, checksum, rank, size, barrier)
    dt = time.perf_counter() - t0
    if rank == 0 and pl.todo:
        record_rate(spec, wbytes * size, len(pl.todo) * size, dt, nthreads, size, fsync, direct)
    return GenerateResult(
        files_total=int(pl.mine.size),
        files_written=len(pl.todo),
        files_skipped=len(pl.skipped),
        bytes_written=wbytes,
        seconds=dt,
    )


__all__ = [
    "DatasetSpec",
    "DatasetError",
    "InsufficientSpace",
    "Manifest",
    "GenerateResult",
    "file_paths",
    "file_dims",
    "all_dims",
    "dataset_bytes",
    "generate",
    "load_manifest",
    "scan_manifest",
    "resolve_paths",
    "manifest_path",
    "split_folder",
    "measured_rate",
    "estimate_seconds",
]
