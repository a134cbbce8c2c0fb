"""The dataset's shape on disk: DLIO's layout, file names, per-file dimensions and sizes.

Layout (DLIO `data_generator/data_generator.py`):
  {data_folder}/train/{prefix}_{i:0Nd}_of_{N}.{format}        N = files of the split, width len(str(N))
  {data_folder}/train/{i % S:0Md}/{prefix}_{i:0Nd}_of_{N}.{format}   when S = num_subfolders > 1,
                                                               M = len(str(S))
  {data_folder}/valid/...                                      the same for evaluation files
Shapes: np.random.seed(10), then 2*(train+eval) side lengths from N(D, sigma_d) (D = int(sqrt(L)),
sigma_d = stdev / (2 sqrt(L))), truncated to int and clipped at >= 1; file i of the combined
train-then-eval list uses sides (2i, 2i+1). With record_dims every file has that shape.
"""

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any, Dict

import numpy as np

from dlio.base.errors import ConfigError
from dlio.base.same_names import same_named
from dlio.config import Config
from dlio.dataset import ranges
from dlio.dataset.formats import get_format
from dlio.system.memcheck import STR_OVERHEAD, check_fits

SPLITS = ("train", "valid")
MANIFEST_DIR = ".dlio-fast"
MANIFEST_VERSION = 1
DLIO_SHAPE_SEED = 10
DIALECTS = ("2.0.0", "current")
# Formats whose bytes differ between DLIO 2.0.0 and current (HDF5 dataset names, CSV header and index
# column, TFRecord's `size` feature): only their generation key includes the dialect.
DIALECT_FORMATS = ("hdf5", "csv", "tfrecord")


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
    dialect: str = "current"  # the DLIO version whose layout is written: "2.0.0" or "current" (see formats/hdf5, csv)
    # parquet (dlio.dataset.formats.parquet): columns as (name, dtype, size, read) tuples, () for DLIO's one
    # uint8 list column; rows per row group and per write; how a reader reads; the columns read when
    # storage.storage_options.columns names them (else the columns' read flags decide)
    parquet_columns: tuple = ()
    parquet_row_group_size: int = 1024
    parquet_generation_batch_size: int = 0
    parquet_read_mode: str = "default"
    parquet_read: tuple = ()

    def __post_init__(self):
        s = object.__setattr__
        folder = str(self.data_folder)
        s(self, "data_folder", folder.rstrip("/") or "/")
        s(self, "format", str(self.format).lower())
        get_format(self.format)  # raises on an unknown format
        for name in ("record_dims", "hdf5_chunk_dims", "hdf5_max_shape"):
            s(self, name, _tuple(getattr(self, name)))
        for name in (
            "num_files_train",
            "num_files_eval",
            "num_samples_per_file",
            "num_subfolders_train",
            "num_subfolders_eval",
            "compression_level",
            "hdf5_num_dset_per_record",
            "seed_content",
            "parquet_row_group_size",
            "parquet_generation_batch_size",
        ):
            s(self, name, int(getattr(self, name) or 0))
        s(self, "parquet_columns", tuple(tuple(c) for c in self.parquet_columns))
        s(self, "parquet_read", tuple(str(c) for c in self.parquet_read))
        s(self, "compression", str(self.compression or "none").lower())
        if self.dialect not in DIALECTS:
            raise ValueError(f"dialect must be one of {', '.join(DIALECTS)}, not {self.dialect!r}")
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
        _check_prefix(str(self.file_prefix))

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
            key = {
                "chunk_dims": "hdf5_chunk_dims",
                "num_dset_per_record": "hdf5_num_dset_per_record",
                "max_shape": "hdf5_max_shape",
            }.get(k)
            if key:
                kw[key] = v
        kw.update(over)
        return cls(**kw)

    @property
    def total_files(self):
        return self.num_files_train + self.num_files_eval

    def num_files(self, split):
        return self.num_files_train if split_key(split) == "train" else self.num_files_eval

    def num_subfolders(self, split):
        return self.num_subfolders_train if split_key(split) == "train" else self.num_subfolders_eval

    def generation_key(self):
        """What decides file sizes and layout (not content): a changed key means remake."""
        # the keys taken as they are, and the lists: json.dumps sorts them, so the text does not depend on this order
        keys = _AS_IS + ("record_dims", "hdf5_chunk_dims", "hdf5_num_dset_per_record", "hdf5_max_shape")
        if self.format in DIALECT_FORMATS:
            keys += ("dialect",)
        out = {k: _jsonable(getattr(self, k)) for k in keys}
        if self.format == "parquet":  # the columns as written (not what is read), the row groups
            out["parquet"] = [[list(c[:3]) for c in self.parquet_columns], self.parquet_row_group_size]
            out["parquet"].append(self.parquet_generation_batch_size)
        return json.dumps(out, sort_keys=True)

    def reader_view(self):
        """What, of the files, a reader reads, where the format lets a config choose (parquet: its
        columns and read mode); None otherwise. A saved manifest holds the ranges of one view."""
        if self.format != "parquet":
            return None
        from dlio.dataset.formats.parquet import read_columns

        return [self.parquet_read_mode, read_columns(self)]


