"""The workload YAML and report written from inferred values (dlio.profile.emit)."""

import numpy as np
import pytest

from dlio.base.errors import ConfigError
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


def _with(**kw):
    inf = inferred()
    for k, x in kw.items():
        inf[k] = Inferred(x, 1.0, f"evidence for {k}")
    return inf


@pytest.mark.parametrize(
    "order,subfolders,shuffle,change,file_order",
    [
        ("path", 2, "off", True, "path"),  # sorted paths over 2 subfolders: one folder after another
        ("path", 0, "off", True, None),  # flat: path order is DLIO's
        ("name", 2, "off", True, None),
        ("once", 2, "seed", False, None),
        ("epoch", 0, "seed", True, None),
    ],
)
def test_file_order_becomes_shuffle_seed_change_and_file_order(
    tmp_path, order, subfolders, shuffle, change, file_order
):
    wl = workload(_with(file_order=order, subfolders=subfolders), str(tmp_path / "data"))
    assert wl["reader"]["file_shuffle"] == shuffle
    assert wl["train"].get("seed_change_epoch", True) is change
    assert wl["dlio_fast"].get("file_order") == file_order
    p = tmp_path / "workload.yaml"
    p.write_text(to_yaml(wl))
    validate(str(p))


def test_prefetch_and_preprocess_for_readers_folded_into_compute_without_them(tmp_path):
    wl = workload(_with(prefetch=3, preprocess_time=0.002), str(tmp_path / "data"))
    assert wl["reader"]["prefetch_size"] == 3 and wl["reader"]["preprocess_time"] == 0.002
    assert wl["train"]["computation_time"] == 0.05
    # a loop without readers: the trainer's own time on its 4 samples is part of its step
    wl = workload(_with(prefetch=0, preprocess_time=0.002, read_threads=0), str(tmp_path / "data"))
    assert "prefetch_size" not in wl["reader"] and "preprocess_time" not in wl["reader"]
    assert wl["reader"]["read_threads"] == 0
    assert wl["train"]["computation_time"] == pytest.approx(0.05 + 4 * 0.002)


def test_a_sample_parallel_loaders_time_per_sample_is_shared_by_its_readers(tmp_path):
    """Its readers share each batch; the replay's reader takes a whole batch alone."""
    wl = workload(_with(preprocess_time=0.004, loader="sample-parallel", readers_per_step=2.0), str(tmp_path))
    assert wl["reader"]["preprocess_time"] == 0.002
    wl = workload(_with(preprocess_time=0.004, loader="batch-per-worker", readers_per_step=1.0), str(tmp_path))
    assert wl["reader"]["preprocess_time"] == 0.004
