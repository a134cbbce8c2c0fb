"""`dlio-fast io` and `engines` through the CLI: numbers checked against the plan, JSON parsed."""

import csv
import json
import os

import pytest
from conftest import one_line

from dlio import _core


def engine_ok(name):
    return {n: ok for n, _, ok, _ in _core.engines()}.get(name, False)


def test_engines_lists_every_engine(run_cli):
    code, out, err = run_cli("engines")
    assert code == 0
    names = [l.split()[0] for l in out.splitlines()]
    for n in ("posix", "io_uring", "mmap", "null"):
        assert n in names
    for line in out.splitlines():
        assert "available" in line


def test_io_size_based_counts_exact_bytes(run_cli, tmp_path):
    out_json = tmp_path / "r.json"
    out_csv = tmp_path / "r.csv"
    code, out, err = run_cli(
        "io",
        tmp_path,
        "--rw",
        "read,randread",
        "--bs",
        "4k,64k",
        "--file-size",
        "1m",
        "--size",
        "2m",
        "--threads",
        "1,2",
        "--json",
        out_json,
        "--csv",
        out_csv,
    )
    assert code == 0, err
    doc = json.loads(out_json.read_text())
    assert doc["schema"] == "dlio-fast.io/1" and doc["complete"] is True
    assert len(doc["points"]) == 2 * 2 * 2
    for p in doc["points"]:
        # a byte budget of 2 MiB in all: the runner stops at the first whole request past it
        assert p["bytes"] >= 2 << 20
        assert p["bytes"] < (2 << 20) + p["threads"] * p["qd"] * p["bs"] + 1
        assert p["bytes"] == p["ops"] * p["bs"]
        assert p["errors"] == 0
        lat = p["lat_ns"]
        assert lat["count"] == p["ops"]
        assert 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"]
        assert p["iops"] == pytest.approx(p["ops"] / p["runtime_s"])
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 8 and rows[0]["rw"] == "read"
    # the test files were removed
    assert not [f for f in os.listdir(tmp_path) if f.startswith("dlio-fast-io")]


def test_io_keep_leaves_fully_written_files(run_cli, tmp_path):
    code, out, err = run_cli("io", tmp_path, "--file-size", "256k", "--size", "256k", "--keep")
    assert code == 0, err
    f = tmp_path / "dlio-fast-io.0.dat"
    assert f.stat().st_size == 256 << 10
    assert f.stat().st_blocks * 512 >= 256 << 10  # no sparse holes
    data = f.read_bytes()
    assert data.count(b"\0" * 4096) == 0


def test_io_write_then_data_is_random(run_cli, tmp_path):
    code, out, err = run_cli(
        "io", tmp_path, "--rw", "write", "--bs", "64k", "--file-size", "1m", "--size", "1m", "--keep"
    )
    assert code == 0, err
    assert (tmp_path / "dlio-fast-io.0.dat").stat().st_size == 1 << 20


def test_io_null_engine_runtime(run_cli, tmp_path):
    js = tmp_path / "n.json"
    code, out, err = run_cli(
        "io", tmp_path, "--engine", "null", "--runtime", "200ms", "--ramp", "100ms", "--file-size", "64k", "--json", js
    )
    assert code == 0, err
    p = json.loads(js.read_text())["points"][0]
    assert 0.19 < p["runtime_s"] < 0.5
    assert p["ops"] > 1000


@pytest.mark.skipif(not engine_ok("io_uring"), reason="io_uring not available here")
def test_io_uring_direct_qd(run_cli, tmp_path):
    js = tmp_path / "u.json"
    code, out, err = run_cli(
        "io",
        tmp_path,
        "--engine",
        "io_uring",
        "--direct",
        "--rw",
        "randread",
        "--qd",
        "1,16",
        "--file-size",
        "4m",
        "--size",
        "4m",
        "--json",
        js,
    )
    if code == 2 and "O_DIRECT" in err:
        pytest.skip("filesystem refuses O_DIRECT: " + err)
    assert code == 0, err
    pts = json.loads(js.read_text())["points"]
    assert [p["qd"] for p in pts] == [1, 16]
    assert all(p["direct"] for p in pts)
    assert all(p["bytes"] >= 4 << 20 for p in pts)


def test_io_existing_file_is_read_not_removed(run_cli, tmp_path):
    f = tmp_path / "mine.bin"
    f.write_bytes(os.urandom(512 << 10))
    js = tmp_path / "e.json"
    code, out, err = run_cli("io", f, "--bs", "128k", "--size", "512k", "--json", js)
    assert code == 0, err
    assert f.exists()
    p = json.loads(js.read_text())["points"][0]
    assert p["bytes"] == 512 << 10 and p["ops"] == 4


@pytest.mark.parametrize(
    "args, needle",
    [
        (["io", "/nonexistent/dir/x"], "/nonexistent/dir/x"),
        (["io", "{tmp}", "--bs", "4q"], "4q"),
        (["io", "{tmp}", "--bs", "128m"], "128MiB"),
        (["io", "{tmp}", "--engine", "floppy"], "floppy"),
        (["io", "{tmp}", "--qd", "0"], "0"),
        (["io", "{tmp}", "--runtime", "1s", "--size", "1m"], "--runtime"),
        (["io", "{tmp}", "--json", "/nonexistent/out.json"], "/nonexistent"),
    ],
)
def test_io_bad_input_one_line_exit_2(run_cli, tmp_path, args, needle):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    code, out, err = run_cli(*args)
    assert code == 2
    line = one_line(err)
    assert needle in line


def test_io_unwritable_folder(run_cli, tmp_path):
    if os.geteuid() == 0:
        # root writes anywhere: use a read-only bind instead of permissions
        ro = "/proc/self"
        code, out, err = run_cli("io", ro, "--size", "4k")
    else:
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o500)
        code, out, err = run_cli("io", d, "--size", "4k")
    assert code == 2
    one_line(err)


def test_subprocess_error_has_no_traceback(dlio_cmd, tmp_path):
    code, out, err = dlio_cmd("io", tmp_path / "missing")
    assert code == 2
    assert "Traceback" not in err and "missing" in err


def test_ceiling_finds_the_best_probe(run_cli, tmp_path):
    js = tmp_path / "c.json"
    code, out, err = run_cli(
        "ceiling", tmp_path, "--runtime", "60ms", "--file-size", "8m", "--max-threads", "2", "--json", js
    )
    assert code == 0, err
    doc = json.loads(js.read_text())
    assert doc["schema"] == "dlio-fast.ceiling/1" and doc["complete"] is True
    probes = doc["probes"]
    for name, rw, metric in (
        ("seq_read", "read", "bw_MiB_s"),
        ("seq_write", "write", "bw_MiB_s"),
        ("rand_read_4k", "randread", "iops"),
    ):
        best = doc["best"][name]
        assert best["rw"] == rw and best[metric] > 0
        mine = [p for p in probes if p["rw"] == rw]
        # the winner is one of the probes, and the search stopped within the bounds
        assert best in mine
        assert all(p["threads"] <= 2 and p["qd"] <= 256 for p in mine)
        assert (best["bs"], best["rw"]) == ((1 << 20) if metric == "bw_MiB_s" else 4096, rw)
    assert name in out and "IOPS" in out
    assert not [f for f in os.listdir(tmp_path) if f.startswith("dlio-fast-io")]
