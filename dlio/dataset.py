"""The dataset on disk: DLIO's layout and shapes, the generation driver, and the manifest.

Layout (DLIO `data_generator/data_generator.py`):
  {data_folder}/train/{prefix}_{i:0Nd}_of_{N}.{format}        N = files of the split, width len(str(N))
  {data_folder}/train/{i % S:0Md}/{prefix}_{i:0Nd}_of_{N}.{format}   when S = num_subfolders > 1,
                                                               M = len(str(S))
  {data_folder}/valid/...                                      the same for evaluation files
Shapes: np.random.seed(10), then 2*(train+eval) side lengths from N(D, sigma_d) (D = int(sqrt(L)),
sigma_d = stdev / (2 sqrt(L))), truncated to int and clipped at >= 1; file i of the combined
train-then-eval list uses sides (2i, 2i+1). With record_dims every file has that shape.

The manifest gives the planner, per split, the size of every file and, for formats where a sample
is not the whole file (hdf5, tfrecord, indexed_binary), the byte ranges a real reader touches
per sample. It is written by `generate()` and, for a dataset made by someone else (DLIO), built by
scanning the files and cached when the folder is writable:
  {data_folder}/.dlio-fast/manifest-{train|valid}.npz
"""
import dataclasses
import errno
import json
import math
import mmap
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from dlio import ranges
from dlio.errors import DlioError
from dlio.output import TMP_MARK, atomic_path
from dlio.formats import get_format, mix_seed

SPLITS = ("train", "valid")
MANIFEST_DIR = ".dlio-fast"
MANIFEST_VERSION = 1
DLIO_SHAPE_SEED = 10


class DatasetError(DlioError):
    """The dataset is missing, incomplete or unusable."""


class InsufficientSpace(DatasetError):
    """Not enough free space for what remains to be generated."""

    def __init__(self, needed, free, suggested_scale, folder=""):
        self.needed = int(needed)
        self.free = int(free)
        self.suggested_scale = float(suggested_scale)
        self.folder = folder
        super().__init__(
            f"{folder or 'data folder'}: generating the dataset needs {self.needed / 2**30:.2f} GiB more "
            f"but only {self.free / 2**30:.2f} GiB is free; free some space, use another data_folder, "
            f"or scale the dataset down (e.g. num_files x {self.suggested_scale:.3g})")


# ---------------------------------------------------------------------------------------------
# the spec

def _tuple(v):
    if v is None:
        return ()
    if isinstance(v, (int, np.integer)):
        return (int(v),)
    return tuple(int(x) for x in v)


