"""--trace: the .pfw(.gz) files parse (line by line, as DFAnalyzer reads them) and their spans add
up to the run's own figures (dlio-fast.json): reads, bytes, samples, steps, compute time. Spans on
one track never cross (Perfetto stacks them), times are integer us, reads carry their engine's
category, each file's name is written once."""

import gzip
import json
import os
from datetime import datetime

import numpy as np
import pytest
from conftest import set_args

from dlio import _core
from dlio.report.trace import Tracer, read_pfw


def _ns(us):
    """An integer microsecond value of the writer -> ns."""
    assert isinstance(us, int), us
    return us * 1000


def crossings(events):
    """Complete events that overlap an earlier one on their track (pid, tid) without nesting
    inside it: what Perfetto cannot draw."""
    tracks = {}
    for e in events:
        if e["ph"] == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    bad = 0
    for spans in tracks.values():
        stack = []
        for ts, te in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= ts:
                stack.pop()
            if stack and te > stack[-1]:
                bad += 1
            else:
                stack.append(te)
    return bad


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory):
    from dlio.cli.main import main

    tmp = tmp_path_factory.mktemp("trace")
    out = tmp / "out"
    args = [
        "run",
        "--workload",
        "default",
        *set_args(
            f"dataset.data_folder={tmp / 'data'}",
            "train.epochs=2",
            "train.computation_time=0.001",
            "evaluation.eval_time=0.001",
        ),
        "--trace",
        "-o",
        str(out),
    ]
    try:
        main(args)
    except SystemExit as e:
        assert not e.code, e
    doc = json.loads((out / "dlio-fast.json").read_text())
    return out, doc


def test_file_layout(traced_run):
    out, doc = traced_run
    path = out / "trace-0-of-1.pfw.gz"
    assert not (out / "trace-0-of-1.pfw").exists()
    with gzip.open(path, "rt") as f:  # one gzip stream, as DFTracer's tools read it
        lines = f.read().splitlines()
    assert lines[0] == "[" and lines[-1] == "]"
    ids = []
    for line in lines[1:-1]:
        ev = json.loads(line.rstrip(","))  # every event line is a JSON object on its own
        assert ev["ph"] in ("X", "M") and ev["pid"] == 0 and isinstance(ev["tid"], int)
        ids.append(ev["id"])
        if ev["ph"] == "X":
            assert {"name", "cat", "ts", "dur", "args"} <= ev.keys()
            assert isinstance(ev["ts"], int) and isinstance(ev["dur"], int) and ev["dur"] >= 0
    assert ids == list(range(len(ids)))  # one id per line, counting up across appends
    assert crossings(read_pfw(path)) == 0


