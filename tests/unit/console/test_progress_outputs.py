"""Outputs of the live figures that would block (a FIFO with no reader, a pipe nobody reads) cost the run
nothing: lines are dropped, counted and said, never waited for (issue 33).

The checks that could hang on a blocking output run in a child process with a deadline: a hang is then a
failed test, not a stuck test run."""

import csv
import fcntl
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from dlio.progress import Progress

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


def child(code, timeout=20):
    """Run `code` in a fresh interpreter; (exit status, stdout, stderr); a hang fails the test."""
    try:
        p = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"blocked for {timeout} s: {e}")
    return p.returncode, p.stdout, p.stderr


def test_live_csv_fifo_without_reader_never_blocks(tmp_path):
    fifo = tmp_path / "live.fifo"
    os.mkfifo(fifo)
    code, out, err = child(
        f"""
        import io, time
        from dlio.progress import Progress
        p = Progress(enabled=False, stream=io.StringIO(), status_interval=0.01, live_csv={str(fifo)!r})
        t0 = time.monotonic()
        for i in range(20):  # 20 generations, a row at each end
            p.generation(0, 0, 100, 2)
            p.generation(100, 2, 100, 2)
            p.done()
        p.close()
        print(round(time.monotonic() - t0, 3), p.csv_out is None)
        """
    )
    assert code == 0, err
    took, closed = out.split()
    assert float(took) < 5 and closed == "True"
    # said once when the first row was dropped, and the count at the end
    assert err.count("--live-csv") == 2, err
    assert "the FIFO has no reader" in err and "20 of 20 lines were dropped" in err, err


def test_live_csv_fifo_reader_gets_the_header_and_rows(tmp_path):
    fifo = tmp_path / "live.fifo"
    os.mkfifo(fifo)
    got = []
    reader_open = threading.Event()

    def read():
        with open(fifo) as f:  # blocks until the writer side opens; then reads to its close
            reader_open.set()
            got.append(f.read())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    time.sleep(0.2)  # the reader waits in open(): the FIFO has a reader from now on
    notes = []
    p = Progress(enabled=False, stream=None, status_interval=0, live_csv=str(fifo))
    p._note = notes.append
    for i in range(3):
        with p.phase("io", f"point {i + 1}", 10, "%") as ph:
            ph.update(10, nbytes=2**20, ops=256)
    p.close()
    t.join(10)
    rows = list(csv.DictReader(got[0].splitlines()))
    assert [r["label"] for r in rows] == ["point 1", "point 2", "point 3"] and not notes


def test_status_lines_to_a_full_pipe_never_block():
    """stderr piped into a reader that stopped reading: the status lines are dropped, not waited for, and
    said in a line once the pipe has room again."""
    code, out, err = child(
        f"""
        import fcntl, os, time
        from dlio.progress import Progress
        r, w = os.pipe()
        fcntl.fcntl(w, {F_SETPIPE_SZ}, 4096)  # the smallest pipe: full after a few lines
        stream = os.fdopen(w, "w")
        p = Progress(enabled=False, stream=stream, status_interval=1e-9)
        t0 = time.monotonic()
        for i in range(2000):  # far more lines than the pipe holds
            p.generation(i, 1, 4000, 2)
        p.done()
        took = time.monotonic() - t0
        dropped = p.status_out.dropped
        os.read(r, 1 << 20)  # the reader reads again: the next line says what was dropped
        with p.phase("train", "epoch last train", 16, "steps") as ph:
            ph.update(16)
        text = os.read(r, 1 << 20).decode()
        print(round(took, 3), dropped, repr(text))
        """
    )
    assert code == 0, err
    took, dropped, text = out.split(" ", 2)
    assert float(took) < 10 and int(dropped) > 1000
    assert f"[status] {dropped} status line(s) dropped: stderr was full" in text and "epoch last train" in text


def test_status_lines_to_a_file_and_a_string_are_written_whole(tmp_path):
    path = tmp_path / "log"
    with open(path, "w") as f:
        p = Progress(enabled=False, stream=f, status_interval=1e-9)
        for i in range(50):
            with p.phase("train", f"epoch {i} train", 16, "steps") as ph:
                ph.update(8)
        p.close()
    assert len([x for x in path.read_text().splitlines() if x.startswith("[status] epoch")]) == 50
