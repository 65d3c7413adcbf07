"""Faults of a Function's input plane (models/inputs/platform/faults.py): containers that crash with the inputs on them,
the Function's retries of those inputs (``function.retries``, modal.Retries' rule), and a slow dependency."""

from __future__ import annotations

import math

import modal
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.whatif.recovery import measure
from models.inputs import loadtest
from sim.scenario import ScenarioError
from tests.support import examples, preset, scenario

SAME = ("calls", "calls_per_s", "wait_mean_s", "added_latency_p50_s", "added_latency_p99_s", "errors", "cold_starts")


def fixed(**more) -> dict:
    """Four always-warm containers, four closed-loop clients, 10 s of work each, no limits: every call's times known."""
    tree = {
        "function": {"containers": 4},
        "clients": {"count": 4, "in_flight": 1},
        "limits": {"enabled": False},
        "work": "constant(10)",
        "duration_s": 60.0,
        "autoscaler": {"cold_start": "constant(2)"},
    }
    for key, value in more.items():
        section, _, leaf = key.partition("__")
        tree.setdefault(section, {})[leaf] = value
    return tree


def test_a_crash_fails_the_inputs_on_the_crashed_containers():
    m = loadtest.run(scenario(fixed(faults__crash_at_s=15.0, faults__crash_containers=2)), records=True)
    assert m["errors_by_kind"] == {"container_crash": 2}
    assert m["cold_starts"] == 2  # the fixed pool starts two again
    r = m["records"]
    crashed = r[r["kind"] == "container_crash"]
    assert len(crashed) == 2 and (crashed["finished"] == 15.0).all()  # the caller hears at the crash
    # a call that fails unretried ends its client's loop (models/inputs/callers/clients.py); the other two run on
    assert len(r) == 2 * 6 + 2 * 2  # 0, 10, ..., 50 s for two clients; 0 and 10 s for the other two


def test_the_function_retries_a_crashed_input_after_modals_delay():
    tree = fixed(faults__crash_at_s=15.0, faults__crash_containers=2, function__retries=1)
    tree["function"]["retry_initial_delay_s"] = 3.0
    m = loadtest.run(scenario(tree), records=True)
    assert m["errors"] == 0 and m["function_retries"] == 2
    r = m["records"]
    again = r[r["started"] == 18.0]  # retried at 15 + 3 s onto the two new containers (ready at 17 s)
    assert len(again) == 2 and (again["finished"] == 28.0).all() and (again["issued"] == 10.0).all()


def test_a_retry_waits_for_a_container():
    # every container crashes at 15 s: the retries, due at once, wait in the pending queue for the new containers
    # (ready at 17 s) and start there, the whole work again
    tree = fixed(faults__crash_at_s=15.0, faults__crash_containers=4, function__retries=1)
    tree["function"]["retry_initial_delay_s"] = 0.0
    m = loadtest.run(scenario(tree), records=True)
    assert m["errors"] == 0 and m["function_retries"] == 4
    r = m["records"]
    assert sorted(r["started"].unique())[:3] == [0.0, 17.0, 27.0]
    assert (r[r["started"] == 17.0]["issued"] == 10.0).all()


