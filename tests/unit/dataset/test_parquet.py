"""parquet: files dlio-fast writes open with pyarrow with the configured schema and row groups; a run
reads only the read columns' column chunks, once per reader and epoch, and the footers (bytes
recomputed here from pyarrow's own metadata and DLIO's worker-of-a-batch rule); a file written as
DLIO's generator writes it (snappy, statistics) is read the same way; bad parquet settings are one line."""

import json

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'dlio-fast[parquet]')")
pq = pytest.importorskip("pyarrow.parquet")

from parquet_reads import expected_bytes  # noqa: E402

from dlio.base.errors import ConfigError  # noqa: E402
from dlio.config import load_config  # noqa: E402
from dlio.dataset.formats import parquet as fmt  # noqa: E402
from dlio.dataset.spec import DatasetSpec, dataset_spec  # noqa: E402

COLUMNS = [
    {"name": "label", "dtype": "float32", "read": True},
    {"name": "skip", "dtype": "float64", "size": 4, "read": False},
    {"name": "feat", "dtype": "float16", "size": 8},  # read: true is the default
    {"name": "flag", "dtype": "int8", "read": False},
    {"name": "mask", "dtype": "bool", "size": 3, "read": False},
]


def _yaml(tmp_path, read_mode="row_group", columns=COLUMNS, files=3, spf=1000, rgs=256, gbs=0, compression="none"):
    import yaml

    doc = {
        "model": {"name": "pq"},
        "framework": "pytorch",
        "workflow": {"generate_data": True, "train": True},
        "dataset": {
            "data_folder": str(tmp_path / "data"),
            "format": "parquet",
            "num_files_train": files,
            "num_samples_per_file": spf,
            "record_length_bytes": 4096,
            "compression": compression,
            "parquet": {"row_group_size": rgs, "generation_batch_size": gbs, "read_mode": read_mode},
        },
        "reader": {"data_loader": "pytorch", "batch_size": 100, "read_threads": 2},
        "train": {"epochs": 2, "computation_time": 0.0005},
    }
    if columns is not None:
        doc["dataset"]["parquet"]["columns"] = columns
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _run(run_cli, tmp_path, **kw):
    code, _, err = run_cli("-q", "run", "--config", _yaml(tmp_path, **kw), "-o", tmp_path / "out")
    assert code == 0, err
    return json.loads((tmp_path / "out" / "dlio-fast.json").read_text())


def _files(tmp_path):
    return sorted(str(p) for p in (tmp_path / "data" / "train").glob("*.parquet"))


def test_files_have_the_configured_schema_and_row_groups(run_cli, tmp_path):
    _run(run_cli, tmp_path, gbs=300)
    files = _files(tmp_path)
    assert len(files) == 3
    for f in files:
        pf = pq.ParquetFile(f)
        schema = pf.schema_arrow
        assert schema.field("label").type == pa.float32()
        assert schema.field("skip").type == pa.list_(pa.float64(), 4)
        assert schema.field("feat").type == pa.list_(pa.float16(), 8)
        assert schema.field("flag").type == pa.int8()
        assert schema.field("mask").type == pa.list_(pa.bool_(), 3)
        # batches of 300 rows, each cut into row groups of 256: 256 + 44, ..., then the last 100
        assert [pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)] == [
            256,
            44,
            256,
            44,
            256,
            44,
            100,
        ]
        t = pf.read_row_group(1, columns=["feat"])  # as DLIO's reader reads a row group
        assert t.num_rows == 44 and len(t.column("feat")[0]) == 8


def test_dlios_single_data_column_without_columns(run_cli, tmp_path):
    """No columns: DLIO's one `data` column, fixed-size uint8 lists of the record's size (64 x 64)."""
    _run(run_cli, tmp_path, columns=None, files=2, spf=300)
    for f in _files(tmp_path):
        schema = pq.read_schema(f)
        assert schema.names == ["data"] and schema.field("data").type == pa.list_(pa.uint8(), 64 * 64)
        assert pq.read_metadata(f).num_rows == 300


@pytest.mark.parametrize("read_mode", ["row_group", "default"])
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_run_reads_only_the_read_columns(run_cli, tmp_path, read_mode, compression):
    doc = _run(run_cli, tmp_path, read_mode=read_mode, compression=compression)
    files = _files(tmp_path)
    steps = 3 * 1000 // 100
    footers, chunks = expected_bytes(files, {"label", "feat"}, 1000, 100, 2, read_mode, steps)
    epochs = doc["ranks"][0]["epochs"]
    assert [e["bytes"] for e in epochs] == [footers + chunks] * 2  # no shuffle: the same reads each epoch
    # the read columns' chunks are a fraction of all columns' (label 4 + feat 16 of 53.4 bytes a row)
    _, every = expected_bytes(files, {c["name"] for c in COLUMNS}, 1000, 100, 2, read_mode, steps)
    assert chunks < 0.6 * every