def test_spans_add_up(traced_run):
    out, doc = traced_run
    evs = read_pfw(out / "trace-0-of-1.pfw.gz")
    xs = [e for e in evs if e["ph"] == "X"]
    fh_lines = [e for e in evs if e["name"] == "FH"]
    fh = {e["args"]["value"]: e["args"]["name"] for e in fh_lines}
    assert len(fh_lines) == len(fh) == len(set(fh.values()))  # each file named once, over all runs
    data = doc["dataset"]["folder"]
    epochs = doc["ranks"][0]["epochs"]
    assert len(epochs) == 2
    t_lo = datetime.fromisoformat(doc["start"]).timestamp() * 1e6 - 1e6
    t_hi = datetime.fromisoformat(doc["end"]).timestamp() * 1e6 + 1e6
    for rec in epochs:
        ep = rec["epoch"]
        (train,) = [e for e in xs if (e["cat"], e["name"]) == ("pipeline", "train") and e["args"]["epoch"] == ep]
        (evl,) = [e for e in xs if (e["cat"], e["name"]) == ("pipeline", "evaluate") and e["args"]["epoch"] == ep]
        (epoch,) = [e for e in xs if (e["cat"], e["name"]) == ("pipeline", "epoch.block") and e["args"]["epoch"] == ep]
        for run in (train, evl):
            assert _ns(epoch["ts"]) <= _ns(run["ts"])
            assert _ns(run["ts"]) + _ns(run["dur"]) <= _ns(epoch["ts"]) + _ns(epoch["dur"])
        assert t_lo <= float(epoch["ts"]) and float(epoch["ts"] + epoch["dur"]) <= t_hi

        def inside(run, cat, name):
            a, b = _ns(run["ts"]), _ns(run["ts"]) + _ns(run["dur"])
            return [
                e
                for e in xs
                if e["cat"] == cat and e["name"] == name and a <= _ns(e["ts"]) and _ns(e["ts"]) + _ns(e["dur"]) <= b
            ]

        reads = inside(train, "POSIX", "read")
        eval_reads = inside(evl, "POSIX", "read")
        assert len(reads) == rec["ops"] == rec["lat"]["count"]
        assert sum(e["args"]["size"] for e in reads + eval_reads) == rec["bytes"]
        for e in reads + eval_reads:
            a = e["args"]
            assert a["size"] == a["ret"] > 0 and a["offset"] >= 0 and a["step"] >= 0
            assert "fname" not in a and fh[a["fhash"]].startswith(data)
            assert os.path.exists(fh[a["fhash"]])
        steps = rec["steps_done"]
        compute = inside(train, "compute", "compute")
        fetch = inside(train, "dataloader", "fetch.iter")
        samples = inside(train, "data", "item")
        assert len(compute) == len(fetch) == steps
        assert sorted(e["args"]["step"] for e in compute) == list(range(steps))
        assert len(samples) == rec["samples"]
        # compute: each dur within 1 us of the run's own figure (its ends are rounded to the us)
        for e, c in zip(sorted(compute, key=lambda e: e["args"]["step"]), rec["train"]["compute"]):
            assert abs(_ns(e["dur"]) - round(c * 1e9)) < 1000
        # the batch fetched at each step is the bytes read for it
        fbytes = {e["args"]["step"]: e["args"]["size"] for e in fetch}
        rbytes = {}
        for e in reads:
            rbytes[e["args"]["step"]] = rbytes.get(e["args"]["step"], 0) + e["args"]["size"]
        assert fbytes == rbytes
    gen = [e for e in xs if e["name"] == "generate"]
    assert len(gen) == 1


def test_run_without_trace_has_no_events():
    ops = np.zeros(8, dtype=_core.OP_DTYPE)
    ops["length"] = 512
    steps = np.zeros(2, dtype=_core.STEP_DTYPE)
    steps["first_op"] = [0, 4]
    steps["nops"] = 4
    res = _core.Run("train", "null", ["x"], ops, threads=1, steps=steps).execute()
    assert "trace" not in res


def test_full_buffer_counts_dropped(tmp_path):
    ops = np.zeros(100, dtype=_core.OP_DTYPE)
    ops["length"] = 512
    ops["offset"] = np.arange(100) * 512
    res = _core.Run("io", "null", ["x"], ops, threads=2, trace=10).execute()
    assert res["ops"] == 100
    assert len(res["trace"]) == 20 and res["trace_dropped"] == 80
    tr = Tracer(tmp_path, 0, 1, thread_names=lambda t: f"worker {t}")
    tr.add_run(res, ["x"], "io")
    tr.close()
    evs = read_pfw(tr.path)
    assert sum(e["name"] == "read" for e in evs) == 20
    (d,) = [e for e in evs if e["name"] == "trace_dropped"]
    assert d["args"]["dropped"] == 80


