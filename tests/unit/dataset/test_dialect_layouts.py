"""The data layout follows the DLIO version a config was written for (DatasetSpec.dialect), and the
readers take both: HDF5 `records` (2.0.0) vs `records_0..k-1` (current), CSV with 2.0.0's header row and
row numbers vs bare rows, TFRecord's `size` feature. Files are read back with h5py, the csv module and a
hand-written protobuf walk (tests/unit/dataset/test_formats.py's helpers), never with the writer's code."""

import csv
import dataclasses
import math
import os

import numpy as np
import pytest
from test_formats import decode_example, read_tfrecords

from dlio.base.errors import DatasetError
from dlio.dataset.formats import get_format
from dlio.dataset.generate import generate
from dlio.dataset.manifest import scan_manifest
from dlio.dataset.spec import DatasetSpec, file_paths
from dlio.dataset.verify import verify

pytest.importorskip("dlio._core")
h5py = pytest.importorskip("h5py")

SPF = 3
L = 1024  # 32 x 32 uint8


def make(tmp_path, fmt, dialect, **kw):
    spec = DatasetSpec(
        data_folder=str(tmp_path / f"{fmt}-{dialect}"),
        format=fmt,
        num_files_train=2,
        num_files_eval=1,
        num_samples_per_file=SPF,
        record_length_bytes=L,
        dialect=dialect,
        **kw,
    )
    assert generate(spec, threads=1).files_written == 3
    return spec


def paths(spec):
    return file_paths(spec, "train") + file_paths(spec, "valid")


@pytest.mark.parametrize("dialect, names", [("2.0.0", ["records"]), ("current", ["records_0"])])
def test_hdf5_dataset_names_follow_the_dialect(tmp_path, dialect, names):
    spec = make(tmp_path, "hdf5", dialect)
    for p in paths(spec):
        with h5py.File(p, "r") as hf:
            assert sorted(hf) == sorted(names + ["labels"])
            ds = hf[names[0]]
            assert ds.shape == (SPF, 32, 32) and ds.dtype == np.uint8
            raw = open(p, "rb").read()
            s, o, ln = get_format("hdf5").extents(p, SPF, spec)
            assert s.tolist() == list(range(SPF))
            assert [raw[a : a + n] for a, n in zip(o, ln)] == [ds[j].tobytes() for j in range(SPF)]


def test_hdf5_2_0_0_ignores_num_dset_per_record(tmp_path):
    spec = make(tmp_path, "hdf5", "2.0.0", record_dims=(4, 8, 6), hdf5_num_dset_per_record=2)
    with h5py.File(paths(spec)[0], "r") as hf:
        assert sorted(hf) == ["labels", "records"] and hf["records"].shape == (SPF, 4, 8, 6)


@pytest.mark.parametrize("written, read", [("2.0.0", "current"), ("current", "2.0.0")])
def test_hdf5_read_and_verified_whatever_the_config_says(tmp_path, written, read):
    spec = make(tmp_path, "hdf5", written)
    other = dataclasses.replace(spec, dialect=read)
    m = scan_manifest(other, "train")
    f, s, o, ln = m.ranges()
    assert np.asarray(ln).tolist() == [L] * (2 * SPF)  # one 32 x 32 record per sample
    checked, problems = verify(other)
    assert (checked, problems) == (3, [])


def test_hdf5_unreadable_layout_says_why(tmp_path):
    spec = make(tmp_path, "hdf5", "current")
    p = paths(spec)[0]
    with h5py.File(p, "w") as hf:
        hf.create_dataset("images", data=np.zeros((SPF, 4), np.uint8))
    with pytest.raises(DatasetError) as e:
        scan_manifest(spec, "train")
    msg = str(e.value)
    assert "\n" not in msg and p in msg and "found: images" in msg
    assert "'records' (DLIO 2.0.0)" in msg and "'records_0'" in msg