@dataclass(frozen=True)
class DatasetSpec:
    """What the dataset looks like (DLIO's `dataset` section, names as in its current schema)."""
    data_folder: str = "./data"
    format: str = "tfrecord"
    num_files_train: int = 8
    num_files_eval: int = 0
    num_samples_per_file: int = 1
    record_length_bytes: float = 65536
    record_length_bytes_stdev: float = 0.0
    record_dims: tuple = ()
    record_element_type: str = "uint8"
    num_subfolders_train: int = 0
    num_subfolders_eval: int = 0
    file_prefix: str = "img"
    compression: str = "none"
    compression_level: int = 4
    hdf5_chunk_dims: tuple = ()
    hdf5_num_dset_per_record: int = 1
    hdf5_max_shape: tuple = ()
    seed_content: int = 0

    def __post_init__(self):
        s = object.__setattr__
        folder = str(self.data_folder)
        s(self, "data_folder", folder.rstrip("/") or "/")
        s(self, "format", str(self.format).lower())
        get_format(self.format)  # raises on an unknown format
        for name in ("record_dims", "hdf5_chunk_dims", "hdf5_max_shape"):
            s(self, name, _tuple(getattr(self, name)))
        for name in ("num_files_train", "num_files_eval", "num_samples_per_file", "num_subfolders_train",
                     "num_subfolders_eval", "compression_level", "hdf5_num_dset_per_record", "seed_content"):
            s(self, name, int(getattr(self, name) or 0))
        s(self, "compression", str(self.compression or "none").lower())
        if self.format in ("jpeg", "png"):
            s(self, "record_element_type", "uint8")  # DLIO forces uint8 for images
        s(self, "record_element_type", np.dtype(self.record_element_type).name)
        if self.num_files_train < 0 or self.num_files_eval < 0:
            raise ValueError("num_files_train and num_files_eval must be >= 0")
        if self.num_samples_per_file < 1:
            raise ValueError("num_samples_per_file must be >= 1")
        if not self.record_dims and float(self.record_length_bytes) < 1:
            raise ValueError("record_length_bytes must be >= 1")
        if self.hdf5_num_dset_per_record < 1:
            s(self, "hdf5_num_dset_per_record", 1)

    @classmethod
    def from_dict(cls, d, **over):
        """From a DLIO `dataset` section (either dialect) plus keyword overrides."""
        d = dict(d or {})
        h5 = d.pop("hdf5", None) or {}
        alias = {"record_length": "record_length_bytes", "record_length_stdev": "record_length_bytes_stdev"}
        kw = {}
        names = {f.name for f in dataclasses.fields(cls)}
        for k, v in d.items():
            k = alias.get(k, k)
            if k in names:
                kw[k] = v
        for k, v in h5.items():
            key = {"chunk_dims": "hdf5_chunk_dims", "num_dset_per_record": "hdf5_num_dset_per_record",
                   "max_shape": "hdf5_max_shape"}.get(k)
            if key:
                kw[key] = v
        kw.update(over)
        return cls(**kw)

    @property
    def total_files(self):
        return self.num_files_train + self.num_files_eval

    def num_files(self, split):
        return self.num_files_train if _split(split) == "train" else self.num_files_eval

    def num_subfolders(self, split):
        return self.num_subfolders_train if _split(split) == "train" else self.num_subfolders_eval

    def generation_key(self):
        """What decides file sizes and layout (not content): a changed key means remake."""
        keys = ("format", "num_files_train", "num_files_eval", "num_samples_per_file", "record_length_bytes",
                "record_length_bytes_stdev", "record_dims", "record_element_type", "num_subfolders_train",
                "num_subfolders_eval", "file_prefix", "compression", "compression_level", "hdf5_chunk_dims",
                "hdf5_num_dset_per_record", "hdf5_max_shape")
        return json.dumps({k: _jsonable(getattr(self, k)) for k in keys}, sort_keys=True)


