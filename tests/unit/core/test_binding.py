"""The Cython binding and the C core through it: histograms against exact values, the fill and
CRC, engines, errors with path and offset, fault injection, and a soak run that loses no bytes."""

import errno
import os
import subprocess

import numpy as np
import pytest

from dlio import _core
from dlio.system import stats


def test_histogram_percentiles_match_exact_within_1_percent():
    rng = np.random.default_rng(7)
    # latencies from ns to seconds (lognormal): what the runner sees
    values = np.exp(rng.uniform(np.log(50), np.log(3e9), 20000)).astype(np.uint64)
    h = _core.hist_from_values(values.tolist())
    assert h["count"] == len(values)
    assert h["min"] == values.min() and h["max"] == values.max()
    srt = np.sort(values)
    for p in (50.0, 90.0, 99.0, 99.9):
        exact = srt[int(np.ceil(p / 100 * len(srt))) - 1]
        got = stats.percentile(h, p)
        assert abs(int(got) - int(exact)) <= exact / 100 + 1, (p, got, exact)
        assert got == h["c_percentiles"][p]  # Python walk == C walk
    assert stats.percentile(h, 100.0) == values.max()
    assert stats.summary(h)["mean"] == pytest.approx(values.mean(), rel=1e-9)


def test_histogram_small_values_exact_and_merge_is_addition():
    a = _core.hist_from_values(range(0, 128))
    assert [stats.percentile(a, p) for p in (1.0, 50.0)] == [1, 63]
    b = _core.hist_from_values([1000, 2000, 3000])
    m = stats.merge([a, b])
    both = _core.hist_from_values(list(range(0, 128)) + [1000, 2000, 3000])
    assert np.array_equal(m["buckets"], both["buckets"])
    assert m["count"] == 131 and m["max"] == 3000 and m["min"] == 0
    j = stats.from_json(stats.to_json(m))
    assert np.array_equal(j["buckets"], m["buckets"]) and j["count"] == m["count"]


def test_bucket_index_round_trip_error_bound():
    vals = stats.bucket_values()
    for v in [1, 127, 128, 1000, 65_537, 10**6, 123_456_789, 10**11]:
        mid = int(vals[_core.hist_index(v)])
        assert abs(mid - v) <= max(1, v / 128), (v, mid)


def test_fill_random_deterministic_and_crc32c():
    a, b, c = bytearray(10007), bytearray(10007), bytearray(10007)
    _core.fill_random(a, 5)
    _core.fill_random(b, 5)
    _core.fill_random(c, 6)
    assert a == b and a != c
    assert _core.crc32c(b"123456789") == 0xE3069283
    assert _core.crc32c(b"") == 0
    # incremental CRC equals one-shot
    assert _core.crc32c(a[5000:], _core.crc32c(a[:5000])) == _core.crc32c(a)


def test_write_random_equals_fill(tmp_path):
    p = tmp_path / "w.bin"
    fd = os.open(p, os.O_CREAT | os.O_WRONLY)
    _core.write_random(fd, 0, 3 * 65536 + 5, 9, chunk=65536 + 4)
    os.close(fd)
    want = bytearray(3 * 65536 + 5)
    _core.fill_random(want, 9)
    assert p.read_bytes() == bytes(want)


def test_engines_registry():
    names = {n: (caps, ok, why) for n, caps, ok, why in _core.engines()}
    assert names["posix"][1] and names["null"][1] and names["mmap"][1]
    assert names["null"][0] & _core.CAP_NOIO
    assert names["posix"][0] & _core.CAP_DIRECT
    if not names["io_uring"][1]:
        assert names["io_uring"][2]  # unavailable engines say why


def plan(nops, length=4096, file=0):
    ops = np.zeros(nops, dtype=_core.OP_DTYPE)
    ops["file"] = file
    ops["length"] = length
    ops["offset"] = np.arange(nops, dtype=np.uint64) * length
    return ops


