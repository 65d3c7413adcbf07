"""Invariants over Hypothesis-generated scenarios: no call lost, no negative wait, causality."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.inputs import loadtest
from models.inputs.clients import ClosedLoop, Load
from models.inputs.records import CallLog
from tests.conftest import scenario

dists = st.sampled_from(["constant(1)", "uniform(0.5, 3)", "exponential(1)", "lognormal(1, 0.5)"])

scenarios = st.fixed_dictionaries(
    {
        "approach": st.sampled_from(["remote", "spawn", "copies", "batching", "server"]),
        "work": dists,
        "duration_s": st.floats(1, 20),
        "drain_s": st.sampled_from([0.0, 5.0, 300.0]),
        "function": st.fixed_dictionaries(
            {"max_inputs": st.integers(1, 20), "copies": st.integers(1, 3), "containers": st.sampled_from([0, 0, 2])}
        ),
        "limits": st.fixed_dictionaries(
            {
                "sync_accept_rate": st.floats(1, 100),
                "sync_accept_burst": st.floats(1, 50),
                "sync_pending_cap": st.integers(0, 50),
                "sync_in_system_cap": st.integers(0, 100),
                "start_rate": st.floats(0.5, 100),
                "start_burst": st.floats(1, 20),
            }
        ),
        "autoscaler": st.fixed_dictionaries(
            {
                "interval_s": st.floats(0.1, 5),
                "scaleup_step": st.integers(1, 4),
                "cold_start": dists,
                "scaledown_window_s": st.floats(2, 30),
                "max_containers": st.integers(0, 5),
            }
        ),
        "server": st.fixed_dictionaries({"max_concurrency": st.integers(0, 10)}),
        "clients": st.fixed_dictionaries(
            {
                "count": st.integers(1, 4),
                "in_flight": st.integers(1, 30),
                "retry": st.sampled_from(["none", "backoff"]),
                "connection_limit": st.integers(0, 10),
            }
        ),
        "batching": st.fixed_dictionaries(
            {
                "round_items": st.integers(1, 40),
                "chunk_items": st.integers(1, 10),
                "item_failure_prob": st.sampled_from([0.0, 0.1]),
            }
        ),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=scenarios, seed=st.integers(0, 2**32))
def test_every_call_is_accounted_for(tree, seed):
    loads: list[Load] = []
    orig_init = Load.__init__

    def spy(self, *a, **k):
        orig_init(self, *a, **k)
        loads.append(self)

    logs: list[dict] = []
    orig_arrays = CallLog.arrays

    def spy_arrays(self):
        out = orig_arrays(self)
        logs.append(out)
        return out

    Load.__init__, CallLog.arrays = spy, spy_arrays
    try:
        m = loadtest.run(scenario(tree), seed=seed)
    finally:
        Load.__init__, CallLog.arrays = orig_init, orig_arrays
    load, a = loads[0], logs[0]

    # completed + failed + in flight = issued, by the callers' own counters and by the records
    in_flight_items = int(a["items"][np.isnan(a["finished"])].sum())
    assert load.completed + load.failed + in_flight_items == load.issued == m["calls_issued"]
    assert m["calls_completed"] + m["errors"] + m["calls_in_flight"] == m["calls_issued"]
    assert load.outstanding == int(np.isnan(a["finished"]).sum())
    # causality: issued ≤ started ≤ finished, and no negative wait or added latency
    started = ~np.isnan(a["started"])
    assert np.all(a["started"][started] >= a["issued"][started] - 1e-9)
    ok = (a["kind"] == "") & ~np.isnan(a["finished"])
    assert np.all(a["finished"][ok] - a["issued"][ok] - a["work"][ok] >= -1e-9)
    assert m["wait_mean_s"] is None or m["wait_mean_s"] >= 0
    # the pending queue and running inputs never outgrow what the pool holds
    for t in load.targets:
        assert t.pool.size >= 0 and t.pool.starting >= 0
        if tree["autoscaler"]["max_containers"] and not tree["function"]["containers"]:
            assert t.pool.peak <= tree["autoscaler"]["max_containers"]
    if isinstance(load, ClosedLoop) and tree["clients"]["retry"] == "backoff" and m["calls_in_flight"] == 0:
        assert m["errors"] == 0  # backoff retries until accepted; nothing fails


sandbox_scenarios = st.fixed_dictionaries(
    {
        "model": st.just("sandboxes"),
        "control_plane": st.sampled_from(["modal-v2", "modal-v1", "kubernetes"]),
        "horizon_s": st.floats(1, 200),
        "sandboxes": st.fixed_dictionaries(
            {
                "count": st.integers(1, 400),
                "cpu": st.sampled_from([0.5, 4.0, 16.0]),
                "lifetime_s": st.sampled_from([0.0, 0.5, 5.0]),
            }
        ),
        "client": st.fixed_dictionaries(
            {"rate": st.floats(10, 5000), "concurrency": st.integers(1, 500), "tick_s": st.sampled_from([0.01, 0.1])}
        ),
        "fleet": st.fixed_dictionaries(
            {
                "workers": st.integers(1, 40),
                "worker_cpu": st.sampled_from([16.0, 64.0]),
                "rtnl_hold_s": st.sampled_from([0.0, 0.01, 0.156]),
            }
        ),
        "scheduler": st.fixed_dictionaries(
            {
                "count": st.integers(1, 8),
                "placement": st.sampled_from(["random", "power_of_d", "least_loaded"]),
                "publish_interval_s": st.sampled_from([0.05, 1.0, 10.0]),
                "publish_phases": st.integers(1, 5),
            }
        ),
    }
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=sandbox_scenarios, seed=st.integers(0, 2**32))
def test_sandbox_creation_never_overfills_a_worker_nor_loses_a_sandbox(tree, seed):
    from experiments.cli import build_scenario
    from models.sandboxes import creation as sandboxes

    fleets = []
    orig = sandboxes.Fleet.__init__

    def spy(self, *a, **k):
        orig(self, *a, **k)
        fleets.append(self)

    sandboxes.Fleet.__init__ = spy
    try:
        m = sandboxes.run(build_scenario(tree), seed=seed)
    finally:
        sandboxes.Fleet.__init__ = orig
    fleet = fleets[0]
    assert all(0 <= u <= fleet.slots for u in fleet.used)  # a worker is its own source of truth
    assert m["sandboxes_created"] <= m["sandboxes_issued"] <= m["sandboxes_requested"]
    assert fleet.accepted >= m["sandboxes_created"]
    assert m["retries"] >= 0 and m["rejections"] >= 0
    if tree["sandboxes"]["lifetime_s"] == 0:
        assert sum(fleet.used) == fleet.accepted  # nothing released while every sandbox lives to the end
    for q in ("tti_p50_s", "schedule_latency_p50_s"):
        assert m[q] is None or m[q] >= 0
