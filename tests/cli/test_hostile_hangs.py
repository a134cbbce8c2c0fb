"""Nothing hung, nothing lost: FIFOs in a dataset, ranks with different configs, a second signal
during shutdown, a file truncated under the mmap engine."""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from conftest import one_line, set_args, wait_for_text

from dlio import _core

FAST = ["--workload", "default", "--set", "train.epochs=1", "--set", "train.computation_time=0"]


def plan(n, size=4096):
    ops = np.zeros(n, dtype=_core.OP_DTYPE)
    ops["offset"] = np.arange(n) * size
    ops["length"] = size
    return ops


def dlio(*args, timeout=60):
    p = subprocess.run([sys.executable, "-m", "dlio", *map(str, args)], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("ds") / "d"
    code, _, err = dlio("generate", *FAST, "--set", f"dataset.data_folder={d}")
    assert code == 0, err
    return d


@pytest.mark.parametrize("engine", ["posix", "mmap", "io_uring"])
def test_the_core_never_blocks_opening_a_fifo(tmp_path, engine):
    if not {n: ok for n, _, ok, _ in _core.engines()}.get(engine):
        pytest.skip("io_uring is not available here")
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    box = []

    def go():
        try:
            _core.Run("io", engine, [str(fifo)], plan(1)).execute()
        except _core.RunError as e:
            box.append(e)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(10)
    assert box, "the open of a FIFO blocked"
    assert box[0].errno == errno.ESPIPE and box[0].filename == str(fifo)
    assert "not a regular file" in str(box[0])


@pytest.mark.parametrize("manifest", [True, False])
@pytest.mark.parametrize("cmd", ["run", "verify", "run-skip", "generate"])
def test_a_fifo_in_the_dataset_never_hangs(tmp_path, dataset, manifest, cmd):
    d = tmp_path / "d"
    shutil.copytree(dataset, d, symlinks=True)
    if not manifest:
        shutil.rmtree(d / ".dlio-fast")
    victim = d / "train" / "1" / "img_03_of_64.npz"
    victim.unlink()
    os.mkfifo(victim)
    args = {
        "run": ["run", "-o", tmp_path / "o"],
        "verify": ["verify"],
        "generate": ["generate"],
        "run-skip": ["run", "-o", tmp_path / "o", "--set", "dlio_fast.skip_bad_files=true"],
    }[cmd]
    t0 = time.monotonic()
    code, out, err = dlio(*args, *FAST, "--set", f"dataset.data_folder={d}", timeout=60)
    assert time.monotonic() - t0 < 50
    assert "Traceback" not in err
    if cmd == "generate":
        assert code == 0 and victim.is_file()  # the FIFO is replaced by the file it stands for
    elif cmd == "verify":
        assert code == 1 and f"{victim}: not a regular file" in out
    elif cmd == "run-skip" and manifest:
        assert code == 0, err  # the bad file's samples are left out
        doc = json.loads((tmp_path / "o" / "dlio-fast.json").read_text())
        assert doc["complete"] is True
    else:
        assert code == 2 and str(victim) in one_line(err) and "not a regular file" in err


def test_ranks_with_different_configs_stop_naming_the_key(tmp_path, dataset):
    mpiexec = shutil.which("mpiexec")
    if not mpiexec:
        pytest.skip("needs mpiexec")
    base = [
        sys.executable,
        "-m",
        "dlio",
        "run",
        *FAST,
        "--set",
        f"dataset.data_folder={dataset}",
        "-o",
        str(tmp_path / "o"),
    ]
    p = subprocess.run(
        [
            mpiexec,
            "-n",
            "1",
            *base,
            "--set",
            "reader.batch_size=4",
            ":",
            "-n",
            "1",
            *base,
            "--set",
            "reader.batch_size=8",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2, p.stderr
    line = one_line(p.stderr)
    assert "reader.batch_size" in line and "4 on rank(s) 0" in line and "8 on rank(s) 1" in line


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("gap_s", [0.0, 0.05, 0.2])
def test_a_second_signal_during_shutdown_loses_nothing(tmp_path, dataset, second, gap_s):
    out, log = tmp_path / "o", tmp_path / "stdout"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dlio",
            "run",
            "--workload",
            "default",
            *set_args(f"dataset.data_folder={dataset}", "train.epochs=1000", "train.computation_time=0.01"),
            "-o",
            str(out),
        ],
        stdout=open(log, "w"),
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"},
    )
    wait_for_text(log, "Ending epoch 1 ", p)  # an epoch measured: the partial results are not empty
    p.send_signal(signal.SIGINT)
    time.sleep(gap_s)
    for _ in range(5):  # a user hammering Ctrl-C / a supervisor repeating SIGTERM
        if p.poll() is not None:
            break
        p.send_signal(second)
        time.sleep(0.01)
    try:
        _, stderr = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # SIGABRT: faulthandler prints where every thread is
        p.send_signal(signal.SIGABRT)
        pytest.fail(f"still running 60 s after the signals; its threads:\n{p.communicate()[1][-6000:]}")
    # the signal that stopped the run is the first one handled (two pending ones may be taken in either order)
    assert p.returncode in (130, 128 + second), stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    doc = json.loads((out / "dlio-fast.json").read_text())
    assert doc["complete"] is False and signal.Signals(p.returncode - 128).name in doc["reason"]
    assert json.loads((out / "summary.json").read_text())


def test_mmap_engine_survives_a_file_truncated_under_it(tmp_path):
    f = tmp_path / "big.dat"
    with open(f, "wb") as fh:
        fh.write(os.urandom(1 << 20) * 32)
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dlio",
            "io",
            str(f),
            "--engine",
            "mmap",
            "--rw",
            "randread",
            "--bs",
            "64k",
            "--runtime",
            "4s",
            "--ramp",
            "0",
            "--cache",
            "keep",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(2)
    os.truncate(f, 1 << 20)
    _, err = p.communicate(timeout=60)
    assert p.returncode != -signal.SIGBUS, "killed by SIGBUS"
    if p.returncode == 0:
        pytest.skip("the run ended before the truncation took effect")
    assert p.returncode == 1 and str(f) in one_line(err.split("\n", 1)[-1] if err.startswith("warning") else err)
    assert "offset" in err and "end of file" in err


def test_io_interrupted_keeps_the_interrupted_points_measured_seconds(tmp_path):
    js = tmp_path / "io.json"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dlio",
            "io",
            str(tmp_path),
            "--engine",
            "null",
            "--rw",
            "read,randread",
            "--bs",
            "64k",
            "--file-size",
            "1m",
            "--runtime",
            "2s",
            "--ramp",
            "0",
            "--json",
            str(js),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = []
    for line in p.stdout:  # the header, then the first point's line when it is done
        seen.append(line)
        if line.startswith("read "):
            break
    time.sleep(0.7)  # the second point has measured a part of its 2 s
    p.send_signal(signal.SIGINT)
    time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    rest, err = p.communicate(timeout=60)
    out = "".join(seen) + rest
    assert p.returncode == 130 and "Traceback" not in err
    doc = json.loads(js.read_text())
    assert doc["complete"] is False and "SIGINT" in doc["reason"]
    pts = doc["points"]
    assert [x["rw"] for x in pts] == ["read", "randread"]
    assert pts[1]["interrupted"] == "SIGINT" and 0 < pts[1]["runtime_s"] < 2.0 and pts[1]["ops"] > 0
    assert "interrupted by SIGINT" in out
