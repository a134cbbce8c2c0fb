"""O_DIRECT generation writes the same bytes as buffered generation (whole aligned blocks direct, the
tail and patched checksums through the page cache), and `generate --dry-run` estimates from a measured rate."""

import os

import pytest

from dlio.base.errors import DatasetError
from dlio.dataset.generate import generate
from dlio.dataset.spec import DatasetSpec, file_paths
from dlio.dataset.verify import verify


def _spec(folder, fmt, **kw):
    base = dict(
        data_folder=str(folder),
        format=fmt,
        num_files_train=3,
        num_files_eval=1,
        num_samples_per_file=4,
        record_length_bytes=300_001,  # odd: every file ends in a partial 4 KiB block
        record_length_bytes_stdev=20_000,
    )
    base.update(kw)
    return DatasetSpec(**base)


def _all_files(folder):
    out = {}
    for d, _, names in os.walk(folder):
        for n in names:
            if ".dlio-fast" not in d:
                p = os.path.join(d, n)
                with open(p, "rb") as f:
                    out[os.path.relpath(p, folder)] = f.read()
    return out


@pytest.mark.parametrize("fmt", ["npz", "tfrecord", "png", "indexed_binary"])
def test_direct_writes_the_buffered_bytes(tmp_path, fmt):
    spf = 1 if fmt in ("npz", "png") else 4
    buffered, direct = (
        _spec(tmp_path / "b", fmt, num_samples_per_file=spf),
        _spec(tmp_path / "d", fmt, num_samples_per_file=spf),
    )
    generate(buffered, threads=2)
    try:
        r = generate(direct, threads=2, direct=True)
    except DatasetError as e:
        assert "refuses O_DIRECT" in str(e) and "without --direct" in str(e)
        pytest.skip(f"{tmp_path}: the filesystem refuses O_DIRECT")
    assert r.files_written == 4
    a, b = _all_files(tmp_path / "b"), _all_files(tmp_path / "d")
    assert a.keys() == b.keys() and len(a) >= 4
    assert all(a[k] == b[k] for k in a), [k for k in a if a[k] != b[k]]
    assert any(len(v) % 4096 for v in b.values())  # the tails were exercised
    checked, problems = verify(direct)
    assert checked == 4 and problems == []


def test_direct_refused_is_one_clear_error(tmp_path):
    """/dev/shm (tmpfs) refuses O_DIRECT on older kernels: then the error says so; else it writes."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    folder = f"/dev/shm/dlio-test-direct-{os.getpid()}"
    s = _spec(folder, "npy", num_files_train=1, num_files_eval=0)
    try:
        generate(s, threads=1, direct=True)
        assert os.path.getsize(file_paths(s, "train")[0]) > 0
    except DatasetError as e:
        assert (
            str(e) == f"{folder}: the filesystem refuses O_DIRECT (open: Invalid argument); generate without --direct"
        )
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def test_generate_dry_run_estimates_from_the_small_run(tmp_path, run_cli):
    folder = tmp_path / "d"
    common = ["--workload", "default", "--set", f"dataset.data_folder={folder}", "--set", "dataset.num_files_eval=0"]
    code, out, err = run_cli("generate", *common, "--dry-run", "--set", "dataset.num_files_train=4")
    assert code == 0 and "no generation measured" in out and not os.path.exists(folder / "train"), err
    code, out, err = run_cli("generate", *common, "--set", "dataset.num_files_train=4", "--threads", "2")
    assert code == 0, err
    names = sorted(os.listdir(folder / "train"))
    code, out, err = run_cli("generate", *common, "--dry-run", "--set", "dataset.num_files_train=400")
    assert code == 0, err
    line = next(l for l in out.splitlines() if l.startswith("generation time"))
    assert "at the rate measured here" in line and "4 npz files" in line and "2 threads" in line
    assert "400 train + 0 eval files" in out
    assert sorted(os.listdir(folder / "train")) == names  # nothing written
