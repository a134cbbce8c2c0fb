"""Dataset generation: resumable (complete files are kept), each file written atomically (temp +
rename), the manifest saved once at the end.

Three steps: plan() finds what is left to write; _write_all() writes it from the C core on
`threads` threads (each takes the next batch of files, describes them as segment programs in
Python, then writes them with the GIL released: dlio.dataset.formats.program); _finish() records
sample ranges, checksums and the manifest. A format without programs for some layout (hdf5 with
chunks or compression, synthetic) is written file by file by its own write()."""

import errno
import math
import os
import stat
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import numpy as np

from dlio.dataset import ranges
from dlio.dataset.formats import get_format, mix_seed, mix_seeds
from dlio.dataset.formats.program import Program
from dlio.dataset.manifest import (
    Manifest,
    file_crc,
    load_manifest,
    load_saved,
    manifest_path,
    merge_parts,
    range_crcs,
    resolve_paths,
    save_manifest,
    scan_manifest,
)
from dlio.dataset.spec import (
    MANIFEST_DIR,
    SPLITS,
    DatasetSpec,
    all_dims,
    dataset_bytes,
    estimated_sizes,
    file_dims,
    file_paths,
    split_dirs,
    split_folder,
)
from dlio.errors import DatasetError, InsufficientSpace
from dlio.output import TMP_MARK, atomic_path

BATCH_BYTES = 64 << 20  # a thread's batch of files: about this many bytes ...
BATCH_FILES = 512  # ... or this many files (bounds the programs held in memory)
POLL_S = 0.25  # progress is reported this often


@dataclass
class GenerateResult:
    files_total: int = 0  # files of this rank
    files_written: int = 0
    files_skipped: int = 0
    bytes_written: int = 0
    seconds: float = 0.0


@dataclass
class _Plan:
    spec: DatasetSpec
    fmt: object
    paths: List[str]
    dims: np.ndarray
    mine: np.ndarray  # this rank's file indices
    todo: List[int]
    skipped: List[int]
    sizes: np.ndarray  # bytes of each file once complete (0 while not)
    present_bytes: int
    old: Dict[str, Manifest]  # manifests of a previous generation of the same spec, by split
    per_file: dict = field(default_factory=dict)  # file index -> its sample ranges
    crcs: dict = field(default_factory=dict)
    skipped_set: set = field(default_factory=set)
    range_crcs: dict = field(default_factory=dict)  # file index -> its ranges' CRCs (checksum, computed once)


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
    try:  # the manifest is a cache: a complete dataset on a read-only mount does without a new one
        os.makedirs(f"{spec.data_folder}/{MANIFEST_DIR}", exist_ok=True)
    except OSError as e:
        if e.errno not in _READ_ONLY:
            raise


_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


def _free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _listing(dirs):
    """Names in each directory (one listdir each: most files of a new dataset need no stat)."""
    out = {}
    for d in dirs:
        try:
            out[d] = set(os.listdir(d))
        except OSError:
            out[d] = set()
    return out


def _remove_stale_tmp(spec, paths, listing):
    """Remove temporary files left by an interrupted run for the given final paths (and their
    companion files)."""
    stale = [(d, e) for d, names in listing.items() for e in names if e.startswith(".") and TMP_MARK in e]
    if not stale:
        return
    fmt = get_format(spec.format)
    wanted = set()
    for p in paths:
        wanted.update(os.path.split(q) for q in [p, *fmt.companions(p, spec)])
    for d, e in stale:
        if (d, e[1 : e.rindex(TMP_MARK)]) in wanted:
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


def rank_files(spec: DatasetSpec, dims: np.ndarray, rank: int, size: int) -> np.ndarray:
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