def _jsonable(v):
    if isinstance(v, tuple):
        return list(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def split_key(split):
    s = str(split).lower()
    if s in ("train", "training"):
        return "train"
    if s in ("valid", "eval", "evaluation", "validation"):
        return "valid"
    raise ValueError(f"split must be 'train' or 'valid' (eval), not {split!r}")


# ---------------------------------------------------------------------------------------------
# names and shapes


def _check_prefix(prefix):
    """File names are joined to the data folder: a prefix must not lead out of it."""
    if not prefix or "/" in prefix or ".." in prefix or "\0" in prefix:
        raise ConfigError(
            f"dataset.file_prefix = {prefix!r}: must be a plain file name part (no '/', no '..', "
            "not empty), e.g. 'img'",
            key="dataset.file_prefix",
            value=prefix,
        )


def split_folder(spec, split):
    return f"{spec.data_folder}/{split_key(split)}"


def check_names_fit(spec, split, n, name_len, per_sample=True):
    """The list of names (and the manifest's byte ranges, when it lists them) must fit in memory: an
    absurd num_files or --scale is refused here, with the key and the amount, not by the OOM killer.
    per_sample False: only per-file arrays are made (the drawn shapes). What a rank plans is checked
    apart (dlio.train.plan_size): it depends on the steps, not on the dataset's sample count."""
    per_file = name_len + STR_OVERHEAD + 16 * max(1, len(spec.record_dims))
    nbytes = float(n) * per_file + (float(n) * listed_ranges_per_file(spec) * 24 if per_sample else 0.0)
    key = "dataset.num_files_train" if split == "train" else "dataset.num_files_eval"
    check_fits(
        nbytes, f"{key} = {n} ({spec.num_samples_per_file} samples per file)", "use fewer files or a smaller --scale"
    )


def listed_ranges_per_file(spec):
    """Byte ranges per file the manifest lists (24 bytes each, dlio.dataset.ranges): none for formats
    that read whole files, and none for files of fixed-size records (ranges.Uniform: one first offset
    per file, however many samples: DLIO 2.0.0's dlrm.yaml has 4,195,198,976 in one file); one per
    row group and column for parquet; else one per sample."""
    fmt = get_format(spec.format)
    spf = spec.num_samples_per_file
    if fmt.WHOLE_FILE or spec.format == "synthetic":
        return 0
    if getattr(fmt, "GROUPED", False):
        return -(-spf // max(1, spec.parquet_row_group_size)) * max(1, len(spec.parquet_columns)) + 1
    layout = getattr(fmt.module, "layout_extents", None)
    if layout is not None and not spec.record_length_bytes_stdev:  # every file has the same shape
        dims = spec.record_dims or (int(math.sqrt(float(spec.record_length_bytes))),) * 2
        extents = layout(dims, min(spf, 3), spec)  # None: a layout it cannot tell (chunked hdf5)
        if extents is not None and isinstance(ranges.compact(*extents), ranges.Uniform):
            return 0
    return spf


def split_dirs(spec, split):
    """The folders a split's files go to: its subfolders 0..S-1 (zero-padded to one width) when
    S = num_subfolders > 1, else the split's folder."""
    base = split_folder(spec, split_key(split))
    s = spec.num_subfolders(split_key(split))
    return [f"{base}/{str(k).zfill(len(str(s)))}" for k in range(s)] if s > 1 else [base]


def file_paths(spec, split):
    """DLIO's file names for one split, in index order (which is also DLIO's sorted listing)."""
    split = split_key(split)
    n = spec.num_files(split)
    dirs = split_dirs(spec, split)
    nd = len(str(n))
    pre, ext = spec.file_prefix, spec.format
    check_names_fit(spec, split, n, len(f"{split_folder(spec, split)}/{'0' * 8}/{pre}_{'0' * nd}_of_{n}.{ext}"))
    return [f"{dirs[i % len(dirs)]}/{pre}_{str(i).zfill(nd)}_of_{n}.{ext}" for i in range(n)]


def all_dims(spec):
    """Drawn shape of every file of the combined train-then-eval list: int64 (total, ndim)."""
    n = spec.total_files
    for split in ("train", "eval"):
        check_names_fit(spec, split, spec.num_files(split), 64, per_sample=False)
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
    if split_key(split) == "train":
        return dims[: spec.num_files_train]
    return dims[spec.num_files_train :]


def estimated_sizes(spec, dims):
    fmt = get_format(spec.format)
    if len(dims) == 0:
        return np.zeros(0, np.int64)
    est = np.asarray(fmt.estimate_sizes(dims, spec.num_samples_per_file, spec), dtype=np.float64)
    if spec.format == "tfrecord":
        est = est + 16.0 * spec.num_samples_per_file  # the .idx text
    return est


def dataset_bytes(spec):
    """Estimated bytes on disk of the whole dataset (train + eval), index files included."""
    return int(np.ceil(estimated_sizes(spec, all_dims(spec)).sum()))


# ---------------------------------------------------------------------------------------------


# The dataset keys a DatasetSpec takes as they are (the rest are converted or come from other sections).
# Each decides the files' sizes or layout, so each is in the generation key too (DatasetSpec.generation_key).
_AS_IS = (
    "format",
    "num_files_train",
    "num_files_eval",
    "num_samples_per_file",
    "record_length_bytes",
    "record_length_bytes_stdev",
    "record_element_type",
    "num_subfolders_train",
    "num_subfolders_eval",
    "file_prefix",
    "compression",
    "compression_level",
)


def dataset_spec(cfg: Config) -> DatasetSpec:
    """The DatasetSpec of a resolved config (its dataset section and the content seed)."""
    d = cfg.dataset
    return DatasetSpec(
        data_folder=d.data_folder or ".",  # "/" stays "/" (DatasetSpec strips a trailing "/")
        **same_named(d, _AS_IS),
        record_dims=tuple(d.record_dims),
        hdf5_chunk_dims=tuple(d.hdf5.chunk_dims),
        hdf5_num_dset_per_record=d.hdf5.num_dset_per_record,
        hdf5_max_shape=tuple(d.hdf5.max_shape),
        seed_content=cfg.dlio_fast.seed,
        dialect=cfg.dlio_fast.dialect if cfg.dlio_fast.dialect in DIALECTS else "current",  # "auto" is resolved by load
        **_parquet_fields(cfg),
    )


def _parquet_fields(cfg: Config) -> Dict[str, Any]:
    """The parquet section of a config as DatasetSpec fields (checked: dlio.dataset.formats.parquet)."""
    if cfg.dataset.format != "parquet":
        return {}
    from dlio.dataset.formats.parquet import spec_fields

    return spec_fields(cfg)
