"""A workload's dataset where its storage backend keeps it: whether it is there, the local view planning
reads its manifests from, the names a run reads, the check that it was made with this config, and its
generation (in place on a filesystem; staged and uploaded batch by batch to an object store).

A run plans from the manifests (dlio.dataset.manifest) exactly as on a filesystem: on a backend whose
names are not local files they are fetched into a local folder that stands for the dataset's root, and
the planned paths under that folder become the backend's names (``names``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

import numpy as np

from dlio.base.errors import DlioError
from dlio.base.limits import usable_cpus
from dlio.base.units import fmt_bytes
from dlio.config import Config
from dlio.dataset import gen_stream
from dlio.dataset.generate import generate as generate_in_place
from dlio.dataset.manifest import recorded
from dlio.dataset.mismatch import check_dataset_matches
from dlio.dataset.spec import MANIFEST_DIR, DatasetSpec, dataset_bytes, file_paths
from dlio.storage import backend_for, staging
from dlio.storage.base import IN_PLACE, SCAN, Backend
from dlio.system.mpi import Comm

if TYPE_CHECKING:
    from dlio.progress import Progress

SPLITS = ("train", "valid")


@dataclasses.dataclass(frozen=True)
class StoredDataset:
    """A dataset spec and where its backend keeps it."""

    backend: Backend
    root: str  # the backend's name of the data folder (a path, or s3://BUCKET/PREFIX/)
    spec: DatasetSpec


def stored(cfg: Config, spec: DatasetSpec, backend: Optional[Backend] = None) -> StoredDataset:
    """The dataset of this spec where the config's backend (or the one given) keeps it."""
    backend = backend if backend is not None else backend_for(cfg)
    return StoredDataset(backend, backend.dataset_root(cfg), spec)


def manifest_names(spec: DatasetSpec) -> List[str]:
    """The manifests of the splits that have files, by name relative to the data folder."""
    return [f"{MANIFEST_DIR}/manifest-{s}.npz" for s in SPLITS if spec.num_files(s)]


def planning_spec(ds: StoredDataset) -> DatasetSpec:
    """The spec whose data folder holds the manifests locally (the data folder itself on files)."""
    folder, _ = staging.local_copy(ds.backend, ds.root, manifest_names(ds.spec))
    return dataclasses.replace(ds.spec, data_folder=folder)


def names(ds: StoredDataset, planning: DatasetSpec, split: str) -> List[str]:
    """The backend's names of a split's files, in the planner's order."""
    return ds.backend.names(ds.root, planning.data_folder, file_paths(planning, split))


def _local_view(ds: StoredDataset) -> Tuple[str, bool]:
    """The local folder of the dataset's manifests, and whether they are all there (none are needed where a
    dataset can be scanned in place)."""
    folder, found = staging.local_copy(ds.backend, ds.root, [] if ds.backend.has(SCAN) else manifest_names(ds.spec))
    return folder, all(found)


def present(ds: StoredDataset) -> bool:
    """Every file of both splits is there (a cheap check: the first and last of each split on files, one
    listing on an object store); where a dataset cannot be scanned in place, its manifests too."""
    folder, found = _local_view(ds)
    if not found:
        return False
    planning = dataclasses.replace(ds.spec, data_folder=folder)
    return all(ds.backend.exist(names(ds, planning, s)) for s in SPLITS if ds.spec.num_files(s))


def check_matches(ds: StoredDataset, split: str, planning: Optional[DatasetSpec] = None) -> None:
    """dlio.dataset.mismatch's check against the manifest; its message names the dataset's root."""
    planning = planning if planning is not None else planning_spec(ds)
    try:
        check_dataset_matches(planning, split)
    except DlioError as e:
        if planning.data_folder == ds.spec.data_folder:
            raise
        raise type(e)(str(e).replace(planning.data_folder, ds.root.rstrip("/"))) from None