def _jsonable(v):
    if isinstance(v, tuple):
        return list(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _split(split):
    s = str(split).lower()
    if s in ("train", "training"):
        return "train"
    if s in ("valid", "eval", "evaluation", "validation"):
        return "valid"
    raise ValueError(f"split must be 'train' or 'valid' (eval), not {split!r}")


# ---------------------------------------------------------------------------------------------
# names and shapes

def split_folder(spec, split):
    return f"{spec.data_folder}/{_split(split)}"


def file_paths(spec, split):
    """DLIO's file names for one split, in index order (which is also DLIO's sorted listing)."""
    split = _split(split)
    n = spec.num_files(split)
    s = spec.num_subfolders(split)
    base = split_folder(spec, split)
    nd = len(str(n))
    pre, ext = spec.file_prefix, spec.format
    if s > 1:
        ns = len(str(s))
        return [f"{base}/{str(i % s).zfill(ns)}/{pre}_{str(i).zfill(nd)}_of_{n}.{ext}" for i in range(n)]
    return [f"{base}/{pre}_{str(i).zfill(nd)}_of_{n}.{ext}" for i in range(n)]


def all_dims(spec):
    """Drawn shape of every file of the combined train-then-eval list: int64 (total, ndim)."""
    n = spec.total_files
    L = float(spec.record_length_bytes)
    stdev = float(spec.record_length_bytes_stdev or 0)
    if spec.record_dims:
        rd = np.array(spec.record_dims, dtype=np.int64)
        if stdev > 0 and n:
            sigma = stdev / 2.0 / L
            draws = np.random.RandomState(DLIO_SHAPE_SEED).normal(loc=rd, scale=sigma, size=(2 * n, rd.size))
            return np.maximum(draws.astype(np.int64), 1)[0::2].copy()
        return np.tile(rd, (n, 1))
    d = int(math.sqrt(L))
    if stdev > 0 and n:
        sigma = stdev / 2.0 / math.sqrt(L)
        draws = np.random.RandomState(DLIO_SHAPE_SEED).normal(d, sigma, 2 * n)
        return np.maximum(draws.astype(np.int64), 1).reshape(n, 2)
    return np.full((n, 2), d, dtype=np.int64)


def file_dims(spec, split):
    """Drawn shape of every file of one split: int64 (nfiles, ndim)."""
    dims = all_dims(spec)
    if _split(split) == "train":
        return dims[:spec.num_files_train]
    return dims[spec.num_files_train:]


def _estimates(spec, dims):
    fmt = get_format(spec.format)
    if len(dims) == 0:
        return np.zeros(0, np.int64)
    est = np.asarray(fmt.estimate_sizes(dims, spec.num_samples_per_file, spec), dtype=np.float64)
    if spec.format == "tfrecord":
        est = est + 16.0 * spec.num_samples_per_file  # the .idx text
    return est


def dataset_bytes(spec):
    """Estimated bytes on disk of the whole dataset (train + eval), index files included."""
    return int(np.ceil(_estimates(spec, all_dims(spec)).sum()))


# ---------------------------------------------------------------------------------------------
# the manifest

@dataclass
class Manifest:
    """Per split: file paths and sizes, and (non-whole-file formats) per-sample byte ranges.

    table (dlio.ranges.Table) holds the ranges, in O(files) when the files are regular; it is None
    for whole-file formats (npz, npy, jpeg, png, csv), where every sample reads (0, file_size):
    see ranges(). range_crc32c, when present, follows the flat order of table.flat()."""
    split: str
    format: str
    paths: list
    file_size: np.ndarray
    num_samples_per_file: int
    whole_file: bool
    table: Optional[ranges.Table] = None
    file_crc32c: np.ndarray = None
    range_crc32c: np.ndarray = None
    meta: dict = field(default_factory=dict)

    @property
    def nfiles(self):
        return int(self.file_size.size)

    @property
    def total_bytes(self):
        return int(self.file_size.sum())

    def ranges(self):
        """(range_file, range_sample, range_offset, range_length) for every format: O(ranges)."""
        if self.table is not None:
            return self.table.flat(self.nfiles)
        spf = self.num_samples_per_file
        n = self.nfiles
        rf = np.repeat(np.arange(n, dtype=np.uint32), spf)
        rs = np.tile(np.arange(spf, dtype=np.uint32), n)
        return rf, rs, np.zeros(n * spf, np.uint64), np.repeat(self.file_size.astype(np.uint64), spf)


def manifest_path(spec, split, part=None):
    d = f"{spec.data_folder}/{MANIFEST_DIR}"
    if part is None:
        return f"{d}/manifest-{_split(split)}.npz"
    rank, size = part
    return f"{d}/manifest-{_split(split)}.part-{rank}-of-{size}.npz"


def _layout_meta(spec, split):
    split = _split(split)
    return {"version": MANIFEST_VERSION, "format": spec.format, "split": split, "nfiles": spec.num_files(split),
            "spf": spec.num_samples_per_file, "prefix": spec.file_prefix,
            "subfolders": spec.num_subfolders(split)}


def _save_npz(path, arrays):
    d, name = os.path.split(path)
    os.makedirs(d, exist_ok=True)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)


def save_manifest(spec, m, part=None):
    meta = dict(m.meta)
    meta.update(_layout_meta(spec, m.split))
    canonical = m.paths == file_paths(spec, m.split) if part is None else True
    meta["canonical"] = bool(canonical)
    arrays = {"meta": np.array(json.dumps(meta)), "file_size": m.file_size.astype(np.uint64)}
    if not canonical:
        root = split_folder(spec, m.split) + "/"
        arrays["names"] = np.array([p[len(root):] if p.startswith(root) else p for p in m.paths])
    arrays.update(_table_arrays(m.table))
    for k in ("file_crc32c", "range_crc32c"):
        v = getattr(m, k)
        if v is not None:
            arrays[k] = v
    _save_npz(manifest_path(spec, m.split, part), arrays)


