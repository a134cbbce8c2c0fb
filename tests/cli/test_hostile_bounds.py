"""Nothing unbounded: sizes from input are checked before allocation; inputs are regular files with a
cap; numbers that overflow are refused. Run under an address-space limit, as a careless script would."""

import os
import resource
import subprocess
import sys
import threading

import pytest
from conftest import one_line

LIMIT = 2 << 30  # RLIMIT_AS for the subprocess: Python + numpy + the core fit well below


def limited(*args, timeout=120):
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    p = subprocess.run(
        [sys.executable, "-m", "dlio", *map(str, args)], capture_output=True, text=True, timeout=timeout, preexec_fn=cap
    )
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize(
    "sets, needle",
    [
        (["dataset.num_files_train=100000000"], "dataset.num_files_train"),
        (["dataset.num_files_train=10000000000000"], "dataset.num_files_train"),
        (["dataset.num_files_eval=300000000", "workflow.evaluation=true"], "dataset.num_files_eval"),
        (["dataset.num_samples_per_file=1000000000"], "dataset.num_files_train"),
        (
            [
                "reader.read_threads=512",
                "dlio_fast.qd=512",
                "dlio_fast.engine=io_uring",
                "dataset.record_length_bytes=100000000",
            ],
            "reader.read_threads",
        ),
    ],
)
@pytest.mark.parametrize("dry", [True, False])
def test_absurd_sizes_refused_under_a_memory_limit(tmp_path, sets, needle, dry):
    args = ["run", "--workload", "default", "--set", f"dataset.data_folder={tmp_path}/d", "-o", tmp_path / "o"]
    for s in sets:
        args += ["--set", s]
    code, out, err = limited(*args, *(["--dry-run"] if dry else []))
    if dry and needle == "reader.read_threads":
        assert code == 0, err  # a dry run allocates no buffers
        return
    assert code == 2, err
    line = one_line(err)
    assert needle in line and "GiB" in line and "memory" in line
    assert not (tmp_path / "d").exists()


def test_absurd_scale_refused_under_a_memory_limit(tmp_path):
    code, out, err = limited(
        "run",
        "--workload",
        "default",
        "--scale",
        "10000000",
        "--set",
        f"dataset.data_folder={tmp_path}/d",
        "-o",
        tmp_path / "o",
    )
    assert code == 2
    assert "dataset.num_files_train" in one_line(err)


def test_io_buffers_refused_under_a_memory_limit(tmp_path):
    code, out, err = limited(
        "io", tmp_path, "--engine", "io_uring", "--threads", "64", "--qd", "256", "--bs", "1m", "--runtime", "100ms"
    )
    assert code == 2
    line = one_line(err)
    assert "--threads 64" in line and "--qd 256" in line and "memory" in line
    assert not os.listdir(tmp_path)


def _fifo_with_writer(tmp_path):
    """A FIFO whose writer never writes: a reader would wait forever."""
    p = tmp_path / "fifo"
    os.mkfifo(p)
    return p


@pytest.mark.parametrize("cmd", ["config", "report", "compare"])
@pytest.mark.parametrize("src", ["/dev/zero", "fifo", "dir", "big", "/dev/null"])
def test_inputs_must_be_regular_files_of_bounded_size(run_cli, tmp_path, cmd, src):
    if src == "fifo":
        src = _fifo_with_writer(tmp_path)
    elif src == "dir":
        src = tmp_path / "adir.json"
        src.mkdir()
    elif src == "big":
        src = tmp_path / "big.yaml"
        with open(src, "wb") as f:
            f.truncate(300 << 20)  # sparse: no disk used
    done = []

    def go():
        if cmd == "config":
            done.append(run_cli("run", "--config", src, "-o", tmp_path / "o", "--dry-run"))
        elif cmd == "report":
            done.append(run_cli("report", src))
        else:
            done.append(run_cli("report", src, src))

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(30)
    assert done, f"{cmd} {src} hung"
    code, out, err = done[0]
    assert code == 2
    assert str(src) in one_line(err)


@pytest.mark.parametrize(
    "key, value",
    [
        ("train.computation_time", "1e300"),
        ("train.computation_time", "{mean: 1, stdev: 1e300}"),
        ("train.computation_time", "{type: uniform, min: 0, max: 1e20}"),
        ("train.computation_time", "{type: gamma, shape: 1e12, scale: 1}"),
        ("evaluation.eval_time", "1e300"),
        ("train.epochs", "1e30"),
        ("train.epochs", "99999999999999999999"),
        ("dataset.record_length_bytes", "1e300"),
        ("dataset.num_files_train", "1e300"),
        ("reader.batch_size", "1e19"),
    ],
)
def test_overflowing_numbers_are_refused_with_the_key(run_cli, tmp_path, key, value):
    code, out, err = run_cli(
        "run", "--workload", "default", "--set", f"{key}={value}", "--dry-run", "-o", tmp_path / "o"
    )
    assert code == 2, out
    assert key in one_line(err)


def test_a_large_but_sane_time_is_accepted(run_cli, tmp_path):
    code, out, err = run_cli(
        "run", "--workload", "default", "--set", "train.computation_time=86400", "--dry-run", "-o", tmp_path / "o"
    )
    assert code == 0, err
