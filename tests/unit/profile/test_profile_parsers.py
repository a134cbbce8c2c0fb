"""The trace parsers of `dlio-fast profile` on small hand-written traces: strace -f -tt -T, Darshan
DXT text and DFTracer .pfw / .pfw.gz. Each expected event is written out by hand from the input."""

import gzip
import json

import pytest

from dlio.base.errors import DlioError
from dlio.profile.parsers import OP_CLOSE, OP_MMAP, OP_OPEN, OP_READ, OP_WRITE, load_trace

STRACE = """\
1234  10:00:00.000100 openat(AT_FDCWD, "/data/a.npz", O_RDONLY|O_CLOEXEC) = 3 <0.000010>
1234  10:00:00.000200 read(3, "PK\\3\\4\\24\\0\\0\\0"..., 4096) = 4096 <0.000020>
[pid  1235] 10:00:00.000250 pread64(3, "\\0\\0, \\"x\\""..., 8192, 4096) = 8192 <0.000030>
1234  10:00:00.000300 lseek(3, 100, SEEK_SET) = 100 <0.000001>
1234  10:00:00.000400 read(3,  <unfinished ...>
1235  10:00:00.000410 openat(AT_FDCWD, "/data/b.npz", O_RDONLY) = 4 <0.000005>
1234  10:00:00.000500 <... read resumed>"abc"..., 50) = 50 <0.000100>
1234  10:00:00.000600 mmap(NULL, 65536, PROT_READ, MAP_PRIVATE, 4, 0) = 0x7f0000000000 <0.000005>
1234  10:00:00.000700 openat(AT_FDCWD, "/nope", O_RDONLY) = -1 ENOENT (No such file or directory) <0.000005>
1234  10:00:00.000800 close(3) = 0 <0.000002>
1234  10:00:00.000900 read(3, "", 10) = -1 EBADF (Bad file descriptor) <0.000001>
1235  10:00:00.001000 write(4, "hello", 5) = 5 <0.000004>
1235  10:00:00.001100 +++ exited with 0 +++
"""


def rows(tr):
    """(t ns, dur ns, pid, tid, op, path, offset, size) per event."""
    return [
        (
            int(e["t"]),
            int(e["dur"]),
            int(e["pid"]),
            int(e["tid"]),
            int(e["op"]),
            str(tr.paths[e["file"]]),
            int(e["offset"]),
            int(e["size"]),
        )
        for e in tr.events
    ]


def test_strace_opens_reads_offsets_unfinished_and_mmap(tmp_path):
    p = tmp_path / "job.strace"
    p.write_text(STRACE)
    tr = load_trace(str(p))
    assert tr.source == "strace"
    a, b = "/data/a.npz", "/data/b.npz"
    assert rows(tr) == [
        (0, 10_000, 1234, 1234, OP_OPEN, a, 0, 0),
        (100_000, 20_000, 1234, 1234, OP_READ, a, 0, 4096),  # read() offset from the open
        (150_000, 30_000, 1235, 1235, OP_READ, a, 4096, 8192),  # pread64's own offset; a thread's fd
        (300_000, 100_000, 1234, 1234, OP_READ, a, 100, 50),  # after lseek; unfinished + resumed
        (310_000, 5_000, 1235, 1235, OP_OPEN, b, 0, 0),
        (500_000, 5_000, 1234, 1234, OP_MMAP, b, 0, 65536),  # mmap of an fd another pid opened
        (700_000, 2_000, 1234, 1234, OP_CLOSE, a, -1, 0),  # failed open and read after close: none
        (900_000, 4_000, 1235, 1235, OP_WRITE, b, 0, 5),
    ]


DXT = """\
# darshan log version: 3.41
# DXT, file_id: 9001, file_name: /data/img_0.jpeg
# DXT, rank: 0, hostname: node1
# DXT, write_count: 0, read_count: 2
# DXT, mnt_pt: /data, fs_type: lustre
# Module    Rank  Wt/Rd  Segment          Offset       Length    Start(s)      End(s)  [OST]
 X_POSIX       0  read        0               0       262144      1.5000      1.5020  [  3]
 X_POSIX       0  read        1          262144          100      1.5030      1.5031  [  3]

# DXT, file_id: 9002, file_name: /ckpt/model.pt
# DXT, rank: 1, hostname: node2
# Module    Rank  Wt/Rd  Segment          Offset       Length    Start(s)      End(s)
 X_MPIIO       1  write       0               0      1048576      2.0000      2.5000
 X_POSIX       1  write       0               0      1048576      2.0010      2.4990
"""