def _table_arrays(t):
    """The npz arrays of a range table (flat: the four range_* columns of earlier versions)."""
    if t is None:
        return {}
    if t.uniform:
        return {"range_first": t.first, "range_uniform": np.array([t.stride, t.length, t.count], np.int64)}
    return {"range_file": t.file, "range_sample": t.sample, "range_offset": t.offset, "range_length": t.size}


def _table_from_arrays(a):
    if "range_first" in a:
        stride, length, count = (int(x) for x in a["range_uniform"])
        return ranges.Table(first=a["range_first"].astype(np.uint64), stride=stride, length=length, count=count)
    if "range_file" in a:
        return ranges.Table(file=a["range_file"], sample=a["range_sample"], offset=a["range_offset"],
                            size=a["range_length"])
    return None


def _read_manifest_file(path):
    with np.load(path, allow_pickle=False) as z:
        out = {k: z[k] for k in z.files}
    out["meta"] = json.loads(str(out["meta"]))
    return out


def _manifest_from_arrays(spec, split, a, paths):
    fmt = get_format(spec.format)
    m = Manifest(split=_split(split), format=spec.format, paths=paths, file_size=a["file_size"].astype(np.uint64),
                 num_samples_per_file=spec.num_samples_per_file, whole_file=fmt.WHOLE_FILE, meta=a["meta"])
    m.table = _table_from_arrays(a)
    for k in ("file_crc32c", "range_crc32c"):
        if k in a:
            setattr(m, k, a[k])
    return m


def _load_saved(spec, split, check=True):
    """The saved manifest of a split when it matches the spec's layout (else None)."""
    path = manifest_path(spec, split)
    try:
        a = _read_manifest_file(path)
    except (OSError, ValueError, KeyError):
        return None
    meta = a["meta"]
    want = _layout_meta(spec, split)
    if any(meta.get(k) != v for k, v in want.items()):
        return None
    if meta.get("canonical", True):
        paths = file_paths(spec, split)
    else:
        root = split_folder(spec, split) + "/"
        paths = [root + str(n) for n in a["names"]]
    if len(paths) != a["file_size"].size:
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


def resolve_paths(spec, split):
    """The files of a split: DLIO's names when they exist, else (a dataset generated with more
    files) DLIO's own listing rule: sorted names ending in the format, the first N used."""
    split = _split(split)
    n = spec.num_files(split)
    folder = split_folder(spec, split)
    if n == 0:
        return []
    if not os.path.isdir(folder):
        raise DatasetError(f"{folder}: no such folder, expected {n} {spec.format} file(s) for "
                           f"num_files_{'train' if split == 'train' else 'eval'}={n}; generate the dataset first")
    paths = file_paths(spec, split)
    if os.path.exists(paths[0]) and os.path.exists(paths[-1]):
        return paths
    listed = _list_like_dlio(spec, split)
    if len(listed) < n:
        raise DatasetError(f"{folder}: found {len(listed)} {spec.format} file(s) but "
                           f"num_files_{'train' if split == 'train' else 'eval'} is {n}; "
                           "generate the dataset (or lower the file count)")
    return listed[:n]


def _list_like_dlio(spec, split):
    folder = split_folder(spec, split)
    ext = spec.format
    out = []
    if spec.num_subfolders(split) > 1:
        for sub in sorted(os.listdir(folder)):
            p = os.path.join(folder, sub)
            if os.path.isdir(p):
                out.extend(os.path.join(p, e) for e in os.listdir(p) if e.endswith(ext) and not e.startswith("."))
        out.sort(key=os.path.basename)
    else:
        out = sorted(os.path.join(folder, e) for e in os.listdir(folder)
                     if e.endswith(ext) and not e.startswith(".") and os.path.isfile(os.path.join(folder, e)))
    return out


