"""The maxacc search on an analytic storage: AU(N) = min(100, 100 x capacity / N) percent, so the
answer is floor(capacity / threshold) whatever the search path."""

import math

import pytest

from dlio.base.errors import DlioError
from dlio.mlperf.maxacc import Probe, curve_lines, search


def model(capacity, noise=None):
    """measure(n, kind) of a storage that feeds `capacity` accelerators at 100 % AU."""
    calls = []

    def measure(n, kind):
        au = min(100.0, 100.0 * capacity / n)
        if noise:
            au += noise(n, len([c for c in calls if c[0] == n]))
        calls.append((n, kind))
        return Probe(n, au, 10.0 * n, 1.0 * n, kind=kind)

    return measure, calls


@pytest.mark.parametrize("capacity", [0.5, 1.0, 2.7, 5.5, 13.2, 40.0])
def test_answer_is_the_largest_n_at_or_above_threshold(capacity):
    measure, calls = model(capacity)
    res = search(measure, 90.0, max_n=64, repeats=2)
    want = min(64, math.floor(capacity / 0.9))
    assert res.answer == want
    if want:
        assert calls[-1] == (want, "confirm")
        assert sum(1 for n, _ in calls if n == want) >= 3  # repeats at the edge + confirmation
    assert len(calls) <= 2 * math.ceil(math.log2(64)) + 6


def test_limit_hit_when_every_probe_passes():
    measure, _ = model(100.0)
    res = search(measure, 90.0, max_n=10)
    assert (res.answer, res.limit_hit) == (10, True)


def test_a_noisy_edge_steps_down():
    # capacity 4.5 -> AU(5) = 90 %: a pass on the first probe, then a repeat 3 % low fails it
    measure, calls = model(4.5, noise=lambda n, k: -3.0 if (n == 5 and k >= 1) else 0.0)
    res = search(measure, 90.0, max_n=16, repeats=2)
    assert res.answer == 4
    assert [p.au for p in res.probes if p.n == 5][:2] == [90.0, 87.0]
    table = curve_lines(res, demand_gib_s=0.5)
    row5 = next(r for r in table if r.split()[0] == "5")
    assert row5.split()[-2:] == ["FAIL", "-"] and "87.00" in row5 and row5.split()[-3] == "2.5"  # no verdicts here


def test_bad_max():
    with pytest.raises(DlioError):
        search(lambda n, k: Probe(n, 100, 0, 0), 90.0, max_n=0)
