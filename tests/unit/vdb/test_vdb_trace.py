"""Captures of real DiskANN: the strace parser on a capture-shaped text, the trace file, bad trace files."""

import json

import numpy as np
import pytest

from dlio.base.errors import ConfigError
from dlio.vdb import trace
from dlio.vdb.layout import SECTOR, Layout

CAPTURE = "tests/data/vdb/diskann_n5000_d1536_r32_l64_w4.json"


def _iocbs(fd, offs, n=4096):
    return ", ".join(
        f"{{aio_data=0, aio_lio_opcode=IOCB_CMD_PREAD, aio_fildes={fd}, aio_buf=0x1000, aio_nbytes={n}, "
        f"aio_offset={o}}}"
        for o in offs
    )


def test_parse_strace(tmp_path):
    """Two queries on a packed index (6 nodes per sector): the load's medoid read before the first marker is
    not a search; a submit split by another thread (unfinished / resumed) still counts; the medoid's sector
    reads as the medoid."""
    lay = Layout("diskann", 2000, 128, 4, 32, 1)
    idx = tmp_path / "ann_disk.index"
    idx.write_bytes(lay.metadata(0, 859) + bytes(lay.index_bytes(0) - SECTOR))
    m = 144 * SECTOR  # the medoid's sector
    text = "\n".join(
        [
            f'[pid 10] openat(AT_FDCWD, "{idx}", O_RDONLY) = 3',
            f'[pid 10] openat(AT_FDCWD, "{idx}", O_RDONLY|O_DIRECT) = 4',
            f"[pid 10] io_submit(0x7f, 1, [{_iocbs(4, [m])}]) = 1",
            '[pid 10] access("/nonexistent-vdb-capture/q0", F_OK) = -1 ENOENT (No such file or directory)',
            f"[pid 11] io_submit(0x7f, 1, [{_iocbs(4, [m])}]) = 1",
            f"[pid 11] io_submit(0x7f, 3, [{_iocbs(4, [4096, 8192, 12288])}] <unfinished ...>",
            "[pid 12] <... io_submit resumed>) = 4",
            '[pid 10] access("/nonexistent-vdb-capture/q1", F_OK) = -1 ENOENT (No such file or directory)',
            f"[pid 11] io_submit(0x7f, 1, [{_iocbs(4, [m])}]) = 1",
            f"[pid 11] io_submit(0x7f, 2, [{_iocbs(4, [8192, 16384])}]) = 2",
            f"[pid 11] io_submit(0x7f, 1, [{_iocbs(9, [8192])}]) = 1",  # another file: not the index
        ]
    )
    tr = trace.parse_strace(text, str(idx), {"search_list": 8})
    assert tr.searches == 2 and tr.read_bytes == 4096 and tr.medoid == 859
    assert list(tr.hops_per_search()) == [2, 2] and list(tr.reads_per_search()) == [4, 3]
    assert list(tr.first_reads()) == [859, 859]
    assert list(tr.nodes) == [859, 0, 6, 12, 859, 6, 18]
    assert tr.open_flags == ["O_RDONLY", "O_RDONLY|O_DIRECT"]
    assert tr.params["node_len"] == 644 and tr.params["vectors"] == 2000

    path = tmp_path / "t.json"
    trace.save(tr, str(path))
    back = trace.load(str(path))
    assert np.array_equal(back.nodes, tr.nodes) and np.array_equal(back.hop_first, tr.hop_first)
    assert back.medoid == 859 and back.params == tr.params


def test_the_committed_capture():
    """Real DiskANN: every search starts at the medoid, reads whole 8 KiB nodes, opens the index O_DIRECT."""
    tr = trace.load(CAPTURE)
    assert tr.searches == 50 and tr.read_bytes == 8192
    assert (tr.first_reads() == tr.medoid).all()
    assert any("O_DIRECT" in f for f in tr.open_flags)
    sizes = np.diff(tr.read_first)
    assert sizes.max() <= tr.params["beam_width"] and (sizes[tr.hop_first[:-1]] == 1).all()


@pytest.mark.parametrize(
    "content, what",
    [("not json", "not a valid"), ('{"format": "x"}', "not a dlio-fast.vdb-trace/1"), (None, "No such file")],
)
def test_bad_trace_files(tmp_path, content, what):
    path = tmp_path / "t.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as e:
        trace.load(str(path))
    assert "vdb.trace" in str(e.value) and what in str(e.value)


def test_a_trace_with_an_empty_hop_is_refused(tmp_path):
    doc = json.load(open(CAPTURE))
    doc["searches"][0].append([])
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="empty hop"):
        trace.load(str(path))


def test_replay_at_another_scale_stretches_the_node_ids():
    from dlio.vdb.search import _scaled

    tr = trace.load(CAPTURE)
    ids, medoid = _scaled(tr, 4 * tr.params["vectors"])
    assert medoid == 4 * tr.medoid and np.array_equal(ids, 4 * tr.nodes)
    ids, medoid = _scaled(tr, tr.params["vectors"])
    assert medoid == tr.medoid and np.array_equal(ids, tr.nodes)
