"""`dlio-fast verify`: check a dataset against its format, and its content checksums if recorded.

Per file: present, readable, the size the manifest recorded, valid for its format (the format
module's own check: headers, framing, companions), and, when the dataset was generated with
--checksum, the CRC32C of its bytes. Problems are listed with the path; nothing is changed. The
dataset is checked against its own manifest (the config it was generated with), wherever its storage
backend keeps it: an object store's objects are fetched a batch at a time into a local folder, checked
there, and removed.
"""

import dataclasses
import json
import os
import stat
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from dlio.dataset import stored
from dlio.dataset.formats import Dims, Format, get_format
from dlio.dataset.manifest import file_crc, load_saved, manifest_path, read_manifest_file
from dlio.dataset.section import DIALECT_FORMATS, DIALECTS
from dlio.dataset.spec import DatasetSpec, file_dims, file_paths
from dlio.storage import staging

FETCH_BYTES = 1 << 30  # an object store's files are fetched and checked about this much at a time
Problem = Tuple[str, str]  # (path, what is wrong with it)


def as_generated(spec: DatasetSpec) -> Tuple[DatasetSpec, Optional[str]]:
    """The spec the dataset in spec.data_folder was generated with (its manifest's generation key), and
    a note when it differs from the config's; the spec as given when there is no manifest."""
    try:
        gen_key = read_manifest_file(manifest_path(spec, "train")).meta["gen_key"]
        key = json.loads(gen_key) if gen_key is not None else None  # None: made by a scan
    except (OSError, ValueError, KeyError, TypeError):
        return spec, None
    if key is None:
        return spec, None
    # the key's values as JSON gives them: DatasetSpec converts them
    fields: Dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in key.items() if hasattr(spec, k)}
    made = dataclasses.replace(spec, **fields)
    changed = [
        f"{k} {getattr(made, k)!r} (config: {getattr(spec, k)!r})"
        for k in fields
        if getattr(made, k) != getattr(spec, k)
    ]
    note = f"checked against the dataset's own manifest: generated with {', '.join(changed)}" if changed else None
    return made, note


def verify_stored(
    ds: "stored.StoredDataset", checksums: bool = True, log: Optional[Callable[[int], None]] = None
) -> Tuple[int, List[Problem], Optional[str]]:
    """verify() of a dataset where its backend keeps it: (files checked, problems, note)."""
    spec, note = as_generated(stored.planning_spec(ds))
    if staging.in_place(ds.backend, ds.root) is not None:  # the files are checked where they lie, no copy
        return (*verify(spec, checksums, log), note)
    fmt = get_format(spec.format)
    batch_files = max(1, FETCH_BYTES // max(1, int(spec.record_length_bytes * spec.num_samples_per_file)))
    checked = 0
    problems: List[Problem] = []
    for split in ("train", "valid"):
        n = spec.num_files(split)
        paths = file_paths(spec, split)
        name_of = dict(zip(paths, stored.names(ds, spec, split)))
        for start in range(0, n, batch_files):
            batch = list(range(start, min(n, start + batch_files)))
            local = [q for i in batch for q in (*fmt.companions(paths[i], spec), paths[i])]
            rels = [os.path.relpath(q, spec.data_folder) for q in local]
            staging.local_copy(ds.backend, ds.root, rels)  # fetched; an object that is not there stays missing
            c, found = verify(spec, checksums, log, split=split, only=batch)
            checked += c
            problems += [(name_of.get(path, path), what) for path, what in found]
            staging.discard_copy(ds.backend, ds.root, spec.data_folder, rels)
    return checked, problems, note


def verify(
    spec: DatasetSpec,
    checksums: bool = True,
    log: Optional[Callable[[int], None]] = None,
    split: Optional[str] = None,
    only: Optional[Sequence[int]] = None,
) -> Tuple[int, List[Problem]]:
    """Returns (files_checked, problems: list of (path, what)); ``split`` and ``only`` (file indices)
    restrict it to part of the dataset."""
    fmt = get_format(spec.format)
    problems: List[Problem] = []
    checked = 0
    for split_ in ("train", "valid") if split is None else (split,):
        n = spec.num_files(split_)
        if n == 0:
            continue
        paths = file_paths(spec, split_)
        dims = file_dims(spec, split_)
        saved = load_saved(spec, split_, check=False)
        for i in range(n) if only is None else only:
            p = paths[i]
            checked += 1
            try:
                st = os.stat(p)
            except FileNotFoundError:
                problems.append((p, "missing"))
                continue
            if not stat.S_ISREG(st.st_mode):
                problems.append((p, "not a regular file (a FIFO, socket or device)"))
                continue
            if not os.access(p, os.R_OK):
                problems.append((p, "not readable (permissions)"))
                continue
            if saved is not None and i < saved.nfiles and st.st_size != int(saved.file_size[i]):
                problems.append(
                    (
                        p,
                        f"size {st.st_size} bytes, the manifest recorded {int(saved.file_size[i])} "
                        "(truncated or changed)",
                    )
                )
                continue
            if not _valid_any_dialect(fmt, p, tuple(int(x) for x in dims[i]), spec):
                problems.append((p, f"not a valid complete {spec.format} file"))
                continue
            if checksums and saved is not None and saved.file_crc32c is not None:
                if file_crc(p) != int(saved.file_crc32c[i]):
                    problems.append((p, "content checksum (CRC32C) differs from generation"))
            if log is not None and checked % 1000 == 0:
                log(checked)
    return checked, problems


def _valid_any_dialect(fmt: Format, path: str, dims: Dims, spec: DatasetSpec) -> bool:
    """Valid in the layout of the config's DLIO version, or of the other one (the readers take both:
    a DLIO 2.0.0 dataset is fine under a current config and the other way round)."""
    if fmt.valid(path, dims, spec.num_samples_per_file, spec):
        return True
    others = [d for d in DIALECTS if d != spec.dialect] if spec.format in DIALECT_FORMATS else []
    return any(fmt.valid(path, dims, spec.num_samples_per_file, dataclasses.replace(spec, dialect=d)) for d in others)


def has_checksums(spec: DatasetSpec) -> bool:
    m = load_saved(spec, "train", check=False)
    return m is not None and m.file_crc32c is not None
