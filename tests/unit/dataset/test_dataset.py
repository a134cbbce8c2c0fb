"""Dataset layout (DLIO's names, folders and shape draws), the generation driver (skip/remake,
temporary names, free-space check, ranks, progress) and the manifest (generated vs scanned)."""

import os
import struct
import subprocess
import sys
from collections import namedtuple

import numpy as np
import pytest

from dlio.base.errors import ConfigError, DatasetError, InsufficientSpace
from dlio.dataset.formats import get_format
from dlio.dataset.generate import generate
from dlio.dataset.manifest import load_manifest, load_saved, manifest_path, resolve_paths, scan_manifest
from dlio.dataset.spec import (
    LISTED_FROM,
    DatasetSpec,
    all_dims,
    dataset_bytes,
    file_dims,
    file_paths,
    listed_dataset_bytes,
)

_core = pytest.importorskip("dlio._core")


def spec_of(tmp_path, fmt="npy", **kw):
    base = dict(
        data_folder=str(tmp_path / "data") + "/",
        format=fmt,
        num_files_train=4,
        num_files_eval=2,
        num_samples_per_file=3,
        record_length_bytes=1024,
        record_length_bytes_stdev=256,
    )
    base.update(kw)
    return DatasetSpec(**base)


def tmp_files(root):
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if ".tmp-" in f]


# ---------------------------------------------------------------------------------------------
# names and shapes


def test_names_flat_like_dlio():
    s = DatasetSpec(data_folder="/d/", format="npz", num_files_train=168, num_files_eval=8)
    tr = file_paths(s, "train")
    assert len(tr) == 168 and tr[7] == "/d/train/img_007_of_168.npz" and tr[167] == "/d/train/img_167_of_168.npz"
    assert file_paths(s, "eval") == [f"/d/valid/img_{i}_of_8.npz" for i in range(8)]
    assert file_paths(DatasetSpec(format="tfrecord", num_files_train=1, file_prefix="x"), "train") == [
        "./data/train/x_0_of_1.tfrecord"
    ]
    assert (
        file_paths(DatasetSpec(format="mmap_indexed_binary", num_files_train=10), "train")[3]
        == "./data/train/img_03_of_10.mmap_indexed_binary"
    )


def test_names_subfolders_like_dlio():
    s = DatasetSpec(
        data_folder="/d",
        format="jpeg",
        num_files_train=25,
        num_subfolders_train=10,
        num_files_eval=5,
        num_subfolders_eval=3,
    )
    tr = file_paths(s, "train")
    assert tr[13] == "/d/train/03/img_13_of_25.jpeg"  # subfolder width len(str(10)) = 2
    assert tr[0] == "/d/train/00/img_00_of_25.jpeg" and tr[9] == "/d/train/09/img_09_of_25.jpeg"
    assert file_paths(s, "valid") == [f"/d/valid/{i % 3}/img_{i}_of_5.jpeg" for i in range(5)]
    one = DatasetSpec(data_folder="/d", format="png", num_files_train=3, num_subfolders_train=1)
    assert file_paths(one, "train")[2] == "/d/train/img_2_of_3.png"  # S = 1 writes flat, as DLIO


def test_names_imagenet_scale_fast():
    s = DatasetSpec(data_folder="/d", format="jpeg", num_files_train=1281167, num_subfolders_train=1000)
    p = file_paths(s, "train")
    assert len(p) == 1281167 and p[1281166] == "/d/train/0166/img_1281166_of_1281167.jpeg"
    assert p[5] == "/d/train/0005/img_0000005_of_1281167.jpeg"  # width len(str(1000)) = 4


def test_dims_follow_dlio_seed10_rule():
    s = DatasetSpec(
        format="npz",
        num_files_train=5,
        num_files_eval=3,
        record_length_bytes=146600628,
        record_length_bytes_stdev=68341808,
    )
    np.random.seed(10)
    D = int(np.sqrt(146600628))
    draws = np.random.normal(D, 68341808 / 2 / np.sqrt(146600628), 2 * 8)
    d = [max(int(x), 1) for x in draws]
    np.random.seed()
    want = np.array(d).reshape(8, 2)
    assert D == 12107
    assert file_dims(s, "train").tolist() == want[:5].tolist()
    assert file_dims(s, "valid").tolist() == want[5:].tolist()
    assert file_dims(s, "train").dtype == np.int64


