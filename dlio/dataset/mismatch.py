"""A dataset generated with one config and run with another reads other bytes than the config says
(a record size, samples per file): the figures would be silently wrong. Checked before training:
against the generation key the manifest recorded, else (a DLIO-made dataset without a manifest)
against the file sizes the config implies."""

import dataclasses
import json
import os
from typing import Optional

from dlio.base.errors import DatasetError
from dlio.dataset.manifest import ManifestMeta, manifest_path, read_manifest_file
from dlio.dataset.section import DIALECT_FORMATS, DIALECTS
from dlio.dataset.spec import DatasetSpec, estimated_sizes, file_dims, file_paths, split_key

# What decides the bytes of a file with a given name (the format is in the name already).
CONTENT_KEYS = (
    "num_samples_per_file",
    "record_length_bytes",
    "record_length_bytes_stdev",
    "record_dims",
    "record_element_type",
    "compression",
    "compression_level",
    "hdf5_chunk_dims",
    "hdf5_num_dset_per_record",
    "hdf5_max_shape",
)
SIZE_SLACK = 0.10  # headers and container overhead beside the records


def _saved_meta(spec: DatasetSpec, split: str) -> Optional[ManifestMeta]:
    try:
        meta = read_manifest_file(manifest_path(spec, split)).meta
    except (OSError, ValueError, KeyError):
        return None
    same_files = (
        meta.get("nfiles") == spec.num_files(split)
        and meta.get("prefix") == spec.file_prefix
        and meta.get("subfolders") == spec.num_subfolders(split)
        and meta.get("format") == spec.format
    )
    return meta if same_files else None


def check_dataset_matches(spec: DatasetSpec, split: str) -> None:
    """DatasetError naming the key, the dataset's value and the config's, when they differ."""
    split = split_key(split)
    if spec.num_files(split) == 0 or spec.format == "synthetic":
        return
    meta = _saved_meta(spec, split)
    gen_key = meta.get("gen_key") if meta is not None else None
    if gen_key:
        made = json.loads(gen_key)
        now = json.loads(spec.generation_key())
        for k in CONTENT_KEYS:
            if k in made and made[k] != now.get(k):
                raise DatasetError(
                    f"{spec.data_folder}: the dataset was generated with dataset.{k} = {made[k]} "
                    f"but the config says {now.get(k)}; set it back, or generate into another "
                    "dataset.data_folder"
                )
        return
    _check_by_size(spec, split)  # no manifest, or one made by a scan (it records no generation key)


def _check_by_size(spec: DatasetSpec, split: str) -> None:
    """No manifest: the first file's size against what the config implies (fixed-size records only)."""
    if float(spec.record_length_bytes_stdev or 0) or spec.compression != "none":
        return
    if spec.format == "jpeg":  # DLIO's JPEG is whatever the encoder makes of noise: ~0.56x the record
        return
    path = file_paths(spec, split)[0]
    try:
        size = os.stat(path).st_size
    except OSError:
        return
    # either DLIO version's layout is read (a 2.0.0 CSV carries a header and row numbers)
    dialects = DIALECTS if spec.format in DIALECT_FORMATS else (spec.dialect,)
    dims = file_dims(spec, split)[:1]
    expects = [float(estimated_sizes(dataclasses.replace(spec, dialect=d), dims)[0]) for d in dialects]
    expect = min(expects, key=lambda e: abs(size - e))
    if abs(size - expect) > SIZE_SLACK * expect + 1024:
        per = size / spec.num_samples_per_file
        raise DatasetError(
            f"{path}: {size} bytes, but dataset.record_length_bytes = {spec.record_length_bytes} x "
            f"num_samples_per_file = {spec.num_samples_per_file} makes about {int(expect)}; the files "
            f"hold about {int(per)} bytes per sample: set the dataset keys the data was generated "
            "with, or generate into another dataset.data_folder"
        )
