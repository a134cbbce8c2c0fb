"""The manifest: per split, the size of every file and, for formats where a sample is not the
whole file (hdf5, tfrecord, indexed_binary), the byte ranges a real reader touches per sample (per
group for parquet: dlio.dataset.formats.parquet).

It is written by generation and, for a dataset made by someone else (DLIO), built by scanning the
files and cached when the folder is writable:
  {data_folder}/.dlio-fast/manifest-{train|valid}.npz
"""

import json
import mmap
import os
import stat
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, TypedDict, Union

import numpy as np
from numpy.typing import NDArray

from dlio import _core
from dlio.base.errors import DatasetError
from dlio.dataset import ranges
from dlio.dataset.formats import Format, get_format
from dlio.dataset.spec import MANIFEST_DIR, MANIFEST_VERSION, DatasetSpec, file_paths, split_folder, split_key
from dlio.system.output import atomic_path


class ManifestMeta(TypedDict, total=False):
    """A manifest's "meta" (JSON in its npz): how it was made, and the layout it lists (_layout_meta)."""

    gen_key: Optional[str]  # DatasetSpec.generation_key() of the generation (None: made by a scan)
    source: str  # "generate" or "scan"
    files: Optional[List[int]]  # a rank's part: the numbers of its files within the split
    canonical: bool  # the files have DLIO's names (file_paths); else the npz lists them
    version: int
    format: str
    split: str
    nfiles: int
    spf: int
    prefix: str
    subfolders: int
    reader_view: Optional[List[Union[str, List[str]]]]


@dataclass
class Saved:
    """A saved manifest as read back: its arrays by name, and its meta."""

    arrays: Dict[str, NDArray[Any]]
    meta: ManifestMeta


@dataclass
class Manifest:
    """Per split: file paths and sizes, and (non-whole-file formats) per-sample byte ranges.

    table (dlio.dataset.ranges.Table) holds the ranges, in O(files) when the files are regular; it is None
    for whole-file formats (npz, npy, jpeg, png, csv), where every sample reads (0, file_size):
    see ranges(). range_crc32c, when present, follows the flat order of table.flat()."""

    split: str
    format: str
    paths: List[str]
    file_size: NDArray[np.uint64]
    num_samples_per_file: int
    whole_file: bool
    table: Optional[ranges.Table] = None
    file_crc32c: Optional[NDArray[np.uint32]] = None
    range_crc32c: Optional[NDArray[np.uint32]] = None
    meta: ManifestMeta = field(default_factory=ManifestMeta)

    @property
    def nfiles(self) -> int:
        return int(self.file_size.size)

    @property
    def total_bytes(self) -> int:
        return int(self.file_size.sum())

    def ranges(self) -> Tuple[NDArray[np.uint32], NDArray[np.uint32], NDArray[np.uint64], NDArray[np.uint64]]:
        """(range_file, range_sample, range_offset, range_length) for every format: O(ranges)."""
        if self.table is not None:
            return self.table.flat(self.nfiles)
        spf = self.num_samples_per_file
        n = self.nfiles
        rf = np.repeat(np.arange(n, dtype=np.uint32), spf)
        rs = np.tile(np.arange(spf, dtype=np.uint32), n)
        return rf, rs, np.zeros(n * spf, np.uint64), np.repeat(self.file_size.astype(np.uint64), spf)


def manifest_path(spec: DatasetSpec, split: str, part: Optional[Tuple[int, int]] = None) -> str:
    """The npz of a split's manifest, or of a rank's part of it (part: (rank, ranks))."""
    d = f"{spec.data_folder}/{MANIFEST_DIR}"
    if part is None:
        return f"{d}/manifest-{split_key(split)}.npz"
    rank, size = part
    return f"{d}/manifest-{split_key(split)}.part-{rank}-of-{size}.npz"


def _layout_meta(spec: DatasetSpec, split: str) -> ManifestMeta:
    split = split_key(split)
    return {
        "version": MANIFEST_VERSION,
        "format": spec.format,
        "split": split,
        "nfiles": spec.num_files(split),
        "spf": spec.num_samples_per_file,
        "prefix": spec.file_prefix,
        "subfolders": spec.num_subfolders(split),
        "reader_view": spec.reader_view(),  # parquet: the columns read and how (the table is of those)
    }


def _save_npz(path: str, arrays: Dict[str, NDArray[Any]]) -> None:
    d, name = os.path.split(path)
    os.makedirs(d, exist_ok=True)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]  # (numpy's stub: a name could be allow_pickle)


