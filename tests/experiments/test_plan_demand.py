"""A plan over the demand, not one rate (experiments/whatif/peak.py): the peak's onset run, the pre-warm it needs found
and verified, and money integrated over the demand with the 24×7 figure as its upper bound."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import api
from experiments.whatif import peak
from models.inputs.callers.demand import parse_shape
from models.inputs.platform.billing import HOURS_PER_MONTH
from models.runs import load_scenario, run_scenario
from tests.support import in_chromium

# 10 calls/s for 10 minutes, then 200/s: containers that take 8 s to start cannot follow the step in time
SETS = {
    "duration_s": 60,
    "warmup_s": 20,
    "work": "constant(0.5)",
    "function.max_inputs": 10,
    "autoscaler.scaleup_step": 0,
    "autoscaler.cold_start": "constant(8)",
}
ASK = {"rate": 200, "shape": "steps(600, 0.05, 1)", "p99": 2, "seeds": 2, "jobs": 2, "ways": "spawn", "lead": 60}


@pytest.fixture(scope="module")
def stepped(tmp_path_factory):
    out = tmp_path_factory.mktemp("stepped")
    plan = api.whatif("plan", set=SETS, out=str(out), **ASK)
    plan["page"] = out / "plan.html"
    return plan


@pytest.mark.slow
def test_an_onset_that_misses_gets_the_least_pre_warm_that_meets_verified(stepped):
    o = stepped["onset"]
    assert o["at_s"] == pytest.approx(600, abs=0.02) and o["before"] == 0.05 and o["lead_s"] == 60
    first = o["tries"][0]
    assert first["min_containers"] == 0 and not first["meets"] and "p99" in first["why"]
    w = o["prewarm"]
    assert w is not None and w["min_containers"] >= 1
    by_n = {t["min_containers"]: t for t in o["tries"]}
    assert by_n[w["min_containers"]]["meets"]  # the pre-warm proposed was simulated and met
    assert all(not t["meets"] for n, t in by_n.items() if n < w["min_containers"])  # no smaller one met
    # run it again by hand where the plan checked it: the answer, from 60 s before the step, with the pre-warm
    config = peak.onset_config(stepped["answer"]["config"], o, 60, 40)
    sets = [f"{k}={v}" for k, v in {**SETS, **config, "autoscaler.min_containers": w["min_containers"]}.items()]
    p99 = [run_scenario(load_scenario("loadtest-remote", sets), seed=s)["added_latency_p99_s"] for s in range(2)]
    assert np.mean(p99) == pytest.approx(w["p99_s"], rel=1e-9) and np.mean(p99) <= 2


@pytest.mark.slow
def test_money_is_integrated_over_the_demand_and_24x7_is_its_upper_bound(stepped):
    m, a = stepped["month"], stepped["answer"]
    levels = {x["rate"]: x["cost_per_hour"] for x in m["levels"]}
    assert set(levels) == {10.0, 200.0} and levels[200.0] == a["cost_per_hour"]
    # half the period at each rate (steps of 600 s, the last held as long: Shape.period)
    assert m["serving_per_month"] == pytest.approx((levels[10.0] + levels[200.0]) / 2 * HOURS_PER_MONTH, rel=1e-9)
    assert m["peak_24x7_per_month"] == pytest.approx(a["cost_per_hour"] * HOURS_PER_MONTH)
    assert m["serving_per_month"] < m["peak_24x7_per_month"]
    per_onset = stepped["onset"]["prewarm"]["cost_per_onset"]
    assert m["prewarm_per_month"] == pytest.approx(per_onset * HOURS_PER_MONTH / (1200 / 3600), rel=1e-9)
    assert m["cost_per_month"] == pytest.approx(m["serving_per_month"] + m["prewarm_per_month"], rel=1e-12)


def test_the_levels_money_is_simulated_at():
    week = 400 * parse_shape("weekdays(14, 1, 5)").rates()
    assert peak.levels(week) == [400.0, 2000.0]  # two rates: both
    assert peak.levels(np.array([1.0, 5.0, 2.0, 3.0, 4.0])) == [1.0, 3.0, 5.0]  # more: least, median, greatest


def test_a_steady_demand_has_no_onset_and_no_month():
    assert peak.onset_point("steady", None) is None
    counts = np.array([60, 60, 600, 600, 60, 60, 900])
    point = peak.onset_point(None, counts)  # a trace: the largest minute-to-minute rise, and how many rises like it
    assert point == {"at_s": 360.0, "before": 1.0, "rises": 2, "period_h": 7 / 60}


@pytest.mark.slow
def test_the_plan_page_shows_the_onset_the_pre_warm_the_month_and_what_it_rests_on(stepped, tmp_path):
    dom = in_chromium(stepped["page"], tmp_path)
    for said in ("Onset: the steepest rise", "Pre-warm: min_containers", "Per month over the demand", "24×7"):
        assert said in dom, said
    assert "Every combination simulated" in dom and "the answer: the cheapest that meets" in dom
    assert "Extrapolated" in dom or "within the calibrated range" in dom  # the flags, either way
    # the Function as described: every key that differs from the default, the plan's own settings among them
    assert "autoscaler.cold_start" in dom and "constant(8)" in dom and "function.max_inputs" in dom
    assert dom.count("<table") >= 4  # the levels, the ways, the combinations, the Function
