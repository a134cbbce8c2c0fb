"""What a generation has left to write: this rank's files (byte-balanced runs), which of them are
complete already, room on the filesystem for the others, and the temporary files an interrupted
run left for them (removed)."""

import errno
import math
import os
import stat
from dataclasses import dataclass, field
from typing import Dict, List, Set, Tuple, Union

import numpy as np
from numpy.typing import NDArray

from dlio.base import tmpclaim
from dlio.base.errors import InsufficientSpace
from dlio.dataset.formats import Format, get_format
from dlio.dataset.manifest import Manifest, load_saved, merge_parts
from dlio.dataset.ranges import FileRanges
from dlio.dataset.spec import (
    MANIFEST_DIR,
    SPLITS,
    DatasetSpec,
    all_dims,
    estimated_sizes,
    file_paths,
    split_dirs,
    split_folder,
)

READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)  # a read-only mount, or a folder we may not write


@dataclass
class GenPlan:
    """One rank's generation: what it writes, what is already there, and what it learns on the way."""

    spec: DatasetSpec
    fmt: Format
    paths: List[str]
    dims: NDArray[np.int64]  # every file's drawn shape (train then eval)
    mine: NDArray[np.int64]  # this rank's file indices
    todo: List[int]
    skipped: List[int]
    sizes: NDArray[np.int64]  # bytes of each file once complete (0 while not)
    present_bytes: int
    old: Dict[str, Manifest]  # manifests of a previous generation of the same spec, by split
    per_file: Dict[int, FileRanges] = field(default_factory=dict)  # file index -> its sample ranges
    crcs: Dict[int, int] = field(default_factory=dict)  # file index -> its CRC32C (checksum)
    skipped_set: Set[int] = field(default_factory=set)
    range_crcs: Dict[int, NDArray[np.uint32]] = field(default_factory=dict)  # file index -> its ranges' CRCs


def _make_folders(spec: DatasetSpec) -> None:
    os.makedirs(spec.data_folder, exist_ok=True)
    for split in SPLITS:
        base = split_folder(spec, split)
        os.makedirs(base, exist_ok=True)
        s = spec.num_subfolders(split)
        if s > 1:
            w = len(str(s))
            for k in range(s):
                os.makedirs(f"{base}/{str(k).zfill(w)}", exist_ok=True)
        if spec.format == "tfrecord":
            os.makedirs(f"{spec.data_folder}/index/{split}", exist_ok=True)
    try:  # the manifest is a cache: a complete dataset on a read-only mount does without a new one
        os.makedirs(f"{spec.data_folder}/{MANIFEST_DIR}", exist_ok=True)
    except OSError as e:
        if e.errno not in READ_ONLY:
            raise


