"""dlio-fast reads what DLIO itself wrote: the golden datasets in tests/data/dlio-golden/<version>/<format>/
(made by DLIO 2.0.0 and current DLIO, see the README there). Each is verified and trained on for one epoch
with the posix engine, under the OTHER version's dialect (the readers take both layouts whatever the config
says); the bytes read must equal the per-sample bytes DLIO's reader touches, computed here from the files
with h5py / struct / os.stat, and DLIO's files must be left as they were."""

import hashlib
import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from interop_dlio import FORMATS, NUM_FILES_TRAIN, dataset_keys, samples_per_file  # noqa: E402

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "dlio-golden"
VERSIONS = ("2.0.0", "current")
CASES = FORMATS + ("npz-subfolders",)  # the last: train/{i % 2}/img_i_of_2.npz (num_subfolders = 2)


def case(name):
    """(format, num_subfolders) of a golden folder name."""
    return name.split("-")[0], (2 if name.endswith("-subfolders") else 0)


WHOLE_FILE = ("npz", "npy", "csv", "jpeg", "png")


def settings(data, fmt, dialect, read=True, subfolders=0):
    keys = {
        **dataset_keys(data, fmt, dialect, samples_per_file(fmt), subfolders),
        "reader.batch_size": 2,
        "train.epochs": 1,
        "train.computation_time": 0,
        "workflow.generate_data": False,
        "workflow.evaluation": False,
        "dlio_fast.engine": "posix",
    }
    if not read:
        del keys["workflow.generate_data"]
    return [a for k, v in keys.items() for a in ("--set", f"{k}={v}")]


def expected_train_bytes(data, fmt):
    """What DLIO's reader of `fmt` reads in one epoch over the train files, from the files themselves."""
    files = sorted((data / "train").rglob(f"*.{fmt}"))
    assert len(files) == NUM_FILES_TRAIN
    spf = samples_per_file(fmt)
    if fmt in WHOLE_FILE:  # np.load / read_csv / PIL open the whole file for every sample
        return spf * sum(f.stat().st_size for f in files)
    if fmt == "synthetic":
        return 0
    if fmt in ("indexed_binary", "mmap_indexed_binary"):  # sample sizes: the .sz.idx companion (uint64 each)
        return sum(int(np.fromfile(f"{f}.sz.idx", dtype="<u8")[:spf].sum()) for f in files)
    if fmt == "tfrecord":  # each record framed: u64 length, u32 crc, payload, u32 crc
        total = 0
        for f in files:
            buf, pos, n = f.read_bytes(), 0, 0
            while pos < len(buf):
                (length,) = struct.unpack_from("<Q", buf, pos)
                pos += length + 16
                n += 1
            assert n == spf
            total += pos
        return total
    if fmt == "hdf5":  # records[j] (2.0.0) or records_0[j] .. (current): one row of each
        import h5py

        total = 0
        for f in files:
            with h5py.File(f, "r") as hf:
                names = [n for n in hf if n.startswith("records")]
                total += spf * sum(hf[n][0].nbytes for n in names)
        return total
    raise AssertionError(fmt)


def digest(folder):
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", CASES)
def test_dlio_fast_reads_dlio_golden_files(run_cli, tmp_path, version, name):
    src = GOLDEN / version / name
    if not src.is_dir():
        pytest.skip(f"no golden files of DLIO {version} for {name} (make_golden.py there makes them)")
    fmt, sub = case(name)
    data, out = tmp_path / "data", tmp_path / "out"
    shutil.copytree(src, data)
    before = digest(data)
    other = VERSIONS[1 - VERSIONS.index(version)]
    keys = settings(data, fmt, other, subfolders=sub)

    code, so, se = run_cli("verify", "-w", "default", *keys)
    assert code == 0, so + se
    assert "0 bad" in so + se

    code, so, se = run_cli("-q", "run", "-w", "default", *keys, "-o", out)
    assert code == 0, se
    with open(out / "dlio-fast.json") as f:
        d = json.load(f)
    steps = NUM_FILES_TRAIN * samples_per_file(fmt) // 2
    assert [e["steps_done"] for e in d["ranks"][0]["epochs"]] == [steps]
    assert d["metrics"]["bytes_read"] == expected_train_bytes(data, fmt)

    after = {k: v for k, v in digest(data).items() if not k.startswith(".dlio-fast")}
    assert after == before  # DLIO's files read, never rewritten