def test_dims_fixed_and_record_dims():
    s = DatasetSpec(format="tfrecord", num_files_train=3, num_files_eval=1, record_length_bytes=114660.07)
    assert file_dims(s, "train").tolist() == [[338, 338]] * 3 and file_dims(s, "valid").tolist() == [[338, 338]]
    r = DatasetSpec(format="hdf5", num_files_train=2, record_dims=[4, 5, 6], record_element_type="float32")
    assert file_dims(r, "train").tolist() == [[4, 5, 6], [4, 5, 6]]
    tiny = DatasetSpec(format="npy", num_files_train=50, record_length_bytes=4, record_length_bytes_stdev=40)
    assert file_dims(tiny, "train").min() == 1  # clipped at >= 1


def test_dataset_bytes_estimate(tmp_path):
    for fmt in ("npy", "npz", "tfrecord", "indexed_binary", "hdf5", "jpeg"):
        s = spec_of(tmp_path / fmt, fmt, num_samples_per_file=2)
        generate(s, threads=2)
        actual = sum(
            os.path.getsize(os.path.join(d, f))
            for d, _, fs in os.walk(s.data_folder)
            for f in fs
            if ".dlio-fast" not in d
        )
        est = dataset_bytes(s)
        assert abs(est - actual) / actual < 0.1, (fmt, est, actual)
    big = DatasetSpec(
        format="npz", num_files_train=168, record_length_bytes=146600628, record_length_bytes_stdev=68341808
    )
    dims = file_dims(big, "train")
    assert abs(dataset_bytes(big) - int(np.prod(dims, axis=1).sum())) < 168 * 1000


def test_a_listing_sizes_a_big_dataset_from_its_first_files():
    """`dlio-fast workloads` sizes ImageNet's 1.3 M files from the first LISTED_FROM drawn shapes: the
    draws are sequential, so those are the whole list's first shapes, and the mean times the count is
    within 0.1 % of the whole sum; a dataset of at most LISTED_FROM files is summed whole."""
    imagenet = DatasetSpec(
        format="jpeg", num_files_train=1281167, record_length_bytes=114660, record_length_bytes_stdev=51960
    )
    small = DatasetSpec(
        format="jpeg", num_files_train=LISTED_FROM, record_length_bytes=114660, record_length_bytes_stdev=51960
    )
    assert (all_dims(small) == all_dims(imagenet)[:LISTED_FROM]).all()
    whole = dataset_bytes(imagenet)
    assert abs(listed_dataset_bytes(imagenet) - whole) / whole < 0.001
    assert listed_dataset_bytes(small) == dataset_bytes(small)


# ---------------------------------------------------------------------------------------------
# generation


def test_generate_skip_and_remake_only_broken_file(tmp_path):
    s = spec_of(tmp_path)
    r = generate(s, threads=3)
    assert (r.files_total, r.files_written, r.files_skipped) == (6, 6, 0)
    paths = file_paths(s, "train") + file_paths(s, "valid")
    old = 1_000_000_000
    for p in paths:
        os.utime(p, (old, old))
    good = os.path.getsize(paths[2])
    with open(paths[2], "r+b") as f:
        f.truncate(good - 10)
    r = generate(s, threads=3)
    assert (r.files_written, r.files_skipped) == (1, 5)
    assert [os.stat(p).st_mtime == old for p in paths] == [True, True, False, True, True, True]
    assert os.path.getsize(paths[2]) == good
    assert np.load(paths[2]).shape == (*file_dims(s, "train")[2], 3)
    r = generate(s)
    assert (r.files_written, r.files_skipped) == (0, 6)
    assert tmp_files(s.data_folder) == []


def test_generate_without_manifest_uses_format_validity(tmp_path):
    for fmt in ("npy", "tfrecord", "hdf5", "jpeg"):
        s = spec_of(tmp_path / fmt, fmt)
        generate(s)
        for split in ("train", "valid"):
            os.unlink(manifest_path(s, split))
        p = file_paths(s, "valid")[1]
        with open(p, "r+b") as f:
            f.truncate(100)
        r = generate(s)
        assert (r.files_written, r.files_skipped) == (1, 5), fmt
        assert os.path.exists(manifest_path(s, "train"))


def test_generate_changed_spec_remakes(tmp_path):
    s = spec_of(tmp_path, num_samples_per_file=1)
    generate(s)
    s2 = spec_of(tmp_path, num_samples_per_file=2)
    r = generate(s2)
    assert r.files_written == 6
    assert np.load(file_paths(s2, "train")[0]).shape[-1] == 2


