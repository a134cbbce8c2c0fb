"""The workload YAML and report written from inferred values (dlio.profile.emit)."""

import numpy as np
import pytest

from dlio.errors import ConfigError
from dlio.profile.analyze import Inferred
from dlio.profile.emit import report, to_yaml, validate, workload


def inferred():
    v = {
        "files": 48,
        "format": "npz",
        "samples_per_file": 1,
        "record_length": 262144.0,
        "record_length_stdev": 0.0,
        "subfolders": 0,
        "batch_size": 4,
        "read_threads": 2,
        "file_shuffle": False,
        "pattern": "whole-file",
        "sequential": True,
        "epochs": 2,
        "computation_time": 0.05,
        "computation_time_stdev": 0.001,
        "sizes": np.full(48, 262642),
    }
    return {k: Inferred(x, 1.0, f"evidence for {k}") for k, x in v.items()}


def test_workload_loads_and_emulates_compute_off_the_cpu(tmp_path):
    wl = workload(inferred(), str(tmp_path / "data"))
    assert wl["reader"] == {"data_loader": "pytorch", "batch_size": 4, "read_threads": 2, "file_shuffle": "off"}
    assert wl["train"] == {"epochs": 2, "computation_time": 0.05}  # stdev under 10 % of the mean: left out
    assert wl["dlio_fast"] == {"compute_mode": "hybrid"}
    p = tmp_path / "workload.yaml"
    p.write_text(to_yaml(wl))
    validate(str(p))
    wl["reader"]["batchsize"] = 4  # a key DLIO does not know: a warning in a user's file, an error in ours
    p.write_text(to_yaml(wl))
    with pytest.raises(ConfigError, match="reader.batchsize is not a DLIO key"):
        validate(str(p))


def test_report_names_the_source_with_its_article():
    assert report(inferred(), "interposer").startswith("dlio-fast profile: inferred from an interposer trace\n")
    text = report(inferred(), "strace", "python train.py")
    assert text.startswith("dlio-fast profile: inferred from a strace trace of `python train.py`\n")
    assert "  sizes " in text and "48 files, 262642..262642 bytes, 12606816 in all" in text
