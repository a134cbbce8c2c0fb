"""An asynchronous checkpoint save that fails (a file where its folder goes, a read-only folder, a full
disk) ends the run with one clear line naming the folder and exit 1, the measured epochs kept in the
results; one killed mid-write leaves no checkpoint file under its final name."""

import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO, wait_for_text

MiB = 1 << 20


def sets(tmp_path, ck, *extra):
    base = (
        f"dataset.data_folder={tmp_path / 'data'}",
        f"checkpoint.checkpoint_folder={ck}",
        "dataset.num_files_train=16",
        "workflow.generate_data=true",
        "workflow.evaluation=false",
        "workflow.checkpoint=true",
        "checkpoint.async_save=true",
        "checkpoint.steps_between_checkpoints=4",
        "train.epochs=1",
        "train.computation_time=0.01",
        "reader.batch_size=1",
        f"model.model_size_bytes={8 * MiB}",
    )
    return [a for s in base + extra for a in ("--set", s)]


@pytest.fixture
def mounted(tmp_path):
    """mount(options) -> a fresh tmpfs at a folder of tmp_path (root only), unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    points = []

    def mount(options):
        where = tmp_path / f"mnt{len(points)}"
        where.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True)
        points.append(where)
        return where

    yield mount
    for p in points:
        subprocess.run(["umount", "-l", str(p)], check=False)


def failed_run(run_cli, tmp_path, ck):
    code, out, err = run_cli("run", "-w", "default", "-o", tmp_path / "out", *sets(tmp_path, ck))
    assert "Traceback" not in err and "AttributeError" not in err, err
    lines = [l for l in err.strip().splitlines() if l.startswith("dlio-fast: error:")]
    assert code == 1 and len(lines) == 1, err
    with open(tmp_path / "out" / "dlio-fast.json") as f:
        doc = json.load(f)
    assert doc["complete"] is False and doc["ranks"][0]["epochs"]  # what was measured is kept
    return lines[0]


def test_a_file_where_the_checkpoint_folder_goes(run_cli, tmp_path):
    (tmp_path / "afile").write_text("mine\n")
    line = failed_run(run_cli, tmp_path, tmp_path / "afile" / "ck")
    assert str(tmp_path / "afile") in line and "not a folder" in line or "Not a directory" in line
    assert (tmp_path / "afile").read_text() == "mine\n"


def test_a_read_only_checkpoint_folder(run_cli, tmp_path, mounted):
    ro = mounted("ro,size=1m")
    line = failed_run(run_cli, tmp_path, ro / "ck")
    assert str(ro / "ck") in line and "read-only" in line.lower()


def test_a_full_disk_under_the_checkpoint_folder(run_cli, tmp_path, mounted):
    small = mounted("size=2m")
    line = failed_run(run_cli, tmp_path, small / "ck")
    assert str(small / "ck") in line and "free" in line and "checkpoint" in line


def test_a_save_killed_mid_write_leaves_no_checkpoint_under_its_final_name(tmp_path, dlio_cmd):
    """The null engine at 0.2 s a request: a 64 MiB save (four 16 MiB requests) writes for 0.8 s; the
    process is killed in that window. Only dot-named temporaries (and their claim) are left, and the next
    save into that folder removes them."""
    ck = tmp_path / "ck"
    slow = ("dlio_fast.engine=null", "dlio_fast.null_delay_ns=200000000", f"model.model_size_bytes={64 * MiB}")
    log = tmp_path / "log"
    with open(log, "w") as f:
        p = subprocess.Popen(
            [sys.executable, "-m", "dlio", "run", "-w", "default", "-o", tmp_path / "out", *sets(tmp_path, ck, *slow)],
            stdout=f,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    try:
        wait_for_text(str(log), "writing in the background", p)
        time.sleep(0.3)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    left = [os.path.relpath(f, ck) for f in glob.glob(str(ck / "**" / "*"), recursive=True) if os.path.isfile(f)]
    assert left == [], left  # glob skips dot names: no file under a final name
    hidden = [f for f in glob.glob(str(ck / "**" / ".*"), recursive=True) if os.path.isfile(f)]
    assert any(".tmp-" in f for f in hidden), hidden  # the save was killed mid-write
    code, out, err = dlio_cmd("run", "-w", "default", "-o", tmp_path / "out2", *sets(tmp_path, ck))
    assert code == 0, err
    assert not [f for f in glob.glob(str(ck / "**" / ".*"), recursive=True) if ".tmp-" in f]
    finals = [f for f in glob.glob(str(ck / "**" / "*"), recursive=True) if os.path.isfile(f)]
    assert finals and all(os.path.getsize(f) > 0 for f in finals)
