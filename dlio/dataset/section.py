"""DatasetSpec: DLIO's `dataset` section as the dataset layer reads it (what the dataset looks like), the
format names it may take and the split names. Apart from dlio.dataset.spec (names, shapes, sizes) so that
the format modules, which read a spec, do not import what imports them."""

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, SupportsInt, Tuple, TypedDict, Union

import numpy as np

from dlio.base.errors import ConfigError

FORMATS = (
    "npz",
    "npy",
    "hdf5",
    "tfrecord",
    "jpeg",
    "png",
    "csv",
    "indexed_binary",
    "mmap_indexed_binary",
    "synthetic",
    "parquet",
)
DIALECTS = ("2.0.0", "current")
# Formats whose bytes differ between DLIO 2.0.0 and current (HDF5 dataset names, CSV header and index
# column, TFRecord's `size` feature): only their generation key includes the dialect.
DIALECT_FORMATS = ("hdf5", "csv", "tfrecord")

# A parquet column as DatasetSpec holds it: (name, dtype, elements per row, read by default)
# (dlio.dataset.formats.parquet.Column)
ColumnFields = Tuple[str, str, int, bool]


class ParquetFields(TypedDict, total=False):
    """DatasetSpec's parquet fields as a config gives them (dlio.dataset.formats.parquet.spec_fields: all
    of them for a parquet dataset, none for another format)."""

    parquet_columns: Tuple[ColumnFields, ...]
    parquet_row_group_size: int
    parquet_generation_batch_size: int
    parquet_read_mode: str
    parquet_read: Tuple[str, ...]


def check_format(name: object) -> str:
    """The format's name in lower case; ConfigError for a name that is not one of FORMATS."""
    key = str(name).lower()
    if key not in FORMATS:
        raise ConfigError(f"unknown dataset format {name!r}; known formats: {', '.join(FORMATS)}")
    return key


def _tuple(v: Union[None, int, "np.integer[Any]", Iterable[SupportsInt]]) -> Tuple[int, ...]:
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
    record_dims: Tuple[int, ...] = ()
    record_element_type: str = "uint8"
    num_subfolders_train: int = 0
    num_subfolders_eval: int = 0
    file_prefix: str = "img"
    compression: str = "none"
    compression_level: int = 4
    hdf5_chunk_dims: Tuple[int, ...] = ()
    hdf5_num_dset_per_record: int = 1
    hdf5_max_shape: Tuple[int, ...] = ()
    seed_content: int = 0
    dialect: str = "current"  # the DLIO version whose layout is written: "2.0.0" or "current" (see formats/hdf5, csv)
    # parquet (dlio.dataset.formats.parquet): columns as (name, dtype, size, read) tuples, () for DLIO's one
    # uint8 list column; rows per row group and per write; how a reader reads; the columns read when
    # storage.storage_options.columns names them (else the columns' read flags decide)
    parquet_columns: Tuple[ColumnFields, ...] = ()
    parquet_row_group_size: int = 1024
    parquet_generation_batch_size: int = 0
    parquet_read_mode: str = "default"
    parquet_read: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        s = object.__setattr__
        folder = str(self.data_folder)
        s(self, "data_folder", folder.rstrip("/") or "/")
        s(self, "format", str(self.format).lower())
        check_format(self.format)
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
    def from_dict(cls, d: Optional[Mapping[str, Any]], **over: Any) -> "DatasetSpec":
        """From a DLIO `dataset` section (either dialect) plus keyword overrides (the values as a YAML
        file gives them: __post_init__ converts them)."""
        d = dict(d or {})
        h5 = d.pop("hdf5", None) or {}
        alias = {"record_length": "record_length_bytes", "record_length_stdev": "record_length_bytes_stdev"}
        kw: Dict[str, Any] = {}
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
    def total_files(self) -> int:
        return self.num_files_train + self.num_files_eval

    def num_files(self, split: str) -> int:
        return self.num_files_train if split_key(split) == "train" else self.num_files_eval

    def num_subfolders(self, split: str) -> int:
        return self.num_subfolders_train if split_key(split) == "train" else self.num_subfolders_eval

    def generation_key(self) -> str:
        """What decides file sizes and layout (not content): a changed key means remake."""
        # the keys taken as they are, and the lists: json.dumps sorts them, so the text does not depend on this order
        keys: Tuple[str, ...] = AS_IS + ("record_dims", "hdf5_chunk_dims", "hdf5_num_dset_per_record", "hdf5_max_shape")
        if self.format in DIALECT_FORMATS:
            keys += ("dialect",)
        out: Dict[str, object] = {k: _jsonable(getattr(self, k)) for k in keys}
        if self.format == "parquet":  # the columns as written (not what is read), the row groups
            out["parquet"] = [
                [list(c[:3]) for c in self.parquet_columns],
                self.parquet_row_group_size,
                self.parquet_generation_batch_size,
            ]
        return json.dumps(out, sort_keys=True)

    def reader_view(self) -> Optional[List[Union[str, List[str]]]]:
        """What, of the files, a reader reads, where the format lets a config choose (parquet: its
        columns and read mode); None otherwise. A saved manifest holds the ranges of one view (a list,
        as its JSON gives it back)."""
        if self.format != "parquet":
            return None
        return [self.parquet_read_mode, read_columns(self)]


def read_columns(spec: DatasetSpec) -> List[str]:
    """The names of the parquet columns a reader reads."""
    if spec.parquet_read:
        return list(spec.parquet_read)
    if spec.parquet_columns:
        return [c[0] for c in spec.parquet_columns if c[3]]
    return ["data"]


def _jsonable(v: object) -> object:
    if isinstance(v, tuple):
        return list(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def split_key(split: str) -> str:
    s = str(split).lower()
    if s in ("train", "training"):
        return "train"
    if s in ("valid", "eval", "evaluation", "validation"):
        return "valid"
    raise ValueError(f"split must be 'train' or 'valid' (eval), not {split!r}")


def _check_prefix(prefix: str) -> None:
    """File names are joined to the data folder: a prefix must not lead out of it."""
    if not prefix or "/" in prefix or ".." in prefix or "\0" in prefix:
        raise ConfigError(
            f"dataset.file_prefix = {prefix!r}: must be a plain file name part (no '/', no '..', "
            "not empty), e.g. 'img'",
            key="dataset.file_prefix",
            value=prefix,
        )


# The dataset keys a DatasetSpec takes as they are (the rest are converted or come from other sections).
# Each decides the files' sizes or layout, so each is in the generation key too (DatasetSpec.generation_key).
AS_IS = (
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
