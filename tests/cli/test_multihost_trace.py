"""A traced run across two simulated hosts (hA, hB) x 2 ranks through Open MPI (tests/multihost.py): each rank
measures its clock's offset against rank 0's at the start (recorded with its round trip in its trace and in
dlio-fast.json), and rank 0 merges the per-rank traces onto its clock (trace-merged.json.gz). On one machine
every clock is the same, so the true offsets are 0: the measured ones must be within their round trip of it, and
what the step barrier orders (every rank's compute of a step before any rank's next fetch) must keep its order
in the merged file."""

import gzip
import json
import subprocess

import pytest
from conftest import REPO, set_args
from multihost import HOSTS, dlio_argv, launcher_command, run_env

from dlio.report.trace import read_pfw

PER_HOST = 2
RANKS = len(HOSTS) * PER_HOST


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mhtrace")
    out = tmp / "out"
    argv = dlio_argv(
        "run",
        "--workload",
        "default",
        "--trace",
        *set_args(
            f"dataset.data_folder={tmp / 'data'}",
            "dataset.num_files_train=64",
            "dataset.num_files_eval=0",
            "reader.batch_size=2",
            "train.epochs=1",
            "workflow.evaluation=false",
            "train.computation_time=0.001",
        ),
        "-o",
        out,
    )
    cmd = launcher_command("openmpi", HOSTS, PER_HOST, argv)
    p = subprocess.run(cmd, env=run_env(), cwd=REPO, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    with open(out / "dlio-fast.json") as f:
        doc = json.load(f)
    return out, doc, p.stdout


def test_offsets_are_recorded_with_their_round_trip(traced):
    out, doc, _ = traced
    assert doc["hostnames"] == ["hA", "hA", "hB", "hB"]
    for r in doc["ranks"]:
        (clock,) = [e for e in read_pfw(out / f"trace-{r['rank']}-of-{RANKS}.pfw.gz") if e["name"] == "clock_offset"]
        assert clock["args"] == {
            "rank": r["rank"],
            "host": r["hostname"],
            "offset_ns": r["clock_offset_ns"],
            "rtt_ns": r["clock_rtt_ns"],
        }
        if r["rank"] == 0:
            assert (r["clock_offset_ns"], r["clock_rtt_ns"]) == (0, 0)
        else:  # one clock here: the true offset is 0, and it is within half the round trip of the estimate
            assert 0 < r["clock_rtt_ns"] < 50_000_000
            assert abs(r["clock_offset_ns"]) <= r["clock_rtt_ns"] / 2


def test_the_merged_trace_has_every_rank_of_both_hosts(traced):
    out, doc, so = traced
    assert f"Merged trace: {out / 'trace-merged.json.gz'}" in so
    with gzip.open(out / "trace-merged.json.gz", "rt") as f:
        merged = json.load(f)  # one JSON document
    hosts = {e["pid"]: e["args"]["name"] for e in merged if e["name"] == "process_name"}
    assert sorted(hosts.values()) == ["hA", "hB"]
    # per rank, the per-rank file's events, each on its host's pid, with its rank's thread names
    for rank, host in enumerate(doc["hostnames"]):
        own = [e for e in read_pfw(out / f"trace-{rank}-of-{RANKS}.pfw.gz") if e["name"] != "process_name"]
        mine = [e for e in merged if e["name"] != "process_name" and e["tid"] // (1 << 16) == rank]
        assert len(mine) == len(own) > 0
        assert {hosts[e["pid"]] for e in mine} == {host}
        names = {e["args"]["name"] for e in mine if e["name"] == "thread_name"}
        assert f"rank {rank}: trainer" in names
        reads = [e for e in mine if (e.get("cat"), e["name"]) == ("POSIX", "read")]
        assert len(reads) == sum(ep["ops"] for ep in doc["ranks"][rank]["epochs"]) > 0
        shift = round(doc["ranks"][rank]["clock_offset_ns"] / 1000)
        assert sorted(e["ts"] for e in mine if "ts" in e) == sorted(e["ts"] + shift for e in own if "ts" in e)


def test_the_step_barrier_lines_up_on_the_merged_timeline(traced):
    """Every rank leaves step k's barrier after every rank arrived at it: each rank's fetch of batch k + 1 starts
    after each rank's compute of step k ended. Two ranks whose times were off by more than that gap (a slice of the
    1 ms step here) would break it from one side or the other. Tolerance: the microsecond rounding, and half of
    each rank's offset round trip (the estimate's bound)."""
    out, doc, _ = traced
    rtt_us = {r["rank"]: r["clock_rtt_ns"] / 1000 for r in doc["ranks"]}
    compute_end, fetch_start = {}, {}
    for e in read_pfw(out / "trace-merged.json.gz"):
        rank = e.get("tid", 0) // (1 << 16)
        if (e.get("cat"), e["name"]) == ("compute", "compute"):
            compute_end[rank, e["args"]["step"]] = e["ts"] + e["dur"]
        elif (e.get("cat"), e["name"]) == ("dataloader", "fetch.iter"):
            fetch_start[rank, e["args"]["step"]] = e["ts"]
    steps = sorted({k for _, k in compute_end})
    checked = 0
    gaps = []
    for k in steps:
        if not all((r, k) in compute_end and (r, k + 1) in fetch_start for r in range(RANKS)):
            continue
        for a in range(RANKS):
            for b in range(RANKS):
                slack = 1 + (rtt_us[a] + rtt_us[b]) / 2
                assert fetch_start[a, k + 1] >= compute_end[b, k] - slack, (a, b, k)
        gaps.append(min(fetch_start[a, k + 1] for a in range(RANKS)) - max(compute_end[b, k] for b in range(RANKS)))
        checked += 1
    assert checked >= 4, steps
    print(f"barrier gaps (us): {gaps}")
