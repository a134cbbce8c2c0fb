"""The live display on a terminal (read through a pty) and the status lines of a batch log (a pipe)."""

import csv
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios

FAST = [
    "--workload",
    "default",
    "--set",
    "train.epochs=2",
    "--set",
    "train.computation_time=0.04",
    "--set",
    "workflow.evaluation=False",
]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_in_pty(args, cols=200, timeout=120, stdout=None):
    """dlio-fast on a pseudo-terminal: (exit status, everything it wrote, escape codes and all).
    stdout: a file for standard output instead of the terminal (`dlio-fast run > log`)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    p = subprocess.Popen(
        [sys.executable, "-m", "dlio", *map(str, args)],
        stdin=slave,
        stdout=slave if stdout is None else stdout,
        stderr=slave,
        close_fds=True,
        env=env,
    )
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            p.kill()
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    p.wait()
    os.close(master)
    return p.returncode, out.decode("utf-8", "replace")


def screen_lines(raw):
    """The text of each redraw: a \\r or newline starts a new one; escape codes removed."""
    return [s.strip() for s in re.split(r"[\r\n]+", ANSI.sub("", raw)) if s.strip()]


def test_live_display_on_a_terminal(tmp_path):
    code, raw = run_in_pty(["run", *FAST, "--set", f"dataset.data_folder={tmp_path / 'data'}", "-o", tmp_path / "o"])
    assert code == 0, raw
    lines = screen_lines(raw)
    bars = [line for line in lines if line.startswith("epoch 1 train")]
    assert bars, raw
    # the last state is drawn: 16/16 steps (64 files / batch 4)
    assert any(" 16/16 steps" in b for b in bars), bars[-3:]
    assert all("ETA" in b for b in bars if "steps" in b)
    for b in bars:
        m = re.search(r"AU ([0-9.]+) %", b)
        if m:
            assert float(m.group(1)) <= 100.0, b  # rates from the phase start
        m = re.search(r"([0-9,.]+) MiB/s", b)
        if m:
            assert float(m.group(1).replace(",", "")) < 1e5, b
    # log lines never run into the bar: each starts its own line
    for text in ("Ending epoch 1", "Starting epoch 2", "Epoch 1 - Block 1 [Training] Accelerator"):
        assert any(line.startswith(text) for line in lines), text
    assert not re.search(r"(ETA|%)\s*\S*(Ending|Starting|Epoch) ", ANSI.sub("", raw))
    # DLIO's lines, in DLIO's order
    text = ANSI.sub("", raw)
    assert (
        text.index("Max steps per epoch: 16")
        < text.index("Starting epoch 1: 16 steps expected")
        < text.index("epoch 1 train")
        < text.index("Ending epoch 1")
    )
    assert "Computation time per step (second): 0.04" in text and "(set value: 0.04)" in text


def test_batch_log_has_status_lines_and_live_csv(tmp_path, dlio_cmd):
    live = tmp_path / "live.csv"
    code, so, se = dlio_cmd(
        "run",
        *FAST,
        "--set",
        f"dataset.data_folder={tmp_path / 'data'}",
        "-o",
        tmp_path / "o",
        "--status-interval",
        "0.2",
        "--live-csv",
        live,
    )
    assert code == 0, se
    assert "\x1b" not in so + se and "\r" not in so + se  # a plain log
    status = [line for line in se.splitlines() if line.startswith("[status] epoch")]
    assert len(status) >= 2, se
    assert all(
        re.match(r"\[status\] epoch \d train: \d+/16 steps .* samples/s .* MiB/s .*AU [0-9.]+ % .*ETA", s)
        for s in status
    ), status
    rows = list(csv.DictReader(open(live)))
    train = [r for r in rows if r["phase"] == "train"]
    assert len(train) >= 3 and {r["label"] for r in train} == {"epoch 1 train", "epoch 2 train"}
    assert all(0 <= float(r["AU_percent"]) <= 100 for r in train)
    assert [r["done"] for r in train if r["label"] == "epoch 2 train"][-1] == "16"


def test_status_interval_zero_is_quiet(tmp_path, dlio_cmd):
    code, so, se = dlio_cmd(
        "run",
        *FAST,
        "--set",
        f"dataset.data_folder={tmp_path / 'data'}",
        "-o",
        tmp_path / "o",
        "--status-interval",
        "0",
    )
    assert code == 0, se
    assert "[status]" not in so + se


def test_io_grid_points_on_a_terminal(tmp_path):
    code, raw = run_in_pty(["io", tmp_path, "--file-size", "4m", "--bs", "4k,64k", "--runtime", "0.6s"])
    assert code == 0, raw
    lines = screen_lines(raw)
    assert any(line.startswith("point 1/2 read 4KiB posix qd1 t1") and "ETA" in line for line in lines), lines
    assert any(line.startswith("point 2/2 read 64KiB") for line in lines)
    # the point's bar is erased once its row is printed: the rows follow one another
    rows = [line for line in ANSI.sub("", raw).replace("\r", "\n").splitlines() if line.startswith("read ")]
    assert len(rows) == 2


def test_stdout_to_a_file_keeps_its_lines(tmp_path):
    """`dlio-fast run > log` on a terminal: the bar on the terminal (stderr), every log line in the file."""
    log = tmp_path / "log"
    with open(log, "w") as f:
        code, raw = run_in_pty(
            ["run", *FAST, "--set", f"dataset.data_folder={tmp_path / 'data'}", "-o", tmp_path / "o"], stdout=f
        )
    assert code == 0, raw
    text = log.read_text()
    for line in ("Starting epoch 1: 16 steps expected", "Ending epoch 1", "Starting epoch 2", "Ending epoch 2"):
        assert line in text
    assert "\x1b" not in text
    assert "epoch 1 train" in ANSI.sub("", raw) and "Ending epoch" not in raw


def test_generation_bar_reaches_the_last_file(tmp_path):
    code, raw = run_in_pty(["generate", "--workload", "default", "--set", f"dataset.data_folder={tmp_path / 'd'}"])
    assert code == 0, raw
    bars = [line for line in screen_lines(raw) if line.startswith("generating")]
    assert bars and " 72/72 files" in bars[-1] and "MiB/s" in bars[-1] and "ETA" in bars[-1], bars[-3:]
