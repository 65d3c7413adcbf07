"""The steady cost per hour (``cost_per_hour``, models/inputs/loadtest.py ``costs``): measured after the warm-up
MSER-5 detects in the containers billed, so that the same configuration costs the same per steady hour whatever
window a command measures it over (``run``, ``whatif capacity``, ``whatif plan``, the API); the warm-up's cost apart,
and the bill's three parts adding up to it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from experiments import api
from models.inputs import loadtest
from tests.support import run_module

# A Function with a start-up overshoot: 150 calls/s of ~1 s of work, 40 inputs per container. Its containers come one
# per autoscaler decision (5.75 s apart) while the arrivals queue, so it launches for that backlog more than the load
# keeps (7 against 5) and holds them idle for the 60 s scaledown window, to 95-115 s.
FUNCTION = {
    "load": "arrivals",
    "arrivals.rate": 150,
    "work": "uniform(0.5, 1.5)",
    "function.max_inputs": 40,
}
LONG = {"duration_s": 240}  # a run long enough for MSER-5 (it cuts at most half of the window), warm-up 0
LONG_SET = ("--set", "duration_s=240")
SEEDS = 3


def steady_containers(m: dict, series: dict) -> float:
    """The containers the series holds after ``cost_steady_from_s``, time-averaged (the monitor's samples)."""
    t, c = np.asarray(series["t"]), np.asarray(series["containers"], dtype=float)
    after = (t >= m["cost_steady_from_s"]) & (t < LONG["duration_s"])
    return float(c[after].mean())


def test_the_detected_warm_up_excludes_the_start_up_overshoot():
    m = api.run("loadtest-remote", set={**FUNCTION, **LONG}, seed=0, series=True)
    t, c = np.asarray(m["series"]["t"]), np.asarray(m["series"]["containers"])
    steady = steady_containers(m, m["series"])
    assert m["containers_peak"] >= steady + 2  # the overshoot ...
    assert t[c == m["containers_peak"]].max() < m["cost_steady_from_s"]  # ... is before the steady part
    assert c[t >= m["cost_steady_from_s"]].max() < m["containers_peak"]
    assert loadtest.UNSETTLED not in m["extrapolated"]
    per_hour = api.scenario("loadtest-remote").billing.per_second() * 3600
    assert m["cost_per_hour"] == pytest.approx(steady * per_hour, rel=0.01)  # the samples against the bill
    assert m["containers_mean"] * per_hour > m["cost_per_hour"] * 1.02  # what the whole window's mean had counted


@pytest.mark.slow
def test_a_run_too_short_for_a_steady_state_says_so():
    # 180 s: the extra containers held to 95 s, past the half MSER-5 may cut
    short = api.run("loadtest-remote", set={**FUNCTION, "duration_s": 180}, seed=0)
    long = api.run("loadtest-remote", set={**FUNCTION, **LONG}, seed=0)
    assert loadtest.UNSETTLED in short["extrapolated"] and loadtest.UNSETTLED not in long["extrapolated"]
    assert short["cost_per_hour"] > long["cost_per_hour"]  # it holds part of the overshoot
    # calls made once and back before the duration: no steady load to measure, nothing to flag
    once = {"clients.count": 1, "clients.in_flight": 200, "clients.reissue": False, "duration_s": 600}
    drain = api.run("loadtest-spawn", set=once, seed=0)
    assert drain["sim_time_s"] < 600 and loadtest.UNSETTLED not in drain["extrapolated"]


@pytest.mark.parametrize("sets", [{**FUNCTION, **LONG}, {**FUNCTION, "duration_s": 210, "warmup_s": 90}])
def test_the_warm_up_the_steady_part_and_the_tail_add_up_to_the_bill(sets):
    m = api.run("loadtest-remote", set=sets, seed=1)
    per_s = api.scenario("loadtest-remote").billing.per_second()
    steady_h = (min(sets["duration_s"], m["sim_time_s"]) - m["cost_steady_from_s"]) / 3600
    assert m["cost_usd_warmup"] + m["cost_per_hour"] * steady_h + m["cost_usd_after"] == pytest.approx(
        m["cost_usd"], rel=1e-9
    )
    # the warm-up's part holds the stated warm-up's container-seconds and the detected one's after it
    assert m["cost_usd_warmup"] > m["container_seconds_warmup"] * per_s
    assert m["cost_steady_from_s"] > sets.get("warmup_s", 0)
    # the tail is the idle containers' scaledown after the last call: billed to their removal
    assert m["cost_usd_after"] > 0 and m["billed_until_s"] > m["sim_time_s"]


@pytest.mark.slow
def test_the_same_configuration_costs_the_same_per_steady_hour_everywhere():
    sets = [a for k, v in FUNCTION.items() for a in ("--set", f"{k}={v}")]
    common = ["--scenario", "loadtest-remote", "--rate", "150", "--p99", "1", "--seeds", str(SEEDS), "--jobs", "1"]
    # run: the preset's warm-up (0) over a run long enough for MSER-5, one seed a command
    runs = []
    for seed in range(SEEDS):
        r = run_module("experiments.run", "loadtest-remote", *sets, *LONG_SET, "--seed", str(seed), "--json")
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout))
    # the API: the same runs in a notebook, the same numbers
    for seed, r in enumerate(runs):
        assert api.run("loadtest-remote", set={**FUNCTION, **LONG}, seed=seed)["cost_per_hour"] == r["cost_per_hour"]
    # capacity and the plan: their own window (210 s, warm-up 90), the answer at 1 copy
    cap = run_module("experiments.whatif", "capacity", *common, "--knob", "copies", *sets, "--json")
    assert cap.returncode == 0, cap.stderr
    chosen = json.loads(cap.stdout)["chosen"]
    assert chosen["config"]["function.copies"] == 1, chosen
    plan = run_module("experiments.whatif", "plan", *common, "--ways", "remote", *sets, "--json")
    assert plan.returncode == 0, plan.stderr
    answer = json.loads(plan.stdout)["answer"]
    assert answer["config"]["function.copies"] == 1, answer
    for flags in (chosen["extrapolated"], answer["extrapolated"], *(r["extrapolated"] for r in runs)):
        assert loadtest.UNSETTLED not in flags

    # the tolerance from the replications: the seeds' spread of each mean (the run's from its seeds, capacity's from
    # its 95% CI), at 99% two-sided (Student t)
    from scipy import stats

    t99 = float(stats.t.ppf(0.995, SEEDS - 1))
    run_costs = np.array([r["cost_per_hour"] for r in runs])
    sd_cap = chosen["metrics"]["cost_per_hour"]["ci95"] * math.sqrt(SEEDS) / float(stats.t.ppf(0.975, SEEDS - 1))
    mean_run = float(run_costs.mean())
    tolerance = t99 * math.sqrt(run_costs.var(ddof=1) / SEEDS + sd_cap**2 / SEEDS) + 1e-9 * mean_run  # (+ rounding)
    assert abs(chosen["cost_per_hour"] - mean_run) <= tolerance
    assert abs(answer["cost_per_hour"] - mean_run) <= tolerance
    # the whole window's mean containers, what cost_per_hour was before, differ by more than that (and by over 1%)
    per_hour = api.scenario("loadtest-remote").billing.per_second() * 3600
    old_run = np.mean([r["containers_mean"] for r in runs]) * per_hour
    old_plan = answer["figures"]["containers_mean"]["mean"] * per_hour
    assert abs(old_plan - old_run) > max(3 * tolerance, 0.01 * mean_run)
