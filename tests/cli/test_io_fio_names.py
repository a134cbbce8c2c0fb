"""fio's habits on `dlio-fast io` (issue 30): fio's option names answered with dlio-fast's, and fio's mixed
read/write point (`--rw randrw --rwmixread 70`) with its read and write sections."""

import csv
import io
import json

import pytest
from conftest import one_line


@pytest.mark.parametrize(
    "args,answer",
    [
        (["--iodepth", "4"], "did you mean --qd (fio's --iodepth)?"),
        (["--iodepth=4"], "did you mean --qd (fio's --iodepth)?"),
        (["--numjobs", "4"], "did you mean --threads (fio's --numjobs)?"),
        (["--output-format=json"], "did you mean --json - (fio's --output-format=json)?"),
        (["--time_based"], "did you mean --runtime DURATION (fio's --time_based)?"),
        (["--direct=1"], "did you mean --direct (fio's --direct=1)?"),
        (["--direct=0"], "did you mean --buffered (fio's --direct=0)?"),
        (["--ioengine=libaio"], "did you mean --engine io_uring (fio's --ioengine=libaio)?"),
        (["--ioengine=psync"], "did you mean --engine posix (fio's --ioengine=psync)?"),
        (["--filename=/data/f"], "did you mean PATH (fio's --filename)?"),
        (["--directory", "/data"], "did you mean PATH (fio's --directory)?"),
        (["--blocksize=4k"], "did you mean --bs (fio's --blocksize)?"),
        (["--rwmixwrite", "30"], "did you mean --rwmixread (fio's --rwmixwrite)?"),
    ],
)
def test_fio_names_are_pointed_at(tmp_path, run_cli, args, answer):
    """The review: `--iodepth` got "did you mean --independent", `--numjobs` "--bs", others nothing."""
    code, out, err = run_cli("io", tmp_path, *args)
    assert code == 2, err
    line = one_line(err)
    assert line.startswith("dlio-fast: io: error: unknown option --") and answer in line, line


def test_our_own_direct_flag_still_works(tmp_path, run_cli):
    code, out, err = run_cli("io", tmp_path, "--direct", "--file-size", "1m", "--bs", "64k", "--json", "-", "-q")
    if code == 2 and "O_DIRECT" in err:
        pytest.skip(f"this filesystem refuses O_DIRECT: {err.strip()}")
    assert code == 0, err
    assert json.loads(out)["points"][0]["direct"] is True


def test_randrw_point_has_read_and_write_sections(tmp_path, run_cli):
    code, out, err = run_cli(
        "io", tmp_path, "--rw", "randrw,rw", "--rwmixread", "70", "--file-size", "8m", "--bs", "4k", "--json", "-"
    )
    assert code == 0, err
    pts = json.loads(out)["points"]
    assert [p["rw"] for p in pts] == ["randrw", "readwrite"]  # fio's `rw` is readwrite
    for p in pts:
        r, w = p["read"], p["write"]
        assert p["rwmixread"] == 70 and r["ops"] + w["ops"] == p["ops"] == 2048
        assert r["bytes"] == r["ops"] * 4096 and w["bytes"] == w["ops"] * 4096
        assert 0.25 < w["ops"] / p["ops"] < 0.35
        assert r["lat_ns"]["count"] == r["ops"] and w["lat_ns"]["count"] == w["ops"]
        assert r["bw_MiB_s"] + w["bw_MiB_s"] == pytest.approx(p["bw_MiB_s"])
    # the table: the point's row, then its read and write rows
    assert "  read       70 %" in err and "  write      30 %" in err


def test_randrw_csv_columns(tmp_path, run_cli):
    code, out, err = run_cli("io", tmp_path, "--rw", "randrw", "--file-size", "4m", "--csv", "-")
    assert code == 0, err
    (row,) = list(csv.DictReader(io.StringIO(out)))
    assert row["rwmixread"] == "50" and int(row["read_ops"]) + int(row["write_ops"]) == int(row["ops"]) == 1024


def test_mixed_points_need_a_folder_and_files(tmp_path, run_cli):
    f = tmp_path / "given.dat"
    f.write_bytes(bytes(1 << 20))
    code, out, err = run_cli("io", f, "--rw", "randrw")
    assert code == 2 and "write tests run only on files dlio-fast creates" in one_line(err)
    code, out, err = run_cli("io", "s3://bucket/prefix", "--rw", "randrw", "--endpoint", "http://127.0.0.1:9")
    assert code == 2 and "--rw randrw: mixed read/write points run on files, not on s3:// paths" in one_line(err)
