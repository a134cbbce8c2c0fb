"""A job's logical access (visits.py), its passes and file order (order.py), and the files a job
writes that are its dataset (dataset.dataset_written), on hand-made traces whose answer is known."""

import numpy as np
import pytest

from dlio.profile.dataset import dataset_files
from dlio.profile.events import EVENT_DTYPE, OP_OPEN, OP_READ, OP_WRITE, Trace
from dlio.profile.order import epoch_of, file_order
from dlio.profile.visits import union_segments, visits

# np.load of a 4594-byte npz (dlio-fast generate -w default), as the interposer saw it: the first
# 4 KiB, the end-of-central-directory, an EOF read, the central directory, then the first 4 KiB
# again and the rest of the member. 8878 bytes in 6 calls; the file once.
NPZ_READS = [(0, 4096), (4572, 22), (4552, 42), (4470, 124), (0, 4096), (4096, 498)]


def _ev(rows):
    ev = np.array(rows, dtype=EVENT_DTYPE)
    return ev[np.argsort(ev["t"], kind="stable")]


def _np_load(rows, t, pid, tid, fid, with_open=True):
    if with_open:
        rows.append((t, 1000, pid, tid, OP_OPEN, fid, 0, 0))
    for k, (off, size) in enumerate(NPZ_READS):
        rows.append((t + 10_000 * (k + 1), 2000, pid, tid, OP_READ, fid, off, size))
    return t + 100_000


def test_a_library_reading_a_small_npz_twice_is_one_visit_of_the_file():
    rows = []
    _np_load(rows, 0, 1, 1, 0)
    vis = visits(_ev(rows)[1:], _ev(rows)[:1])
    v = vis["visits"]
    assert len(v) == 1
    assert v["bytes"][0] == 4594 and v["raw"][0] == 8878 and v["reads"][0] == 6
    assert list(vis["seg_len"]) == [4594]  # one contiguous run: what a replay reads in one call


def test_visits_end_at_another_file_a_new_open_or_another_reader():
    rows = []
    t = _np_load(rows, 0, 1, 1, 0)
    t = _np_load(rows, t, 1, 1, 0)  # the same file opened again by the same reader: a new visit
    t = _np_load(rows, t, 1, 1, 1)
    _np_load(rows, t, 1, 2, 1, with_open=False)  # another thread, no open seen
    ev = _ev(rows)
    v = visits(ev[ev["op"] == OP_READ], ev[ev["op"] == OP_OPEN])["visits"]
    assert list(v["file"]) == [0, 0, 1, 1]
    assert list(v["bytes"]) == [4594] * 4
    # without the opens, the two visits of file 0 by one reader in a row are one
    assert len(visits(ev[ev["op"] == OP_READ])["visits"]) == 3


def test_union_segments_match_a_byte_map():
    rng = np.random.default_rng(5)
    g = rng.integers(0, 7, 400)
    s = rng.integers(0, 5000, 400)
    e = s + rng.integers(1, 300, 400)
    sg, ss, se = union_segments(g, s, e)
    for k in range(7):
        want = np.zeros(6000, bool)
        for a, b in zip(s[g == k], e[g == k]):
            want[a:b] = True
        got = np.zeros(6000, bool)
        for a, b in zip(ss[sg == k], se[sg == k]):
            assert not got[a:b].any()  # disjoint
            got[a:b] = True
        assert (got == want).all()


def _dlio_paths(n, folders):
    """DLIO's names: file i in subfolder i % folders."""
    if folders:
        return np.array([f"/d/train/{i % folders}/img_{i:03d}_of_{n}.npz" for i in range(n)], dtype=object)
    return np.array([f"/d/train/img_{i:03d}_of_{n}.npz" for i in range(n)], dtype=object)


def _passes_trace(orders, readers=2):
    """Visits of files (indices) in the given order per pass, spread round-robin over readers."""
    rows, t = [], 0
    for order in orders:
        for k, f in enumerate(order):
            rows.append((t, 5000, 1, 10 + k % readers, OP_READ, int(f), 0, 1000))
            t += 100_000
        t += 50_000_000
    return visits(_ev(rows))["visits"]


