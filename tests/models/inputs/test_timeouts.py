"""Callers that stop waiting (``clients.timeout_s``, models/inputs/callers/clients.py): the attempt times out, the input
is abandoned but still run by the Function, and a retry policy sends the call again as a new input.

Oracle: with no retries the Function's queue does not change when callers time out (an abandoned input is not
cancelled), so an open loop into one warm container of exponential work is an M/M/1 queue whose FCFS time in system
is exponential of rate μ − λ: a call times out with probability exp(−(μ − λ)·T). Were abandoned inputs removed from
the queue (reneging), fewer would wait and fewer would time out, so the check can fail.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from experiments import api
from models.inputs import loadtest
from tests.support import ROOT, scenario

SEEDS = 10


def mm1(rate: float, timeout: float, duration: float, seed: int, **more) -> dict:
    tree = {
        "load": "arrivals",
        "arrivals": {"rate": rate},
        "function": {"containers": 1},
        "limits": {"enabled": False},
        "work": "exponential(1)",
        "duration_s": duration,
        "warmup_s": 200.0,
        "clients": {"timeout_s": timeout, **more},
    }
    return loadtest.run(scenario(tree), seed=seed)


@pytest.mark.parametrize(("rate", "timeout"), [(0.7, 3.0), (0.5, 1.5)])
def test_the_share_timed_out_is_the_mm1_tail_of_the_time_in_system(rate, timeout):
    shares = []
    for seed in range(SEEDS):
        m = mm1(rate, timeout, 8000.0, seed)
        out = m["errors_by_kind"].get("timeout", 0)
        shares.append(out / (out + m["calls"]))
        assert m["abandoned"] >= out  # every timed-out call left an input behind (some before the window)
    exact = math.exp(-(1.0 - rate) * timeout)
    mean, se = np.mean(shares), np.std(shares, ddof=1) / math.sqrt(SEEDS)
    half = stats.t.ppf(0.975, SEEDS - 1) * se
    assert abs(mean - exact) <= half, (mean, half, exact)


def test_a_deadline_that_never_passes_changes_no_number():
    plain = mm1(0.7, 0.0, 2000.0, 3)
    timed = mm1(0.7, 1e7, 2000.0, 3)  # armed on every call, never reached
    for key in ("calls", "calls_per_s", "wait_mean_s", "added_latency_p99_s", "errors", "retries"):
        assert timed[key] == plain[key], key
    assert timed["abandoned"] == 0 and plain["abandoned"] == 0


def test_abandoned_inputs_keep_the_container_busy_and_retries_add_inputs():
    # one container, work 10 s, deadline 4 s, a retry 1 s after each timeout: no try is ever back in time; every
    # try is an input the container runs to its end, one after the other
    m = api.run(
        "mmc",
        set={
            "load": "clients",
            "clients.count": 1,
            "clients.in_flight": 1,
            "clients.timeout_s": 4,
            "clients.retry": "fixed",
            "clients.retry_delay_s": 1,
            "function.containers": 1,
            "work": "constant(10)",
            "duration_s": 60,
            "warmup_s": 0,
            "drain_s": 0,
        },
        records=True,
    )
    rec = m["records"]
    abandoned = rec[rec["kind"] == "abandoned"].sort_values("started")
    assert m["calls"] == 0 and m["abandoned"] == len(rec[rec["kind"] == "abandoned"]) > 0
    ran = abandoned.dropna(subset=["finished"])
    assert len(ran) >= 5  # 60 s of a container busy with nobody's work
    assert np.allclose(ran["started"].to_numpy()[1:], ran["finished"].to_numpy()[:-1])  # back to back
    assert m["rejections_by_kind"]["timeout"] == m["abandoned"]  # each timed-out try left its input behind


@pytest.mark.slow
def test_timeouts_with_retries_turn_a_stable_function_into_a_storm_the_budget_stops():
    # utilization 7/8 without timeouts; with a 3 s deadline and a retry every 0.5 s each timed-out call adds an
    # input while its abandoned one still runs: the load passes the capacity and never comes back
    sets = ["arrivals.rate=7", "function.containers=8", "duration_s=600", "warmup_s=100", "work=exponential(1)"]
    cmd = [sys.executable, "-m", "experiments.run", "mmc"] + [a for s in sets for a in ("--set", s)]
    calm = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert calm.returncode == 0, calm.stderr
    storm = [*cmd, "--set", "clients.timeout_s=3", "--set", "clients.retry=fixed", "--set", "clients.retry_delay_s=0.5"]
    r = subprocess.run(storm, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "run budget" in r.stderr and "timed-out tries" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "sets",
    [
        ["clients.timeout_s=-1"],
        ["clients.timeout_s=inf"],
        ["clients.timeout_s=nan"],
        ["clients.timeout_s=soon"],
        ["clients.timeout_s=5", "clients.api=map"],
        ["clients.timeout_s=5", "clients.streams=10"],
    ],
)
def test_bad_timeouts_exit_2_naming_the_key(sets):
    cmd = [sys.executable, "-m", "experiments.run", "loadtest-remote"] + [a for s in sets for a in ("--set", s)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "clients.timeout_s" in r.stderr or "clients.api" in r.stderr, r.stderr


@pytest.mark.parametrize("preset", ["loadtest-server", "loadtest-batching"])
def test_timeouts_are_refused_where_they_are_not_modelled(preset):
    cmd = [sys.executable, "-m", "experiments.run", preset, "--set", "clients.timeout_s=5"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and "clients.timeout_s" in r.stderr, r.stderr


RETRIES = ["none", "backoff", "exponential", "fixed", "random", "immediate"]


@pytest.mark.slow
@pytest.mark.parametrize("retry", RETRIES)
@pytest.mark.parametrize("approach", ["remote", "spawn"])
@pytest.mark.parametrize("timeout", [3.0])
def test_closed_loop_callers_that_time_out_keep_every_invariant_with_every_retry_policy(retry, approach, timeout):
    """A closed loop whose round trips are drawn ahead (lognormal legs) and whose callers give up: a call abandoned
    while its result is on its way back is no round trip, so no call is issued twice and none from a row nobody
    holds. Every run checks its invariants (Little's law among them)."""
    tree = {
        "approach": approach,
        "duration_s": 20.0,
        "warmup_s": 5.0,
        "work": "uniform(0.2, 2)",
        "clients": {"count": 4, "in_flight": 200, "timeout_s": timeout, "retry": retry, "retry_delay_s": 0.2},
        "overhead": {"submit": "lognormal(0.1, 0.5)", "result": "lognormal(0.3, 0.8)"},
    }
    m = loadtest.run(scenario(tree), seed=1)
    assert m["calls_issued"] == m["calls_completed"] + m["errors_total"] + m["calls_in_flight"]
    assert m["errors_total"] > 0 or m["retries"] > 0  # the timeout does cut calls