def test_read_past_eof_names_path_and_offset(tmp_path):
    f = tmp_path / "short.bin"
    f.write_bytes(b"x" * 10000)
    with pytest.raises(_core.RunError) as ei:
        _core.Run("io", "posix", [str(f)], plan(4)).execute()
    e = ei.value
    assert e.errno == errno.ENODATA and e.filename == str(f) and e.offset == 8192
    assert "unexpected end of file" in str(e) and str(f) in str(e)
    assert e.result["ops"] == 2 and e.result["bytes"] == 8192  # what completed is kept


def test_missing_file_is_enoent_with_path(tmp_path):
    with pytest.raises(_core.RunError) as ei:
        _core.Run("io", "posix", [str(tmp_path / "nope")], plan(1)).execute()
    assert ei.value.errno == errno.ENOENT and ei.value.what == "open"
    assert ei.value.filename == str(tmp_path / "nope")


@pytest.mark.parametrize("qd", [1, 8])
def test_fault_injection_eio_on_nth_request_keeps_stats(qd):
    run = _core.Run("io", "null", ["/virtual/file"], plan(100), qd=qd, fail_nth=5, fail_errno=errno.EIO)
    with pytest.raises(_core.RunError) as ei:
        run.execute()
    e = ei.value
    assert e.errno == errno.EIO and e.filename == "/virtual/file"
    assert e.offset == 4 * 4096  # the 5th request
    assert e.result["ops"] >= 4 and e.result["bytes"] == e.result["ops"] * 4096
    assert e.result["lat"]["count"] == e.result["ops"]


def test_fault_injection_short_read_is_reported():
    with pytest.raises(_core.RunError) as ei:
        _core.Run("io", "null", ["/virtual/file"], plan(10), fail_nth=3, fail_errno=-1).execute()
    assert ei.value.offset == 2 * 4096
    assert "short" in ei.value.what or ei.value.errno in (errno.EIO, errno.ENODATA)


def test_fault_injection_slow_read_shows_in_latency():
    res = _core.Run("io", "null", ["/virtual/file"], plan(20), delay_ns=2_000_000).execute()
    assert res["lat"]["min"] >= 2_000_000
    assert stats.percentile(res["lat"], 50.0) >= 2_000_000


def test_soak_4_threads_qd64_loses_no_bytes(tmp_path):
    """4 threads x qd 64 on io_uring (or posix) for a bounded time: bytes counted == ops x size,
    and one full pass reads exactly the plan's bytes."""
    f = tmp_path / "soak.bin"
    fd = os.open(f, os.O_CREAT | os.O_WRONLY)
    _core.write_random(fd, 0, 8 << 20, 1)
    os.close(fd)
    engine = "io_uring" if {n: ok for n, _, ok, _ in _core.engines()}["io_uring"] else "posix"
    ops = plan(2048, 4096)
    first = np.linspace(0, len(ops), 5).astype(np.uint64)
    one_pass = _core.Run("io", engine, [str(f)], ops, threads=4, qd=64, thread_first_op=first).execute()
    assert one_pass["ops"] == 2048 and one_pass["bytes"] == int(ops["length"].sum())
    assert sum(t["bytes"] for t in one_pass["threads"]) == one_pass["bytes"]
    timed = _core.Run(
        "io", engine, [str(f)], ops, threads=4, qd=64, thread_first_op=first, runtime_ns=1_000_000_000, loop=True
    ).execute()
    assert timed["errors"] == 0 and timed["bytes"] == timed["ops"] * 4096
    assert sum(t["ops"] for t in timed["threads"]) == timed["ops"]
    assert timed["lat"]["count"] == timed["ops"]


def test_stop_request_ends_a_long_run_quickly():
    import threading
    import time

    run = _core.Run("io", "null", ["/v"], plan(10), delay_ns=1_000_000, runtime_ns=60_000_000_000, loop=True)
    t = threading.Timer(0.3, run.request_stop)
    t0 = time.monotonic()
    t.start()
    res = run.execute()
    assert time.monotonic() - t0 < 2.0
    assert res["stopped"] and res["ops"] > 0