def scan_manifest(spec, split, paths=None, checksum=False):
    """Build a split's manifest from the files themselves (stat + the format's extents())."""
    split = _split(split)
    fmt = get_format(spec.format)
    if paths is None:
        paths = resolve_paths(spec, split)
    sizes = np.zeros(len(paths), np.uint64)
    missing = []
    for i, p in enumerate(paths):
        try:
            sizes[i] = os.stat(p).st_size
        except FileNotFoundError:
            missing.append(p)
    if missing:
        raise DatasetError(f"{split_folder(spec, split)}: {len(missing)} of {len(paths)} file(s) missing "
                           f"(first: {missing[0]}); generate the dataset first")
    m = Manifest(split=split, format=spec.format, paths=list(paths), file_size=sizes,
                 num_samples_per_file=spec.num_samples_per_file, whole_file=fmt.WHOLE_FILE,
                 meta={"gen_key": None, "source": "scan"})
    if not fmt.WHOLE_FILE:
        m.table = ranges.build([ranges.compact(*fmt.extents(p, spec.num_samples_per_file, spec)) for p in paths])
    if checksum:
        _add_checksums(m)
    return m


def _file_crc(path):
    from dlio import _core
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


def _range_crcs(path, offs, lens):
    from dlio import _core
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
                    out[k] = _core.crc32c(mv[o:o + n])
            finally:
                mv.release()
    return out


def _add_checksums(m):
    m.file_crc32c = np.array([_file_crc(p) for p in m.paths], dtype=np.uint32)
    if m.table is not None:
        m.range_crc32c = np.concatenate([_range_crcs(p, *m.table.of_file(i)[1:]) for i, p in enumerate(m.paths)]
                                        or [np.zeros(0, np.uint32)])


def _merge_parts(spec, split):
    """Merge the per-rank parts a multi-rank generation left (None unless they cover the split)."""
    d = f"{spec.data_folder}/{MANIFEST_DIR}"
    prefix = f"manifest-{_split(split)}.part-"
    try:
        names = [n for n in os.listdir(d) if n.startswith(prefix) and n.endswith(".npz")]
    except OSError:
        return None
    by_size = {}
    for n in names:
        try:
            r, s = n[len(prefix):-4].split("-of-")
            by_size.setdefault(int(s), {})[int(r)] = os.path.join(d, n)
        except ValueError:
            continue
    want = _layout_meta(spec, split)
    for size, parts in by_size.items():
        if sorted(parts) != list(range(size)):
            continue
        try:
            loaded = [_read_manifest_file(parts[r]) for r in range(size)]
        except (OSError, ValueError, KeyError):
            continue
        if any(any(a["meta"].get(k) != v for k, v in want.items()) for a in loaded):
            continue
        keys = {a["meta"].get("gen_key") for a in loaded}
        m = _combine(spec, split, [(a["meta"]["files"], a) for a in loaded], keys.pop() if len(keys) == 1 else None)
        if m is not None:
            return m
    return None


def _combine(spec, split, parts, gen_key):
    """parts: (global file indices within the split, arrays) per rank. A part's flat range table
    numbers its files globally; a uniform one lists first offsets in the order of its files."""
    n = spec.num_files(split)
    fmt = get_format(spec.format)
    sizes = np.zeros(n, np.uint64)
    seen = np.zeros(n, bool)
    tables, rc = [], []
    have_fc = all("file_crc32c" in a for _, a in parts)
    have_rc = all("range_crc32c" in a for _, a in parts)
    fcs = np.zeros(n, np.uint32)
    for files, a in parts:
        files = np.asarray(files, dtype=np.int64)
        sizes[files] = a["file_size"]
        seen[files] = True
        if have_fc:
            fcs[files] = a["file_crc32c"]
        t = None if fmt.WHOLE_FILE else _table_from_arrays(a)
        if t is not None:
            tables.append((files, t))
            if have_rc:
                rc.append(a["range_crc32c"])
    if not seen.all():
        return None
    m = Manifest(split=_split(split), format=spec.format, paths=file_paths(spec, split), file_size=sizes,
                 num_samples_per_file=spec.num_samples_per_file, whole_file=fmt.WHOLE_FILE,
                 meta={"gen_key": gen_key, "source": "generate"})
    if have_fc:
        m.file_crc32c = fcs
    if fmt.WHOLE_FILE:
        return m
    shapes = {(t.stride, t.length, t.count) if t.uniform else None for _, t in tables}
    if len(shapes) == 1 and None not in shapes:
        stride, length, count = shapes.pop()
        first = np.zeros(n, np.uint64)
        for files, t in tables:
            first[files] = t.first
        m.table = ranges.Table(first=first, stride=stride, length=length, count=count)
        if not (have_rc and rc):
            return m
    # flat, or checksums to put in (file, sample) order: the parts' ranges with global file numbers
    cols = []
    for files, t in tables:
        f, smp, o, ln = t.flat(len(files))
        cols.append((files[f.astype(np.int64)] if t.uniform else f.astype(np.int64), smp, o, ln))
    f, smp, o, ln = (np.concatenate([c[k] for c in cols]) if cols else np.zeros(0, np.int64) for k in range(4))
    order = np.lexsort((o, smp, f))
    if m.table is None:
        m.table = ranges.Table(file=f[order].astype(np.uint32), sample=smp[order].astype(np.uint32),
                               offset=o[order].astype(np.uint64), size=ln[order].astype(np.uint64))
    if have_rc and rc:
        m.range_crc32c = np.concatenate(rc)[order].astype(np.uint32)
    return m