def save_manifest(spec: DatasetSpec, m: Manifest, part: Optional[Tuple[int, int]] = None) -> None:
    meta = m.meta.copy()
    meta.update(_layout_meta(spec, m.split))
    canonical = m.paths == file_paths(spec, m.split) if part is None else True
    meta["canonical"] = bool(canonical)
    arrays: Dict[str, NDArray[Any]] = {"meta": np.array(json.dumps(meta)), "file_size": m.file_size.astype(np.uint64)}
    if not canonical:
        root = split_folder(spec, m.split) + "/"
        arrays["names"] = np.array([p[len(root) :] if p.startswith(root) else p for p in m.paths])
    arrays.update(_table_arrays(m.table))
    if m.file_crc32c is not None:
        arrays["file_crc32c"] = m.file_crc32c
    if m.range_crc32c is not None:
        arrays["range_crc32c"] = m.range_crc32c
    _save_npz(manifest_path(spec, m.split, part), arrays)


def _table_arrays(t: Optional[ranges.Table]) -> Dict[str, NDArray[Any]]:
    """The npz arrays of a range table (flat: the four range_* columns of earlier versions)."""
    if t is None:
        return {}
    if t.first is not None:
        return {"range_first": t.first, "range_uniform": np.array([t.stride, t.length, t.count], np.int64)}
    file, sample, offset, size = t.columns()
    return {"range_file": file, "range_sample": sample, "range_offset": offset, "range_length": size}


def _table_from_arrays(a: Dict[str, NDArray[Any]]) -> Optional[ranges.Table]:
    if "range_first" in a:
        stride, length, count = (int(x) for x in a["range_uniform"])
        return ranges.Table(first=a["range_first"].astype(np.uint64), stride=stride, length=length, count=count)
    if "range_file" in a:
        return ranges.Table(
            file=a["range_file"], sample=a["range_sample"], offset=a["range_offset"], size=a["range_length"]
        )
    return None


def read_manifest_file(path: str) -> Saved:
    """A saved manifest's arrays, and its "meta" decoded from JSON."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return Saved(arrays, json.loads(str(arrays.pop("meta"))))


def _manifest_from_arrays(spec: DatasetSpec, split: str, saved: Saved, paths: List[str]) -> Manifest:
    fmt = get_format(spec.format)
    a = saved.arrays
    return Manifest(
        split=split_key(split),
        format=spec.format,
        paths=paths,
        file_size=a["file_size"].astype(np.uint64),
        num_samples_per_file=spec.num_samples_per_file,
        whole_file=fmt.WHOLE_FILE,
        table=_table_from_arrays(a),
        file_crc32c=a.get("file_crc32c"),
        range_crc32c=a.get("range_crc32c"),
        meta=saved.meta,
    )


def load_saved(spec: DatasetSpec, split: str, check: bool = True) -> Optional[Manifest]:
    """The saved manifest of a split when it matches the spec's layout (else None)."""
    path = manifest_path(spec, split)
    try:
        a = read_manifest_file(path)
    except (OSError, ValueError, KeyError):
        return None
    meta = a.meta
    want = _layout_meta(spec, split)
    if any(meta.get(k) != v for k, v in want.items()):
        return None
    if meta.get("canonical", True):
        paths = file_paths(spec, split)
    else:
        root = split_folder(spec, split) + "/"
        paths = [root + str(n) for n in a.arrays["names"]]
    if len(paths) != a.arrays["file_size"].size:
        return None
    m = _manifest_from_arrays(spec, split, a, paths)
    if check and paths:
        for i in {0, len(paths) - 1}:
            try:
                if os.stat(paths[i]).st_size != int(m.file_size[i]):
                    return None
            except OSError:
                return None
    return m


def resolve_paths(spec: DatasetSpec, split: str) -> List[str]:
    """The files of a split: DLIO's names when they exist, else (a dataset generated with more
    files) DLIO's own listing rule: sorted names ending in the format, the first N used."""
    split = split_key(split)
    n = spec.num_files(split)
    folder = split_folder(spec, split)
    if n == 0:
        return []
    if not os.path.isdir(folder):
        raise DatasetError(
            f"{folder}: no such folder, expected {n} {spec.format} file(s) for "
            f"num_files_{'train' if split == 'train' else 'eval'}={n}; generate the dataset first"
        )
    paths = file_paths(spec, split)
    if os.path.exists(paths[0]) and os.path.exists(paths[-1]):
        return paths
    listed = _list_like_dlio(spec, split)
    if len(listed) < n:
        raise DatasetError(
            f"{folder}: found {len(listed)} {spec.format} file(s) but "
            f"num_files_{'train' if split == 'train' else 'eval'} is {n}; "
            "generate the dataset (or lower the file count)"
        )
    return listed[:n]


