"""steps.find_steps on synthetic loader traces whose batch size and step period are known, in the
three loader shapes: batch-per-worker (reader threads each read whole batches), sample-parallel
(one batch spread over the readers, which reader takes which sample drawn at random) and a loop
without readers. Files are read as np.load reads an npz (a header read and a payload read per
file). Loading time per file is drawn from a wide lognormal, as on a loaded machine, so that no
single gap threshold separates the batches."""

import numpy as np
import pytest

from dlio.profile import steps
from dlio.profile.events import EVENT_DTYPE, OP_READ
from dlio.profile.visits import visits

MS = 1_000_000


def _file_reads(rows, t, pid, tid, fid):
    """An npz-like visit: header then payload, 30 us apart. Returns the time after it."""
    for off, size in ((0, 4096), (4096, 253952)):
        rows.append((t, 20_000, pid, tid, OP_READ, fid, off, size))
        t += 30_000
    return t


def _trace(rows):
    ev = np.array(rows, dtype=EVENT_DTYPE)
    return ev[np.argsort(ev["t"], kind="stable")]


def loader_trace(batch, threads, steps, period_ms, load_ms, epochs=2, seed=0, bound_by_readers=False):
    """Reads of a PyTorch-like loader with `threads` workers and 2 batches in flight: worker
    t reads batches t, t+T, ...; batch k may start once the trainer took batch k-2 (at once for
    k < 2); the trainer takes batch k one period after batch k-1, or when it is read if later.
    A worker's files follow one another after a random load time. bound_by_readers: the trainer
    never makes a reader wait."""
    rng = np.random.default_rng(seed)
    rows, fid, t_epoch = [], 0, 0
    for ep in range(epochs):
        free = [t_epoch] * threads  # when each worker is done with its last batch
        took = [0] * steps  # when the trainer took batch k
        for k in range(steps):
            w = k % threads
            release = t_epoch if (k < 2 or bound_by_readers) else took[k - 2]
            t = max(free[w], release)
            for _ in range(batch):
                t = _file_reads(rows, t, 100, 1000 + ep * threads + w, fid)
                fid = (fid + 1) % (steps * batch)
                t += int(rng.lognormal(np.log(load_ms * MS), 0.5))
            free[w] = t
            took[k] = t if k == 0 else max(t, took[k - 1] + period_ms * MS)
        t_epoch = max(free) + 100 * MS
    return _trace(rows)


