"""The model against queueing theory (domain.md §4), with tolerances from CIs over replications."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from models.inputs import loadtest
from tests.conftest import preset


def erlang_c_wait(lam: float, mu: float, c: int) -> float:
    """Mean wait in queue of M/M/c: C(c, a) / (cμ − λ), a = λ/μ."""
    a = lam / mu
    rho = a / c
    top = a**c / math.factorial(c) / (1 - rho)
    p_wait = top / (sum(a**k / math.factorial(k) for k in range(c)) + top)
    return p_wait / (c * mu - lam)


def ci95(x: list[float]) -> tuple[float, float]:
    x = np.asarray(x)
    return float(x.mean()), float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))


@pytest.mark.parametrize("lam, c", [(5.0, 10), (8.0, 10), (9.0, 10)])
def test_mmc_mean_wait_matches_erlang_c(lam, c):
    sc = preset("mmc", f"arrivals.rate={lam}", f"function.containers={c}", "duration_s=6000", "warmup_s=500")
    waits = [loadtest.run(sc, seed=s)["wait_mean_s"] for s in range(12)]
    mean, half = ci95(waits)
    theory = erlang_c_wait(lam, 1.0, c)
    assert abs(mean - theory) <= half, f"ρ={lam / c}: simulated {mean:.4f} ± {half:.4f}, Erlang C {theory:.4f}"


def test_mm1_time_in_system():
    sc = preset("mmc", "arrivals.rate=0.7", "function.containers=1", "duration_s=20000", "warmup_s=1000")
    w = [loadtest.run(sc, seed=s)["wait_mean_s"] + 1.0 for s in range(10)]  # + E[service]
    mean, half = ci95(w)
    assert abs(mean - 1 / (1.0 - 0.7)) <= half


def test_littles_law_in_steady_state():
    # L (time-average of calls in flight over the window) against λ·W (arrival rate in the window × mean time in
    # system of the calls that arrived in it): equal in steady state up to edge effects; and L against M/M/c.
    lam, c = 8.0, 10
    gaps, ls = [], []
    for seed in range(12):
        m = loadtest.run(preset("mmc", f"arrivals.rate={lam}", "duration_s=6000", "warmup_s=500"), seed=seed)
        gaps.append(m["in_flight_mean"] - m["issued_per_s"] * m["response_mean_s"])
        ls.append(m["in_flight_mean"])
    mean, half = ci95(gaps)
    assert abs(mean) <= half
    mean, half = ci95(ls)
    assert abs(mean - lam * (erlang_c_wait(lam, 1.0, c) + 1.0)) <= half


def test_batching_ideal_follows_order_statistics():
    sc = preset("loadtest-batching")
    # 8 clients × 1,000 items per round; a round lasts E[max of 1,000 uniform(1, 10)] = 1 + 9·1000/1001
    assert sc.ideal_calls_per_s() == pytest.approx(8 * 1000 / (1 + 9 * 1000 / 1001))
    assert preset("loadtest-spawn").ideal_calls_per_s() == pytest.approx(8000 / 5.5)