def test_darshan_dxt_rows_ranks_and_mpiio_left_out(tmp_path):
    p = tmp_path / "job.dxt.txt"
    p.write_text(DXT)
    tr = load_trace(str(p))
    assert tr.source == "darshan"
    img, ck = "/data/img_0.jpeg", "/ckpt/model.pt"
    r = rows(tr)
    assert [x[2:] for x in r] == [
        (0, 0, OP_READ, img, 0, 262144),
        (0, 0, OP_READ, img, 262144, 100),
        (1, 1, OP_WRITE, ck, 0, 1048576),
    ]  # the MPI-IO row repeats the POSIX one
    assert [x[0] for x in r] == pytest.approx([0, 3_000_000, 501_000_000], abs=2)  # seconds -> ns, from 0
    assert [x[1] for x in r] == pytest.approx([2_000_000, 100_000, 498_000_000], abs=2)


PFW = [
    {"name": "FH", "ph": "M", "pid": 7, "tid": 7, "args": {"name": "/data/b.npz", "value": 77}},
    {
        "id": 1,
        "name": "open64",
        "cat": "POSIX",
        "pid": 7,
        "tid": 8,
        "ts": 1000,
        "dur": 3,
        "ph": "X",
        "args": {"fname": "/data/a.npz", "ret": 5},
    },
    {
        "id": 2,
        "name": "read",
        "cat": "POSIX",
        "pid": 7,
        "tid": 8,
        "ts": 1010,
        "dur": 40,
        "ph": "X",
        "args": {"fname": "/data/a.npz", "ret": 4096, "offset": 0},
    },
    {
        "id": 3,
        "name": "pread64",
        "cat": "POSIX",
        "pid": 7,
        "tid": 9,
        "ts": 1020,
        "dur": 25,
        "ph": "X",
        "args": {"fhash": 77, "ret": 8192, "offset": 4096},
    },
    {"id": 4, "name": "compute", "cat": "compute", "pid": 7, "tid": 8, "ts": 1100, "dur": 500, "ph": "X"},
    {
        "id": 5,
        "name": "read",
        "cat": "POSIX",
        "pid": 7,
        "tid": 8,
        "ts": 1200,
        "dur": 2,
        "ph": "X",
        "args": {"fname": "/data/a.npz", "ret": -1, "offset": 4096},
    },
    {
        "id": 6,
        "name": "close",
        "cat": "POSIX",
        "pid": 7,
        "tid": 8,
        "ts": 1300,
        "dur": 1,
        "ph": "X",
        "args": {"fname": "/data/a.npz", "ret": 0},
    },
]
PFW_ROWS = [
    (0, 3000, 7, 8, OP_OPEN, "/data/a.npz", -1, 0),
    (10_000, 40_000, 7, 8, OP_READ, "/data/a.npz", 0, 4096),
    (20_000, 25_000, 7, 9, OP_READ, "/data/b.npz", 4096, 8192),  # name from the FH metadata line
    (200_000, 2000, 7, 8, OP_READ, "/data/a.npz", 4096, -1),  # a failed read keeps size -1
    (300_000, 1000, 7, 8, OP_CLOSE, "/data/a.npz", -1, 0),
]  # the compute span is left out


def _pfw_text():
    return "[\n" + "".join(json.dumps(e) + ",\n" for e in PFW)


def test_pfw_posix_events_fhash_names_and_other_categories_left_out(tmp_path):
    p = tmp_path / "trace-0-of-1.pfw"
    p.write_text(_pfw_text())
    tr = load_trace(str(p))
    assert tr.source == "pfw"
    assert rows(tr) == PFW_ROWS


def test_pfw_gz_and_run_folder(tmp_path):
    with gzip.open(tmp_path / "trace-0-of-1.pfw.gz", "wt") as f:
        f.write(_pfw_text())
    assert rows(load_trace(str(tmp_path / "trace-0-of-1.pfw.gz"))) == PFW_ROWS
    assert rows(load_trace(str(tmp_path))) == PFW_ROWS  # a run folder of `run --trace`


def test_unknown_trace_is_a_one_line_error(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello\nworld\n")
    with pytest.raises(DlioError, match="not a trace this knows"):
        load_trace(str(p))
    with pytest.raises(DlioError, match="no such file"):
        load_trace(str(tmp_path / "missing"))