def free_bytes(path: str) -> int:
    """Bytes an unprivileged writer may still use on path's filesystem."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _listing(dirs: Union[List[str], Set[str]]) -> Dict[str, Set[str]]:
    """Names in each directory (one listdir each: most files of a new dataset need no stat)."""
    out: Dict[str, Set[str]] = {}
    for d in dirs:
        try:
            out[d] = set(os.listdir(d))
        except OSError:
            out[d] = set()
    return out


def require_space(spec: DatasetSpec, need: int, present: int) -> None:
    """InsufficientSpace unless `need` more bytes fit in the data folder (`present`: bytes already
    there), with the --scale that would fit."""
    folder = spec.data_folder
    free = free_bytes(folder)
    if need > free:
        total = need + present
        scale = max(0.0, min(1.0, (present + 0.95 * free) / total)) if total else 0.0
        raise InsufficientSpace(need, free, math.floor(scale * 1000) / 1000, folder)


def rank_files(spec: DatasetSpec, dims: NDArray[np.int64], rank: int, size: int) -> NDArray[np.int64]:
    """This rank's files (global indices of train-then-eval): consecutive runs holding about the same
    bytes on every rank (by the files' estimated sizes: the file whose middle byte falls in rank r's
    share of the total is r's), so ranks finish together when file sizes vary, and each writes its
    own stretch of the folders. Every rank computes the same split from the spec alone."""
    n = len(dims)
    if size == 1 or n == 0:
        return np.arange(n, dtype=np.int64)
    est = np.maximum(estimated_sizes(spec, dims).astype(np.float64), 1.0)
    mid = np.cumsum(est) - est / 2
    owner = np.minimum((mid * size / est.sum()).astype(np.int64), size - 1)
    return np.nonzero(owner == rank)[0].astype(np.int64)


def plan(spec: DatasetSpec, rank: int = 0, size: int = 1, check_space: bool = True) -> GenPlan:
    """This rank's files (rank_files: byte-balanced runs of train-then-eval), which of them are
    complete (size recorded in a manifest of the same generation key, or valid for the format),
    and room on the filesystem for the others (unless not check_space: a caller that writes them a
    batch at a time checks each batch); stale temporary files of those are removed."""
    if size < 1 or not 0 <= rank < size:
        raise ValueError(f"bad rank {rank} of {size}")
    fmt = get_format(spec.format)
    _make_folders(spec)
    ntrain = spec.num_files_train
    paths = file_paths(spec, "train") + file_paths(spec, "valid")
    dims = all_dims(spec)
    total = len(paths)
    spf = spec.num_samples_per_file
    mine = rank_files(spec, dims, rank, size)
    recorded = np.full(total, -1, np.int64)
    old: Dict[str, Manifest] = {}
    for split, first in (("train", 0), ("valid", ntrain)):
        m = load_saved(spec, split, check=False) if spec.num_files(split) else None
        if m is None:
            m = merge_parts(spec, split) if spec.num_files(split) else None
        if m is not None and m.meta.get("gen_key") == spec.generation_key():
            recorded[first : first + m.nfiles] = m.file_size.astype(np.int64)
            old[split] = m
    sizes = np.zeros(total, np.int64)
    todo: List[int] = []
    skipped: List[int] = []
    present = 0
    dirs = {d for split in SPLITS for d in split_dirs(spec, split)}  # from the spec: no per-file work
    if mine.size:
        dirs.update(os.path.dirname(c) for c in fmt.companions(paths[int(mine[0])], spec))
    listing = _listing(dirs)
    if not any(listing.values()):  # a new dataset: nothing to check file by file
        located: List[Tuple[str, str]] = []
        todo = mine.tolist()
    else:
        located = [_split(paths[i]) for i in mine.tolist()]
    for i, (d, name) in zip(mine.tolist(), located):
        names = listing.get(d)
        if names is None:  # (a folder the spec did not name: listed when first seen)
            names = listing[d] = _listing([d])[d]
        if name not in names:
            todo.append(i)
            continue
        p = paths[i]
        try:
            sb = os.stat(p)
            st = sb.st_size
        except FileNotFoundError:
            todo.append(i)
            continue
        if not stat.S_ISREG(sb.st_mode):
            ok = False  # a FIFO would block fmt.valid's open; the new file replaces it
        elif recorded[i] >= 0:
            ok = recorded[i] == st and all(os.path.exists(c) for c in fmt.companions(p, spec))
        else:
            ok = fmt.valid(p, tuple(dims[i]), spf, spec)
        if ok:
            sizes[i] = st
            present += st
            skipped.append(i)
        else:
            todo.append(i)
    if todo and check_space:
        require_space(spec, int(np.ceil(estimated_sizes(spec, dims[np.array(todo)]).sum())), present)
        tmpclaim.sweep(spec.data_folder, listing)  # an earlier generation that died: its claim proves them ours
    return GenPlan(spec, fmt, paths, dims, mine, todo, skipped, sizes, present, old, skipped_set=set(skipped))


def _split(path: str) -> Tuple[str, str]:
    """os.path.split(path), at a third of its cost (it runs once per file)."""
    i = path.rfind("/") + 1
    head = path[:i]
    return (head.rstrip("/") or head), path[i:]
