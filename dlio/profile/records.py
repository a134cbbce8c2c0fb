"""The record_length_bytes that makes dlio-fast's generator write files of the observed size: the
file size minus the format's own overhead (headers, zip directory, HDF5 metadata), found from the
format module itself (exact size when it knows it, else one small probe file)."""

import math
import os
import tempfile
from typing import Tuple

import numpy as np

from dlio.dataset.formats import get_format
from dlio.dataset.spec import DatasetSpec


def _overhead(fmt: str, d: int) -> int:
    """Bytes of a one-sample file with a d x d uint8 record beyond the d*d payload."""
    spec = DatasetSpec.from_dict({"format": fmt, "record_length_bytes": d * d, "num_samples_per_file": 1})
    mod = get_format(fmt)
    size = mod.expected_size((d, d), 1, spec)
    if size is None:
        with tempfile.TemporaryDirectory() as tmp:
            size = mod.write(os.path.join(tmp, f"probe.{fmt}"), (d, d), 1, spec, 0)
    return int(size) - d * d


def record_length(fmt: str, sizes: np.ndarray) -> Tuple[float, float, float, str]:
    """(record_length_bytes, its stdev, confidence, evidence) for one-sample files of these sizes."""
    if fmt not in ("npz", "npy", "hdf5", "jpeg", "png"):
        return float(np.mean(sizes)), float(np.std(sizes)), 0.5, "the mean file size (no overhead model)"
    med = int(np.median(sizes))
    ovh = _overhead(fmt, max(1, math.isqrt(med)))
    for _ in range(2):  # the overhead depends a little on the shape's digits: settle it
        d = max(1, math.isqrt(max(1, med - ovh)))
        ovh = _overhead(fmt, d)
    rec = sizes.astype(np.float64) - ovh
    exact = np.all(np.isclose(rec, np.round(np.sqrt(np.maximum(rec, 0))) ** 2))
    conf = 1.0 if exact else 0.8
    why = f"file size minus {ovh} bytes of {fmt} overhead" + (
        " (a square record, as DLIO draws it: exact)" if exact else " (not a square record: approximate)"
    )
    return float(rec.mean()), float(rec.std()), conf, why