def test_hdf5_missing_second_dataset_names_the_key(tmp_path):
    spec = make(tmp_path, "hdf5", "current")
    two = dataclasses.replace(spec, hdf5_num_dset_per_record=2)
    with pytest.raises(DatasetError, match=r"lacks records_1 \(dataset.hdf5.num_dset_per_record = 2\).*found: labels"):
        get_format("hdf5").extents(paths(spec)[0], SPF, two)


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_csv_2_0_0_has_pandas_header_and_row_numbers(tmp_path):
    spec = make(tmp_path, "csv", "2.0.0")
    for p in paths(spec):
        rows = _rows(p)
        assert rows[0] == [""] + [str(i) for i in range(L)]  # pandas to_csv(): index label empty, column numbers
        assert [r[0] for r in rows[1:]] == [str(i) for i in range(SPF)]
        body = [[int(v) for v in r[1:]] for r in rows[1:]]
        assert len(body) == SPF and all(len(r) == L and r == body[0] for r in body)
        assert get_format("csv").valid(p, (32, 32), SPF, spec)
        assert not get_format("csv").valid(p, (32, 32), SPF, dataclasses.replace(spec, dialect="current"))


def test_csv_2_0_0_rows_numbered_past_one_digit(tmp_path):
    spec = DatasetSpec(
        data_folder=str(tmp_path / "d"),
        format="csv",
        num_files_train=1,
        num_samples_per_file=12,
        record_length_bytes=4,
        dialect="2.0.0",
    )
    generate(spec, threads=1)
    rows = _rows(file_paths(spec, "train")[0])
    assert rows[0] == ["", "0", "1", "2", "3"] and [r[0] for r in rows[1:]] == [str(i) for i in range(12)]
    assert all(r[1:] == rows[1][1:] for r in rows[1:])


def test_csv_current_has_bare_rows(tmp_path):
    spec = make(tmp_path, "csv", "current")
    for p in paths(spec):
        rows = _rows(p)
        assert len(rows) == SPF and all(len(r) == L for r in rows)
        assert not get_format("csv").valid(p, (32, 32), SPF, dataclasses.replace(spec, dialect="2.0.0"))


@pytest.mark.parametrize("written", ["2.0.0", "current"])
def test_csv_verified_whatever_the_config_says(tmp_path, written):
    spec = make(tmp_path, "csv", written)
    other = dataclasses.replace(spec, dialect="current" if written == "2.0.0" else "2.0.0")
    assert verify(other) == (3, [])


@pytest.mark.parametrize("dialect", ["2.0.0", "current"])
def test_tfrecord_size_feature_follows_the_dialect(tmp_path, dialect):
    spec = make(tmp_path, "tfrecord", dialect)
    want = int(math.sqrt(L)) if dialect == "2.0.0" else L  # 2.0.0: its `dimension`; current: image bytes
    for p in paths(spec):
        recs = read_tfrecords(p)
        assert len(recs) == SPF
        for _, _, payload in recs:
            ex = decode_example(payload)
            assert ex["size"] == ("int64", [want]) and len(ex["image"][1][0]) == L
        assert get_format("tfrecord").extents(p, SPF, spec)[2].tolist() == [r[1] for r in recs]


def test_dialect_changes_the_generation_key_only_where_bytes_differ():
    a = DatasetSpec(format="hdf5", dialect="2.0.0")
    assert a.generation_key() != dataclasses.replace(a, dialect="current").generation_key()
    b = DatasetSpec(format="npz", dialect="2.0.0")
    assert b.generation_key() == dataclasses.replace(b, dialect="current").generation_key()
    with pytest.raises(ValueError, match="dialect"):
        DatasetSpec(format="npz", dialect="1.0")


def test_dlio_made_jpeg_of_a_realistic_size_is_accepted(tmp_path):
    """DLIO saves noise as JPEG: at 224 x 224 the file is ~0.56x the record length, which is not a
    wrong config (a PNG of noise is ~1.0x and stays checked)."""
    import io

    from PIL import Image

    from dlio.dataset.mismatch import check_dataset_matches

    spec = DatasetSpec(data_folder=str(tmp_path / "d"), format="jpeg", num_files_train=2, record_length_bytes=224 * 224)
    for p in file_paths(spec, "train"):
        os.makedirs(os.path.dirname(p), exist_ok=True)
        buf = io.BytesIO()
        Image.fromarray(np.random.randint(255, size=(224, 224), dtype=np.uint8)).save(buf, format="JPEG")
        assert len(buf.getvalue()) < 0.8 * 224 * 224
        with open(p, "wb") as f:
            f.write(buf.getvalue())
    check_dataset_matches(spec, "train")  # no DatasetError
    assert verify(spec) == (2, [])
