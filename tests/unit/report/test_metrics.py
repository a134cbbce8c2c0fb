"""dlio.report.metrics against DLIO's formulas (docs/dlio-facts.md §3.3) computed by hand from synthetic timestamps."""

import numpy as np
import pytest

from dlio.report import metrics

MS = 1_000_000


def synth(loads_ms, comps_ms, hook_ms=0.0, t0=10_000 * MS, bytes_per_step=None):
    """Runner-shaped step_times: step i waits loads[i], computes comps[i], then a hook (barrier)."""
    t_fetch, t_ready, t_end = [], [], []
    t = t0
    for ld, c in zip(loads_ms, comps_ms):
        t_fetch.append(t)
        t += int(ld * MS)
        t_ready.append(t)
        t += int(c * MS) + int(hook_ms * MS)
        t_end.append(t)
    n = len(loads_ms)
    nb = bytes_per_step if bytes_per_step is not None else [4096 * (i + 1) for i in range(n)]
    return {
        "t_fetch": np.array(t_fetch, np.uint64),
        "t_ready": np.array(t_ready, np.uint64),
        "t_end": np.array(t_end, np.uint64),
        "compute_ns": np.array([int(c * MS) for c in comps_ms], np.uint64),
        "bytes": np.array(nb, np.uint64),
    }


def dlio_by_hand(loads_ms, comps_ms, hook_ms, batch, s=1, e_excl=0):
    """DLIO's statscounter arithmetic, written out in seconds."""
    n = len(loads_ms)
    load = [x / 1e3 for x in loads_ms]
    comp = [x / 1e3 for x in comps_ms]
    proc = [a + b for a, b in zip(load, comp)]
    wall = sum(load) + sum(comp) + n * hook_ms / 1e3  # start_block .. end_block
    e_idx = n - 1 - e_excl
    T = wall - sum(proc[:s]) - sum(proc[e_idx + 1 :])
    csum = sum(comp[s : e_idx + 1])
    au = 100 * csum / T
    thr = (n - 2) * batch / T
    return au, thr, T, csum


LOADS = [50.0, 1.0, 3.0, 0.5, 7.0, 2.0, 0.25, 4.0]
COMPS = [10.0, 10.0, 12.0, 10.0, 9.0, 11.0, 10.0, 10.0]


@pytest.mark.parametrize("hook_ms", [0.0, 0.5])
def test_block_metrics_equal_dlio_formula(hook_ms):
    st = synth(LOADS, COMPS, hook_ms)
    m = metrics.block_metrics(st, batch=4)
    au, thr, T, csum = dlio_by_hand(LOADS, COMPS, hook_ms, 4)
    assert m["steps"] == 8
    assert m["au"] == pytest.approx(au, rel=1e-12)
    assert m["throughput"] == pytest.approx(thr, rel=1e-12)
    assert m["duration_s"] == pytest.approx(sum(LOADS) / 1e3 + sum(COMPS) / 1e3 + 8 * hook_ms / 1e3, rel=1e-12)
    assert m["load"] == pytest.approx([x / 1e3 for x in LOADS])
    assert m["compute"] == pytest.approx([x / 1e3 for x in COMPS])
    assert m["proc"] == pytest.approx([(a + b) / 1e3 for a, b in zip(LOADS, COMPS)])
    # numbers by hand for the hook-free case: T = sum of steps 1..7, AU = 72/(17.75+72)
    if hook_ms == 0:
        assert m["au"] == pytest.approx(100 * 72.0 / 89.75, rel=1e-12)
        assert m["throughput"] == pytest.approx(6 * 4 / 0.08975, rel=1e-12)


def test_block_metrics_exact_window():
    """Exact figures use the whole block: first fetch .. end of the last step, all steps."""
    hook = 0.5
    st = synth(LOADS, COMPS, hook)
    m = metrics.block_metrics(st, batch=4)
    x = m["exact"]
    window = (sum(LOADS) + sum(COMPS) + 8 * hook) / 1e3
    assert x["window_s"] == pytest.approx(window, rel=1e-12)
    assert x["steps"] == 8
    assert x["au_percentage"] == pytest.approx(100 * sum(COMPS) / 1e3 / window, rel=1e-12)
    assert x["samples_per_second"] == pytest.approx(8 * 4 / window, rel=1e-12)
    nb = sum(4096 * (i + 1) for i in range(8))
    assert x["bytes"] == nb
    assert x["bytes_per_second"] == pytest.approx(nb / window, rel=1e-12)
    waits = np.array(LOADS) / 1e3
    assert x["io_wait_mean_s"] == pytest.approx(waits.mean(), rel=1e-12)
    assert x["io_wait_max_s"] == pytest.approx(max(LOADS) / 1e3, rel=1e-12)
    assert x["io_wait_p99_s"] == pytest.approx(np.percentile(waits, 99), rel=1e-12)
    assert x["compute_total_s"] == pytest.approx(sum(COMPS) / 1e3, rel=1e-12)
    assert x["compute_mean_s"] == pytest.approx(sum(COMPS) / 8e3, rel=1e-12)