def _list_like_dlio(spec: DatasetSpec, split: str) -> List[str]:
    folder = split_folder(spec, split)
    ext = spec.format
    out: List[str] = []
    if spec.num_subfolders(split) > 1:
        for sub in sorted(os.listdir(folder)):
            p = os.path.join(folder, sub)
            if os.path.isdir(p):
                out.extend(os.path.join(p, e) for e in os.listdir(p) if e.endswith(ext) and not e.startswith("."))
        out.sort(key=os.path.basename)
    else:
        out = sorted(
            os.path.join(folder, e)
            for e in os.listdir(folder)
            if e.endswith(ext) and not e.startswith(".") and os.path.isfile(os.path.join(folder, e))
        )
    return out


def scan_manifest(
    spec: DatasetSpec, split: str, paths: Optional[Sequence[str]] = None, checksum: bool = False
) -> Manifest:
    """Build a split's manifest from the files themselves (stat + the format's extents())."""
    split = split_key(split)
    fmt = get_format(spec.format)
    if paths is None:
        paths = resolve_paths(spec, split)
    sizes = np.zeros(len(paths), np.uint64)
    missing = []
    for i, p in enumerate(paths):
        try:
            st = os.stat(p)
        except FileNotFoundError:
            missing.append(p)
            continue
        if not stat.S_ISREG(st.st_mode):  # reading a FIFO's extents would wait for a writer forever
            raise DatasetError(
                f"{p}: not a regular file (a FIFO, socket or device) in the dataset; "
                "remove it and run dlio-fast generate"
            )
        sizes[i] = st.st_size
    if missing:
        raise DatasetError(
            f"{split_folder(spec, split)}: {len(missing)} of {len(paths)} file(s) missing "
            f"(first: {missing[0]}); generate the dataset first"
        )
    m = Manifest(
        split=split,
        format=spec.format,
        paths=list(paths),
        file_size=sizes,
        num_samples_per_file=spec.num_samples_per_file,
        whole_file=fmt.WHOLE_FILE,
        meta={"gen_key": None, "source": "scan"},
    )
    if not fmt.WHOLE_FILE:
        m.table = ranges.build([_file_ranges(fmt, p, spec) for p in paths])
    if checksum:
        _add_checksums(m)
    return m


def _file_ranges(fmt: Format, path: str, spec: DatasetSpec) -> ranges.FileRanges:
    """One file's sample byte ranges; a file the format cannot parse, or with fewer samples than
    num_samples_per_file, is named (the reader's own error says neither the file nor what to do)."""
    spf = spec.num_samples_per_file
    try:
        samples, offs, lens = fmt.extents(path, spf, spec)
        offs, lens = np.asarray(offs, dtype=np.int64), np.asarray(lens, dtype=np.int64)
        _check_bounds(path, offs, lens)
    except DatasetError:
        raise
    except (ValueError, KeyError, IndexError, TypeError, OSError, EOFError, OverflowError, MemoryError) as e:
        what = e.strerror if isinstance(e, OSError) and e.strerror else " ".join(str(e).split()) or type(e).__name__
        raise DatasetError(
            f"{path}: not a valid {spec.format} file ({what}); check it with dlio-fast verify, "
            "or regenerate with dlio-fast generate"
        ) from None
    have = np.unique(np.asarray(samples)).size if len(samples) else 0
    # a synthetic file is never read: it has no samples; a grouped format's keys are its groups (it checks
    # its rows itself)
    if have < spf and spec.format != "synthetic" and not getattr(fmt, "GROUPED", False):
        raise DatasetError(
            f"{path}: holds {have} sample(s) but dataset.num_samples_per_file = {spf}; set the value "
            "the data was generated with, or regenerate with dlio-fast generate"
        )
    return ranges.compact(samples, offs, lens)