@pytest.fixture
def ramfs(tmp_path):
    """A filesystem that refuses O_DIRECT (ramfs), mounted for the test (root only)."""
    d = tmp_path / "ramfs"
    d.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "ramfs", "ramfs", str(d)], capture_output=True).returncode != 0
    ):
        pytest.skip("cannot mount a ramfs here (needs root and mount permission)")
    yield d
    subprocess.run(["umount", str(d)], capture_output=True)


def test_odirect_refused_is_one_line_exit_2(run_cli, ramfs):
    fd = os.open(ramfs / "probe", os.O_CREAT | os.O_WRONLY)
    os.close(fd)
    try:
        os.close(os.open(ramfs / "probe", os.O_RDONLY | os.O_DIRECT))
        pytest.skip("this kernel's ramfs accepts O_DIRECT")
    except OSError:
        pass
    code, out, err = run_cli("io", ramfs, "--direct", "--size", "64k", "--file-size", "64k")
    assert code == 2
    assert "O_DIRECT" in err and str(ramfs) in err and len(err.strip().splitlines()) == 1


def test_written_blocks_are_all_different(tmp_path):
    """A write run reuses its slot buffers, but every 4 KiB block it writes is unique, so a
    deduplicating or compressing store cannot keep repeated data once."""
    f = tmp_path / "w.bin"
    n, bs = 128, 64 << 10
    ops = plan(n, bs)
    ops["op"] = _core.OP_WRITE
    res = _core.Run("io", "posix", [str(f)], ops, threads=1, qd=1).execute()
    assert res["bytes"] == n * bs and f.stat().st_size == n * bs
    data = f.read_bytes()
    blocks = {data[i : i + 4096] for i in range(0, len(data), 4096)}
    assert len(blocks) == len(data) // 4096
    # the stamp holds the block's own offset
    assert int.from_bytes(data[8192:8200], "little") == 8192


def test_file_fill_patterns_per_file(tmp_path):
    """Run(file_fill=...) writes each file's 8-byte pattern, unstamped; a slot switching files is
    refilled."""
    a, b = tmp_path / "a", tmp_path / "b"
    ops = np.concatenate([plan(4, 65536, file=0), plan(4, 65536, file=1), plan(2, 65536, file=0)])
    ops["offset"][8:] = [4 * 65536, 5 * 65536]
    ops["op"] = _core.OP_WRITE
    pa, pb = 0x3C003C003C003C00, 0x0101010101010101
    res = _core.Run("io", "posix", [str(a), str(b)], ops, file_fill=[pa, pb]).execute()
    assert res["bytes"] == 10 * 65536
    assert np.all(np.fromfile(a, dtype=np.uint64) == pa) and a.stat().st_size == 6 * 65536
    assert np.all(np.fromfile(b, dtype=np.uint64) == pb)
    with pytest.raises(ValueError):
        _core.Run("io", "posix", [str(a)], ops[:1], file_fill=[pa, pb])


@pytest.mark.parametrize("engine, qd", [("posix", 1), ("io_uring", 8)])
def test_fsync_flag_flushes_after_the_files_writes(tmp_path, engine, qd):
    if not {n: ok for n, _, ok, _ in _core.engines()}.get(engine):
        pytest.skip(f"{engine} not available here")
    paths = [str(tmp_path / "a"), str(tmp_path / "b")]
    ops = np.concatenate([plan(16, 65536, file=0), plan(16, 65536, file=1)])
    ops["op"] = _core.OP_WRITE
    ops["flags"][[15, 31]] = _core.OPF_FSYNC
    res = _core.Run(
        "io", engine, paths, ops, threads=2, qd=qd, thread_first_op=np.array([0, 16, 32], dtype=np.uint64)
    ).execute()
    assert res["bytes"] == 32 * 65536
    assert all(t["fsync_ns"] > 0 for t in res["threads"])
    assert all(os.path.getsize(p) == 16 * 65536 for p in paths)
