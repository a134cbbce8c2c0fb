"""What generated files hold, checked independently of the generator: every 4 KiB block that holds
random content is unique across the dataset (a deduplicating store cannot shortcut it), the content
does not compress, the C writer writes exactly what the program renders, checksums are right (zip's
CRC-32 through zipfile, PNG chunk CRCs by hand with zlib), and --dry-run's estimate comes from a
measured generation."""

import hashlib
import os
import struct
import zipfile
import zlib

import numpy as np
import pytest

from dlio.dataset.formats import get_format, mix_seed
from dlio.dataset.formats import program as P
from dlio.dataset.gen_rate import estimate_seconds, estimate_text, measured_rate
from dlio.dataset.generate import generate
from dlio.dataset.spec import DatasetSpec, all_dims, file_paths

pytest.importorskip("dlio._core")

BLOCK = 4096


def make(tmp_path, fmt, spf=3, n=4, **kw):
    kw.setdefault("record_length_bytes", 20000)
    kw.setdefault("record_length_bytes_stdev", 3000)
    spec = DatasetSpec(
        data_folder=str(tmp_path / fmt), format=fmt, num_files_train=n, num_files_eval=1, num_samples_per_file=spf, **kw
    )
    generate(spec, threads=2)
    return spec


def random_ranges(spec, i):
    """[start, end) of the random segments of file i, walking its program (REPEAT expanded)."""
    prog = P.Program()
    fmt = get_format(spec.format)
    fmt.program(
        prog,
        tuple(int(x) for x in all_dims(spec)[i]),
        spec.num_samples_per_file,
        spec,
        mix_seed(spec.seed_content, i),
        file_paths(spec, "train" if i < spec.num_files_train else "valid")[
            i if i < spec.num_files_train else i - spec.num_files_train
        ],
    )
    prog.finish()
    segs = prog.seg_array()[prog.first[-1] :]  # the data file is the last one the format adds
    blob = bytes(prog.blob)
    out, off, k = [], 0, 0

    def run(s):
        nonlocal off
        kind = int(s["kind"])
        n = {P.LIT: int(s["b"]), P.RAND: int(s["b"]), P.INLINE: int(s["arg"]), P.PUT: 4}.get(kind, 0)
        if kind == P.RAND:
            out.append((off, off + n))
        off += n

    while k < len(segs):
        if int(segs[k]["kind"]) == P.REPEAT:
            body = segs[k + 1 : k + 1 + int(segs[k]["b"])]
            for _ in range(int(segs[k]["a"])):
                for s in body:
                    run(s)
            k += 1 + len(body)
        else:
            run(segs[k])
            k += 1
    assert blob is not None
    return out, off


