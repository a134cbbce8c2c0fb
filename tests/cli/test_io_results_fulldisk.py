"""`dlio-fast io --json/--csv` onto a full disk (a small tmpfs we mount): one line naming the path, and the
results written to a file of the temporary folder instead, never lost."""

import csv
import json
import os
import subprocess
import sys

import pytest
from conftest import REPO


@pytest.fixture
def full(tmp_path):
    """A 1 MiB tmpfs, full."""
    d = tmp_path / "tiny"
    d.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)], capture_output=True).returncode
    ):
        pytest.skip("cannot mount a small tmpfs here (needs root and mount permission)")
    st = os.statvfs(d)
    with open(d / "filler", "wb") as f:
        f.write(b"\0" * (st.f_bavail * st.f_frsize))
    yield d
    subprocess.run(["umount", "-l", str(d)], capture_output=True)


def io(*args):
    p = subprocess.run(
        [sys.executable, "-m", "dlio", "-q", "io", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": REPO},
    )
    return p.returncode, p.stdout, p.stderr


def fallback(line, ext):
    """The file the error line says the results went to instead (removed by the caller)."""
    part = [x for x in line.split("; ") if x.startswith("the results were written to ")]
    assert part, line
    path = part[0][len("the results were written to ") :].split(" instead")[0]
    assert path.endswith(ext) and not path.startswith(str(os.path.dirname(line)))
    return path


@pytest.mark.parametrize("what", ["--json", "--csv"])
def test_io_results_on_a_full_disk_are_written_elsewhere_and_said_where(tmp_path, full, what):
    data = tmp_path / "data"
    data.mkdir()
    target = full / ("r.json" if what == "--json" else "r.csv")
    code, out, err = io(data, "--bs", "4k,64k", "--file-size", "1m", "--size", "1m", "--cache", "keep", what, target)
    assert code == 1, err
    lines = [x for x in err.splitlines() if x.startswith("dlio-fast: error")]
    assert len(lines) == 1 and "Traceback" not in err, err
    line = lines[0]
    assert f"{target}: No space left on device" in line, line
    alt = fallback(line, target.suffix)
    try:
        if what == "--json":
            doc = json.load(open(alt))
            assert doc["complete"] is True
            assert [p["bs"] for p in doc["points"]] == [4096, 65536]
            assert all(p["bytes"] == 1 << 20 and p["ops"] == (1 << 20) // p["bs"] for p in doc["points"])
        else:
            rows = list(csv.DictReader(open(alt)))
            assert [int(r["bs"]) for r in rows] == [4096, 65536]
    finally:
        os.unlink(alt)
    assert not target.exists() and [x for x in os.listdir(full) if x != "filler"] == []
    assert len([x for x in out.splitlines() if "posix" in x]) == 2  # the table, as always