def _check_bounds(path: str, offs: ranges.Ints, lens: ranges.Ints) -> None:
    """Every sample's bytes lie inside the file: a malformed record (a length field of 2^64, an index
    pointing past the end) must not become a read the plan cannot do."""
    size = os.stat(path).st_size
    bad = (offs < 0) | (lens < 0) | (offs > size) | (lens > size - np.minimum(offs, size))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DatasetError(
            f"{path}: malformed: record {i} at offset {int(offs[i])} claims {int(lens[i])} bytes, but the file "
            f"has {size}; check it with dlio-fast verify, or regenerate with dlio-fast generate"
        )


def file_crc(path: str) -> int:
    """The CRC32C of a file's bytes."""
    crc = 0
    with open(path, "rb") as f:
        buf = bytearray(8 << 20)
        mv = memoryview(buf)
        while True:
            n = f.readinto(buf)
            if not n:
                break
            crc = _core.crc32c(mv[:n], crc)
    return crc


def range_crcs(path: str, offs: ranges.Ints, lens: ranges.Ints) -> NDArray[np.uint32]:
    """The CRC32C of each byte range of a file."""
    out = np.zeros(len(offs), np.uint32)
    if len(offs) == 0:
        return out
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return out
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            mv = memoryview(mm)
            try:
                for k, (o, n) in enumerate(zip(offs.tolist(), lens.tolist())):
                    out[k] = _core.crc32c(mv[o : o + n])
            finally:
                mv.release()
    return out


def _add_checksums(m: Manifest) -> None:
    m.file_crc32c = np.array([file_crc(p) for p in m.paths], dtype=np.uint32)
    if m.table is not None:
        m.range_crc32c = np.concatenate(
            [range_crcs(p, *m.table.of_file(i)[1:]) for i, p in enumerate(m.paths)] or [np.zeros(0, np.uint32)]
        )


def merge_parts(spec: DatasetSpec, split: str) -> Optional[Manifest]:
    """Merge the per-rank parts a multi-rank generation left (None unless they cover the split)."""
    d = f"{spec.data_folder}/{MANIFEST_DIR}"
    prefix = f"manifest-{split_key(split)}.part-"
    try:
        names = [n for n in os.listdir(d) if n.startswith(prefix) and n.endswith(".npz")]
    except OSError:
        return None
    by_size: Dict[int, Dict[int, str]] = {}  # ranks of the generation -> rank -> its part
    for n in names:
        try:
            r, s = n[len(prefix) : -4].split("-of-")
            by_size.setdefault(int(s), {})[int(r)] = os.path.join(d, n)
        except ValueError:
            continue
    want = _layout_meta(spec, split)
    for size, parts in by_size.items():
        if sorted(parts) != list(range(size)):
            continue
        try:
            loaded = [read_manifest_file(parts[r]) for r in range(size)]
        except (OSError, ValueError, KeyError):
            continue
        if any(any(a.meta.get(k) != v for k, v in want.items()) for a in loaded):
            continue
        keys = {a.meta.get("gen_key") for a in loaded}
        m = _combine(
            spec, split, [(a.meta.get("files") or [], a) for a in loaded], keys.pop() if len(keys) == 1 else None
        )
        if m is not None:
            return m
    return None