@pytest.mark.parametrize("fmt", ["npz", "npy", "hdf5", "tfrecord", "indexed_binary", "jpeg", "png"])
def test_random_blocks_are_unique_across_the_dataset(tmp_path, fmt):
    spf = 1 if fmt in ("jpeg", "png") else 3
    spec = make(tmp_path, fmt, spf, record_length_bytes=60000 if fmt in ("jpeg", "png") else 20000)
    paths = file_paths(spec, "train") + file_paths(spec, "valid")
    seen, random_blocks, framing_only = {}, 0, 0
    for i, p in enumerate(paths):
        data = open(p, "rb").read()
        rr, size = random_ranges(spec, i)
        assert size == len(data)
        assert rr, "every format but csv holds random content"
        for b in range(0, len(data), BLOCK):
            has_random = any(s < b + BLOCK and e > b for s, e in rr)
            h = hashlib.sha256(data[b : b + BLOCK]).digest()
            if has_random:
                random_blocks += 1
                assert h not in seen, f"{p} block {b // BLOCK} repeats {seen.get(h)}"
                seen[h] = (p, b // BLOCK)
            else:
                framing_only += 1
    assert random_blocks > 5 * len(paths) and framing_only <= 2 * len(paths)


def test_content_does_not_compress(tmp_path):
    spec = make(tmp_path, "npy", 3, record_length_bytes=400000, record_length_bytes_stdev=0)
    data = open(file_paths(spec, "train")[0], "rb").read()
    assert len(zlib.compress(data, 9)) > 0.999 * len(data)


@pytest.mark.parametrize("fmt", ["npz", "tfrecord", "png", "indexed_binary"])
def test_written_file_is_the_rendered_program(tmp_path, fmt):
    spec = make(tmp_path, fmt, 2)
    for i, p in enumerate(file_paths(spec, "train")[:2]):
        prog = P.Program()
        get_format(fmt).program(
            prog, tuple(int(x) for x in all_dims(spec)[i]), 2, spec, mix_seed(spec.seed_content, i), p
        )
        prog.finish()
        for k, path in enumerate(prog.paths):  # companions first, then the data file
            assert open(path, "rb").read() == P.render(prog, k)


def test_npz_crcs_check_out(tmp_path):
    spec = make(tmp_path, "npz", 3, record_length_bytes=300000)
    for p in file_paths(spec, "train"):
        with zipfile.ZipFile(p) as zf:
            assert zf.testzip() is None  # reads every member, checks its CRC-32
            for name in ("x.npy", "y.npy"):
                assert zf.getinfo(name).CRC == zlib.crc32(zf.read(name))
        raw = open(p, "rb").read(18)
        assert struct.unpack_from("<I", raw, 14)[0] == zipfile.ZipFile(p).getinfo("x.npy").CRC


def test_png_chunk_crcs_check_out(tmp_path):
    spec = make(tmp_path, "png", 1, record_length_bytes=150000)
    for p in file_paths(spec, "train"):
        data = open(p, "rb").read()
        pos, kinds = 8, []
        while pos < len(data):
            n, kind = struct.unpack_from(">I4s", data, pos)
            (crc,) = struct.unpack_from(">I", data, pos + 8 + n)
            assert crc == zlib.crc32(data[pos + 4 : pos + 8 + n]), kind
            kinds.append(kind)
            pos += 12 + n
        assert kinds[:2] == [b"IHDR", b"prVt"] and kinds[-1] == b"IEND"


def test_sizes_known_before_writing_match_the_files(tmp_path):
    for fmt in ("npz", "npy", "tfrecord", "jpeg", "png", "indexed_binary"):
        spec = make(tmp_path, fmt, 2)
        f = get_format(fmt)
        for i, p in enumerate(file_paths(spec, "train")):
            assert os.path.getsize(p) == f.expected_size(tuple(int(x) for x in all_dims(spec)[i]), 2, spec), fmt


def test_generation_rate_is_recorded_and_estimates_the_full_size(tmp_path):
    spec = DatasetSpec(
        data_folder=str(tmp_path / "d"),
        format="npy",
        num_files_train=6,
        num_files_eval=0,
        num_samples_per_file=1,
        record_length_bytes=100000,
        record_length_bytes_stdev=0,
    )
    assert measured_rate(spec) is None
    assert "no generation measured" in estimate_text(spec, 10**9, 100)
    r = generate(spec, threads=2)
    rec = measured_rate(spec)
    assert rec["files"] == 6 and rec["bytes"] == r.bytes_written and rec["format"] == "npy"
    assert rec["bytes_per_s"] == pytest.approx(rec["bytes"] / rec["seconds"])
    assert rec["files_per_s"] == pytest.approx(6 / rec["seconds"])
    # 100x the files of the same size: 100x the measured time
    assert estimate_seconds(rec, 100 * rec["bytes"], 600) == pytest.approx(100 * rec["seconds"])
    # the bound that is larger wins: many more, smaller files take the files/s time
    assert estimate_seconds(rec, rec["bytes"], 6000) == pytest.approx(1000 * rec["seconds"])
    text = estimate_text(spec, 100 * rec["bytes"], 600)
    assert "MiB/s" in text and "generation-rate.json" in text and "6 npy files" in text
    before = open(os.path.join(spec.data_folder, ".dlio-fast", "generation-rate.json")).read()
    generate(spec, threads=2)  # nothing left to write: the measurement stays
    assert open(os.path.join(spec.data_folder, ".dlio-fast", "generation-rate.json")).read() == before


def test_threads_default_to_the_cpus_and_batches_split_big_datasets(tmp_path, monkeypatch):
    from dlio.dataset import gen_plan, gen_write

    monkeypatch.setattr(gen_write, "BATCH_FILES", 3)
    spec = DatasetSpec(
        data_folder=str(tmp_path / "d"),
        format="jpeg",
        num_files_train=10,
        num_files_eval=2,
        num_samples_per_file=1,
        record_length_bytes=5000,
        record_length_bytes_stdev=500,
    )
    r = generate(spec)
    assert r.files_written == 12
    pl = gen_plan.plan(spec)
    assert pl.todo == [] and len(pl.skipped) == 12
    from PIL import Image

    for p in file_paths(spec, "train") + file_paths(spec, "valid"):
        with Image.open(p) as im:
            im.load()
    assert np.all(
        np.array([os.path.getsize(p) for p in file_paths(spec, "train")])
        == [int(d[0]) * int(d[1]) for d in all_dims(spec)[:10]]
    )
