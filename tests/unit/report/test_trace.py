"""--trace: the .pfw files parse (line by line, as DFAnalyzer reads them) and their spans add up to
the run's own figures (dlio-fast.json): reads, bytes, samples, steps, compute time."""
import json
import os
from datetime import datetime
from decimal import Decimal

import numpy as np
import pytest

from dlio import _core
from dlio.report.trace import Tracer, read_pfw


def _ns(us):
    """A Decimal microsecond value of the writer -> exact integer ns."""
    return int(Decimal(us) * 1000)


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory):
    from dlio.cli.main import main
    tmp = tmp_path_factory.mktemp("trace")
    out = tmp / "out"
    args = ["run", "--workload", "default", "--set", f"dataset.data_folder={tmp / 'data'}",
            "--set", "train.epochs=2", "--set", "train.computation_time=0.001",
            "--set", "evaluation.eval_time=0.001", "--trace", "-o", str(out)]
    try:
        main(args)
    except SystemExit as e:
        assert not e.code, e
    doc = json.loads((out / "dlio-fast.json").read_text())
    return out, doc


def test_file_layout(traced_run):
    out, doc = traced_run
    path = out / "trace-0-of-1.pfw"
    lines = path.read_text().splitlines()
    assert lines[0] == "[" and lines[-1] == "]"
    ids = []
    for line in lines[1:-1]:
        ev = json.loads(line.rstrip(","))   # every event line is a JSON object on its own
        assert ev["ph"] in ("X", "M") and ev["pid"] == 0 and isinstance(ev["tid"], int)
        ids.append(ev["id"])
        if ev["ph"] == "X":
            assert {"name", "cat", "ts", "dur", "args"} <= ev.keys()
            assert ev["dur"] >= 0
    assert ids == list(range(len(ids)))     # one id per line, counting up across appends


def test_spans_add_up(traced_run):
    out, doc = traced_run
    evs = read_pfw(out / "trace-0-of-1.pfw")
    xs = [e for e in evs if e["ph"] == "X"]
    fh = {e["args"]["value"]: e["args"]["name"] for e in evs if e["name"] == "FH"}
    data = doc["dataset"]["folder"]
    epochs = doc["ranks"][0]["epochs"]
    assert len(epochs) == 2
    t_lo = datetime.fromisoformat(doc["start"]).timestamp() * 1e6 - 1e6
    t_hi = datetime.fromisoformat(doc["end"]).timestamp() * 1e6 + 1e6
    for rec in epochs:
        ep = rec["epoch"]
        (train,) = [e for e in xs if e["name"] == "train" and e["args"]["epoch"] == ep]
        (evl,) = [e for e in xs if e["name"] == "eval" and e["args"]["epoch"] == ep]
        (epoch,) = [e for e in xs if e["name"] == "epoch" and e["args"]["epoch"] == ep]
        for run in (train, evl):
            assert _ns(epoch["ts"]) <= _ns(run["ts"])
            assert _ns(run["ts"]) + _ns(run["dur"]) <= _ns(epoch["ts"]) + _ns(epoch["dur"])
        assert t_lo <= float(epoch["ts"]) and float(epoch["ts"] + epoch["dur"]) <= t_hi

        def inside(run, cat, name):
            a, b = _ns(run["ts"]), _ns(run["ts"]) + _ns(run["dur"])
            return [e for e in xs if e["cat"] == cat and e["name"] == name
                    and a <= _ns(e["ts"]) and _ns(e["ts"]) + _ns(e["dur"]) <= b]

        reads = inside(train, "POSIX", "read")
        eval_reads = inside(evl, "POSIX", "read")
        assert len(reads) == rec["ops"] == rec["lat"]["count"]
        assert sum(e["args"]["size"] for e in reads + eval_reads) == rec["bytes"]
        for e in reads + eval_reads:
            a = e["args"]
            assert a["size"] == a["ret"] > 0 and a["offset"] >= 0 and a["step"] >= 0
            assert a["fname"].startswith(data) and fh[a["fhash"]] == a["fname"]
            assert os.path.exists(a["fname"])
        steps = rec["steps_done"]
        compute = inside(train, "ai_framework", "compute")
        fetch = inside(train, "data_loader", "fetch")
        samples = inside(train, "reader", "sample")
        assert len(compute) == len(fetch) == steps
        assert sorted(e["args"]["step"] for e in compute) == list(range(steps))
        assert len(samples) == rec["samples"]
        # compute: exact to the ns (dur has three decimals of us)
        want = sum(round(c * 1e9) for c in rec["train"]["compute"])
        assert sum(_ns(e["dur"]) for e in compute) == want
        assert abs(sum(Decimal(e["dur"]) for e in compute) / Decimal(1e6)
                   - Decimal(sum(rec["train"]["compute"]))) < Decimal("1e-6") * steps
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
    path = tmp_path / "t.pfw"
    n = _core.write_trace(str(path), res["trace"], names, 3, 0, 100)
    evs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert n == 100 + len(evs)
    assert {e["args"]["fname"] for e in evs if e["name"] == "read"} == set(names)
    assert {e["args"]["name"] for e in evs if e["name"] == "FH"} == set(names)
    assert all(e["pid"] == 3 for e in evs)
    assert _core.json_escape('a"b\\c') == 'a\\"b\\\\c'


def test_io_trace_has_a_span_per_request(run_cli, tmp_path):
    from dlio.report.trace import read_pfw
    tr, js = tmp_path / "io.pfw", tmp_path / "io.json"
    code, out, err = run_cli("io", tmp_path, "--bs", "64k", "--file-size", "1m", "--size", "1m",
                             "--threads", "1,2", "--trace", tr, "--json", js)
    assert code == 0, err
    events = read_pfw(tr)
    reads = [e for e in events if e["name"] == "read"]
    points = json.loads(js.read_text())["points"]
    assert len(reads) == sum(p["ops"] for p in points)
    assert sum(int(e["args"]["size"]) for e in reads) == sum(p["bytes"] for p in points)
    assert [e["args"]["threads"] for e in events if e["name"] == "point"] == [1, 2]