def _combine(
    spec: DatasetSpec, split: str, parts: List[Tuple[List[int], Saved]], gen_key: Optional[str]
) -> Optional[Manifest]:
    """parts: (global file indices within the split, arrays) per rank. A part's flat range table
    numbers its files globally; a uniform one lists first offsets in the order of its files."""
    n = spec.num_files(split)
    fmt = get_format(spec.format)
    sizes = np.zeros(n, np.uint64)
    seen = np.zeros(n, bool)
    tables: List[Tuple[NDArray[np.int64], ranges.Table]] = []
    rc: List[NDArray[np.uint32]] = []
    have_fc = all("file_crc32c" in a.arrays for _, a in parts)
    have_rc = all("range_crc32c" in a.arrays for _, a in parts)
    fcs = np.zeros(n, np.uint32)
    for numbers, saved in parts:
        files = np.asarray(numbers, dtype=np.int64)
        a = saved.arrays
        sizes[files] = a["file_size"]
        seen[files] = True
        if have_fc:
            fcs[files] = a["file_crc32c"]
        t = None if fmt.WHOLE_FILE or not files.size else _table_from_arrays(a)  # a rank may have none
        if t is not None:
            tables.append((files, t))
            if have_rc:
                rc.append(a["range_crc32c"])
    if not seen.all():
        return None
    m = Manifest(
        split=split_key(split),
        format=spec.format,
        paths=file_paths(spec, split),
        file_size=sizes,
        num_samples_per_file=spec.num_samples_per_file,
        whole_file=fmt.WHOLE_FILE,
        meta={"gen_key": gen_key, "source": "generate"},
    )
    if have_fc:
        m.file_crc32c = fcs
    if fmt.WHOLE_FILE:
        return m
    uniform = [(files, t.first) for files, t in tables if t.first is not None]
    shapes = {(t.stride, t.length, t.count) for _, t in tables}
    if len(shapes) == 1 and len(uniform) == len(tables):
        stride, length, count = shapes.pop()
        first = np.zeros(n, np.uint64)
        for files, t_first in uniform:
            first[files] = t_first
        m.table = ranges.Table(first=first, stride=stride, length=length, count=count)
        if not (have_rc and rc):
            return m
    # flat, or checksums to put in (file, sample) order: the parts' ranges with global file numbers
    cols: List[Tuple[ranges.Ints, ...]] = []
    for files, t in tables:
        tf, ts, to, tl = t.flat(len(files))
        cols.append((files[tf.astype(np.int64)] if t.uniform else tf.astype(np.int64), ts, to, tl))
    f, smp, o, ln = (np.concatenate([c[k] for c in cols]) if cols else np.zeros(0, np.int64) for k in range(4))
    order = np.lexsort((o, smp, f))
    if m.table is None:
        m.table = ranges.Table(
            file=f[order].astype(np.uint32),
            sample=smp[order].astype(np.uint32),
            offset=o[order].astype(np.uint64),
            size=ln[order].astype(np.uint64),
        )
    if have_rc and rc:
        m.range_crc32c = np.concatenate(rc)[order].astype(np.uint32)
    return m


def recorded(spec: DatasetSpec, split: str) -> Manifest:
    """The manifest a run reads a split by: the saved one (its files not stat'ed here: the caller checks them all), else
    load_manifest's."""
    saved = load_saved(spec, split, check=False)
    return saved if saved is not None else load_manifest(spec, split)


def load_manifest(spec: DatasetSpec, split: str, cache: bool = True, checksum: bool = False) -> Manifest:
    """The manifest of one split: the saved one when it matches, else merged from per-rank parts,
    else built by scanning the files (and saved when the folder is writable and cache is True)."""
    split = split_key(split)
    if spec.num_files(split) == 0:
        fmt = get_format(spec.format)
        m = Manifest(
            split=split,
            format=spec.format,
            paths=[],
            file_size=np.zeros(0, np.uint64),
            num_samples_per_file=spec.num_samples_per_file,
            whole_file=fmt.WHOLE_FILE,
        )
        if not fmt.WHOLE_FILE:
            m.table = ranges.build([])
        return m
    saved = None if _parts_newer(spec, split) else load_saved(spec, split)
    if saved is not None and (not checksum or saved.file_crc32c is not None):
        return saved
    merged = merge_parts(spec, split)
    if merged is not None and (not checksum or merged.file_crc32c is not None):
        if _quick_check(merged):
            _try_save(spec, merged, cache)
            return merged
    m = scan_manifest(spec, split, checksum=checksum)
    # A manifest written at generation is the record of what the files should be: a scan of files
    # that changed since must not replace it (that would make a truncated file look complete).
    if load_saved(spec, split, check=False) is None:
        _try_save(spec, m, cache)
    return m


def _parts_newer(spec: DatasetSpec, split: str) -> bool:
    """True when a multi-rank generation left parts newer than the saved manifest."""
    d = f"{spec.data_folder}/{MANIFEST_DIR}"
    prefix = f"manifest-{split_key(split)}.part-"
    try:
        parts = [os.path.join(d, n) for n in os.listdir(d) if n.startswith(prefix)]
        if not parts:
            return False
        full = manifest_path(spec, split)
        return not os.path.exists(full) or max(os.stat(p).st_mtime_ns for p in parts) > os.stat(full).st_mtime_ns
    except OSError:
        return False


def _quick_check(m: Manifest) -> bool:
    for i in {0, m.nfiles - 1}:
        try:
            if os.stat(m.paths[i]).st_size != int(m.file_size[i]):
                return False
        except OSError:
            return False
    return True


def _try_save(spec: DatasetSpec, m: Manifest, cache: bool) -> None:
    if not cache:
        return
    try:
        save_manifest(spec, m)
    except OSError:
        pass  # a read-only dataset: scan again next time