def test_failed_write_leaves_no_temp_and_no_final(tmp_path):
    """A real failure in the C writer (the final name is taken by a directory, so naming the file fails):
    a one-line error naming the file, no temporary file left, and the next run completes."""
    s = spec_of(tmp_path, "tfrecord")
    generate(s, threads=1)
    victim = file_paths(s, "train")[3]
    os.unlink(victim)
    os.mkdir(victim)
    with pytest.raises(DatasetError, match="img_3_of_4.tfrecord.*(link|rename)"):
        generate(s, threads=1)
    assert os.path.isdir(victim)
    assert tmp_files(s.data_folder) == []
    os.rmdir(victim)
    r = generate(s, threads=2)
    assert r.files_written == 1 and r.files_skipped == 5
    assert os.path.getsize(victim) == get_format("tfrecord").expected_size(
        tuple(all_dims(s)[3]), s.num_samples_per_file, s
    )


def test_stale_temp_files_are_removed(tmp_path):
    s = spec_of(tmp_path)
    generate(s)
    p = file_paths(s, "train")[1]
    os.unlink(p)
    # a generation that died writing p: its temporary file under its claim on the data folder
    dies = (
        "import os, sys; from dlio.system import output; "
        "cm = output.atomic_path(sys.argv[1], claim_root=sys.argv[2]); t = cm.__enter__(); "
        "open(t, 'wb').write(b'junk'); print(t, flush=True); os._exit(9)"
    )
    stale = subprocess.run(
        [sys.executable, "-c", dies, p, s.data_folder], capture_output=True, text=True, check=False
    ).stdout.strip()
    assert os.path.exists(stale)
    named_alike = os.path.join(os.path.dirname(p), f".{os.path.basename(p)}.tmp-99999999")  # no claim: not ours
    open(named_alike, "wb").write(b"keep")
    r = generate(s)
    assert r.files_written == 1 and not os.path.exists(stale) and os.path.exists(named_alike)


def test_insufficient_space(tmp_path, monkeypatch):
    s = spec_of(tmp_path, record_length_bytes=1 << 20, record_length_bytes_stdev=0)
    real = os.statvfs
    Fake = namedtuple("Fake", "f_bavail f_frsize f_blocks f_bfree")

    def tiny(path):
        real(path)
        return Fake(f_bavail=100, f_frsize=4096, f_blocks=1000, f_bfree=100)

    monkeypatch.setattr(os, "statvfs", tiny)
    with pytest.raises(InsufficientSpace) as ei:
        generate(s)
    e = ei.value
    assert e.free == 409600 and e.needed >= 6 * 3 * (1 << 20) and 0 < e.suggested_scale < 0.03
    assert "MiB" in str(e) and "0.00" not in str(e) and s.data_folder in str(e)
    assert not any(os.path.exists(p) for p in file_paths(s, "train"))


def test_ranks_partition_and_part_manifests(tmp_path):
    s = spec_of(tmp_path, "tfrecord", num_files_train=5, num_files_eval=3, record_length_bytes_stdev=0)
    r0 = generate(s, rank=0, size=3)
    r1 = generate(s, rank=1, size=3)
    paths = file_paths(s, "train") + file_paths(s, "valid")
    # equal sizes: the middle bytes of files 0-2 fall in rank 0's third, 3-4 in rank 1's, 5-7 in rank 2's
    assert r0.files_written == 3 and r1.files_written == 2
    assert [os.path.exists(p) for p in paths] == [i < 5 for i in range(8)]
    r2 = generate(s, rank=2, size=3)
    assert r2.files_written == 3
    assert not os.path.exists(manifest_path(s, "train"))
    m = load_manifest(s, "train")  # merged from the three parts
    assert m.meta.get("source") == "generate"
    fresh = scan_manifest(s, "train")
    assert np.array_equal(m.file_size, fresh.file_size)
    assert all(np.array_equal(a, b) for a, b in zip(m.ranges(), fresh.ranges()))