def load_manifest(spec, split, cache=True, checksum=False):
    """The manifest of one split: the saved one when it matches, else merged from per-rank parts,
    else built by scanning the files (and saved when the folder is writable and cache is True)."""
    split = _split(split)
    if spec.num_files(split) == 0:
        fmt = get_format(spec.format)
        m = Manifest(split=split, format=spec.format, paths=[], file_size=np.zeros(0, np.uint64),
                     num_samples_per_file=spec.num_samples_per_file, whole_file=fmt.WHOLE_FILE)
        if not fmt.WHOLE_FILE:
            m.table = ranges.build([])
        return m
    m = None if _parts_newer(spec, split) else _load_saved(spec, split)
    if m is not None and (not checksum or m.file_crc32c is not None):
        return m
    m = _merge_parts(spec, split)
    if m is not None and (not checksum or m.file_crc32c is not None):
        if _quick_check(m):
            _try_save(spec, m, cache)
            return m
    m = scan_manifest(spec, split, checksum=checksum)
    # A manifest written at generation is the record of what the files should be: a scan of files
    # that changed since must not replace it (that would make a truncated file look complete).
    if _load_saved(spec, split, check=False) is None:
        _try_save(spec, m, cache)
    return m


def _parts_newer(spec, split):
    """True when a multi-rank generation left parts newer than the saved manifest."""
    d = f"{spec.data_folder}/{MANIFEST_DIR}"
    prefix = f"manifest-{_split(split)}.part-"
    try:
        parts = [os.path.join(d, n) for n in os.listdir(d) if n.startswith(prefix)]
        if not parts:
            return False
        full = manifest_path(spec, split)
        return not os.path.exists(full) or max(os.stat(p).st_mtime_ns for p in parts) > os.stat(full).st_mtime_ns
    except OSError:
        return False


def _quick_check(m):
    for i in {0, m.nfiles - 1}:
        try:
            if os.stat(m.paths[i]).st_size != int(m.file_size[i]):
                return False
        except OSError:
            return False
    return True


def _try_save(spec, m, cache):
    if not cache:
        return
    try:
        save_manifest(spec, m)
    except OSError:
        pass  # a read-only dataset: scan again next time


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
    os.makedirs(f"{spec.data_folder}/{MANIFEST_DIR}", exist_ok=True)


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
        m = _load_saved(spec, split, check=False) if spec.num_files(split) else None
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
            st = os.stat(p).st_size
        except FileNotFoundError:
            todo.append(i)
            continue
        if recorded[i] >= 0:
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
        need = int(np.ceil(_estimates(spec, dims[np.array(todo)]).sum()))
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
            crcs[i] = _file_crc(p)
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
            remaining = int(np.ceil(_estimates(spec, dims[np.array(left, dtype=np.int64)]).sum())) if left else 0
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
                crcs[i] = _file_crc(paths[i])

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
                    [_range_crcs(paths[i], *ranges.as_arrays(per_file[i])[1:]) for i in idx.tolist()]
                    or [np.zeros(0, np.uint32)])
        if size == 1:
            save_manifest(spec, m)
        else:
            save_manifest(spec, m, part=(rank, size))
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
