"""The dataset's shape on disk: DLIO's layout, file names, per-file dimensions and sizes.

Layout (DLIO `data_generator/data_generator.py`):
  {data_folder}/train/{prefix}_{i:0Nd}_of_{N}.{format}        N = files of the split, width len(str(N))
  {data_folder}/train/{i % S:0Md}/{prefix}_{i:0Nd}_of_{N}.{format}   when S = num_subfolders > 1,
                                                               M = len(str(S))
  {data_folder}/valid/...                                      the same for evaluation files
Shapes: np.random.seed(10), then 2*(train+eval) side lengths from N(D, sigma_d) (D = int(sqrt(L)),
sigma_d = stdev / (2 sqrt(L))), truncated to int and clipped at >= 1; file i of the combined
train-then-eval list uses sides (2i, 2i+1). With record_dims every file has that shape.
The DatasetSpec itself, DLIO's `dataset` section, is dlio.dataset.section's.
"""

import math
from typing import List

import numpy as np
from numpy.typing import NDArray

from dlio.base.same_names import same_named
from dlio.config import Config
from dlio.dataset import ranges
from dlio.dataset.formats import get_format
from dlio.dataset.section import AS_IS, DIALECTS, DatasetSpec, ParquetFields, split_key
from dlio.system.memcheck import STR_OVERHEAD, check_fits

SPLITS = ("train", "valid")
MANIFEST_DIR = ".dlio-fast"
MANIFEST_VERSION = 1
DLIO_SHAPE_SEED = 10

# ---------------------------------------------------------------------------------------------
# names and shapes


def split_folder(spec: DatasetSpec, split: str) -> str:
    return f"{spec.data_folder}/{split_key(split)}"


def check_names_fit(spec: DatasetSpec, split: str, n: int, name_len: int, per_sample: bool = True) -> None:
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


def listed_ranges_per_file(spec: DatasetSpec) -> int:
    """Byte ranges per file the manifest lists (24 bytes each, dlio.dataset.ranges): none for formats
    that read whole files, and none for files of fixed-size records (ranges.Uniform: one first offset
    per file, however many samples: DLIO 2.0.0's dlrm.yaml has 4,195,198,976 in one file); one per
    row group and column for parquet; else one per sample."""
    fmt = get_format(spec.format)
    spf = spec.num_samples_per_file
    if fmt.WHOLE_FILE or spec.format == "synthetic":
        return 0
    if fmt.GROUPED:
        return -(-spf // max(1, spec.parquet_row_group_size)) * max(1, len(spec.parquet_columns)) + 1
    layout = fmt.layout_extents
    if layout is not None and not spec.record_length_bytes_stdev:  # every file has the same shape
        dims = spec.record_dims or (int(math.sqrt(float(spec.record_length_bytes))),) * 2
        extents = layout(dims, min(spf, 3), spec)  # None: a layout it cannot tell (chunked hdf5)
        if extents is not None and isinstance(ranges.compact(*extents), ranges.Uniform):
            return 0
    return spf


def split_dirs(spec: DatasetSpec, split: str) -> List[str]:
    """The folders a split's files go to: its subfolders 0..S-1 (zero-padded to one width) when
    S = num_subfolders > 1, else the split's folder."""
    base = split_folder(spec, split_key(split))
    s = spec.num_subfolders(split_key(split))
    return [f"{base}/{str(k).zfill(len(str(s)))}" for k in range(s)] if s > 1 else [base]


def file_paths(spec: DatasetSpec, split: str) -> List[str]:
    """DLIO's file names for one split, in index order (which is also DLIO's sorted listing)."""
    split = split_key(split)
    n = spec.num_files(split)
    dirs = split_dirs(spec, split)
    nd = len(str(n))
    pre, ext = spec.file_prefix, spec.format
    check_names_fit(spec, split, n, len(f"{split_folder(spec, split)}/{'0' * 8}/{pre}_{'0' * nd}_of_{n}.{ext}"))
    return [f"{dirs[i % len(dirs)]}/{pre}_{str(i).zfill(nd)}_of_{n}.{ext}" for i in range(n)]


def all_dims(spec: DatasetSpec) -> NDArray[np.int64]:
    """Drawn shape of every file of the combined train-then-eval list: int64 (total, ndim)."""
    for split in ("train", "eval"):
        check_names_fit(spec, split, spec.num_files(split), 64, per_sample=False)
    return _first_dims(spec, spec.total_files)


def _first_dims(spec: DatasetSpec, n: int) -> NDArray[np.int64]:
    """The drawn shapes of the list's first n files (the draws are sequential: the same as all_dims')."""
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


def file_dims(spec: DatasetSpec, split: str) -> NDArray[np.int64]:
    """Drawn shape of every file of one split: int64 (nfiles, ndim)."""
    dims = all_dims(spec)
    if split_key(split) == "train":
        return dims[: spec.num_files_train]
    return dims[spec.num_files_train :]


def estimated_sizes(spec: DatasetSpec, dims: NDArray[np.int64]) -> NDArray[np.float64]:
    """Estimated bytes on disk of files of these drawn shapes (the format's estimate, and TFRecord's index)."""
    fmt = get_format(spec.format)
    if len(dims) == 0:
        return np.zeros(0, np.float64)
    est = np.asarray(fmt.estimate_sizes(dims, spec.num_samples_per_file, spec), dtype=np.float64)
    if spec.format == "tfrecord":
        est = est + 16.0 * spec.num_samples_per_file  # the .idx text
    return est


def dataset_bytes(spec: DatasetSpec) -> int:
    """Estimated bytes on disk of the whole dataset (train + eval), index files included."""
    return int(np.ceil(estimated_sizes(spec, all_dims(spec)).sum()))


LISTED_FROM = 16384  # files whose drawn shapes give a listing's dataset size (all of ImageNet's 1.3 M: 0.16 s)


def listed_dataset_bytes(spec: DatasetSpec) -> int:
    """dataset_bytes for a listing: from the first LISTED_FROM files' shapes (i.i.d. draws) times the
    file count, within a fraction of a percent of the whole sum."""
    n = spec.total_files
    if n <= LISTED_FROM:
        return dataset_bytes(spec)
    return int(np.ceil(estimated_sizes(spec, _first_dims(spec, LISTED_FROM)).mean() * n))


# ---------------------------------------------------------------------------------------------


def dataset_spec(cfg: Config) -> DatasetSpec:
    """The DatasetSpec of a resolved config (its dataset section and the content seed)."""
    d = cfg.dataset
    return DatasetSpec(
        data_folder=d.data_folder or ".",  # "/" stays "/" (DatasetSpec strips a trailing "/")
        **same_named(d, AS_IS),
        record_dims=tuple(d.record_dims),
        hdf5_chunk_dims=tuple(d.hdf5.chunk_dims),
        hdf5_num_dset_per_record=d.hdf5.num_dset_per_record,
        hdf5_max_shape=tuple(d.hdf5.max_shape),
        seed_content=cfg.dlio_fast.seed,
        dialect=cfg.dlio_fast.dialect if cfg.dlio_fast.dialect in DIALECTS else "current",  # "auto" is resolved by load
        **_parquet_fields(cfg),
    )


def _parquet_fields(cfg: Config) -> ParquetFields:
    """The parquet section of a config as DatasetSpec fields (checked: dlio.dataset.formats.parquet)."""
    if cfg.dataset.format != "parquet":
        return {}
    from dlio.dataset.formats.parquet import spec_fields

    return spec_fields(cfg)