def test_ranks_balance_bytes_not_files(tmp_path):
    """One large file and many small ones: the large file's rank gets few files, about half the bytes."""
    from dlio.dataset.gen_plan import rank_files

    s = spec_of(tmp_path, "npy", num_files_train=9, num_files_eval=0)
    dims = np.array([[64, 64]] + [[8, 8]] * 8)  # 4096-element file, then 8 files of 64 elements
    got = [rank_files(s, dims, r, 2) for r in range(2)]
    assert sorted(np.concatenate(got).tolist()) == list(range(9))  # a partition
    assert got[0].tolist() == [0] and got[1].tolist() == list(range(1, 9))
    assert rank_files(s, dims, 0, 1).tolist() == list(range(9))
    # 3 ranks over equal files: each gets a third, within one file
    dims = np.array([[16, 16]] * 10)
    counts = [rank_files(s, dims, r, 3).size for r in range(3)]
    assert sum(counts) == 10 and max(counts) - min(counts) <= 1


def test_barrier_merges_parts(tmp_path):
    s = spec_of(tmp_path, "npy")
    calls = []
    generate(s, rank=1, size=2, barrier=lambda: calls.append(1))
    generate(s, rank=0, size=2, barrier=lambda: calls.append(0))
    assert os.path.exists(manifest_path(s, "train"))
    assert not [f for f in os.listdir(os.path.dirname(manifest_path(s, "train"))) if ".part-" in f]
    assert load_manifest(s, "valid").file_size.tolist() == [os.path.getsize(p) for p in file_paths(s, "valid")]


def test_progress_callback(tmp_path):
    s = spec_of(tmp_path, "npz")
    seen = []
    generate(s, threads=2, progress=lambda b, f: seen.append((b, f)))
    total = sum(os.path.getsize(p) for p in file_paths(s, "train") + file_paths(s, "valid"))
    assert seen and seen == sorted(seen) and seen[-1] == (total, 6)  # polled: running totals, then all
    seen.clear()
    generate(s, progress=lambda b, f: seen.append((b, f)))
    assert seen == [(total, 6)]


# ---------------------------------------------------------------------------------------------
# manifest


def test_manifest_whole_file_values(tmp_path):
    s = spec_of(tmp_path, "npy", record_element_type="float32")
    generate(s)
    for split in ("train", "valid"):
        m = load_manifest(s, split)
        dims = file_dims(s, split)
        assert m.whole_file and m.table is None
        assert m.file_size.dtype == np.uint64
        assert m.file_size.tolist() == (128 + np.prod(dims, axis=1) * 3 * 4).tolist()
        rf, rsm, ro, rl = m.ranges()
        assert rf.tolist() == np.repeat(np.arange(len(dims)), 3).tolist() and rsm.tolist() == [0, 1, 2] * len(dims)
        assert not ro.any() and rl.tolist() == np.repeat(m.file_size, 3).tolist()


def test_manifest_indexed_binary_values(tmp_path):
    s = spec_of(tmp_path, "indexed_binary", record_element_type="int32")
    generate(s)
    m = load_manifest(s, "train")
    ss = np.prod(file_dims(s, "train"), axis=1) * 4
    rf, rsm, ro, rl = m.ranges()
    assert rf.dtype == np.uint32 and ro.dtype == np.uint64
    assert rf.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert rsm.tolist() == [0, 1, 2] * 4
    assert ro.tolist() == [int(k * x) for x in ss for k in range(3)]
    assert rl.tolist() == [int(x) for x in ss for _ in range(3)]
    assert m.file_size.tolist() == (ss * 3).tolist()


def records_on_disk(path):
    """(offset, framed length) of every record, walking the TFRecord length fields."""
    data = open(path, "rb").read()
    pos, recs = 0, []
    while pos < len(data):
        n = struct.unpack_from("<Q", data, pos)[0]
        recs.append((pos, n + 16))
        pos += n + 16
    return recs


def test_manifest_tfrecord_values(tmp_path):
    s = spec_of(tmp_path, "tfrecord")
    generate(s)
    m = load_manifest(s, "valid")
    for f, p in enumerate(m.paths):
        smp, off, ln = m.table.of_file(f)
        assert list(zip(off.tolist(), ln.tolist())) == records_on_disk(p)
        assert smp.tolist() == [0, 1, 2]


def test_scan_without_manifest_equals_generated(tmp_path):
    for fmt in ("hdf5", "tfrecord", "npz", "indexed_binary"):
        s = spec_of(tmp_path / fmt, fmt)
        generate(s)
        gen = {sp: load_manifest(s, sp) for sp in ("train", "valid")}
        for sp in ("train", "valid"):
            os.unlink(manifest_path(s, sp))
            scanned = load_manifest(s, sp)
            assert scanned.meta.get("source") == "scan"
            assert os.path.exists(manifest_path(s, sp))  # cached again
            assert scanned.paths == gen[sp].paths
            assert np.array_equal(scanned.file_size, gen[sp].file_size), fmt
            assert all(np.array_equal(a, b) for a, b in zip(scanned.ranges(), gen[sp].ranges())), fmt
            assert (scanned.table is None) == (gen[sp].table is None), fmt


