"""dlio.report.stragglers on hand-built runs of 2 hosts x 2 ranks: which host is named, from what evidence.

The host whose reads are throttled (hB) shares its device's rate between its two ranks, so they take turns: at
each step one rank's batch comes after READ_S, the other's after 2 x READ_S (its read waited behind the first).
The host arrives with its later rank, so its own time is 2 x READ_S + COMPUTE_S, and the evidence must say that
this time was I/O wait (an average over its ranks would say 1.5 x READ_S, and not add up to the own time)."""

import numpy as np
import pytest

from dlio.report import stragglers

STEPS = 8
COMPUTE_S = 0.005  # the set compute, which every rank ran on time
READ_S = 0.060  # one rank's read of its batch at hB's throttled rate
FAST_S = 0.001  # a batch's wait on hA


def rank(r, host, load, compute):
    load, compute = np.asarray(load, dtype=float), np.asarray(compute, dtype=float)
    return {"rank": r, "hostname": host, "load": load, "compute": compute, "host_cpus_usable": 2.0}


def run(ranks):
    """The RunResult of one trained epoch; every rank's step lasts as long as the slowest rank's (the barrier)."""
    step = np.max([x["load"] + x["compute"] for x in ranks], axis=0)
    out = []
    for x in ranks:
        train = {
            "steps": STEPS,
            "duration_s": float(step.sum()),
            "load": x["load"].tolist(),
            "compute": x["compute"].tolist(),
            "proc": (x["load"] + x["compute"]).tolist(),
            "exact": {"compute_set_mean_s": COMPUTE_S},
        }
        rec = {k: x[k] for k in ("rank", "hostname", "host_cpus_usable")}
        out.append({**rec, "epochs": [{"epoch": 1, "train": train}]})
    return {"ranks": out}, float(step.mean())


def turns():
    """hB's two ranks' I/O waits: rank 2 first at even steps, rank 3 first at odd ones."""
    first = np.arange(STEPS) % 2 == 0
    return np.where(first, READ_S, 2 * READ_S), np.where(first, 2 * READ_S, READ_S)


def test_a_host_whose_ranks_take_turns_at_a_throttled_device_is_named_for_its_io_wait():
    b2, b3 = turns()
    compute = np.full(STEPS, COMPUTE_S)
    fast = np.full(STEPS, FAST_S)
    result, step_s = run(
        [
            rank(0, "hA", fast, compute),
            rank(1, "hA", fast, compute),
            rank(2, "hB", b2, compute),
            rank(3, "hB", b3, compute),
        ]
    )
    au = 100 * COMPUTE_S / step_s
    s = stragglers.stragglers(result, au)
    rows = {r["host"]: r for r in s["per_host"]}
    assert step_s == pytest.approx(2 * READ_S + COMPUTE_S)
    # hB's evidence is its later rank's at each step: I/O wait and compute add up to its own time
    assert rows["hB"]["own_s"] == pytest.approx(2 * READ_S + COMPUTE_S)
    assert rows["hB"]["io_wait_s"] == pytest.approx(2 * READ_S)  # the ranks' mean would be 1.5 x READ_S
    assert rows["hB"]["compute_s"] == pytest.approx(COMPUTE_S)
    assert rows["hA"]["io_wait_s"] == pytest.approx(FAST_S) and rows["hA"]["own_s"] == pytest.approx(FAST_S + COMPUTE_S)
    [n] = s["named"]
    assert n["host"] == "hB" and n["ranks"] == [2, 3] and n["cause"] == "io_wait"
    assert n["slower_percentage"] == pytest.approx(100 * ((2 * READ_S + COMPUTE_S) / (FAST_S + COMPUTE_S) - 1))
    assert n["wait_for_it_s"] == pytest.approx(2 * READ_S - FAST_S)
    assert (
        s["summary"][0] == "straggler: host hB (ranks 2,3) is 1983 % slower than the other hosts: its reads were late"
    )
    assert s["summary"][1] == (
        "  hB: own time per step 125.00ms (I/O wait 120.00ms, compute 5.00ms of 5.00ms set; its ranks could use 2 CPUs)"
    )


def test_a_host_whose_compute_runs_over_is_named_for_its_compute():
    """The other way round: hB's later rank at each step is the one whose compute ran over (its CPU), while its
    reads came as fast as hA's."""
    fast = np.full(STEPS, FAST_S)
    compute = np.full(STEPS, COMPUTE_S)
    over = np.where(np.arange(STEPS) % 2 == 0, 4 * COMPUTE_S, COMPUTE_S)
    result, step_s = run(
        [
            rank(0, "hA", fast, compute),
            rank(1, "hA", fast, compute),
            rank(2, "hB", fast, over),
            rank(3, "hB", fast, over[::-1]),
        ]
    )
    s = stragglers.stragglers(result, 100 * COMPUTE_S / step_s)
    rows = {r["host"]: r for r in s["per_host"]}
    assert rows["hB"]["compute_s"] == pytest.approx(4 * COMPUTE_S) and rows["hB"]["io_wait_s"] == pytest.approx(FAST_S)
    [n] = s["named"]
    assert n["host"] == "hB" and n["cause"] == "compute"
    assert "its compute ran over its set time (the host's CPU)" in s["summary"][0]
