"""dlio.report.trace_merge on per-rank traces written by the Tracer, with known clock offsets: rank 1 on another
host whose clock runs 2.5 s behind rank 0's; the same instant on both must get one ts in the merged file."""

import gzip
import json

from dlio import _core
from dlio.report.trace import Tracer, read_pfw
from dlio.report.trace_merge import TID_SPAN, merge

OFFSET_NS = 2_500_000_000  # rank 1's clock + this = rank 0's


def test_merge_shifts_each_rank_onto_rank_0s_clock(tmp_path):
    t = _core.now_ns()
    tracers = [
        Tracer(str(tmp_path), 0, 2, clock={"host": "hA", "offset_ns": 0, "rtt_ns": 0}),
        Tracer(str(tmp_path), 1, 2, clock={"host": "hB", "offset_ns": OFFSET_NS, "rtt_ns": 40_000}),
    ]
    # one wall-clock anchor, rank 1's OFFSET_NS behind: its file's times are OFFSET_NS early
    tracers[1].t0_ns = tracers[0].t0_ns - OFFSET_NS
    for tr in tracers:
        tr.span("epoch", t, 1_000_000, epoch=1)
        tr.close()
    own = [read_pfw(tmp_path / f"trace-{r}-of-2.pfw.gz") for r in range(2)]
    (e0,), (e1,) = ([e for e in evs if e["name"] == "epoch.block"] for evs in own)
    assert e0["ts"] - e1["ts"] == OFFSET_NS // 1000  # apart in the per-rank files, which stay as they are

    path, n, left_out = merge(str(tmp_path), 2)
    with gzip.open(path, "rt") as f:
        merged = json.load(f)
    assert left_out == [] and n == len(merged) - 2  # all but the two hosts' process_name lines
    hosts = {e["pid"]: e["args"]["name"] for e in merged if e["name"] == "process_name"}
    assert hosts == {0: "hA", 1: "hB"}
    m0, m1 = (next(e for e in merged if e["name"] == "epoch.block" and e["tid"] // TID_SPAN == r) for r in (0, 1))
    assert m0["ts"] == m1["ts"] == e0["ts"]  # one instant, one ts
    assert (m0["pid"], m1["pid"]) == (0, 1)


def test_a_missing_rank_is_left_out_by_name(tmp_path):
    tr = Tracer(str(tmp_path), 0, 2, clock={"host": "hA", "offset_ns": 0, "rtt_ns": 0})
    tr.close()
    _, _, left_out = merge(str(tmp_path), 2)
    assert left_out == ["trace-1-of-2.pfw.gz"]