def test_storage_options_columns_choose_what_is_read(tmp_path):
    cfg = load_config(config_file=_yaml(tmp_path), dlio_overrides=["++workload.storage.storage_options.columns=[skip]"])
    assert fmt.read_columns(dataset_spec(cfg)) == ["skip"]
    assert fmt.read_columns(dataset_spec(load_config(config_file=_yaml(tmp_path)))) == ["label", "feat"]


def test_a_file_written_as_dlios_generator_writes_it_is_read(run_cli, tmp_path):
    """DLIO's writer: ParquetWriter with snappy, batches written with write_table(row_group_size), pyarrow's
    defaults (statistics, dictionary). dlio-fast scans its footer and reads its read columns."""
    (tmp_path / "data" / "train").mkdir(parents=True)
    schema = pa.schema(
        [
            pa.field("label", pa.float32()),
            pa.field("skip", pa.list_(pa.float64(), 4)),
            pa.field("feat", pa.list_(pa.float16(), 8)),
        ]
    )
    rng = np.random.default_rng(7)
    for i in range(2):
        with pq.ParquetWriter(tmp_path / "data" / "train" / f"img_{i}_of_2.parquet", schema, compression="snappy") as w:
            for _ in range(4):  # batches of 250 rows, row groups of 256: one row group per batch
                arrays = [
                    pa.array(rng.random(250, dtype=np.float32)),
                    pa.FixedSizeListArray.from_arrays(pa.array(rng.random(1000)), 4),
                    pa.FixedSizeListArray.from_arrays(pa.array(rng.random(2000).astype(np.float16)), 8),
                ]
                w.write_table(pa.Table.from_arrays(arrays, schema=schema), row_group_size=256)
    cols = [{"name": "label", "dtype": "float32"}, {"name": "skip", "dtype": "float64", "size": 4, "read": False}]
    cols.append({"name": "feat", "dtype": "float16", "size": 8})
    yaml_path = _yaml(tmp_path, columns=cols, files=2, compression="snappy")
    code, _, err = run_cli(
        "-q", "run", "--config", yaml_path, "--set", "workflow.generate_data=False", "-o", tmp_path / "out"
    )
    assert code == 0, err
    doc = json.loads((tmp_path / "out" / "dlio-fast.json").read_text())
    want = sum(expected_bytes(_files(tmp_path), {"label", "feat"}, 1000, 100, 2, "row_group", 2 * 1000 // 100))
    assert [e["bytes"] for e in doc["ranks"][0]["epochs"]] == [want, want]


def test_row_groups_as_dlios_writer_cuts_them():
    spec = DatasetSpec(format="parquet", num_samples_per_file=1000, parquet_row_group_size=256)
    assert fmt.row_groups(1000, spec).tolist() == [256, 256, 256, 232]
    spec = DatasetSpec(format="parquet", parquet_row_group_size=100, parquet_generation_batch_size=250)
    assert fmt.row_groups(600, spec).tolist() == [100, 100, 50, 100, 100, 50, 100]


@pytest.mark.parametrize(
    "override,words",
    [
        ("++workload.dataset.parquet.columns=[{name: a, dtype: string}]", "dtype = 'string'"),
        ("++workload.dataset.parquet.columns=[{name: a, read: false}]", "no column has read: true"),
        ("++workload.dataset.parquet.columns=[{name: a}, {name: a}]", "column 'a' is listed twice"),
        ("++workload.dataset.parquet.columns=[{name: a, size: 0}]", "size = 0"),
        ("++workload.dataset.parquet.partition_by=day", "partition_by = 'day'"),
        ("++workload.storage.storage_options.columns=[nope]", "no column 'nope'"),
        ("++workload.dataset.compression=bz2", "parquet compresses with"),
    ],
)
def test_bad_parquet_settings_are_one_line(tmp_path, override, words):
    with pytest.raises(ConfigError) as e:
        cfg = load_config(config_file=_yaml(tmp_path), dlio_overrides=[override])
        fmt._compression(dataset_spec(cfg))
    assert words in str(e.value) and "\n" not in str(e.value)
