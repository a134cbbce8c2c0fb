"""The files a training split reads: the dataset manifest as the planner's Layout (dlio.train.planner),
every file checked against the size recorded when the dataset was made (a bad file stops the run, or
with skip_bad_files its samples are left out)."""

import os
import stat
from typing import Optional, Sequence, Tuple

import numpy as np
from numpy.typing import NDArray

from dlio.base.errors import DlioError
from dlio.dataset.formats import get_format
from dlio.dataset.manifest import recorded
from dlio.dataset.spec import DatasetSpec
from dlio.storage.base import STAT, Backend
from dlio.system.mpi import Comm
from dlio.train import planner


def check_files(paths: Sequence[str], recorded_sizes: NDArray[np.uint64]) -> Tuple[np.ndarray, Optional[str]]:
    """Boolean mask of files that are missing, unreadable or not the size recorded at generation
    (truncated, or changed under us), and the first problem as text. One stat per file."""
    bad = np.zeros(len(paths), dtype=bool)
    first: Optional[str] = None
    for i, p in enumerate(paths):
        try:
            st = os.stat(p)
            size = st.st_size
        except OSError as e:
            bad[i] = True
            first = first or f"{p}: {e.strerror}"
            continue
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block the open or read forever
            bad[i] = True
            first = first or f"{p}: not a regular file (a FIFO, socket or device)"
        elif size != int(recorded_sizes[i]):
            bad[i] = True
            first = first or (
                f"{p}: {size} bytes, but {int(recorded_sizes[i])} were recorded when the "
                "dataset was made (truncated or changed)"
            )
        elif not os.access(p, os.R_OK):
            bad[i] = True
            first = first or f"{p}: not readable (permissions)"
    return bad, first


def check_listed(
    names: Sequence[str], recorded_sizes: NDArray[np.uint64], listed: NDArray[np.int64]
) -> Tuple[np.ndarray, Optional[str]]:
    """check_files for objects: their sizes from a listing (-1: not listed) against those recorded."""
    recorded = np.asarray(recorded_sizes, dtype=np.int64)
    bad = listed != recorded
    first: Optional[str] = None
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        first = (
            f"{names[i]}: not there"
            if listed[i] < 0
            else f"{names[i]}: {int(listed[i])} bytes, but {int(recorded[i])} were recorded when the dataset was made "
            "(truncated or replaced)"
        )
    return bad, first


def listed_sizes(backend: Backend, comm: Comm, names: Sequence[str]) -> Optional[Tuple[Sequence[str], np.ndarray]]:
    """For layout_for: objects' names and sizes from rank 0's one listing; None on files (stat'ed instead)."""
    if backend.has(STAT):
        return None
    sizes: Optional[np.ndarray] = backend.sizes(names) if comm.rank == 0 else None
    sizes = comm.bcast(sizes)
    assert sizes is not None  # rank 0's
    return names, sizes


def layout_for(
    spec: DatasetSpec,
    split: str,
    no_io: bool = False,
    skip_bad_files: bool = False,
    listed: Optional[Tuple[Sequence[str], NDArray[np.int64]]] = None,
) -> Tuple[planner.Layout, np.ndarray]:
    """The planner's view of one split, from the dataset manifest (made at generation or by scan).

    The files on disk are checked against the sizes recorded when the dataset was made: a bad file
    stops the run with its path, or with skip_bad_files its samples are left out of every epoch
    (and counted in the results). listed: objects (S3), their names and the sizes a listing gave,
    checked instead of stat'ing the manifest's local paths."""
    fmt = get_format(spec.format)
    m = recorded(spec, split)
    nfiles = spec.num_files_train if split == "train" else spec.num_files_eval
    if listed is None:
        bad, problem = check_files(m.paths, m.file_size)
    else:
        bad, problem = check_listed(listed[0], m.file_size, listed[1])
    if problem and not skip_bad_files:
        raise DlioError(
            f"{problem}; regenerate with dlio-fast generate, check with dlio-fast verify, or run with --skip-bad-files"
        )
    if len(bad) and bad.all():  # --skip-bad-files would leave steps that read nothing: no storage figure
        raise DlioError(
            f"every one of the {len(bad):,} {split} files is bad (e.g. {problem}); there is nothing left to read: "
            "regenerate with dlio-fast generate or check with dlio-fast verify"
        )
    table = m.table if not fmt.WHOLE_FILE and spec.format != "synthetic" else None
    layout = planner.Layout(
        nfiles=nfiles,
        spf=spec.num_samples_per_file,
        file_size=np.asarray(m.file_size, dtype=np.uint64),
        whole_file=bool(fmt.WHOLE_FILE),
        table=table,
        sequential=spec.format == "tfrecord",
        no_io=no_io or spec.format == "synthetic",
        grouped=bool(getattr(fmt, "GROUPED", False)),
    )
    return layout, bad