def plan(spec: DatasetSpec, rank: int = 0, size: int = 1, check_space: bool = True) -> _Plan:
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
    old = {}
    for split, first in (("train", 0), ("valid", ntrain)):
        m = load_saved(spec, split, check=False) if spec.num_files(split) else None
        if m is None:
            m = merge_parts(spec, split) if spec.num_files(split) else None
        if m is not None and m.meta.get("gen_key") == spec.generation_key():
            recorded[first : first + m.nfiles] = m.file_size.astype(np.int64)
            old[split] = m
    sizes = np.zeros(total, np.int64)
    todo, skipped, present = [], [], 0
    dirs = {d for split in SPLITS for d in split_dirs(spec, split)}  # from the spec: no per-file work
    if mine.size:
        dirs.update(os.path.dirname(c) for c in fmt.companions(paths[int(mine[0])], spec))
    listing = _listing(dirs)
    if not any(listing.values()):  # a new dataset: nothing to check file by file
        split = []
        todo = mine.tolist()
    else:
        split = [_split(paths[i]) for i in mine.tolist()]
    for i, (d, name) in zip(mine.tolist(), split):
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
        _check_space(spec, int(np.ceil(estimated_sizes(spec, dims[np.array(todo)]).sum())), present)
        _remove_stale_tmp(spec, [paths[i] for i in todo], listing)
    return _Plan(spec, fmt, paths, dims, mine, todo, skipped, sizes, present, old, skipped_set=set(skipped))


def _batches(pl: _Plan, threads: int = 1) -> List[np.ndarray]:
    """The files left, in batches of about BATCH_BYTES (by estimated size) or BATCH_FILES, largest
    files first: threads take the next batch as they finish one, so the last batches, which decide
    when the threads are all done, are the smallest (bytes, not file counts, balance the threads).
    The last 2 x threads x BATCH_BYTES go in batches of an eighth of that, so a thread that finds
    no batch left waits for the others' last small ones, not for a whole batch."""
    todo = np.array(pl.todo, dtype=np.int64)
    if todo.size == 0:
        return []
    est = estimated_sizes(pl.spec, pl.dims[todo])
    order = np.argsort(-est, kind="stable")
    todo, est = todo[order], est[order]
    csum = np.cumsum(est)
    tail_from = csum[-1] - 2 * max(1, int(threads)) * BATCH_BYTES
    cuts, start = [], 0
    while start < todo.size:
        base = csum[start - 1] if start else 0
        step = BATCH_BYTES if base < tail_from else BATCH_BYTES // 8
        end = int(np.searchsorted(csum, base + step, side="left")) + 1
        end = max(start + 1, min(end, start + BATCH_FILES, todo.size))
        cuts.append(todo[start:end])
        start = end
    return cuts


def _split(path):
    """os.path.split(path), at a third of its cost (it runs once per file)."""
    i = path.rfind("/") + 1
    head = path[:i]
    return (head.rstrip("/") or head), path[i:]


def _write_batch(
    pl: _Plan, idx: np.ndarray, fsync: bool, stop: np.ndarray, counters: np.ndarray, direct: bool = False
) -> int:
    """Write one batch of files; returns the bytes written. Files whose format has a program go to
    the C core together (with O_DIRECT when direct); the others are written one by one by the
    format (buffered: h5py writes chunked/compressed hdf5 through the page cache)."""
    from dlio import _core

    spec, fmt, spf = pl.spec, pl.fmt, pl.spec.num_samples_per_file
    prog, by_python, main_of = Program(), [], {}
    has_program = hasattr(fmt.module, "program")
    if hasattr(fmt.module, "programs"):  # the format describes the whole batch with numpy
        fmt.programs(prog, pl.dims[idx], spf, spec, mix_seeds(spec.seed_content, idx), [pl.paths[i] for i in idx])
        main_of = dict(enumerate(idx.tolist()))
        idx = idx[:0]
    for i in idx.tolist():
        dims = tuple(int(x) for x in pl.dims[i])
        if has_program and fmt.program(prog, dims, spf, spec, mix_seed(spec.seed_content, i), pl.paths[i]) is not False:
            main_of[len(prog.paths) - 1] = i  # the data file comes last, after its companions
        else:
            by_python.append(i)
    prog.finish()
    done = 0
    if prog.paths:
        complete = _core.gen_files(
            f"{TMP_MARK}{os.getpid()}-gen",  # temporary names .NAME.tmp-PID-gen (without O_TMPFILE)
            prog.paths,
            prog.seeds,
            prog.first,
            prog.counts(),
            prog.seg_array(),
            bytes(prog.blob),
            fsync=fsync,
            stop=stop,
            counters=counters,
            direct=direct,
        )
        if not complete:  # stopped between files (another thread failed, or an interrupt)
            return done
        for k, i in main_of.items():
            pl.sizes[i] = prog.sizes[k]
        done += sum(prog.sizes)
    for i in by_python:
        if stop[0]:
            break
        p = pl.paths[i]
        with atomic_path(p, fsync=fsync) as tmp:
            n = fmt.write(
                tmp, tuple(int(x) for x in pl.dims[i]), spf, spec, mix_seed(spec.seed_content, i), final=p, index=i
            )
        pl.sizes[i] = os.stat(p).st_size
        counters[0] += n  # (only this thread writes its counters)
        counters[1] += 1
        done += n
    return done