def test_checksums(tmp_path):
    s = spec_of(tmp_path, "hdf5")
    generate(s, checksum=True)
    m = load_manifest(s, "train", checksum=True)
    for f, p in enumerate(m.paths):
        data = open(p, "rb").read()
        assert int(m.file_crc32c[f]) == _core.crc32c(data)
        rf, _, ro, rl = m.ranges()
        for k in np.flatnonzero(rf == f):
            o, n = int(ro[k]), int(rl[k])
            assert int(m.range_crc32c[k]) == _core.crc32c(data[o : o + n])


def test_missing_and_short_datasets(tmp_path):
    s = spec_of(tmp_path)
    with pytest.raises(DatasetError, match=r"data/train: no such folder, expected 4 npy"):
        load_manifest(s, "train")
    generate(s)
    more = spec_of(tmp_path, num_files_train=9)
    with pytest.raises(DatasetError, match=r"found 4 npy file\(s\) but num_files_train is 9"):
        load_manifest(more, "train")
    os.unlink(file_paths(s, "train")[1])
    os.unlink(manifest_path(s, "train"))
    with pytest.raises(DatasetError, match=r"1 of 4 file\(s\) missing"):
        load_manifest(s, "train")


def test_dlio_listing_takes_first_n_of_a_larger_dataset(tmp_path):
    big = spec_of(tmp_path, "npz", num_files_train=12, num_subfolders_train=5)
    generate(big)
    small = spec_of(tmp_path, "npz", num_files_train=4, num_subfolders_train=5)
    paths = resolve_paths(small, "train")
    assert paths == file_paths(big, "train")[:4]
    m = load_manifest(small, "train")
    assert m.paths == paths and m.file_size.tolist() == [os.path.getsize(p) for p in paths]
    again = load_manifest(small, "train")  # cached with its non-canonical names
    assert again.paths == paths and again.meta.get("canonical") is False


def test_spec_from_dlio_dict():
    s = DatasetSpec.from_dict(
        {
            "data_folder": "x/",
            "format": "hdf5",
            "record_length": 4096,
            "record_length_stdev": 10,
            "num_files_train": 3,
            "hdf5": {"chunk_dims": [1, 8, 8], "num_dset_per_record": 2},
        }
    )
    assert (s.data_folder, s.record_length_bytes, s.record_length_bytes_stdev) == ("x", 4096, 10)
    assert s.hdf5_chunk_dims == (1, 8, 8) and s.hdf5_num_dset_per_record == 2
    assert DatasetSpec(format="jpeg", record_element_type="float32").record_element_type == "uint8"
    with pytest.raises(ConfigError):
        DatasetSpec(format="lance")  # no such DLIO format


# ---------------------------------------------------------------------------------------------
# regular files: the manifest keeps one first offset per file (dlio.dataset.ranges)


@pytest.mark.parametrize("fmt", ["tfrecord", "indexed_binary"])
@pytest.mark.parametrize("ranks", [1, 3])
def test_fixed_size_records_give_a_uniform_table(tmp_path, fmt, ranks):
    s = spec_of(tmp_path, fmt, num_files_train=5, num_samples_per_file=7, record_length_bytes_stdev=0)
    for r in range(ranks):
        generate(s, rank=r, size=ranks)
    m = load_manifest(s, "train")
    assert m.table.uniform and m.table.first.size == 5 and m.table.count == 7
    scanned = scan_manifest(s, "train")
    assert scanned.table.uniform
    assert all(np.array_equal(a, b) for a, b in zip(m.ranges(), scanned.ranges()))
    if fmt == "tfrecord":  # against the bytes themselves
        for f, p in enumerate(m.paths):
            smp, off, ln = m.table.of_file(f)
            assert list(zip(off.tolist(), ln.tolist())) == records_on_disk(p) and smp.tolist() == list(range(7))
    # saved and loaded again: O(files) arrays on disk too
    z = np.load(manifest_path(s, "train"))
    assert "range_first" in z.files and "range_file" not in z.files
    again = load_saved(s, "train")
    assert again.table.uniform and np.array_equal(again.table.first, m.table.first)


