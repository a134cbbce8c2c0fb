"""Output conventions: '-' is stdout for every result file, CSV cells (true/false, rounded), units,
--version, and the MPI-IO engine's availability under mpiexec."""

import csv
import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from dlio.system.host import host_info
from dlio.system.output import csv_value, json_text

IO = ["--file-size", "4m", "--runtime", "0.2s", "-q"]


def test_csv_value():
    assert [csv_value(x) for x in (True, False, None, 8034.191056762688, 16.0, 3, "a")] == [
        "true",
        "false",
        "",
        "8034.191",
        "16",
        3,
        "a",
    ]


def test_json_text_is_jsons_document_with_plain_lists_on_one_line():
    """Result files' JSON (json_text) reads back as json.dumps's would, keys turned to text as json does,
    nan refused as json.dumps(allow_nan=False) does; lists of plain values (the per-step arrays) on one
    line, everything else indented by two."""
    doc = {
        "load": {"block1": [0.5, 1e-300, 3], "eval": []},
        "epochs": [{"n": 1, "ok": True}, {"n": 2, "ok": None}],
        "grid": [[1, 2], [3]],
        "np": np.arange(3),
        "f32": np.float32(1.5),
        "text": 'é"\n',
        "keys": {1: "int", 2.5: "float", None: "null", False: "bool"},
        "empty": {},
        "huge": 10**30,
    }
    expect = json.dumps(doc, default=lambda o: o.tolist())
    text = json_text(doc)
    assert json.loads(text) == json.loads(expect)
    assert text.endswith("}\n") and '\n  "load": {\n    "block1": [0.5, 1e-300, 3],\n' in text
    assert '"epochs": [\n    {\n      "n": 1,' in text and '"grid": [\n    [1, 2],\n    [3]\n  ]' in text
    for bad in (float("nan"), [float("inf")], {"x": float("-inf")}):
        with pytest.raises(ValueError):
            json_text(bad)


def test_a_folder_is_swept_for_leftovers_once_per_process(tmp_path, monkeypatch):
    """Rank 0 writes a file per rank into one folder: sweeping it (a listing) per file was N^2."""
    from dlio.base import tmpclaim
    from dlio.system import output

    swept = []
    monkeypatch.setattr(tmpclaim, "sweep", lambda folder, dirs=(): swept.append(folder) or [])
    for i in range(3):
        output.write_json(str(tmp_path / f"{i}_output.json"), {"rank": i})
    assert swept == [str(tmp_path)]
    assert sorted(os.listdir(tmp_path)) == ["0_output.json", "1_output.json", "2_output.json"]


def test_io_json_to_stdout(tmp_path, dlio_cmd):
    code, so, se = dlio_cmd("io", tmp_path, *IO, "--json", "-", cwd=tmp_path)
    assert code == 0, se
    doc = json.loads(so)  # stdout holds the document alone ...
    assert doc["points"][0]["rw"] == "read"
    assert "MiB/s" in se  # ... the table went to stderr
    assert not os.path.exists(tmp_path / "-")


def test_io_csv_to_stdout_true_false_rounded(tmp_path, dlio_cmd):
    code, so, se = dlio_cmd("io", tmp_path, *IO, "--csv", "-", "--buffered", cwd=tmp_path)
    assert code == 0, se
    rows = list(csv.DictReader(io.StringIO(so)))
    assert rows[0]["direct"] == "false"
    for k in ("bw_MiB_s", "iops", "lat_mean_ns"):
        assert len(rows[0][k].partition(".")[2]) <= 3, rows[0][k]
    assert "False" not in so and "True" not in so


def test_json_and_csv_cannot_both_take_stdout(tmp_path, dlio_cmd):
    code, so, se = dlio_cmd("io", tmp_path, *IO, "--csv", "-", "--json", "-")
    assert code == 2 and "only one of them can write to stdout" in se


def test_memory_fields_one_unit_each():
    h = host_info()
    assert h["memory_GiB"] == pytest.approx(h["memory_bytes"] / 2**30)
    assert h["memory_GB"] == pytest.approx(h["memory_bytes"] / 1e9)


def test_version_says_commit_and_features(dlio_cmd):
    code, so, se = dlio_cmd("--version")
    assert code == 0, se
    lines = so.splitlines()
    import dlio

    assert lines[0] == f"dlio-fast {dlio.__version__}"
    assert lines[1].startswith("commit: ")
    assert lines[2].startswith("compiled in: io_uring ") and "MPI-IO " in lines[2]
    if os.path.exists(os.path.join(os.path.dirname(os.path.dirname(dlio.__file__)), ".git")) and shutil.which("git"):
        head = subprocess.run(
            ["git", "-C", os.path.dirname(os.path.dirname(dlio.__file__)), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        assert head in lines[1]


def _mpiexec():
    return shutil.which("mpiexec") or shutil.which("mpiexec", path=os.path.dirname(sys.executable))


@pytest.mark.skipif(_mpiexec() is None, reason="needs mpiexec (pip install mpich mpi4py)")
def test_engines_under_mpiexec_has_mpiio():
    pytest.importorskip("dlio._mpiio", reason="dlio._mpiio not built (no MPI compiler at build time)")
    p = subprocess.run(
        [_mpiexec(), "-n", "1", sys.executable, "-m", "dlio", "engines"], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("mpiio"))
    assert line.rstrip().endswith("available") and "unavailable" not in line


def test_engines_outside_mpiexec_says_how(dlio_cmd):
    code, so, se = dlio_cmd("engines")
    line = next(x for x in so.splitlines() if x.startswith("mpiio"))
    assert "mpiexec" in line
