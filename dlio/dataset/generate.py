"""Dataset generation: threaded, resumable (complete files are kept), each file written atomically,
the manifest saved at the end."""
import errno
import math
import os
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from dlio.dataset import ranges
from dlio.errors import DatasetError, InsufficientSpace
from dlio.output import TMP_MARK, atomic_path
from dlio.dataset.formats import get_format, mix_seed
from dlio.dataset.spec import SPLITS, MANIFEST_DIR, DatasetSpec, split_folder, file_paths, all_dims, file_dims, estimated_sizes, dataset_bytes
from dlio.dataset.manifest import Manifest, manifest_path, save_manifest, load_saved, resolve_paths, scan_manifest, file_crc, range_crcs, _merge_parts, load_manifest
# ---------------------------------------------------------------------------------------------
# generation

@dataclass
class GenerateResult:
    files_total: int = 0        # files of this rank
    files_written: int = 0
    files_skipped: int = 0
    bytes_written: int = 0
    seconds: float = 0.0


def _make_folders(spec):
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
    try:   # the manifest is a cache: a complete dataset on a read-only mount does without a new one
        os.makedirs(f"{spec.data_folder}/{MANIFEST_DIR}", exist_ok=True)
    except OSError as e:
        if e.errno not in _READ_ONLY:
            raise


_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


def _free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _remove_stale_tmp(spec, paths):
    """Remove temporary files left by an interrupted run for the given final paths (and their
    companion files)."""
    fmt = get_format(spec.format)
    wanted = {}
    for p in paths:
        for q in [p, *fmt.companions(p, spec)]:
            d, name = os.path.split(q)
            wanted.setdefault(d, set()).add(name)
    for d, names in wanted.items():
        try:
            entries = os.listdir(d)
        except OSError:
            continue
        for e in entries:
            if e.startswith(".") and TMP_MARK in e:
                target = e[1:e.rindex(TMP_MARK)]
                if target in names:
                    try:
                        os.unlink(os.path.join(d, e))
                    except OSError:
                        pass


def _check_space(spec, need, present):
    folder = spec.data_folder
    free = _free_bytes(folder)
    if need > free:
        total = need + present
        scale = max(0.0, min(1.0, (present + 0.95 * free) / total)) if total else 0.0
        raise InsufficientSpace(need, free, math.floor(scale * 1000) / 1000, folder)