def test_file_names_escaped(tmp_path):
    names = ['/d/q"uote.npz', "/d/back\\slash.npz", "/d/new\nline\t.npz", "/d/caf\u00e9.npz"]
    ops = np.zeros(4, dtype=_core.OP_DTYPE)
    ops["file"] = np.arange(4)
    ops["length"] = 100
    ops["flags"] = 3
    steps = np.zeros(1, dtype=_core.STEP_DTYPE)
    steps["nops"] = 4
    steps["nsamples"] = 4
    res = _core.Run("train", "null", names, ops, threads=0, steps=steps, trace=True).execute()
    assert res["trace_engine"] == "null"
    path = tmp_path / "t.pfw"
    n, new, lanes = _core.write_trace(str(path), res["trace"], names, 3, 0, 100, "NULL")
    evs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert n == 100 + len(evs)
    fh = {e["args"]["value"]: e["args"]["name"] for e in evs if e["name"] == "FH"}
    assert set(fh.values()) == set(names) and sorted(new) == sorted(fh)
    assert {fh[e["args"]["fhash"]] for e in evs if e["name"] == "read"} == set(names)
    assert {e["cat"] for e in evs if e["name"] == "read"} == {"NULL"}
    assert all(e["pid"] == 3 for e in evs) and list(lanes) == [1]
    assert _core.json_escape('a"b\\c') == 'a\\"b\\\\c'


def _files(tmp_path, n, size):
    paths = []
    for i in range(n):
        p = tmp_path / f"f{i}.bin"
        p.write_bytes(os.urandom(size))
        paths.append(str(p))
    return paths


def _need_uring():
    if not any(name == "io_uring" and ok for name, _caps, ok, _why in _core.engines()):
        pytest.skip("io_uring is not available here (kernel, seccomp or build)")


def test_io_uring_qd8_tracks_do_not_cross(tmp_path):
    """8 reads in flight on one thread: each on a track of its own where it overlaps another, so no
    two spans of a track cross; every request is there once, labelled IO_URING."""
    _need_uring()
    paths = _files(tmp_path, 16, 64 * 4096)
    ops = np.zeros(16 * 64, dtype=_core.OP_DTYPE)
    ops["file"] = np.arange(len(ops)) % 16
    ops["offset"] = np.arange(len(ops)) // 16 * 4096
    ops["length"] = 4096
    res = _core.Run("io", "io_uring", paths, ops, threads=1, qd=8, trace=True).execute()
    tr = Tracer(tmp_path, 0, 1, thread_names=lambda t: f"worker {t}")
    tr.add_run(res, paths, "point")
    tr.close()
    evs = read_pfw(tr.path)
    reads = [e for e in evs if e["name"] == "read"]
    assert len(reads) == res["ops"] == len(ops)
    assert {e["cat"] for e in reads} == {"IO_URING"}
    assert crossings(evs) == 0
    tids = {e["tid"] for e in reads}
    assert len(tids) > 1 and all(t < _core.TRACE_LANES for t in tids)  # thread 0's lanes
    names = {e["tid"]: e["args"]["name"] for e in evs if e["name"] == "thread_name"}
    assert names[0] == "worker 0" and all(names[t] == f"worker 0 slot {t}" for t in tids if t)