def test_retry_delays_follow_modal_retries():
    tree = fixed(function__retries=6, function__retry_max_delay_s=10.0, faults__crash_containers=1)
    fp = scenario(tree).function
    assert [fp.retry_delay(k) for k in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


@pytest.mark.parametrize(
    ("kwargs", "key", "value"),
    [
        ({"backoff_coefficient": 10.5}, "retry_backoff", 10.5),
        ({"backoff_coefficient": 0.9}, "retry_backoff", 0.9),
        ({"max_delay": 0.5}, "retry_max_delay_s", 0.5),
        ({"max_delay": 61.0}, "retry_max_delay_s", 61.0),
        ({"initial_delay": -1.0}, "retry_initial_delay_s", -1.0),
        ({"initial_delay": 61.0}, "retry_initial_delay_s", 61.0),
    ],
)
def test_the_retry_keys_refuse_what_modal_retries_refuses(kwargs, key, value):
    with pytest.raises(modal.exception.InvalidError):
        modal.Retries(max_retries=2, **kwargs)
    with pytest.raises(ScenarioError, match=f"function.{key}"):
        scenario(fixed(function__retries=2, **{f"function__{key}": value}, faults__crash_containers=1))
    ok = {"backoff_coefficient": 10.0, "max_delay": 60.0, "initial_delay": 60.0}
    modal.Retries(max_retries=2, **{k: ok[k] for k in kwargs})  # the edge of modal's range: both take it


@settings(max_examples=examples(25), deadline=None, derandomize=True)
@given(
    rate=st.floats(1.0, 12.0),
    containers=st.integers(0, 12),
    work=st.sampled_from(["exponential(1)", "uniform(0.5, 2)", "constant(1)"]),
    seed=st.integers(0, 2**16),
)
def test_a_fault_after_the_run_changes_no_number(rate, containers, work, seed):
    # the crash's bookkeeping (each running input's container) and a slow-down after the end are on from the start
    # and must not move any number; the general path (shortcuts = none) both ways
    tree = {
        "load": "arrivals",
        "arrivals": {"rate": rate},
        "function": {"containers": containers},
        "work": work,
        "duration_s": 200.0,
        "drain_s": 100.0,
        "shortcuts": "none",
    }
    plain = loadtest.run(scenario(tree), seed=seed)
    late = {
        **tree,
        "faults": {"crash_at_s": 1e6, "crash_containers": 3, "slow_at_s": 1e6, "slow_s": 1, "slow_factor": 5},
    }
    faulty = loadtest.run(scenario(late), seed=seed)
    for key in SAME:
        a, b = plain[key], faulty[key]
        assert a == b or (a != a and b != b), (key, a, b)


def test_a_slow_dependency_multiplies_the_work_of_inputs_started_while_it_lasts():
    m = loadtest.run(
        scenario(fixed(faults__slow_at_s=15.0, faults__slow_s=10.0, faults__slow_factor=3.0)), records=True
    )
    r = m["records"]
    took = (r["finished"] - r["started"]).round(9)
    assert (took[(r["started"] >= 15.0) & (r["started"] < 25.0)] == 30.0).all()
    assert (took[(r["started"] < 15.0) | (r["started"] >= 25.0)] == 10.0).all()
    assert sorted(r["started"].unique())[:3] == [0.0, 10.0, 20.0]  # the calls started at 20 s took 30 s


def test_faults_turn_the_shortcuts_off_and_are_refused_off_the_function_path():
    assert "fifo" in loadtest.run(preset("mmc", "duration_s=200", "warmup_s=10"))["shortcuts_used"]
    slowed = loadtest.run(preset("mmc", "duration_s=200", "warmup_s=10", "faults.slow_s=5", "faults.slow_at_s=50"))
    assert "fifo" not in slowed["shortcuts_used"]
    with pytest.raises(ScenarioError, match=r"faults\.slow_s"):
        scenario({"approach": "server", "faults": {"slow_s": 5.0}})
    with pytest.raises(ScenarioError, match=r"function\.retries"):
        scenario({"function": {"retries": 3}})
    with pytest.raises(ScenarioError, match=r"faults\.crash_at_s"):
        scenario({"faults": {"crash_at_s": 3.0}})


def test_a_slow_down_is_a_trigger_the_recovery_measure_takes():
    # ten warm containers at 70% load; the work takes 1.3 times as long for 200 s (91% load: a backlog grows), then
    # drains at the spare capacity: recovered, and the throughput during the trigger stays near the offered 7/s
    sets = [
        "duration_s=3000",
        "warmup_s=100",
        "arrivals.rate=7",
        "faults.slow_at_s=600",
        "faults.slow_s=200",
        "faults.slow_factor=1.3",
    ]
    rec, series = measure("mmc", sets, [], 0, 0.2)
    assert rec["recovered"] == 1 and rec["recovery_s"] is not None and rec["recovery_s"] >= 0
    assert rec["trigger_calls_per_s"] == pytest.approx(7.0, rel=0.15)
    assert math.isfinite(rec["pre_trigger_latency_s"])
    assert np.nanmax(series["latency_s"]) > 2 * rec["pre_trigger_latency_s"]
