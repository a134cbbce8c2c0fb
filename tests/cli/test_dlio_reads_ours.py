"""DLIO itself reads what dlio-fast wrote: dlio-fast generates a tiny dataset of every format in a DLIO
version's dialect, then that DLIO (2.0.0 from PyPI, or current) trains one epoch on it with
generate_data=False, all formats in ONE DLIO process per version (tests/dlio_driver.py: a DLIO start costs
10-40 s of imports). Each run must finish and take the expected number of steps (DLIO's 0_output.json).
Negative control in the same process: the other version's HDF5 layout, which this DLIO cannot read, must
fail, so a pass means the dialect made the difference. Skipped when the DLIO install is absent."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from dlio_installs import dlio_python, needs_dlio  # noqa: E402
from interop_dlio import (  # noqa: E402
    FORMATS,
    NUM_FILES_TRAIN,
    TRAIN_BATCH,
    TRAIN_SAMPLES_PER_FILE,
    dataset_keys,
    run_dlio,
    samples_per_file,
    workload,
)

VERSIONS = ("2.0.0", "current")
CONTROL = "control"  # the other version's HDF5 layout: DLIO must fail on it
SUBFOLDERS = "npz-subfolders"  # train/{i % 2}/img_i_of_2.npz: DLIO's glob of train/*/*.npz
_runs = {}


def spf(fmt):
    return samples_per_file(fmt, TRAIN_SAMPLES_PER_FILE)


def generate(data, fmt, dialect, subfolders=0):
    from dlio.cli.main import main

    keys = dataset_keys(data, fmt, dialect, spf(fmt), subfolders)
    try:
        main(["-q", "generate", "-w", "default", *[a for k, v in keys.items() for a in ("--set", f"{k}={v}")]])
    except SystemExit as e:
        assert not e.code, f"dlio-fast generate {fmt} ({dialect}) exited {e.code}"


def has_tensorflow(python):
    code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('tensorflow') is None)"
    return subprocess.run([python, "-c", code]).returncode == 0


def dlio_run(version, root):
    """{format or CONTROL: (result, output folder)} of one DLIO process over every format (made once)."""
    if version in _runs:
        return _runs[version]
    python = dlio_python(version)
    other = VERSIONS[1 - VERSIONS.index(version)]
    fmts = [f for f in FORMATS if f != "tfrecord" or has_tensorflow(python)]
    cases = [(f, f, version) for f in fmts] + [(SUBFOLDERS, "npz", version), (CONTROL, "hdf5", other)]
    jobs, outs = [], []
    for key, fmt, dialect in cases:
        data, out = root / "data" / key, root / "out" / key
        sub = 2 if key == SUBFOLDERS else 0
        generate(data, fmt, dialect, sub)
        jobs.append(workload(version, fmt, data, out, False, True, TRAIN_SAMPLES_PER_FILE, TRAIN_BATCH, sub))
        outs.append(out)
    results = run_dlio(python, jobs, root / "work")
    _runs[version] = {key: (r, out) for (key, _, _), r, out in zip(cases, results, outs)}
    return _runs[version]


@pytest.mark.parametrize("fmt", FORMATS + (SUBFOLDERS,))
@pytest.mark.parametrize("version", [pytest.param(v, marks=needs_dlio(v)) for v in VERSIONS])
def test_dlio_trains_on_dlio_fast_data(tmp_path_factory, version, fmt):
    runs = dlio_run(version, tmp_path_factory.mktemp(f"dlio-{version}"))
    if fmt not in runs:
        pytest.skip(f"tensorflow is not installed in DLIO {version}'s venv (tools/install-dlio.sh installs it)")
    result, out = runs[fmt]
    fmt = fmt.split("-")[0]
    assert result["ok"], f"DLIO {version} failed on dlio-fast's {fmt}: {result['error']}"
    with open(out / "0_output.json") as f:
        steps = len(json.load(f)["1"]["load"]["block1"])
    assert steps == NUM_FILES_TRAIN * spf(fmt) // TRAIN_BATCH  # every sample of the epoch, in batches


@pytest.mark.parametrize("version", [pytest.param(v, marks=needs_dlio(v)) for v in VERSIONS])
def test_dlio_fails_on_the_other_versions_hdf5(tmp_path_factory, version):
    """The control: without the dialect, DLIO cannot read the file (2.0.0 wants `records`, current `records_0`)."""
    result, _ = dlio_run(version, tmp_path_factory.mktemp(f"dlio-{version}"))[CONTROL]
    assert not result["ok"] and "KeyError" in result["error"]