FIXED_LAYOUT = (
    "npz",
    "npy",
    "hdf5",
    "tfrecord",
    "indexed_binary",
    "mmap_indexed_binary",
    "synthetic",
)  # sizes set by the shape


def listing(folder):
    return {str(p.relative_to(folder)): p for p in folder.rglob("*") if p.is_file() and ".dlio-fast" not in p.parts}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", CASES)
def test_dlio_fast_generates_what_dlio_generates(run_cli, tmp_path, version, name):
    """Same file names (index files and folders included) as DLIO of that version, in that dialect; the
    same sizes and index bytes for fixed layouts; CSV with the same header-or-not and row count. Images
    differ in size by design (dlio-fast pads them to the record length, see formats/image.py)."""
    golden = GOLDEN / version / name
    if not golden.is_dir():
        pytest.skip(f"no golden files of DLIO {version} for {name} (make_golden.py there makes them)")
    fmt, sub = case(name)
    data = tmp_path / "data"
    code, so, se = run_cli("-q", "generate", "-w", "default", *settings(data, fmt, version, False, sub))
    assert code == 0, se
    ours, theirs = listing(data), listing(golden)
    assert sorted(ours) == sorted(theirs)
    for name, p in theirs.items():
        mine = ours[name].read_bytes()
        if name.endswith(".idx") or fmt == "synthetic":
            assert mine == p.read_bytes(), name
        elif fmt in FIXED_LAYOUT:
            assert len(mine) == p.stat().st_size, name
        elif fmt == "csv":
            want = p.read_bytes()
            header = want.startswith(b",")  # 2.0.0: pandas' header row `,0,1,...`
            assert mine.count(b"\n") == want.count(b"\n") and mine.startswith(b",") == header, name


def test_hdf5_layout_no_dlio_reads_is_one_line_naming_file_and_datasets(run_cli, tmp_path):
    import h5py

    data, out = tmp_path / "data", tmp_path / "out"
    shutil.copytree(GOLDEN / "2.0.0" / "hdf5", data)
    bad = data / "train" / "img_1_of_2.hdf5"
    with h5py.File(bad, "a") as hf:
        hf.move("records", "images")
    code, so, se = run_cli("-q", "run", "-w", "default", *settings(data, "hdf5", "2.0.0"), "-o", out)
    assert code == 2
    err = [ln for ln in se.splitlines() if "error" in ln]
    assert len(err) == 1 and "Traceback" not in se
    assert str(bad) in err[0] and "found: images, labels" in err[0] and "'records' (DLIO 2.0.0)" in err[0]


@pytest.mark.parametrize(
    "spelling, names", [("record_length", ["labels", "records"]), ("record_length_bytes", ["labels", "records_0"])]
)
def test_config_spelling_picks_the_layout(run_cli, tmp_path, spelling, names):
    """A workload YAML in DLIO 2.0.0's spelling (dataset.record_length) writes what 2.0.0 writes, with no
    dialect given (dlio_fast.dialect: auto); one in current's spelling what current DLIO writes."""
    import h5py
    import yaml

    data = tmp_path / "data"
    cfg = {
        "model": {"name": "tiny"} if spelling == "record_length_bytes" else "tiny",
        "framework": "pytorch",
        "workflow": {"generate_data": True, "train": False},
        "dataset": {
            "data_folder": str(data),
            "format": "hdf5",
            "num_files_train": 1,
            "num_samples_per_file": 2,
            spelling: 1024,
        },
        "reader": {"data_loader": "pytorch", "batch_size": 1},
    }
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(cfg))
    code, so, se = run_cli("-q", "generate", "--config", tmp_path / "w.yaml")
    assert code == 0, se
    with h5py.File(data / "train" / "img_0_of_1.hdf5", "r") as hf:
        assert sorted(hf) == names