def test_exact_bandwidth_not_inflated_by_prefetch():
    """Two steps, compute 0, both batches read before step 1 begins (prefetch): bytes over the
    whole block, never over a window that starts after the reads (helper bench bug)."""
    st = synth([10.0, 0.001], [0.0, 0.0])
    m = metrics.block_metrics(st, batch=1)
    total_bytes = 4096 + 8192
    assert m["exact"]["bytes_per_second"] == pytest.approx(total_bytes / (10.001 / 1e3), rel=1e-9)


def test_block_metrics_exclude_end_steps():
    st = synth(LOADS, COMPS, 0.0)
    m = metrics.block_metrics(st, batch=2, exclude_start=2, exclude_end=1)
    au, thr, T, csum = dlio_by_hand(LOADS, COMPS, 0.0, 2, s=2, e_excl=1)
    assert m["au"] == pytest.approx(au, rel=1e-12)
    # DLIO's "-2" is hard-coded regardless of the exclusions
    assert m["throughput"] == pytest.approx((8 - 2) * 2 / T, rel=1e-12)
    assert m["exact"]["steps"] == 8  # exact figures ignore the exclusions
    w = (sum(LOADS) + sum(COMPS)) / 1e3
    assert m["exact"]["window_s"] == pytest.approx(w, rel=1e-12)


