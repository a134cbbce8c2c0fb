"""`dlio-fast verify`: check a dataset against its format, and its content checksums if recorded.

Per file: present, readable, the size the manifest recorded, valid for its format (the format
module's own check: headers, framing, companions), and, when the dataset was generated with
--checksum, the CRC32C of its bytes. Problems are listed with the path; nothing is changed.
"""

import dataclasses
import os
import stat

from dlio.dataset.formats import get_format
from dlio.dataset.manifest import file_crc, load_saved
from dlio.dataset.spec import DIALECT_FORMATS, DIALECTS, file_dims, file_paths


def verify(spec, checksums=True, log=None):
    """Returns (files_checked, problems: list of (path, what))."""
    fmt = get_format(spec.format)
    problems, checked = [], 0
    for split in ("train", "valid"):
        n = spec.num_files(split)
        if n == 0:
            continue
        paths = file_paths(spec, split)
        dims = file_dims(spec, split)
        saved = load_saved(spec, split, check=False)
        for i, p in enumerate(paths):
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


def _valid_any_dialect(fmt, path, dims, spec):
    """Valid in the layout of the config's DLIO version, or of the other one (the readers take both:
    a DLIO 2.0.0 dataset is fine under a current config and the other way round)."""
    if fmt.valid(path, dims, spec.num_samples_per_file, spec):
        return True
    others = [d for d in DIALECTS if d != spec.dialect] if spec.format in DIALECT_FORMATS else []
    return any(fmt.valid(path, dims, spec.num_samples_per_file, dataclasses.replace(spec, dialect=d)) for d in others)


def has_checksums(spec):
    m = load_saved(spec, "train", check=False)
    return m is not None and m.file_crc32c is not None