def test_staggered_requests_get_lanes(tmp_path):
    """Requests issued every 10 us that last 75 us (8 in flight) on thread 1: eight lanes, no
    crossing; on one track per thread (the old layout) they cross, so the check can fail."""
    ev = np.zeros(200, dtype=_core.TRACE_DTYPE)
    ev["t_start"] = np.arange(200) * 10_000 + 123
    ev["dur"] = 75_000
    ev["bytes"] = 4096
    ev["file"] = 0
    ev["tid"] = 1
    ev["step"] = 2**64 - 1
    tr = Tracer(tmp_path, 0, 1, thread_names=lambda t: f"worker {t}")
    tr.add_run({"trace": ev, "trace_engine": "io_uring", "t_start": 0, "t_end": 2_100_000}, ["f"], "point")
    tr.close()
    evs = read_pfw(tr.path)
    reads = [e for e in evs if e["name"] == "read"]
    assert {e["tid"] for e in reads} == {_core.TRACE_LANES + k for k in range(8)}
    assert crossings(evs) == 0
    assert crossings([dict(e, tid=e["tid"] // _core.TRACE_LANES) for e in evs]) > 100


def test_io_uring_train_samples_in_flight(tmp_path):
    """A reader with several samples in flight (io_uring qd 8, 4 reads per sample): its sample and
    read spans never cross on a track, and each read nests in its own sample where it shares one."""
    _need_uring()
    nfiles, per = 32, 4
    paths = _files(tmp_path, nfiles, per * 8192)
    ops = np.zeros(nfiles * per, dtype=_core.OP_DTYPE)
    ops["file"] = np.repeat(np.arange(nfiles), per)
    ops["offset"] = np.tile(np.arange(per) * 8192, nfiles)
    ops["length"] = 8192
    ops["flags"][::per] |= _core.OPF_OPEN
    ops["flags"][per - 1 :: per] |= _core.OPF_CLOSE
    steps = np.zeros(4, dtype=_core.STEP_DTYPE)
    steps["first_op"] = np.arange(4) * (len(ops) // 4)
    steps["nops"] = len(ops) // 4
    steps["nsamples"] = nfiles // 4
    res = _core.Run("train", "io_uring", paths, ops, threads=1, qd=8, steps=steps, trace=True).execute()
    tr = Tracer(tmp_path, 0, 1)
    tr.add_run(res, paths, "train", epoch=1)
    tr.close()
    evs = read_pfw(tr.path)
    assert crossings(evs) == 0
    samples = [e for e in evs if e["name"] == "item"]
    reads = [e for e in evs if e["name"] == "read"]
    assert len(samples) == nfiles and len(reads) == len(ops)
    for r in reads:  # a read on a sample's track inside that sample's time is that sample's
        for s in samples:
            if (
                s["tid"] == r["tid"]
                and s["ts"] <= r["ts"]
                and r["ts"] + r["dur"] <= s["ts"] + s["dur"]
                and s["dur"] > 0
                and r["ts"] < s["ts"] + s["dur"]
            ):
                assert s["args"]["fhash"] == r["args"]["fhash"]


def test_back_to_back_samples_do_not_overlap(tmp_path):
    """qd 1, one reader: sample spans follow each other on one track; integer us rounded the same
    way at both ends never overlap, parsed as any JSON reader does (floats)."""
    n = 400
    ops = np.zeros(n, dtype=_core.OP_DTYPE)
    ops["file"] = np.arange(n) % 4
    ops["length"] = 512
    ops["flags"] = _core.OPF_OPEN | _core.OPF_CLOSE
    steps = np.zeros(4, dtype=_core.STEP_DTYPE)
    steps["first_op"] = np.arange(4) * (n // 4)
    steps["nops"] = steps["nsamples"] = n // 4
    res = _core.Run("train", "null", ["a", "b", "c", "d"], ops, threads=1, qd=1, steps=steps, trace=True).execute()
    tr = Tracer(None, path=str(tmp_path / "t.pfw"))
    tr.add_run(res, ["a", "b", "c", "d"], "train")
    tr.close()
    with open(tr.path) as f:
        evs = [json.loads(line) for line in f if line.startswith("{")]
    samples = sorted((e for e in evs if e["name"] == "item"), key=lambda e: e["ts"])
    assert len(samples) == n and len({e["tid"] for e in samples}) == 1
    assert all(type(e["ts"]) is int and type(e["dur"]) is int for e in samples)
    for a, b in zip(samples, samples[1:]):
        assert a["ts"] + a["dur"] <= b["ts"]
    assert crossings(evs) == 0


def test_file_named_once_across_runs(tmp_path):
    """Two runs over the same files into one trace: one FH line per file in all; reads name their
    file by hash only."""
    paths = [str(tmp_path / f"x{i}") for i in range(5)]
    ops = np.zeros(50, dtype=_core.OP_DTYPE)
    ops["file"] = np.arange(50) % 5
    ops["length"] = 512
    tr = Tracer(tmp_path, 0, 1, thread_names=lambda t: f"worker {t}")
    for _ in range(2):
        tr.add_run(_core.Run("io", "null", paths, ops, threads=1, trace=True).execute(), paths, "point")
    tr.add_run(
        _core.Run("io", "null", paths[:2] + ["new"], ops[ops["file"] < 3], threads=1, trace=True).execute(),
        paths[:2] + ["new"],
        "point",
    )
    tr.close()
    evs = read_pfw(tr.path)
    fh = [e["args"] for e in evs if e["name"] == "FH"]
    assert sorted(a["name"] for a in fh) == sorted(paths + ["new"])
    assert all(a["value"] == _core.trace_fhash(a["name"]) for a in fh)
    reads = [e for e in evs if e["name"] == "read"]
    assert len(reads) == 50 + 50 + 30 and all(
        set(e["args"]) == {"fhash", "offset", "ret", "size", "step"} for e in reads
    )
    assert [e["name"] for e in evs].count("thread_name") == 1


def test_gzip_and_plain(tmp_path):
    """The default name is .pfw.gz (gzip); a name ending in .pfw is plain text; read_pfw reads both."""
    ops = np.zeros(20, dtype=_core.OP_DTYPE)
    ops["length"] = 512
    got = {}
    for path in (None, str(tmp_path / "plain.pfw")):
        tr = Tracer(tmp_path, 0, 1, path=path)
        tr.add_run(_core.Run("io", "null", ["x"], ops, threads=1, trace=True).execute(), ["x"], "point")
        tr.close()
        with open(tr.path, "rb") as f:
            got[tr.compressed] = (tr.path, f.read(2))
        assert [e["name"] for e in read_pfw(tr.path)].count("read") == 20
    assert got[True] == (str(tmp_path / "trace-0-of-1.pfw.gz"), b"\x1f\x8b")
    assert got[False][1] == b"[\n"


def test_help_says_what_the_file_is(run_cli):
    for cmd in ("run", "io"):
        code, out, _err = run_cli(cmd, "--help")
        assert code == 0
        text = " ".join(out.split())
        assert "Chrome-trace" not in text and "JSON lines, one event per line" in text and "Perfetto" in text


@pytest.mark.parametrize("name", ["io.pfw", "io.pfw.gz"])
def test_io_trace_has_a_span_per_request(run_cli, tmp_path, name):
    tr, js = tmp_path / name, tmp_path / "io.json"
    code, out, err = run_cli(
        "io",
        tmp_path,
        "--bs",
        "64k",
        "--file-size",
        "1m",
        "--size",
        "1m",
        "--threads",
        "1,2",
        "--trace",
        tr,
        "--json",
        js,
    )
    assert code == 0, err
    events = read_pfw(tr)
    reads = [e for e in events if e["name"] == "read"]
    points = json.loads(js.read_text())["points"]
    assert len(reads) == sum(p["ops"] for p in points)
    assert sum(int(e["args"]["size"]) for e in reads) == sum(p["bytes"] for p in points)
    assert [e["args"]["threads"] for e in events if e["name"] == "point"] == [1, 2]
    assert (tr.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")  # the name says which
    assert {e["cat"] for e in reads} == {"POSIX"} and crossings(events) == 0


def test_dft_ai_events_as_dlio_counts_them(traced_run):
    """DFTracer's AI taxonomy, counted per rank as DLIO's tests/dlio_ai_logging_test.py counts a DLIO
    trace: one ai_root, one pipeline epoch.block and train (and evaluate) per epoch, one dataloader
    fetch.iter and one compute per step (training and evaluation), one data item per sample read.
    The default workload: 64 train files, batch 4; 8 eval files, eval batch 1; 2 epochs (the fixture)."""
    out, _ = traced_run
    count = {}
    for e in read_pfw(out / "trace-0-of-1.pfw.gz"):
        if e["ph"] == "X":
            count[(e["cat"], e["name"])] = count.get((e["cat"], e["name"]), 0) + 1
    epochs, train_steps, eval_steps = 2, 64 // 4, 8 // 1
    assert count[("ai_root", "ai_root")] == 1
    assert count[("pipeline", "epoch.block")] == count[("pipeline", "train")] == epochs
    assert count[("pipeline", "evaluate")] == epochs
    assert count[("dataloader", "fetch.iter")] == count[("compute", "compute")] == epochs * (train_steps + eval_steps)
    assert count[("data", "item")] == epochs * (train_steps * 4 + eval_steps * 1)
    assert ("checkpoint", "capture") not in count and ("checkpoint", "restart") not in count
