"""The clock offset estimate (dlio.system.clock_offset) against fake clocks with known offsets: a rank whose
wall clock is `skew` ns off rank 0's, pings whose two legs take different, known times."""

import random

import pytest

from dlio.system import clock_offset
from dlio.system.clock_offset import best_offset, estimate


class FakeLink:
    """True time advances by each leg's delay; the rank reads true + skew, rank 0 reads true."""

    def __init__(self, skew_ns, legs):
        self.true = 1_700_000_000_000_000_000
        self.skew = skew_ns
        self.legs = list(legs)  # (there, back) delays of each round, ns

    def rank_clock(self):
        return self.true + self.skew

    def ping(self):
        there, back = self.legs.pop(0)
        self.true += there
        answer = self.true  # rank 0 reads its clock on arrival
        self.true += back
        return answer


@pytest.mark.parametrize("skew_ns", [0, 3_500_000, -250_000_000, 7])
def test_symmetric_legs_give_the_offset_exactly(skew_ns):
    link = FakeLink(skew_ns, [(40_000, 40_000)] * 8)
    offset, rtt = estimate(link.ping, link.rank_clock, rounds=8)
    assert offset == -skew_ns  # add it to the rank's times: rank 0's clock
    assert rtt == 80_000


@pytest.mark.parametrize("skew_ns", [12_345_678, -98_765_432])
def test_the_round_with_the_smallest_round_trip_is_kept(skew_ns):
    rng = random.Random(skew_ns)
    legs = [(rng.randrange(30_000, 900_000), rng.randrange(30_000, 900_000)) for _ in range(8)]
    legs[5] = (21_000, 19_000)  # the quickest round, its legs 2 us apart
    link = FakeLink(skew_ns, legs)
    offset, rtt = estimate(link.ping, link.rank_clock, rounds=8)
    assert rtt == 40_000
    assert offset == -skew_ns + (21_000 - 19_000) // 2  # the legs' asymmetry / 2 is the error
    for there, back in legs:  # every round's estimate is within half its round trip of the truth
        link = FakeLink(skew_ns, [(there, back)])
        o, r = estimate(link.ping, link.rank_clock, rounds=1)
        assert abs(o - -skew_ns) <= r / 2


def test_best_offset_of_recorded_rounds():
    # (t0, rank 0's clock, t3) on a rank 1 s behind rank 0: the round of 10 us wins over the one of 1 ms
    rounds = [(100, 1_000_000_000 + 600, 1_100), (5_000, 1_000_000_000 + 5_005, 5_010)]
    assert best_offset(rounds) == (1_000_000_000, 10)


def test_the_epoch_anchor_is_read_in_the_tightest_bracket(monkeypatch):
    """wall_minus_mono_ns reads now_ns, time_ns, now_ns and keeps the tightest bracket: a process descheduled
    between two reads (here 5 ms, in the first bracket) no longer shifts every time of its trace by that much."""
    mono = iter([1_000, 5_001_000, 6_000_000, 6_000_100] + [9_000_000, 9_000_300] * 6)
    wall = iter([10**18 + 1_000, 10**18 + 6_000_050] + [10**18 + 9_000_150] * 6)  # wall = mono + 1e18 throughout
    monkeypatch.setattr(clock_offset._core, "now_ns", lambda: next(mono))
    monkeypatch.setattr(clock_offset.time, "time_ns", lambda: next(wall))
    assert clock_offset.wall_minus_mono_ns() == 10**18
