"""MLPerf Storage's Parquet workloads run as shipped (dlrm_b200: 200 typed columns, 40 read, a row
group at a time; flux_b200: 5 large float32 columns, whole files), made small on the command line:
dlrm_b200 through `dlio_benchmark` as mlpstorage runs it, flux_b200 through `dlio-fast run --scale`.
The bytes each run read are recomputed from pyarrow's metadata of the files it wrote."""

import json
import os

import pytest

pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (pip install 'dlio-fast[parquet]')")

from mlpstorage_lines import command, dlio_bin_dir, run  # noqa: E402
from parquet_reads import expected_bytes  # noqa: E402

from dlio.config.workloads import workload_text  # noqa: E402


def _bytes(out):
    doc = json.loads((out / "dlio-fast.json").read_text())
    return [e["bytes"] for e in doc["ranks"][0]["epochs"]]


def test_dlrm_b200_through_dlio_benchmark(tmp_path):
    configs = tmp_path / "configs" / "dlio"
    (configs / "workload").mkdir(parents=True)
    (configs / "workload" / "dlrm_b200.yaml").write_text(workload_text("dlrm_b200"))  # the shipped file
    data, out = tmp_path / "data" / "dlrm", tmp_path / "results" / "run"
    params = {
        "dataset.num_files_train": 2,
        "dataset.num_samples_per_file": 12288,  # 2 row groups of 6144
        "reader.batch_size": 2048,
        "dataset.data_folder": data,
    }
    p = run(command(dlio_bin_dir(tmp_path), "dlrm_b200", out, params, configs), cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    files = sorted(str(f) for f in (data / "train").glob("*.parquet"))
    assert len(files) == 2
    md = pq.read_metadata(files[0])
    assert md.num_columns == 200 and md.num_row_groups == 2 and md.row_group(0).num_rows == 6144
    assert pq.read_schema(files[0]).field("feature_002").type == pq.read_schema(files[0]).field("feature_003").type
    read = {f"feature_{i:03d}" for i in (11, 17, 18, 20, 25, 31, 41, 43, 49, 53, 58, 59, 67, 68, 71, 74, 75)}
    read |= {f"feature_{i:03d}" for i in (88, 90, 91, 92, 93, 94, 96, 97, 116, 117, 137, 141, 147, 154, 155)}
    read |= {f"feature_{i:03d}" for i in (158, 160, 162, 169, 180, 186, 189, 195)}  # the file's read: true
    # each file is 6 batches: with 4 readers every row group is read by 3 and every footer by 4,
    # whatever the file order (file_shuffle: seed)
    footers, chunks = expected_bytes(files, read, 12288, 2048, 4, "row_group", 12)
    assert _bytes(out) == [footers + chunks]
    _, every = expected_bytes(files, {f"feature_{i:03d}" for i in range(200)}, 12288, 2048, 4, "row_group", 12)
    assert 0.15 < chunks / every < 0.3  # 160 of 761 bytes a row, and the encodings' pages
    assert (out / "dlio_config" / "hydra.yaml").exists()


def test_flux_b200_at_a_small_scale(run_cli, tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    code, _, err = run_cli(
        "-q", "run", "-w", "flux_b200", "--scale", "0.001",  # 4 of 4296 files
        "--set", "dataset.num_samples_per_file=8", "--set", "reader.batch_size=4",
        "--set", "train.computation_time=0.01", "--set", f"dataset.data_folder={data}", "-o", out,
    )  # fmt: skip
    assert code == 0, err
    files = sorted(str(f) for f in (data / "train").glob("*.parquet"))
    assert len(files) == 4
    schema = pq.read_schema(files[0])
    assert schema.names == ["t5_encodings", "clip_encodings", "mean", "logvar", "timestamp"]
    assert schema.field("t5_encodings").type.list_size == 524328
    # read_mode default: a whole file's columns by each reader that opens it (2 batches a file, 8 readers)
    footers, chunks = expected_bytes(files, set(schema.names), 8, 4, 8, "default", 8)
    assert _bytes(out) == [footers + chunks]
    assert chunks >= 2 * sum(os.path.getsize(f) for f in files) * 0.95