def test_checksums_of_a_uniform_table(tmp_path):
    s = spec_of(tmp_path, "tfrecord", record_length_bytes_stdev=0)
    generate(s, checksum=True)
    m = load_manifest(s, "train", checksum=True)
    assert m.table.uniform
    rf, _, ro, rl = m.ranges()
    for f, p in enumerate(m.paths):
        data = open(p, "rb").read()
        for k in np.flatnonzero(rf == f):
            assert int(m.range_crc32c[k]) == _core.crc32c(data[int(ro[k]) : int(ro[k] + rl[k])])


def test_batches_cover_every_file_once_and_end_small(tmp_path, monkeypatch):
    """Threads take batches in order: every file is in exactly one batch, and the last
    2 x threads x BATCH_BYTES go in eighth-size batches (no thread idles through a whole batch)."""
    from dlio.dataset import gen_plan, gen_write

    monkeypatch.setattr(gen_write, "BATCH_BYTES", 4 << 20)
    s = spec_of(tmp_path, num_files_train=100, num_files_eval=0, record_length_bytes=256 << 10)
    pl = gen_plan.plan(s)
    batches = gen_write._batches(pl, threads=2)
    assert sorted(np.concatenate(batches).tolist()) == list(range(100))
    est = get_format("npy").estimate_sizes(pl.dims, s.num_samples_per_file, s)
    sizes = [int(est[b].sum()) for b in batches]
    tail = np.cumsum(sizes[::-1])[::-1] <= 2 * 2 * (4 << 20)  # batches within the last 16 MiB
    assert tail.any() and not tail.all()
    assert max(np.array(sizes)[tail]) <= (4 << 20) // 8 + int(est.max())
    assert max(np.array(sizes)[~tail][:-1]) >= 4 << 20


def _corrupt_tfrecord_length(path, value):
    b = bytearray(open(path, "rb").read())
    b[0:8] = struct.pack("<Q", value)
    open(path, "wb").write(b)


def _idx_past_the_end(path, spec):
    idx = [p for p in get_format("indexed_binary").companions(path, spec) if "off" in os.path.basename(p)][0]
    offs = np.fromfile(idx, dtype=np.uint64)
    offs[-1] = np.uint64(2**63 + 5)
    offs.tofile(idx)


@pytest.mark.parametrize(
    "fmt, corrupt",
    [
        ("tfrecord", lambda p, s: _corrupt_tfrecord_length(p, 2**64 - 1)),  # overflowed int64 (a traceback)
        ("tfrecord", lambda p, s: _corrupt_tfrecord_length(p, 10**9)),  # a record past the file's end
        ("indexed_binary", _idx_past_the_end),  # an index entry pointing past the end
    ],
)
def test_a_dataset_made_elsewhere_with_malformed_records_is_named(tmp_path, fmt, corrupt):
    """No manifest (a dataset another tool made): the scan reads lengths and offsets from the files, and
    a record that cannot be where it says is one error naming the file, never an overflow traceback or
    a planned read past the end of the file."""
    s = spec_of(tmp_path, fmt, num_samples_per_file=2, record_length_bytes_stdev=0)
    generate(s)
    for p in resolve_paths(s, "train"):
        for idx in [q for q in get_format(fmt).companions(p, s) if fmt == "tfrecord"]:
            os.unlink(idx)  # the tfrecord scan walks the length fields when no .idx exists
    victim = file_paths(s, "train")[1]
    corrupt(victim, s)
    with pytest.raises(DatasetError) as e:
        scan_manifest(s, "train")
    assert os.path.basename(victim) in str(e.value) and "regenerate" in str(e.value)


def test_a_threads_batch_of_files_is_written_folder_by_folder(tmp_path):
    """Files go round-robin over a split's folders; a batch is handed to the C core folder by folder
    (it keeps the last file's folder open), with every file of the plan in exactly one batch."""
    from dlio.dataset.gen_plan import plan
    from dlio.dataset.gen_write import _batches

    s = spec_of(tmp_path, "jpeg", num_files_train=600, num_files_eval=60, num_subfolders_train=7, num_subfolders_eval=3)
    pl = plan(s, 0, 1)
    batches = _batches(pl, threads=2)
    assert sorted(np.concatenate(batches).tolist()) == sorted(pl.todo)
    for b in batches:
        folders = [os.path.dirname(pl.paths[i]) for i in b]
        runs = [f for k, f in enumerate(folders) if k == 0 or f != folders[k - 1]]
        assert len(runs) == len(set(folders)), "a folder's files are split within one batch"
