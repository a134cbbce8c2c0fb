"""The live display on a terminal (read through a pty) and the status lines of a batch log (a pipe)."""

import csv
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest
from conftest import TINY_KV_CONFIG, set_args, wait_for_text

FAST = [
    "--workload",
    "default",
    *set_args("train.epochs=2", "train.computation_time=0.04", "workflow.evaluation=False"),
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


# --- issue 30: the same console on every phase; issue 33: outputs that block ----------------------


@pytest.mark.parametrize("cols", [80, 160])
def test_run_line_and_the_terminal_width(tmp_path, cols):
    """The run line (epoch k/N, the whole run's ETA) above each epoch's bar; every line fits the terminal:
    at 80 columns figures are dropped, never the bar or the ETA (the review saw both vanish)."""
    code, raw = run_in_pty(
        ["run", *FAST, "--set", f"dataset.data_folder={tmp_path / 'data'}", "-o", tmp_path / "o"], cols=cols
    )
    assert code == 0, raw
    lines = screen_lines(raw)
    runs = [s for s in lines if s.startswith("run: epoch ")]
    assert any(s.startswith("run: epoch 2/2") and "ETA" in s for s in runs), lines
    bars = [s for s in lines if re.match(r"epoch \d train ", s)]
    assert bars and all("━" * 10 in s and re.search(r"ETA \S+$", s) for s in bars if "steps" in s), bars[-3:]
    live = runs + bars + [s for s in lines if s.startswith("generating")]  # log lines wrap as the terminal likes
    too_long = [s for s in live if len(s) > cols]
    assert not too_long, too_long
    if cols == 160:
        assert any("samples/s" in s and "elapsed" in s for s in bars), bars[-3:]


def test_live_csv_rows_once_with_the_run_columns(tmp_path, dlio_cmd):
    """Bug 16: each end-of-epoch row was written twice."""
    live = tmp_path / "live.csv"
    code, so, se = dlio_cmd(
        "run", *FAST, "--set", f"dataset.data_folder={tmp_path / 'data'}", "-o", tmp_path / "o", "--live-csv", live
    )
    assert code == 0, se
    rows = list(csv.DictReader(open(live)))
    ends = [r for r in rows if r["phase"] == "train" and r["done"] == r["total"]]
    assert [r["label"] for r in ends] == ["epoch 1 train", "epoch 2 train"], rows
    assert len({tuple(r.values()) for r in rows}) == len(rows)
    assert [r["run"] for r in ends] == ["run epoch 1/2", "run epoch 2/2"]


CKPT = [
    "--workload",
    "llama_8b_zero3",
    "--scale",
    "0.001",
    *set_args(
        "checkpoint.num_checkpoints_write=2",
        "checkpoint.num_checkpoints_read=2",
        "checkpoint.time_between_checkpoints=2",
    ),
]


def test_checkpoint_only_saves_loads_and_sleeps_are_shown(tmp_path, dlio_cmd):
    """Checkpoint-only mode: each save and load is a phase (status lines, live CSV rows in bytes), the run
    line counts the ops, and the workload's sleeps are said and shown (the review: 30 s silent)."""
    live = tmp_path / "ck.csv"
    code, so, se = dlio_cmd(
        "run",
        *CKPT,
        "--set",
        f"checkpoint.checkpoint_folder={tmp_path / 'ckpt'}",
        "-o",
        tmp_path / "o",
        "--status-interval",
        "0.5",
        "--live-csv",
        live,
    )
    assert code == 0, se
    assert "sleeping 2 s before checkpoint 2 save (checkpoint.time_between_checkpoints)" in so
    assert "waits 2 s first (checkpoint.time_between_checkpoints): 8 s of sleep in all" in so
    assert re.search(
        r"\[status\] sleeping before checkpoint 1 load: [0-9.]+/2 s .* \| checkpoints: op 3/4 \(load 1 of 2\)", se
    )
    rows = list(csv.DictReader(open(live)))
    done = {(r["phase"], r["label"]) for r in rows if r["done"] == r["total"]}
    assert {
        ("save", "saving global_epoch1_step1"),
        ("save", "saving global_epoch1_step2"),
        ("load", "loading global_epoch1_step1"),
        ("load", "loading global_epoch1_step2"),
    } <= done, done
    saves = [r for r in rows if r["phase"] == "save" and r["done"] == r["total"]]
    assert all(r["unit"] == "B" and int(r["total"]) > 0 and float(r["MiB_s"]) > 0 for r in saves)


def test_checkpoints_during_training_and_evaluation_are_phases(tmp_path, dlio_cmd):
    live = tmp_path / "live.csv"
    code, so, se = dlio_cmd(
        "run",
        "--workload",
        "default",
        *set_args(
            "train.epochs=2",
            "workflow.evaluation=True",
            "workflow.checkpoint=True",
            "checkpoint.epochs_between_checkpoints=1",
            f"checkpoint.checkpoint_folder={tmp_path / 'ckpt'}",
            f"dataset.data_folder={tmp_path / 'data'}",
        ),
        "-o",
        tmp_path / "o",
        "--live-csv",
        live,
    )
    assert code == 0, se
    rows = list(csv.DictReader(open(live)))
    phases = {r["phase"] for r in rows}
    assert {"generate", "train", "eval", "save"} <= phases, phases
    evals = [r for r in rows if r["phase"] == "eval"]
    assert evals and all(r["run"].startswith("run epoch ") for r in evals)


def test_ceiling_has_status_lines_and_a_live_csv(tmp_path, dlio_cmd):
    """The review: `ceiling` had no progress off a terminal."""
    live = tmp_path / "c.csv"
    code, so, se = dlio_cmd(
        "ceiling",
        tmp_path,
        "--file-size",
        "4m",
        "--runtime",
        "0.4s",
        "--max-threads",
        "1",
        "--max-qd",
        "2",
        "--status-interval",
        "0.1",
        "--live-csv",
        live,
    )
    assert code == 0, se
    assert re.search(r"\[status\] read 1MiB \w+ qd1 t1: .*ETA \S+  \| search: target 1/3 \(seq_read\)", se), se
    assert re.search(r"\| search: target 3/3 \(rand_read_4k\)  elapsed \S+  ETA \S+", se), se
    rows = list(csv.DictReader(open(live)))
    assert rows and {r["run"].split(" (")[0] for r in rows} == {
        "search target 1/3",
        "search target 2/3",
        "search target 3/3",
    }


def test_live_csv_fifo_without_reader_and_ctrl_c(tmp_path):
    """Issue 33: a FIFO with no reader as --live-csv blocked the run in open() for ever, deaf to Ctrl-C.
    Now the rows are dropped (said once), the run goes on, and SIGINT stops it in time with its results."""
    fifo = tmp_path / "live.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "stdout"
    args = ["run", "--workload", "default", "--set", "train.epochs=100", "--set", "train.computation_time=0.04"]
    args += ["--set", f"dataset.data_folder={tmp_path / 'data'}", "-o", tmp_path / "o"]
    args += ["--live-csv", fifo, "--status-interval", "0.2"]
    with open(out, "w") as so, open(tmp_path / "stderr", "w") as se:
        p = subprocess.Popen([sys.executable, "-m", "dlio", *map(str, args)], stdout=so, stderr=se)
        try:
            wait_for_text(out, "Starting epoch 2", p)
            t0 = time.monotonic()
            p.send_signal(signal.SIGINT)
            code = p.wait(30)
        finally:
            if p.poll() is None:  # stuck (in the FIFO's open, before the fix): no orphan left behind
                p.kill()
                p.wait()
    assert code == 130 and time.monotonic() - t0 < 10
    err = (tmp_path / "stderr").read_text()
    assert err.count("the FIFO has no reader") == 1 and "lines were dropped (nobody was reading)" in err, err
    doc = json.load(open(tmp_path / "o" / "dlio-fast.json"))
    assert doc["complete"] is False and doc["metrics"], doc.keys()


def test_closed_stdout_does_not_cost_the_run(tmp_path):
    """Bug 17: `dlio-fast run ... | head -1` died with exit status 1 and left a lock-only folder. Now the
    stdout's lines are dropped once its reader left, and the run ends as usual, its results written."""
    args = ["run", *FAST, "--set", f"dataset.data_folder={tmp_path / 'data'}", "-o", tmp_path / "o"]
    p = subprocess.Popen(
        [sys.executable, "-m", "dlio", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    first = p.stdout.readline()  # `| head -1`: one line, then the reader leaves
    p.stdout.close()
    err = p.stderr.read().decode()
    code = p.wait(300)
    assert first.startswith(b"Running dlio-fast") and code == 0, err
    assert "standard output was closed by its reader" in err and "Traceback" not in err
    doc = json.load(open(tmp_path / "o" / "dlio-fast.json"))
    assert doc["complete"] is True and len(doc["ranks"][0]["epochs"]) == 2


def test_run_json_to_stdout(tmp_path, dlio_cmd):
    """`run --json -`: the run's dlio-fast.json is the only thing on stdout; DLIO's lines go to stderr."""
    code, so, se = dlio_cmd(
        "run", *FAST, "--set", f"dataset.data_folder={tmp_path / 'data'}", "-o", tmp_path / "o", "--json", "-"
    )
    assert code == 0, se
    doc = json.loads(so)
    assert doc == json.load(open(tmp_path / "o" / "dlio-fast.json"))
    assert "Starting epoch 1" in se and "[METRIC]" in se and "Saved outputs in" in se
    code, so, se = dlio_cmd(
        "run",
        *FAST,
        "--set",
        f"dataset.data_folder={tmp_path / 'data'}",
        "-o",
        tmp_path / "o2",
        "--json",
        tmp_path / "r.json",
    )
    assert code == 0 and json.load(open(tmp_path / "r.json"))["complete"] is True and "Starting epoch 1" in so


def test_a_workload_family_through_the_phase_api(tmp_path, dlio_cmd):
    """vdb's timed runs are phases of the generic API (dlio.progress): queries of the run's count, the
    family's runs as the run line."""
    live = tmp_path / "v.csv"
    code, so, se = dlio_cmd(
        "run",
        "-w",
        "vdb_diskann_1m",
        *("--set", "vdb.vectors=4000", "--set", "vdb.processes=2", "--set", "vdb.runs=2", "--set", "vdb.queries=40"),
        *("--set", f"vdb.index_folder={tmp_path / 'idx'}", "-o", tmp_path / "o", "--live-csv", live),
    )
    assert code == 0, se
    rows = [r for r in csv.DictReader(open(live)) if r["phase"] == "search"]
    ends = [(r["label"], r["done"], r["total"], r["unit"], r["run"]) for r in rows if r["done"] == r["total"]]
    assert ends == [
        ("run 1/2", "40", "40", "queries", "vdb run 1/2"),
        ("run 2/2", "40", "40", "queries", "vdb run 2/2"),
    ]


def test_ctrl_c_ends_a_long_checkpoint_pause(tmp_path):
    """The workload's 30 s pause before a save is said, and Ctrl-C during it stops the run at once (it used
    to sleep the 30 s out first), the results written."""
    out = tmp_path / "stdout"
    args = ["run", *CKPT[:-1], "checkpoint.time_between_checkpoints=30", "--set", "checkpoint.num_checkpoints_read=0"]
    args += ["--set", f"checkpoint.checkpoint_folder={tmp_path / 'ckpt'}", "-o", tmp_path / "o"]
    with open(out, "w") as so:
        p = subprocess.Popen([sys.executable, "-m", "dlio", *map(str, args)], stdout=so, stderr=subprocess.DEVNULL)
        try:
            wait_for_text(out, "sleeping 30 s before checkpoint 1 save (checkpoint.time_between_checkpoints)", p)
            time.sleep(0.5)
            t0 = time.monotonic()
            p.send_signal(signal.SIGINT)
            code = p.wait(60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert code == 130 and time.monotonic() - t0 < 5
    assert json.load(open(tmp_path / "o" / "dlio-fast.json"))["complete"] is False


def test_kvcache_trial_has_a_live_bar_on_a_terminal(tmp_path):
    """A KV-cache trial on a terminal (issue 39: 'no bar'): a live bar of the trial's time of its
    duration, with the requests done and the bytes moved, reaching the duration."""
    cfg = tmp_path / "kv.yaml"
    cfg.write_text(TINY_KV_CONFIG.replace("duration: 1.5", "duration: 2"))
    code, raw = run_in_pty(["run", "--config", cfg, "--set", f"kvcache.cache_dir={tmp_path}/c", "-o", tmp_path / "o"])
    assert code == 0, raw[-2000:]
    bars = [s for s in screen_lines(raw) if re.match(r"trial 0: [\d,]+ requests ━", s)]
    assert len(bars) >= 3, screen_lines(raw)
    assert all(re.search(r"[\d.]+/2 s  [\d.]+ \w?i?B/s  elapsed \S+  ETA \S+$", s) for s in bars), bars
    assert bars[-1].split("━")[0] != bars[0].split("━")[0] and " 2/2 s " in bars[-1], bars
