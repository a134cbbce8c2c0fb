"""The replay score's bounds (dlio.profile.compare): a KS bound is never tighter than samples of
its size can tell apart, checked against draws of one distribution."""

import numpy as np

from dlio.profile import signals
from dlio.profile.compare import KS_LIMITS, ks_limit


def test_ks_bound_follows_the_sample_sizes_and_keeps_its_own_floor():
    assert ks_limit("inter-burst gaps", 30, 30) == round(1.628 * np.sqrt(60 / 900), 3)  # 0.42
    assert ks_limit("inter-burst gaps", 5000, 5000) == KS_LIMITS["inter-burst gaps"][1]
    assert ks_limit("transfer sizes", 10, 10, weighted=True) == KS_LIMITS["transfer sizes"][1]


def test_two_samples_of_one_distribution_pass_the_bound_99_times_in_100():
    rng = np.random.default_rng(4)
    n, fails = 30, 0
    for _ in range(400):
        a, b = rng.lognormal(np.log(50e6), 0.2, n), rng.lognormal(np.log(50e6), 0.2, n)
        fails += signals.ks_distance(a, b) > ks_limit("inter-burst gaps", n, n)
    assert fails <= 0.02 * 400
    # and a step period 25 % longer fails it
    a, b = rng.lognormal(np.log(50e6), 0.05, n), rng.lognormal(np.log(62.5e6), 0.05, n)
    assert signals.ks_distance(a, b, rel_tol=0.10) > ks_limit("inter-burst gaps", n, n)


def test_a_bound_of_one_or_more_is_untestable_not_a_pass():
    from dlio.profile.compare import testable

    lim = ks_limit("inter-burst gaps", 1, 35)  # the 1.651: one gap against 35
    assert lim == round(1.628 * np.sqrt(36 / 35), 3) and not testable(lim)
    assert testable(ks_limit("inter-burst gaps", 30, 30))