def _write_all(pl: _Plan, threads: int, progress: Optional[Callable], fsync: bool, direct: bool = False) -> int:
    """Write pl.todo on `threads` threads, each taking the next batch; progress(bytes, files) is
    called from this thread every POLL_S with the rank's running totals (skipped files included).
    Returns the bytes written."""
    batches = _batches(pl, threads)
    nthreads = max(1, min(int(threads), len(batches))) if batches else 0
    if not nthreads:
        return 0
    stop = np.zeros(1, np.int32)
    counters = np.zeros((nthreads, 2), np.uint64)  # per thread: bytes, files
    lock, it = threading.Lock(), iter(batches)

    def worker(t):
        total = 0
        while not stop[0]:
            with lock:
                idx = next(it, None)
            if idx is None:
                break
            try:
                total += _write_batch(pl, idx, fsync, stop, counters[t], direct)
            except BaseException:
                stop[0] = 1
                raise
        return total

    group = 1 + len(pl.fmt.companions(pl.paths[pl.todo[0]], pl.spec))  # files the C core counts per data file

    def report():
        if progress is not None:
            progress(pl.present_bytes + int(counters[:, 0].sum()), len(pl.skipped) + int(counters[:, 1].sum()) // group)

    with ThreadPoolExecutor(max_workers=nthreads, thread_name_prefix="dlio-gen") as ex:
        futs = [ex.submit(worker, t) for t in range(nthreads)]
        try:
            while True:
                finished, pending = wait(futs, timeout=POLL_S, return_when=FIRST_EXCEPTION)
                report()
                if not pending or any(f.exception() is not None for f in finished):
                    break
        except BaseException:
            stop[0] = 1
            raise
    errors = [f.exception() for f in futs if f.exception() is not None]
    if errors:
        _raise_write_error(pl, errors[0], direct)
    return sum(f.result() for f in futs)


def _raise_write_error(pl: _Plan, e: BaseException, direct: bool = False):
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        left = np.array([j for j in pl.todo if pl.sizes[j] == 0], dtype=np.int64)
        remaining = int(np.ceil(estimated_sizes(pl.spec, pl.dims[left]).sum())) if left.size else 0
        raise InsufficientSpace(remaining, _free_bytes(pl.spec.data_folder), 0.0, pl.spec.data_folder) from e
    if direct and isinstance(e, OSError) and e.errno == errno.EINVAL and str(e.strerror).startswith("create"):
        raise DatasetError(
            f"{pl.spec.data_folder}: the filesystem refuses O_DIRECT (open: {os.strerror(errno.EINVAL)}); "
            "generate without --direct"
        ) from e
    if isinstance(e, OSError):
        raise DatasetError(f"{e.filename or pl.spec.data_folder}: {e.strerror or e}") from e
    raise e


def _ranges_and_crcs(pl: _Plan, written: List[int], checksum: bool) -> None:
    """Sample ranges (formats that read part of a file) and CRCs (with checksum) of every file of
    this rank: from the format's layout or the files for written ones, from the old manifest when
    it has them for skipped ones."""
    spec, fmt, spf, ntrain = pl.spec, pl.fmt, pl.spec.num_samples_per_file, pl.spec.num_files_train
    layout = getattr(fmt.module, "layout_extents", None)

    def from_old(i, what):
        split, j = ("train", i) if i < ntrain else ("valid", i - ntrain)
        m = pl.old.get(split)
        if m is None:
            return None
        if what == "ranges":
            known = m.table.of_file(j) if m.table is not None else None
            return known if known is not None and known[0].size else None
        return int(m.file_crc32c[j]) if m.file_crc32c is not None else None

    if not fmt.WHOLE_FILE:
        for i in written + pl.skipped:
            ext = from_old(i, "ranges") if i in pl.skipped_set else None
            if ext is None and layout is not None:
                ext = layout(tuple(int(x) for x in pl.dims[i]), spf, spec)
            pl.per_file[i] = ranges.compact(*(ext if ext is not None else fmt.extents(pl.paths[i], spf, spec)))
    if checksum:
        for i in written + pl.skipped:
            c = from_old(i, "crc") if i in pl.skipped_set else None
            pl.crcs[i] = c if c is not None else file_crc(pl.paths[i])
        if not fmt.WHOLE_FILE:
            for i in written:
                pl.range_crcs[i] = range_crcs(pl.paths[i], *ranges.as_arrays(pl.per_file[i])[1:])


def _save(pl: _Plan, checksum: bool, rank: int, size: int, barrier: Optional[Callable]) -> None:
    """The manifest of each split (or this rank's part of it; rank 0 merges the parts after
    `barrier` when it is given, else load_manifest() merges them later)."""
    spec, ntrain, mine = pl.spec, pl.spec.num_files_train, pl.mine
    for split, first, n in (("train", 0, ntrain), ("valid", ntrain, spec.num_files_eval)):
        if n == 0:
            continue
        idx = mine[(mine >= first) & (mine < first + n)]
        m = Manifest(
            split=split,
            format=spec.format,
            paths=[pl.paths[i] for i in idx.tolist()],
            file_size=pl.sizes[idx].astype(np.uint64),
            num_samples_per_file=spec.num_samples_per_file,
            whole_file=pl.fmt.WHOLE_FILE,
            meta={
                "gen_key": spec.generation_key(),
                "source": "generate",
                "files": (idx - first).tolist() if size > 1 else None,
            },
        )
        if not pl.fmt.WHOLE_FILE:  # a part's flat table numbers files within the split
            m.table = ranges.build([pl.per_file[i] for i in idx.tolist()], files=idx - first)
        if checksum:
            m.file_crc32c = np.array([pl.crcs[i] for i in idx.tolist()], dtype=np.uint32)
            if m.table is not None:
                m.range_crc32c = np.concatenate(
                    [
                        pl.range_crcs[i]
                        if i in pl.range_crcs
                        else range_crcs(pl.paths[i], *ranges.as_arrays(pl.per_file[i])[1:])
                        for i in idx.tolist()
                    ]
                    or [np.zeros(0, np.uint32)]
                )
        try:
            save_manifest(spec, m, part=None if size == 1 else (rank, size))
        except OSError as e:
            # nothing was written and the folder is read-only: the complete dataset is left as it is
            if pl.todo or e.errno not in _READ_ONLY:
                raise
    if size > 1 and barrier is not None:
        barrier()
        if rank == 0:
            for split in SPLITS:
                m = merge_parts(spec, split) if spec.num_files(split) else None
                if m is not None:
                    save_manifest(spec, m)
                    for r in range(size):
                        try:
                            os.unlink(manifest_path(spec, split, part=(r, size)))
                        except OSError:
                            pass
        barrier()


# ---------------------------------------------------------------------------------------------
# the measured generation rate, for --dry-run's estimate

RATE_FILE = "generation-rate.json"


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
    import json

    if nfiles <= 0 or seconds <= 0:
        return
    rec = {
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


def measured_rate(spec: DatasetSpec) -> Optional[dict]:
    """The rate record_rate() saved in this data folder, or None."""
    import json

    try:
        with open(os.path.join(spec.data_folder, MANIFEST_DIR, RATE_FILE)) as f:
            rec = json.load(f)
        return rec if rec.get("bytes_per_s", 0) > 0 and rec.get("files_per_s", 0) > 0 else None
    except (OSError, ValueError):
        return None


def estimate_seconds(rec: dict, nbytes: int, nfiles: int) -> float:
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
            f"; that run ({rec['bytes'] / 2**30:.1f} GiB) fits in this host's {ram / 2**30:.0f} GiB of RAM, "
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
        f"size on disk        {nbytes / 2**30:.2f} GiB",
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


def generate(
    spec, threads=None, rank=0, size=1, progress=None, checksum=False, fsync=False, barrier=None, direct=False
):
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
    nthreads = int(threads) if threads else (os.cpu_count() or 1)
    wbytes = _write_all(pl, nthreads, progress, fsync, direct)
    _ranges_and_crcs(pl, pl.todo, checksum)
    _save(pl, checksum, rank, size, barrier)
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
