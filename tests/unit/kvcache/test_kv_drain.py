"""The drain after the duration, as the reference's: benchmark.py run() sets the stop event, then
joins its worker threads one after the other with join(timeout=2.0), and takes its figures when the
last join returns. A worker busy at the stop finishes its request (its decode reads) if it is done
before its own join times out, and every join waits while all workers go on; a saturated run has
every worker busy, so its drain lasts up to workers x 2 s, not 2 s. The expected counts come from a
model of those joins, not from the engine. Times are scaled down (drain_s for the 2 s)."""

import numpy as np
import pytest

from dlio import _core

pytestmark = pytest.mark.usefixtures("measured_phase")

BPT, TOKENS, GEN, GEN_NS = 4096, 16, 145, 10_000_000  # each request serves for 1.45 s (its generation)
DURATION_S, JOIN_S = 0.2, 0.5


def plan(n):
    r = np.zeros(n, _core.KV_REQ_DTYPE)
    r["first_step"] = np.arange(n)
    r["nsteps"] = 1
    r["conv"] = np.arange(n)
    r["gen"] = GEN
    r["prio"] = 1
    s = np.zeros(n, _core.KV_STEP_DTYPE)
    s["entry"] = np.arange(n)
    e = np.zeros(n, _core.KV_ENTRY_DTYPE)
    e["tokens"] = TOKENS
    e["bytes"] = TOKENS * BPT
    return r, s, e, np.arange(n + 1, dtype=np.uint32), np.arange(n, dtype=np.uint32)


def reference_joins(finish, stop, timeout):
    """benchmark.py: `for thread in threads: thread.join(timeout)` after the stop; a thread ends when
    its request is done. (requests completed when the figures are taken, when the drain ends)."""
    t = stop
    for f in finish:  # thread by thread, in order
        t = max(t, min(f, t + timeout))
    return sum(f <= t for f in finish), t


def run(workers):
    return _core.KvRun(
        *plan(workers),
        store="null",
        workers=workers,
        alloc_slots=workers,
        duration_s=DURATION_S,
        drain_s=JOIN_S,
        bytes_per_token=BPT,
        gen_ns_per_token=GEN_NS,
        asap=True,
    ).execute()


@pytest.mark.parametrize("workers", [2, 3])
def test_requests_in_flight_finish_as_the_references_joins_allow(workers):
    service = GEN * GEN_NS / 1e9
    done, end = reference_joins([service] * workers, DURATION_S, JOIN_S)
    # by hand: 2 workers are joined until 0.7 and 1.2 s, before 1.45 s: both cut; the third join of
    # 3 workers lasts until 1.7 s, and all three finish at 1.45 s (one drain of 0.5 s cut all)
    assert (done, round(end, 2)) == ((0, 1.2) if workers == 2 else (3, 1.45))
    res = run(workers)
    c = res["counts"]
    assert (c["requests"], c["requests_cut"]) == (done, workers - done)
    assert c["tokens"] == done * GEN
    # each request wrote its entry and read it 1 + ceil(gen / 32) times before its generation
    assert c["write_bytes"] == workers * TOKENS * BPT
    assert c["read_bytes"] == workers * (1 + -(-GEN // 32)) * TOKENS * BPT
    took = (res["end_ns"] - res["start_ns"]) / 1e9  # the start to the end of the drain
    assert end - 0.1 < took < end + 0.3
