"""signals.batches on synthetic loader traces whose batch size and step period are known: reader
threads each read whole batches (an npz-like header read + payload read per file), the trainer
releases a batch every period. Loading time per file is drawn from a wide lognormal, as on a
loaded machine, so that no single gap threshold separates the batches."""

import numpy as np
import pytest

from dlio.profile import signals
from dlio.profile.parsers import EVENT_DTYPE, OP_READ

MS = 1_000_000


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
                for off, size in ((0, 4096), (4096, 253952)):
                    rows.append((t, 20_000, 100, 1000 + ep * threads + w, OP_READ, fid, off, size))
                    t += 30_000
                fid = (fid + 1) % (steps * batch)
                t += int(rng.lognormal(np.log(load_ms * MS), 0.5))
            free[w] = t
            took[k] = t if k == 0 else max(t, took[k - 1] + period_ms * MS)
        t_epoch = max(free) + 100 * MS
    ev = np.array(rows, dtype=EVENT_DTYPE)
    return ev[np.argsort(ev["t"], kind="stable")]


@pytest.mark.parametrize("batch,threads,load_ms", [(4, 2, 1.0), (4, 2, 6.0), (8, 4, 3.0), (3, 1, 4.0), (16, 2, 0.5)])
def test_batch_size_and_period_from_reader_pauses(batch, threads, load_ms):
    period = 50.0
    assert batch * load_ms * 1.7 < threads * period  # compute-bound: readers wait for the trainer
    rd = loader_trace(batch, threads, steps=12, period_ms=period, load_ms=load_ms)
    b = signals.batches(rd, whole=True)
    assert b["b"] == batch
    assert np.all(b["units"] == batch)
    assert len(b["start"]) == 2 * 12
    assert np.allclose(b["bytes"], batch * (4096 + 253952))
    steady = signals.steady_period(signals.start_gaps(b))
    assert abs(np.median(steady) / MS - period) <= 0.02 * period


def test_gaps_stretched_by_load_keep_the_batch():
    """Every gap 5x longer (a loaded machine): the positions of the pauses, hence b, stay."""
    rd = loader_trace(4, 2, steps=12, period_ms=50, load_ms=1.0)
    slow = rd.copy()
    slow["t"] = rd["t"] * 5
    assert signals.batches(rd, True)["b"] == signals.batches(slow, True)["b"] == 4


def test_a_job_bound_by_its_readers_has_no_batches():
    rd = loader_trace(4, 2, steps=12, period_ms=50, load_ms=20.0, bound_by_readers=True)
    b = signals.batches(rd, whole=True)
    assert b["eta"] < signals.MIN_ETA and b["b"] == 1


def test_units_group_a_readers_reads_of_one_file():
    rd = loader_trace(4, 2, steps=4, period_ms=50, load_ms=1.0, epochs=1)
    u = signals.units(rd, whole=True)
    assert len(u["start"]) == 16 and np.all(u["reads"] == 2)
    assert list(u["pos"]) == list(range(8)) * 2  # two readers, 8 files each
    assert len(signals.units(rd, whole=False)["start"]) == 32


def test_steady_period_leaves_out_fills_and_epoch_pauses_whatever_their_share():
    rng = np.random.default_rng(3)
    steady = 50 * MS + rng.normal(0, 0.5 * MS, 18)
    gaps = np.concatenate(([0.4 * MS, 2 * MS, 6 * MS], steady[:9], [172 * MS, 174 * MS, 183 * MS], steady[9:]))
    got = signals.steady_period(gaps)
    assert sorted(got) == sorted(steady)  # 3 fills and 3 long pauses (13 %) all left out
    assert len(signals.steady_period(np.zeros(0))) == 0