def sized(ds: StoredDataset) -> bool:
    """Every file has the size its manifest recorded (on an object store: one listing per split). Written
    in place, a file is checked as it is generated; an object cut short or replaced is only seen here."""
    planning = planning_spec(ds)
    for split in SPLITS:
        if ds.spec.num_files(split):
            made = recorded(planning, split).file_size
            if not np.array_equal(ds.backend.sizes(names(ds, planning, split)), made):
                return False
    return True


def complete(ds: StoredDataset) -> bool:
    """Every file is there at its size and the manifests say it was generated with this config's content."""
    if ds.backend.has(IN_PLACE):
        if not present(ds):
            return False
    elif not _local_view(ds)[1]:
        return False  # objects: sized() below lists each split once, and a listed size is presence too
    try:
        for split in SPLITS:
            check_matches(ds, split)
    except DlioError:
        return False
    return ds.backend.has(IN_PLACE) or sized(ds)


def generate(
    ds: StoredDataset,
    comm: Comm,
    echo: Callable[[str], None],
    progress: Optional[Progress] = None,
    threads: Optional[int] = None,
    checksum: bool = False,
    direct: bool = False,
    multipart_min: Optional[int] = None,
) -> None:
    """Generate the dataset on every rank (each its byte-balanced share), with the console's lines and
    the display's bar on rank 0."""
    spec = ds.spec
    total_bytes = dataset_bytes(spec)
    total_files = spec.num_files_train + spec.num_files_eval
    threads = threads or max(2, round(usable_cpus()))
    if direct and not ds.backend.has(IN_PLACE):
        raise DlioError(
            f"--direct has no meaning on {ds.backend.label} (objects are PUT, not written through a page cache)"
        )
    noun = "files" if ds.backend.has(IN_PLACE) else "objects"
    echo(f"Starting data generation: {total_files} {noun}, {fmt_bytes(total_bytes)} in {ds.root}")
    if not ds.backend.has(IN_PLACE) and comm.bcast(complete(ds) if comm.rank == 0 else None):
        echo(f"Generation done: the dataset in {ds.root} is complete and matches the config; nothing written")
        return
    t0 = time.monotonic()
    cb = None
    if progress is not None and comm.rank == 0:
        cb = lambda b, f: progress.generation(b * comm.size, f * comm.size, total_bytes, total_files)  # noqa: E731
        cb(0, 0)  # the display's clock starts now, not when the first file is written
    if ds.backend.has(IN_PLACE):
        res = generate_in_place(
            spec,
            threads=threads,
            rank=comm.rank,
            size=comm.size,
            progress=cb,
            barrier=comm.barrier,
            checksum=checksum,
            direct=direct,
        )
        if progress is not None:
            progress.done()
        written = sum(comm.allgather(res.bytes_written))
        dt = time.monotonic() - t0
        echo(
            f"Generation done: {fmt_bytes(written)} written in {dt:.1f} s "
            f"({written / 2**20 / max(dt, 1e-9):.0f} MiB/s), "
            f"{sum(comm.allgather(res.files_skipped))} files already complete"
        )
        return
    objects, nbytes, peak = gen_stream.generate_ranks(
        ds.backend, ds.root, spec, comm, threads, checksum=checksum, progress=cb, multipart_min=multipart_min
    )
    if cb is not None and progress is not None:
        progress.done()
    totals = comm.allgather((objects, nbytes, peak))
    objects, nbytes = sum(t[0] for t in totals), sum(t[1] for t in totals)
    dt = time.monotonic() - t0
    echo(
        f"Generation done: {fmt_bytes(nbytes)} in {objects} objects PUT by {comm.size} rank(s) in {dt:.1f} s "
        f"({nbytes / 2**20 / max(dt, 1e-9):.0f} MiB/s, generation and upload; at most "
        f"{max(t[2] for t in totals) / 2**20:.0f} MiB staged at once per rank), manifests last"
    )