@pytest.mark.parametrize(
    "folders,kind",
    [(2, "path"), (0, "path"), (2, "name"), (2, "once"), (0, "epoch")],
)
def test_file_order_sorted_by_path_by_name_shuffled_once_or_each_epoch(folders, kind):
    n = 48
    paths = _dlio_paths(n, folders)
    rng = np.random.default_rng(11)
    by_path = np.argsort(paths.astype(str))
    perm = rng.permutation(n)
    orders = {
        "path": [by_path] * 2,
        "name": [np.arange(n)] * 2,  # DLIO's listing: index order, the folders interleaved
        "once": [perm, perm],
        "epoch": [perm, rng.permutation(n)],
    }[kind]
    v = _passes_trace(orders)
    cover = np.full(n, 1000)
    ep = epoch_of(v, cover)
    assert list(np.bincount(ep)) == [n, n]
    fo = file_order(v, ep, paths)
    assert fo["kind"] == kind, fo
    if kind == "path" and folders:
        assert fo["rho_name"] < 0.9  # sorted paths walk one folder, then the other
    if kind in ("once", "epoch"):
        assert abs(fo["rho_path"]) < 0.5


def test_epoch_of_counts_passes_by_bytes_not_visits():
    """A file taken in two half visits per pass (two samples of it): the passes still count 2."""
    rows, t = [], 0
    for _ in range(2):
        for f in range(3):
            for off in (0, 500):
                rows.append((t, 1000, 1, 1, OP_READ, f, off, 500))
                t += 10_000
                rows.append((t, 1000, 1, 1, OP_READ, 9, 0, 10))  # another file between the halves
                t += 10_000
    v = visits(_ev(rows))["visits"]
    v = v[v["file"] != 9]
    ep = epoch_of(v, np.full(10, 1000))
    assert list(np.bincount(ep)) == [6, 6]


def _trace(rows, paths):
    return Trace(_ev(rows), np.array(paths, dtype=object), "test")


def test_files_a_job_writes_then_reads_again_or_from_other_threads_are_its_dataset():
    paths = [f"/w/gen/s_{i}.npz" for i in range(4)] + ["/w/out/ckpt_1.npz", "/w/log.npz"]
    rows, t = [], 0
    for f in range(6):  # the main thread writes every file
        rows.append((t, 1000, 1, 1, OP_OPEN, f, 0, 0))
        rows.append((t + 1, 1000, 1, 1, OP_WRITE, f, 0, 5000))
        t += 10_000
    for ep in range(2):  # reader threads read the dataset twice, and the checkpoint
        for f in range(5):
            rows.append((t, 1000, 1, 2, OP_OPEN, f, 0, 0))
            rows.append((t + 1, 1000, 1, 2, OP_READ, f, 0, 5000))
            t += 10_000
    rows.append((t, 1000, 1, 1, OP_OPEN, 5, 0, 0))  # the log: read back once by its writer
    rows.append((t + 1, 1000, 1, 1, OP_READ, 5, 0, 5000))
    ds = dataset_files(_trace(rows, paths))
    assert list(ds["files"]) == [0, 1, 2, 3]  # not the checkpoint, not the log
    assert "the job wrote 4 of them before it read them" in ds["evidence"]
    assert "4 were read again after their last write and 4 by other threads" in ds["evidence"]


def test_files_only_written_and_read_back_by_their_writer_are_not_a_dataset():
    paths = ["/w/a.npz", "/w/b.npz", "/data/x.npz"]
    rows = [
        (0, 1, 1, 1, OP_WRITE, 0, 0, 100),
        (10, 1, 1, 1, OP_WRITE, 1, 0, 100),
        (20, 1, 1, 1, OP_OPEN, 0, 0, 0),
        (30, 1, 1, 1, OP_READ, 0, 0, 100),
        (40, 1, 1, 2, OP_READ, 2, 0, 50),
    ]
    ds = dataset_files(_trace(rows, paths))
    assert list(ds["files"]) == [2]