def generate(spec, threads=2, rank=0, size=1, progress=None, checksum=False, fsync=False, barrier=None):
    """Generate this rank's files (global index i of train-then-eval with i % size == rank).

    Complete files (size recorded in a matching manifest, or valid for the format) are skipped;
    others are written under a temporary name and renamed. progress(bytes, files) is called from
    the writing threads with this rank's running totals (skipped files included). With size > 1,
    each rank saves its part of the manifest; when `barrier` (a callable) is given, rank 0 merges
    the parts after it, else load_manifest() merges them later.
    """
    t0 = time.perf_counter()
    if size < 1 or not 0 <= rank < size:
        raise ValueError(f"bad rank {rank} of {size}")
    fmt = get_format(spec.format)
    _make_folders(spec)
    ntrain = spec.num_files_train
    paths = file_paths(spec, "train") + file_paths(spec, "valid")
    dims = all_dims(spec)
    total = len(paths)
    spf = spec.num_samples_per_file
    mine = np.arange(rank, total, size, dtype=np.int64)
    gen_key = spec.generation_key()

    # what a previous generation of the same spec recorded
    recorded = np.full(total, -1, np.int64)
    old = {}
    for split, first in (("train", 0), ("valid", ntrain)):
        m = load_saved(spec, split, check=False) if spec.num_files(split) else None
        if m is None:
            m = _merge_parts(spec, split) if spec.num_files(split) else None
        if m is not None and m.meta.get("gen_key") == gen_key:
            recorded[first:first + m.nfiles] = m.file_size.astype(np.int64)
            old[split] = m

    # which of my files are complete
    sizes = np.zeros(total, np.int64)
    todo = []
    present_bytes = 0
    for i in mine.tolist():
        p = paths[i]
        try:
            sb = os.stat(p)
            st = sb.st_size
        except FileNotFoundError:
            todo.append(i)
            continue
        if not stat.S_ISREG(sb.st_mode):
            ok = False   # a FIFO would block fmt.valid's open; the new file replaces it
        elif recorded[i] >= 0:
            ok = recorded[i] == st and all(os.path.exists(c) for c in fmt.companions(p, spec))
        else:
            ok = fmt.valid(p, tuple(dims[i]), spf, spec)
        if ok:
            sizes[i] = st
            present_bytes += st
        else:
            todo.append(i)
    todo_set = set(todo)
    skipped = [i for i in mine.tolist() if i not in todo_set]

    if todo:
        need = int(np.ceil(estimated_sizes(spec, dims[np.array(todo)]).sum()))
        _check_space(spec, need, present_bytes)
        _remove_stale_tmp(spec, [paths[i] for i in todo])

    lock = threading.Lock()
    state = {"bytes": present_bytes, "files": len(skipped), "written": 0, "wbytes": 0}
    if progress is not None and skipped:
        progress(state["bytes"], state["files"])
    per_file = {}     # file index -> its ranges (ranges.Uniform when regular)
    crcs = {}
    stop = threading.Event()
    errors = []
    it = iter(todo)

    def next_index():
        with lock:
            return next(it, None)

    def write_one(i):
        p = paths[i]
        with atomic_path(p, fsync=fsync) as tmp:
            n = fmt.write(tmp, tuple(int(x) for x in dims[i]), spf, spec, mix_seed(spec.seed_content, i),
                          final=p, index=i)
        st = os.stat(p).st_size
        sizes[i] = st
        if not fmt.WHOLE_FILE:
            per_file[i] = ranges.compact(*fmt.extents(p, spf, spec))
        if checksum:
            crcs[i] = file_crc(p)
        with lock:
            state["bytes"] += st
            state["files"] += 1
            state["written"] += 1
            state["wbytes"] += n
            b, f = state["bytes"], state["files"]
        if progress is not None:
            progress(b, f)

    def worker():
        while not stop.is_set():
            i = next_index()
            if i is None:
                return
            try:
                write_one(i)
            except BaseException as e:  # noqa: B902 - reported by the caller
                errors.append((i, e))
                stop.set()
                return

    nthreads = max(1, min(int(threads), len(todo))) if todo else 0
    if nthreads:
        with ThreadPoolExecutor(max_workers=nthreads, thread_name_prefix="dlio-gen") as ex:
            futs = [ex.submit(worker) for _ in range(nthreads)]
            try:
                for f in futs:
                    f.result()
            except BaseException:
                stop.set()
                raise
    if errors:
        i, e = errors[0]
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            left = [j for j in todo if sizes[j] == 0]
            remaining = int(np.ceil(estimated_sizes(spec, dims[np.array(left, dtype=np.int64)]).sum())) if left else 0
            raise InsufficientSpace(remaining, _free_bytes(spec.data_folder), 0.0, spec.data_folder) from e
        if isinstance(e, OSError):
            raise DatasetError(f"{paths[i]}: {e.strerror or e}") from e
        raise e

    # ranges (and checksums) of skipped files: from the old manifest, else from the files
    if skipped and not fmt.WHOLE_FILE:
        for i in skipped:
            split, j = ("train", i) if i < ntrain else ("valid", i - ntrain)
            m = old.get(split)
            known = m.table.of_file(j) if m is not None and m.table is not None else None
            per_file[i] = ranges.compact(*(known if known is not None and known[0].size
                                           else fmt.extents(paths[i], spf, spec)))
    if checksum:
        for i in skipped:
            split, j = ("train", i) if i < ntrain else ("valid", i - ntrain)
            m = old.get(split)
            if m is not None and m.file_crc32c is not None:
                crcs[i] = int(m.file_crc32c[j])
            else:
                crcs[i] = file_crc(paths[i])

    # the manifest (or this rank's part of it)
    for split, first, n in (("train", 0, ntrain), ("valid", ntrain, spec.num_files_eval)):
        if n == 0:
            continue
        idx = mine[(mine >= first) & (mine < first + n)]
        m = Manifest(split=split, format=spec.format, paths=[paths[i] for i in idx.tolist()],
                     file_size=sizes[idx].astype(np.uint64), num_samples_per_file=spf,
                     whole_file=fmt.WHOLE_FILE, meta={"gen_key": gen_key, "source": "generate",
                                                      "files": (idx - first).tolist() if size > 1 else None})
        if not fmt.WHOLE_FILE:   # a part's flat table numbers files within the split
            m.table = ranges.build([per_file[i] for i in idx.tolist()], files=idx - first)
        if checksum:
            m.file_crc32c = np.array([crcs[i] for i in idx.tolist()], dtype=np.uint32)
            if m.table is not None:
                m.range_crc32c = np.concatenate(
                    [range_crcs(paths[i], *ranges.as_arrays(per_file[i])[1:]) for i in idx.tolist()]
                    or [np.zeros(0, np.uint32)])
        try:
            save_manifest(spec, m, part=None if size == 1 else (rank, size))
        except OSError as e:
            # nothing was written and the folder is read-only: the complete dataset is left as it is
            if state["written"] or e.errno not in _READ_ONLY:
                raise
    if size > 1 and barrier is not None:
        barrier()
        if rank == 0:
            for split in SPLITS:
                if spec.num_files(split) == 0:
                    continue
                m = _merge_parts(spec, split)
                if m is not None:
                    save_manifest(spec, m)
                    for r in range(size):
                        try:
                            os.unlink(manifest_path(spec, split, part=(r, size)))
                        except OSError:
                            pass
        barrier()

    return GenerateResult(files_total=int(mine.size), files_written=state["written"], files_skipped=len(skipped),
                          bytes_written=state["wbytes"], seconds=time.perf_counter() - t0)


__all__ = ["DatasetSpec", "DatasetError", "InsufficientSpace", "Manifest", "GenerateResult", "file_paths",
           "file_dims", "all_dims", "dataset_bytes", "generate", "load_manifest", "scan_manifest",
           "resolve_paths", "manifest_path", "split_folder"]
