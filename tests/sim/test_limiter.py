"""Token bucket against its oracles (docs/sources.md §4)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sim.limiter import TokenBucket


@given(
    rate=st.floats(0.1, 1000),
    burst=st.integers(1, 100),
    gaps=st.lists(st.floats(0, 2), min_size=1, max_size=300),
)
def test_at_most_burst_plus_rate_times_window(rate, burst, gaps):
    bucket = TokenBucket(rate, burst)
    times = np.cumsum(gaps)
    admitted = np.array([t for t in times if bucket.try_take(t)])
    for i, t0 in enumerate(admitted):
        for t1 in admitted[i:]:
            n = np.sum((admitted >= t0) & (admitted <= t1))
            assert n <= burst + rate * (t1 - t0) + 1e-6


def test_next_token_wakeup_succeeds():
    b = TokenBucket(3.0, 1)
    assert b.try_take(0.0) and not b.try_take(0.0)
    wait = b.next_token_in(0.0)
    assert math.isclose(wait, 1 / 3) and b.try_take(wait)


def test_poisson_offered_above_rate_drops_one_minus_r_over_lambda():
    rate, lam, horizon = 50.0, 200.0, 200.0
    fractions = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        times = np.cumsum(rng.exponential(1 / lam, int(lam * horizon * 1.2)))
        times = times[times < horizon]
        bucket = TokenBucket(rate, 10)
        dropped = sum(not bucket.try_take(t) for t in times)
        fractions.append(dropped / len(times))
    mean, half = np.mean(fractions), 2.09 * np.std(fractions, ddof=1) / math.sqrt(len(fractions))
    # the burst adds at most 10 admissions per run: a bias below 10/(λ·horizon) = 0.00025
    assert abs(mean - (1 - rate / lam)) < half + 0.00025
