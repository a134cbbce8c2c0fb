"""Traces other tools wrote are input: `profile --trace` / `--compare` on hostile ones. Each case
answers with one line naming the file (exit 2) or with the good events and a note of what was
skipped (how many lines, the first one's number); none gives a traceback, a hang or unbounded
memory. Each case through load_trace, and the ones that end the command through the CLI too."""

import gzip
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from dlio.base.errors import DlioError
from dlio.profile import tracein
from dlio.profile.parsers import OP_READ, load_trace

CLI = [sys.executable, "-m", "dlio"]


def _ev(i, **kw):
    e = {
        "id": i,
        "name": "read",
        "cat": "POSIX",
        "pid": 7,
        "tid": 8,
        "ts": 1000 + 10 * i,
        "dur": 5,
        "ph": "X",
        "args": {"fname": f"/data/f{i % 3}.npz", "ret": 4096, "offset": 0},
    }
    e.update(kw)
    return json.dumps(e)


def _pfw(tmp_path, lines, name="t.pfw"):
    p = tmp_path / name
    p.write_text("[\n" + "".join(x + ",\n" for x in lines))
    return str(p)


def _cli(args, cwd, timeout=30):
    return subprocess.run(CLI + args, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _one_line_error(r, path):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and path in lines[0], r.stderr


def test_a_malformed_line_is_skipped_counted_and_located(tmp_path):
    good = [_ev(i) for i in range(10)]
    p = _pfw(tmp_path, good[:4] + ['{"name": "read", "cat": "POSIX", "ts": 12'] + good[4:])
    tr = load_trace(p)
    assert len(tr.events) == 10  # the ten good events, none invented
    assert tr.notes == [f"{p}: skipped 1 malformed line (the first: line 6, not a JSON object)"]


@pytest.mark.parametrize(
    "field,value,why",
    [
        ("ts", "NaN", "not finite"),
        ("dur", "Infinity", "not finite"),
        ("ts", "1" + "0" * 39, "out of range"),  # a 40-digit number
        ("pid", "-" + "9" * 40, "out of range"),
        ("ts", '"12abc"', "not a number"),
        ("pid", "true", "not a number"),
    ],
)
def test_a_bad_number_makes_its_line_malformed(tmp_path, field, value, why):
    bad = _ev(99).replace(f'"{field}": {json.dumps(json.loads(_ev(99))[field])}', f'"{field}": {value}', 1)
    assert value in bad
    p = _pfw(tmp_path, [_ev(0), _ev(1), bad, _ev(2)])
    tr = load_trace(p)
    assert len(tr.events) == 3
    assert tr.events["t"].max() == 20_000  # ns: the bad line left no trace in the times
    (note,) = tr.notes
    assert "skipped 1 malformed line (the first: line 4" in note and why in note, note


@pytest.mark.parametrize("key", ["offset", "ret"])
def test_a_40_digit_size_or_offset_is_malformed_not_an_overflow(tmp_path, key):
    e = json.loads(_ev(5))
    e["args"][key] = 10**39
    p = _pfw(tmp_path, [_ev(0), json.dumps(e)])
    tr = load_trace(p)
    assert len(tr.events) == 1 and "skipped 1 malformed line (the first: line 3" in tr.notes[0]


def test_darshan_and_strace_numbers_are_checked(tmp_path):
    dxt = tmp_path / "job.dxt"
    dxt.write_text(
        "# DXT, file_id: 1, file_name: /d/a\n"
        " X_POSIX 0 read 0 0 4096 1.0 1.5\n"
        " X_POSIX 0 read 1 " + "9" * 40 + " 4096 1.6 1.7\n"
        " X_POSIX 0 read 2 0 4096 nan 1.9\n"
        " X_POSIX 0 read 3 0 4096 1.2.3 1.9\n"
    )
    tr = load_trace(str(dxt))
    assert len(tr.events) == 1 and "skipped 3 malformed lines (the first: line 3" in tr.notes[0]
    st = tmp_path / "job.strace"
    st.write_text(
        '1 10:00:00.000100 openat(AT_FDCWD, "/d/a", O_RDONLY) = 3 <0.000010>\n'
        '1 10:00:00.000200 read(3, ""..., 4096) = 4096 <0.000020>\n'
        '1 10:00:00.000300 read(3, ""..., 4096) = ' + "4" * 40 + " <0.000020>\n"
        '1 10:00:00.000400 pread64(3, ""..., 4096, ' + "7" * 40 + ") = 4096 <0.000020>\n"
    )
    tr = load_trace(str(st))
    assert [int(x) for x in tr.events["size"]] == [0, 4096]
    assert "skipped 2 malformed lines (the first: line 3" in tr.notes[0]


def test_too_many_malformed_lines_is_an_error_naming_the_file_and_line(tmp_path):
    p = _pfw(tmp_path, [_ev(0)] + ['{"ts": NaN, "cat": "POSIX", "name": "read"}'] * (tracein.MAX_MALFORMED + 5))
    with pytest.raises(DlioError, match=rf"{p}: line {tracein.MAX_MALFORMED + 3}: more than 1000 malformed lines"):
        load_trace(p)
    r = _cli(["profile", "--trace", p, "-o", str(tmp_path / "o")], tmp_path)
    _one_line_error(r, p)


def test_a_huge_line_is_skipped_in_bounded_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(tracein, "MAX_LINE", 1 << 12)
    p = tmp_path / "t.pfw"
    with open(p, "w") as f:
        f.write("[\n" + _ev(0) + ",\n")
        f.write('{"name": "' + "x" * (1 << 16) + '"},\n')  # 16 x the cap
        f.write(_ev(1) + ",\n")
    tr = load_trace(str(p))
    assert len(tr.events) == 2
    assert tr.notes == [f"{p}: skipped 1 malformed line (the first: line 3, longer than 4,096 bytes)"]


def test_a_line_without_newline_of_gigabytes_is_refused_without_reading_it_whole(tmp_path):
    """The default cap through the CLI: a 40 MiB gzip of one 4 GiB line (a gzip bomb) costs one
    MAX_LINE read at a time; the line is skipped, and with nothing else there the trace says so."""
    p = tmp_path / "bomb.pfw.gz"
    chunk = b"x" * (1 << 24)
    with gzip.open(p, "wb", compresslevel=1) as f:
        f.write(b"[\n" + _ev(0).encode() + b",\n{")
        for _ in range(16):  # 256 MiB, one line
            f.write(chunk)
    tr = load_trace(str(p))
    assert len(tr.events) == 1 and "longer than 1,048,576 bytes" in tr.notes[0]


def test_dev_zero_link_fifo_folder_and_device_are_refused_by_name(tmp_path):
    z = tmp_path / "zero.pfw.gz"
    z.symlink_to("/dev/zero")
    fifo = tmp_path / "trace.pfw"
    os.mkfifo(fifo)
    loop = tmp_path / "loop.pfw"
    loop.symlink_to(loop)
    for path, kind in [(z, "is a character device"), (fifo, "is a FIFO"), (loop, "Too many levels of symbolic links")]:
        done = []
        th = threading.Thread(target=lambda: done.append(_try_load(str(path))), daemon=True)
        th.start()
        th.join(10)  # a hang fails here, not the whole run
        assert done, f"{path}: load_trace hung"
        assert kind.lower() in done[0].lower() and str(path) in done[0], done[0]
        r = _cli(["profile", "--trace", str(path), "-o", str(tmp_path / "o")], tmp_path, timeout=20)
        _one_line_error(r, str(path))
    # a folder given as a trace holds no trace; a folder whose ev-*.bin is /dev/zero is refused too
    cap = tmp_path / "cap"
    cap.mkdir()
    (cap / "ev-1-1.bin").symlink_to("/dev/zero")
    msg = _try_load(str(cap))
    assert f"{cap}/ev-1-1.bin: is a character device" in msg
    r = _cli(["profile", "--compare", str(cap), str(tmp_path)], tmp_path, timeout=20)
    _one_line_error(r, str(cap))


def _try_load(path):
    try:
        load_trace(path)
    except DlioError as e:
        return str(e)
    return "loaded"


def test_a_cut_gzip_keeps_the_events_before_the_cut(tmp_path):
    body = ("[\n" + "".join(_ev(i) + ",\n" for i in range(2000))).encode()
    z = gzip.compress(body)
    p = tmp_path / "t.pfw.gz"
    p.write_bytes(z[: len(z) // 2])
    tr = load_trace(str(p))
    assert 0 < len(tr.events) < 2000
    assert "the gzip stream is damaged after line" in tr.notes[0]


def test_the_event_cap_cuts_with_a_note_saying_how_to_raise_it(tmp_path):
    p = _pfw(tmp_path, [_ev(i) for i in range(50)])
    tr = load_trace(p, max_events=20)
    assert len(tr.events) == 20 and (tr.events["op"] == OP_READ).all()
    assert tr.notes == [
        f"{p}: read the first 20 events only (the cap); give --max-events N to read more "
        f"(about {tracein.EVENT_BYTES} bytes of memory per event)"
    ]
    assert load_trace(p, max_events=50).notes == []  # exactly at the cap: nothing left out


def test_events_are_gathered_in_numpy_chunks_and_sorted_in_place(tmp_path):
    """More than one CHUNK, out of order: the same events as the input, sorted by time."""
    n = tracein.CHUNK * 2 + 17
    rng = np.random.default_rng(1)
    ts = rng.permutation(n)
    p = _pfw(
        tmp_path, [_ev(int(i), ts=int(t), args={"fname": "/d/x", "ret": int(t), "offset": 0}) for i, t in enumerate(ts)]
    )
    tr = load_trace(p)
    assert len(tr.events) == n
    assert (tr.events["t"] == np.arange(n) * 1000).all()
    assert (tr.events["size"] == np.arange(n)).all()  # each field moved with its time


def test_interposer_capture_with_a_cut_tail_and_a_cut_name_line(tmp_path):
    """What a job killed mid-write leaves: zero records where a block was reserved, a names file
    with NUL padding and a last line without its newline."""
    from dlio.profile.parsers import NATIVE_DTYPE, OP_OPEN

    rec = np.zeros(8, NATIVE_DTYPE)
    rec["t"][:3] = [100, 200, 300]
    rec["op"][:3] = [OP_OPEN, OP_READ, OP_READ]
    rec["file"][:3] = [1, 1, 2]
    rec["ret"][:3] = [3, 4096, 10]
    rec["pid"][:3] = 5
    rec.tofile(tmp_path / "ev-5-1.bin")
    (tmp_path / "files-5-1.txt").write_bytes(b"1\t/d/a\n" + b"\0" * 100 + b"2\t/d/b\n3\t/d/c" + b"\0" * 50)
    tr = load_trace(str(tmp_path))
    assert list(tr.events["t"]) == [0, 100, 200]
    assert [tr.paths[i] for i in tr.events["file"]] == ["/d/a", "/d/a", "/d/b"]
    assert tr.notes == []


def test_the_event_cap_on_an_interposer_capture(tmp_path):
    from dlio.profile.parsers import NATIVE_DTYPE

    rec = np.zeros(30, NATIVE_DTYPE)
    rec["t"] = np.arange(1, 31)
    rec["op"], rec["file"], rec["ret"] = OP_READ, 1, 10
    rec.tofile(tmp_path / "ev-5-1.bin")
    (tmp_path / "files-5-1.txt").write_text("1\t/d/a\n")
    tr = load_trace(str(tmp_path), max_events=12)
    assert len(tr.events) == 12 and "read the first 12 events only (the cap)" in tr.notes[0]
    assert load_trace(str(tmp_path), max_events=30).notes == []
