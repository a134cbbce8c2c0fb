"""A full disk (a small tmpfs we mount): results still written somewhere and said where, a partial
checkpoint removed, a failed trace dropped with a warning, out-of-inodes named as such."""

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import one_line, set_args

OPTS = [
    "--workload",
    "default",
    *set_args("train.epochs=1", "train.computation_time=0", "workflow.evaluation=false"),
]
RUN = ["run", *OPTS]


def _mount(d, opts):
    d.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(d)], capture_output=True).returncode != 0
    ):
        pytest.skip("cannot mount a small tmpfs here (needs root and mount permission)")


@pytest.fixture
def tiny(tmp_path):
    d = tmp_path / "tiny"
    _mount(d, "size=2m")
    yield d
    subprocess.run(["umount", "-l", str(d)], capture_output=True)


@pytest.fixture
def few_inodes(tmp_path):
    d = tmp_path / "inodes"
    _mount(d, "size=64m,nr_inodes=6")
    yield d
    subprocess.run(["umount", "-l", str(d)], capture_output=True)


def fill(folder, leave):
    """Fill the filesystem of `folder` but `leave` bytes."""
    st = os.statvfs(folder)
    with open(os.path.join(folder, "filler"), "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))


def dlio(*args):
    p = subprocess.run([sys.executable, "-m", "dlio", *map(str, args)], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("ds") / "d"
    code, _, err = dlio("generate", *OPTS, "--set", f"dataset.data_folder={d}")
    assert code == 0, err
    return d


@pytest.mark.parametrize("trace", [False, True])
def test_results_on_a_full_disk_are_written_elsewhere_and_said_where(tiny, dataset, trace):
    out = tiny / "out"
    out.mkdir()
    fill(tiny, 12 << 10)  # room for the lock file and the write probe, not for the results
    code, stdout, err = dlio(
        *RUN,
        "--set",
        f"dataset.data_folder={dataset}",
        "-o",
        out,
        *(["--set", "dlio_fast.trace=true"] if trace else []),
    )
    assert code == 1, err
    line = [x for x in err.splitlines() if x.startswith("dlio-fast: error")][0]
    assert str(out) in line and "No space left on device" in line and "written to" in line
    alt = line.split("written to ")[1].split(" instead")[0]
    try:
        doc = json.loads(open(os.path.join(alt, "dlio-fast.json")).read())
        assert doc["complete"] is True and doc["ranks"][0]["epochs"][0]["steps_done"] == 16
        assert os.path.isfile(os.path.join(alt, "summary.json"))
    finally:
        shutil.rmtree(alt, ignore_errors=True)
    assert "Traceback" not in err
    if trace:
        assert "the trace was dropped" in err and not glob.glob(str(out / "trace-*"))
    assert not [f for f in os.listdir(out) if ".tmp-" in f]


def test_checkpoint_larger_than_the_free_space_is_refused_before_writing(tiny, dataset, tmp_path):
    ck = tiny / "ck"
    code, stdout, err = dlio(
        *RUN,
        *set_args(
            f"dataset.data_folder={dataset}",
            "workflow.checkpoint=true",
            "model.model_size_bytes=8388608",
            f"checkpoint.checkpoint_folder={ck}",
        ),
        "-o",
        tmp_path / "o",
    )
    assert code == 1
    assert "is free" in err and str(ck) in err and "Traceback" not in err
    assert not glob.glob(str(ck / "*" / "*"))  # nothing half-written left
    assert json.loads((tmp_path / "o" / "dlio-fast.json").read_text())["complete"] is False


def test_checkpoint_that_fills_the_disk_midway_is_removed(tiny, dataset, tmp_path, monkeypatch):
    # the free-space check passes (1.5 MiB free for a 1 MiB file), then a filler grows: ENOSPC mid-save
    from dlio.base.errors import DlioRunError
    from dlio.checkpoint import save as ckpt_save
    from dlio.config.load import load_config
    from dlio.storage import file_sets

    cfg = load_config(
        workload="default",
        sets=[
            "workflow.checkpoint=true",
            "model.model_size_bytes=1048576",
            f"checkpoint.checkpoint_folder={tiny / 'ck'}",
        ],
    )
    fill(tiny, 1536 << 10)
    real = file_sets.run_core

    def squeeze(*a, **k):
        fill_more = os.path.join(tiny, "filler2")
        with open(fill_more, "wb") as f:
            try:
                f.write(b"\0" * (1400 << 10))
            except OSError:
                pass
        return real(*a, **k)

    monkeypatch.setattr(file_sets, "run_core", squeeze)
    with pytest.raises(DlioRunError) as e:
        ckpt_save.save(cfg, None, 1, 1)
    assert "No space left" in str(e.value) or "free some space" in str(e.value)
    assert not os.path.exists(tiny / "ck" / "global_epoch1_step1")


def test_out_of_inodes_is_named(few_inodes, dataset, tmp_path):
    for i in range(10):
        try:
            open(few_inodes / f"f{i}", "w").close()
        except OSError:
            break
    code, stdout, err = dlio("generate", *OPTS, "--set", f"dataset.data_folder={few_inodes}/d2")
    assert code != 0
    assert "inode" in one_line(err) and "Traceback" not in err


CKPT_ONLY = [
    "-w",
    "default",
    *set_args(
        "workflow.train=false",
        "workflow.checkpoint=true",
        "model.model_size_bytes=1100000",
        "checkpoint.num_checkpoints_write=3",
        "checkpoint.num_checkpoints_read=0",
        "checkpoint.time_between_checkpoints=0.01",
    ),
]


def _saves(out):
    doc = json.loads((out / "dlio-fast.json").read_text())
    return doc, [c for r in doc["ranks"] for c in r["checkpoints"] if c["kind"] == "save"]


def test_checkpoint_only_keeps_the_saves_before_one_that_fails(tiny, tmp_path):
    """Checkpoint-only mode, the second save out of room: the first save's record is kept and written,
    the run says it failed (exit 1), and the failed save leaves no files."""
    out = tmp_path / "out"
    code, _, err = dlio("run", *CKPT_ONLY, "--set", f"checkpoint.checkpoint_folder={tiny / 'ck'}", "--output", out)
    assert code == 1, err
    doc, saves = _saves(out)
    assert doc["complete"] is False and [s["block"] for s in saves] == [1]
    assert saves[0]["bytes"] >= 1100000 and "free" in doc["reason"]
    assert sorted(os.listdir(tiny / "ck")) == ["global_epoch1_step1"]


def test_a_stop_signal_between_checkpoints_keeps_the_saves_done(tmp_path):
    """SIGTERM during the pause before save 2: save 1 is in the results, exit 143, within the grace."""
    out = tmp_path / "out"
    args = [*CKPT_ONLY, "--set", f"checkpoint.checkpoint_folder={tmp_path / 'ck'}", "--output", out]
    args[args.index("checkpoint.time_between_checkpoints=0.01")] = "checkpoint.time_between_checkpoints=10"
    p = subprocess.Popen([sys.executable, "-m", "dlio", "run", *map(str, args)], stdout=subprocess.PIPE, text=True)
    lines = []
    for line in p.stdout:  # the first save is done when its line is printed
        lines.append(line)
        if "Checkpoint 1 save" in line:
            break
    p.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    rest = p.communicate(timeout=30)[0]
    assert p.returncode == 143, "".join(lines) + rest
    assert time.monotonic() - t0 < 7  # well within the 10 s pause (0.1 s on an idle host; a loaded CI took 2.5)
    doc, saves = _saves(out)
    assert doc["complete"] is False and [s["block"] for s in saves] == [1]