def sample_parallel_trace(batch, threads, steps, period_ms, load_ms, queue_batches=2, seed=0):
    """A queue-fed loader: at a pass's start the readers fill the queue (queue_batches x batch
    samples) plus the trainer's first batch; then each time the trainer takes a batch (every
    period) the readers read `batch` new samples, each sample taken by a reader drawn at random
    (whichever is free first), readers reading theirs back to back. One pass."""
    rng = np.random.default_rng(seed)
    rows, fid = [], 0
    n = steps * batch
    fill = (queue_batches + 1) * batch
    start_of = [0] * min(fill, n) + [int(k // batch + 1) * period_ms * MS for k in range(n - fill)]
    free = [0] * threads
    for s in range(n):
        r = int(rng.integers(threads))
        t = max(free[r], start_of[s])
        t = _file_reads(rows, t, 100, 2000 + r, fid)
        fid += 1
        free[r] = t + int(rng.lognormal(np.log(load_ms * MS), 0.5))
    return _trace(rows)


def sync_trace(batch, steps, compute_ms, decode_ms, epochs=1):
    """A loop without readers: the job's main thread (pid == tid) reads and decodes its batch's
    files one after another, then computes."""
    rows, fid, t = [], 0, 0
    for _ in range(epochs * steps):
        for _ in range(batch):
            t = _file_reads(rows, t, 100, 100, fid % (steps * batch)) + int(decode_ms * MS)
            fid += 1
        t += int(compute_ms * MS)
    return _trace(rows)


def _steps(rd, epochs=None):
    v = visits(rd)["visits"]
    ep = None
    if epochs is not None:  # each file once per pass: a visit's pass is its file's visit count
        o = np.lexsort((v["start"], v["file"]))
        first = np.r_[True, v["file"][o][1:] != v["file"][o][:-1]]
        idx = np.arange(len(o))
        ep = np.empty(len(v), np.int64)
        ep[o] = idx - np.maximum.accumulate(np.where(first, idx, 0))
    return steps.find_steps(v, ep)


@pytest.mark.parametrize("batch,threads,load_ms", [(4, 2, 1.0), (4, 2, 6.0), (8, 4, 3.0), (3, 1, 4.0), (16, 2, 0.5)])
def test_batch_size_and_period_from_reader_pauses(batch, threads, load_ms):
    period = 50.0
    assert batch * load_ms * 1.7 < threads * period  # compute-bound: readers wait for the trainer
    st = _steps(loader_trace(batch, threads, steps=12, period_ms=period, load_ms=load_ms), epochs=2)
    assert st["b"] == batch
    assert np.all(st["units"] == batch)
    assert len(st["start"]) == 2 * 12
    assert np.allclose(st["bytes"], batch * (4096 + 253952))
    steady = steps.step_period(st)
    assert abs(np.median(steady) / MS - period) <= 0.02 * period


def test_gaps_stretched_by_load_keep_the_batch():
    """Every gap 5x longer (a loaded machine): the positions of the pauses, hence b, stay."""
    rd = loader_trace(4, 2, steps=12, period_ms=50, load_ms=1.0)
    slow = rd.copy()
    slow["t"] = rd["t"] * 5
    assert _steps(rd, 2)["b"] == _steps(slow, 2)["b"] == 4


def test_a_job_bound_by_its_readers_has_no_batches():
    st = _steps(loader_trace(4, 2, steps=12, period_ms=50, load_ms=20.0, bound_by_readers=True), 2)
    assert st["eta"] < steps.MIN_ETA and st["b"] == 1


@pytest.mark.parametrize("batch,threads,seed", [(4, 2, 0), (8, 4, 1), (6, 3, 2)])
def test_a_batch_spread_over_the_readers_is_found_in_the_merged_stream(batch, threads, seed):
    """Which reader takes which sample is random: no single reader pauses every b-th sample, all
    of them together do; the queue's fill (3 batches) leaves each pass at its own phase."""
    rd = sample_parallel_trace(batch, threads, steps=16, period_ms=40, load_ms=1.0, seed=seed)
    st = _steps(rd)
    assert st["view"] == "merged" and st["b"] == batch
    assert st["reader_eta_at_b"] < steps.MIN_ETA
    assert abs(np.median(steps.step_period(st)) / MS - 40) <= 0.02 * 40
    # 3 batches read before the readers first wait, the trainer has taken 1: 2 in the queue
    assert max(st["depth"]) == pytest.approx(2)


def test_a_loop_without_readers_pauses_for_compute_between_batches():
    st = _steps(sync_trace(4, steps=12, compute_ms=40, decode_ms=2.0))
    assert st["b"] == 4
    # the pause before a batch holds the decode of the last sample and the compute; within a
    # batch only the decode
    assert abs((np.median(st["step_gaps"]) - np.median(st["sample_gaps"])) / MS - 40) < 0.5
    assert abs(np.median(st["sample_gaps"]) / MS - 2.0) < 0.1


def test_steady_period_leaves_out_fills_and_epoch_pauses_whatever_their_share():
    from dlio.profile.signals import steady_period

    rng = np.random.default_rng(3)
    steady = 50 * MS + rng.normal(0, 0.5 * MS, 18)
    gaps = np.concatenate(([0.4 * MS, 2 * MS, 6 * MS], steady[:9], [172 * MS, 174 * MS, 183 * MS], steady[9:]))
    got = steady_period(gaps)
    assert sorted(got) == sorted(steady)  # 3 fills and 3 long pauses (13 %) all left out
    assert len(steady_period(np.zeros(0))) == 0