def test_block_metrics_zero_compute_and_tiny_blocks():
    st = synth([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
    m = metrics.block_metrics(st, batch=4)
    assert m["au"] == 0.0
    assert m["throughput"] == pytest.approx(1 * 4 / 0.002, rel=1e-12)
    # one step: too few to exclude, everything counts; DLIO's (n-2) gives no throughput
    one = metrics.block_metrics(synth([2.0], [3.0]), batch=4)
    assert one["steps"] == 1
    assert one["au"] == pytest.approx(60.0, rel=1e-12)
    assert one["throughput"] == 0.0
    assert one["exact"]["steps"] == 1 and one["exact"]["window_s"] == pytest.approx(0.005)
    empty = metrics.block_metrics(synth([], []), batch=4)
    assert empty["steps"] == 0 and empty["au"] == 0.0 and empty["exact"] is None


def test_counted_range():
    assert metrics.counted_range(10, 1, 0) == (1, 9)
    assert metrics.counted_range(10, 2, 3) == (2, 6)
    assert metrics.counted_range(1, 1, 0) == (0, 0)
    assert metrics.counted_range(3, 2, 2) == (0, 2)


def test_eval_metrics_throughput_no_exclusion():
    loads, comps = [5.0, 1.0, 1.0, 2.0], [4.0, 4.0, 4.0, 4.0]
    st = synth(loads, comps)
    m = metrics.eval_metrics(st, batch=3)
    dur = (sum(loads) + sum(comps)) / 1e3
    assert m["throughput"] == pytest.approx(4 * 3 / dur, rel=1e-12)
    au, _, _, _ = dlio_by_hand(loads, comps, 0.0, 3)
    assert m["au"] == pytest.approx(au, rel=1e-12)


def test_mean_std_population():
    assert metrics.mean_std([]) == (0.0, 0.0)
    m, s = metrics.mean_std([1.0, 2.0, 3.0, 4.0])
    assert m == 2.5 and s == pytest.approx(np.sqrt(1.25))


# ---------------------------------------------------- end to end: planner -> C runner (null engine) -> metrics

from dlio import _core  # noqa: E402
from dlio.config import parse_time  # noqa: E402
from dlio.train import planner  # noqa: E402

NSTEPS, BATCH, COMPUTE_S, DELAY_NS, FSIZE = 20, 2, 0.002, 1_000_000, 3 * 4096


def null_plan(max_transfer=planner.MAX_TRANSFER):
    layout = planner.Layout(
        nfiles=NSTEPS * BATCH, spf=1, whole_file=True, file_size=np.full(NSTEPS * BATCH, FSIZE, np.uint64)
    )
    st = planner.Settings(batch=BATCH, sample_shuffle="seed", max_transfer=max_transfer)
    return planner.epoch_plan(layout, st, parse_time(COMPUTE_S), 0, 1, 1)


@pytest.mark.parametrize("threads,prefetch", [(0, 1), (1, 1), (1, 2), (2, 1), (2, 2)])
def test_null_engine_run_matches_plan(threads, prefetch):
    plan = null_plan(max_transfer=4096)  # 3 reads per sample
    paths = [f"/nonexistent/f{i}" for i in range(NSTEPS * BATCH)]  # null never opens them
    run = _core.Run(
        "train", "null", paths, plan.ops, threads=threads, qd=1, steps=plan.steps, prefetch=prefetch, delay_ns=DELAY_NS
    )
    res = run.execute()
    st = res["step_times"]
    nops = plan.steps["nops"].astype(np.int64)
    assert list(nops) == [BATCH * 3] * NSTEPS
    assert res["steps_done"] == NSTEPS and not res["stopped"] and res["errors"] == 0
    assert res["ops"] == len(plan.ops) == NSTEPS * BATCH * 3
    assert res["bytes"] == plan.nominal_bytes == NSTEPS * BATCH * FSIZE
    # per-step bytes equal the plan's bytes for that step
    plan_step_bytes = [
        int(plan.ops["length"][int(f) : int(f) + int(n)].sum())
        for f, n in zip(plan.steps["first_op"], plan.steps["nops"])
    ]
    assert [int(b) for b in st["bytes"]] == plan_step_bytes == [BATCH * FSIZE] * NSTEPS
    # every read took at least the engine's delay; one latency per read, one per sample
    assert res["lat"]["count"] == len(plan.ops)
    assert res["lat"]["min"] >= DELAY_NS
    assert res["sample_lat"]["count"] == NSTEPS * BATCH
    assert res["sample_lat"]["min"] >= 3 * DELAY_NS
    # compute: never less than set, and not wildly more (generous: a loaded shared machine)
    comp = st["compute_ns"].astype(np.int64)
    want = plan.steps["compute_ns"].astype(np.int64)
    assert np.all(want == int(COMPUTE_S * 1e9))
    assert np.all(comp >= want)
    assert np.median(comp) < want[0] + 50_000_000
    # timestamps are ordered
    tf, tr, te = (st[k].astype(np.int64) for k in ("t_fetch", "t_ready", "t_end"))
    assert np.all(tf <= tr) and np.all(tr <= te) and np.all(te[:-1] <= tf[1:])
    assert np.all(te - tr >= comp)
    wait = tr - tf
    if threads == 0:
        # the trainer reads itself: the whole read is exposed
        assert np.all(wait >= nops * DELAY_NS)
    m = metrics.block_metrics(st, BATCH)
    # AU = compute / (compute + wait) over the counted steps; gaps between steps are tiny
    c, w = comp[1:].sum(), wait[1:].sum()
    assert m["au"] == pytest.approx(100.0 * c / (c + w), abs=5.0)
    assert 0 < m["au"] <= 100.0
    if threads == 0:
        # a bound that cannot flake: the wait is at least the reads' delay
        assert m["au"] <= 100.0 * c / (c + (NSTEPS - 1) * BATCH * 3 * DELAY_NS) + 1e-9
    assert m["exact"]["bytes"] == NSTEPS * BATCH * FSIZE


def test_null_engine_no_delay_no_wait_bound():
    """No I/O cost and readers ahead: AU is bounded by compute/(compute+gaps) and > 0."""
    plan = null_plan()
    res = _core.Run(
        "train", "null", [f"f{i}" for i in range(NSTEPS * BATCH)], plan.ops, threads=1, steps=plan.steps, prefetch=2
    ).execute()
    assert res["steps_done"] == NSTEPS and res["bytes"] == NSTEPS * BATCH * FSIZE
    m = metrics.block_metrics(res["step_times"], BATCH)
    assert 0 < m["au"] <= 100.0
    assert m["exact"]["compute_total_s"] >= NSTEPS * COMPUTE_S


def test_compute_overrun_does_not_raise_the_exact_au():
    # Set 10 ms per step; three steps overran (a preempted spin): 12, 15 and 10.5 ms measured.
    comps = [10.0, 12.0, 10.0, 15.0, 10.0, 10.5]
    loads = [2.0] * len(comps)
    st = synth(loads, comps)
    st["set_compute_ns"] = np.full(len(comps), 10 * MS, np.uint64)
    m = metrics.block_metrics(st, batch=1, exclude_start=0)
    window_s = (sum(loads) + sum(comps)) / 1e3
    assert m["exact"]["au_percentage"] == pytest.approx(100 * 0.010 * len(comps) / window_s)
    assert m["exact"]["compute_overrun_max_s"] == pytest.approx(0.005)
    assert m["exact"]["compute_overrun_mean_s"] == pytest.approx((2 + 5 + 0.5) / 1e3 / len(comps))
    assert m["exact"]["compute_set_mean_s"] == pytest.approx(0.010)
    # DLIO's AU keeps DLIO's definition: the measured compute, overruns included
    au, _, _, _ = dlio_by_hand(loads, comps, 0.0, 1, s=0)
    assert m["au"] == pytest.approx(au)
