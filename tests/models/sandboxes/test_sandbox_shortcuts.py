"""The sandbox model's shortcuts against its general path: randomized differential tests (sim/shortcuts.py,
models/sandboxes/shortcuts.py).

A Hypothesis strategy draws small bursts (a few thousand sandboxes at most) under every control plane and across the
keys the shapes claim: workers and their slots, client rates, concurrency and ticks, latencies, scheduler counts,
threads and placement rules, publish intervals, phases and stream counts, lifetimes, horizons that cut the run, fleets
that fill up (``fleet.allow_overload``), start and create distributions. Each is run with a shortcut and without it,
and every metric and every record is compared to the bit (both shortcuts claim ``identical``). No shortcut reorders
random draws, so no comparison of distributions is needed.

CI runs ``DEFAULT_EXAMPLES`` examples in all, spread over the properties; ``SCALESIM_DIFF_EXAMPLES=N`` runs N (as
tests/models/inputs/test_shortcuts.py).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from models import coldstart
from models.sandboxes import creation, placement
from sim import engine
from sim.guard import Budget, Guard, OverBudget, Stalled
from sim.scenario import ScenarioError, build
from tests.support import IGNORED, diff_settings, dists, examples, same

SHORTCUTS = creation.SHORTCUTS
DEFAULT_EXAMPLES = examples(80)
PROPERTIES = 4  # the properties below that draw examples (each gets an equal share)
SETTINGS = diff_settings(DEFAULT_EXAMPLES, PROPERTIES)
SEEDS = st.integers(0, 2**16)
EXAMPLE_EVENTS = 500_000  # the most events an example may process (about a second and a half)
PLANES = ("modal-v2", "modal-v1", "kubernetes")


# --- drawing scenarios ------------------------------------------------------------------------------------------
def ms(lo: float, hi: float) -> st.SearchStrategy[float]:
    """A latency in [lo, hi] seconds, or exactly 0 now and then."""
    return st.one_of(st.just(0.0), st.floats(lo, hi))


@st.composite
def bursts(draw: st.DrawFn, **fixed: st.SearchStrategy) -> dict:
    """A small burst of any control plane, any mechanism on or off; a key in ``fixed`` is drawn from its own
    strategy instead."""

    def pick(key: str, default: st.SearchStrategy):
        return draw(fixed.get(key, default))

    plane = pick("control_plane", st.sampled_from(PLANES))
    cpu = pick("sandboxes.cpu", st.sampled_from([0.5, 1.0, 4.0, 16.0]))
    lifetime = pick("sandboxes.lifetime_s", st.sampled_from([0.0, 0.0, 0.3, 2.0, 20.0]))
    # a burst that holds its slots ends when all run; one that frees them runs to its horizon (kept short)
    horizons = [3600.0, 3600.0, 0.5, 2.0, 10.0] if lifetime == 0 else [0.5, 2.0, 10.0]
    tree: dict = {
        "control_plane": plane,
        "horizon_s": pick("horizon_s", st.sampled_from(horizons)),
        "sandboxes": {
            "count": pick("sandboxes.count", st.one_of(st.integers(1, 50), st.integers(500, 3000))),
            "cpu": cpu,
            "memory_gib": pick("sandboxes.memory_gib", st.sampled_from([0.5, 1.0, 2.0])),
            "lifetime_s": lifetime,
        },
        "client": {
            "rate": pick("client.rate", st.floats(500.0, 50_000.0)),
            "concurrency": pick("client.concurrency", st.sampled_from([1, 10, 200, 20_000])),
            "tick_s": pick("client.tick_s", st.sampled_from([0.0005, 0.001, 0.01, 0.05])),
            "rtt_s": pick("client.rtt_s", ms(1e-4, 0.02)),
        },
        "fleet": {
            "workers": pick("fleet.workers", st.one_of(st.integers(1, 10), st.integers(10, 300))),
            "worker_cpu": pick("fleet.worker_cpu", st.sampled_from([16.0, 64.0])),
            "worker_memory_gib": pick("fleet.worker_memory_gib", st.sampled_from([32.0, 256.0])),
            "allow_overload": pick("fleet.allow_overload", st.sampled_from([False, False, True])),
            "rpc_s": pick("fleet.rpc_s", ms(1e-4, 0.01)),
            "container_create": pick("fleet.container_create", dists(0.01, 0.3)),
            "rtnl_hold_s": pick("fleet.rtnl_hold_s", ms(1e-4, 0.005)),
            "contention_s": pick("fleet.contention_s", ms(1e-4, 0.005)),
            "start": pick("fleet.start", dists(0.01, 0.3)),
        },
    }
    if plane == "modal-v2":
        placement_rule = pick("scheduler.placement", st.sampled_from(["random", "power_of_d", "least_loaded"]))
        tree["scheduler"] = {
            "count": pick("scheduler.count", st.integers(1, 40)),
            "threads": pick("scheduler.threads", st.integers(1, 16)),
            "cpu_s": pick("scheduler.cpu_s", st.sampled_from([1e-4, 0.001, 0.01])),
            "request_s": pick("scheduler.request_s", ms(1e-3, 0.05)),
            "placement": placement_rule,
            "d": pick("scheduler.d", st.integers(1, 4)),
            "publish_interval_s": pick("scheduler.publish_interval_s", st.sampled_from([0.01, 0.1, 1.0, 5.0])),
            "streams": pick("scheduler.streams", st.integers(1, 4)),
            "stream_msgs_per_s": pick("scheduler.stream_msgs_per_s", st.sampled_from([100.0, 10_000.0, 200_000.0])),
            "stream_lag_s": pick("scheduler.stream_lag_s", ms(1e-4, 0.01)),
            "metadata_writes_per_s": pick("scheduler.metadata_writes_per_s", st.sampled_from([500.0, 200_000.0])),
            "publish_phases": pick("scheduler.publish_phases", st.sampled_from([1, 3, 20])),
        }
    elif plane == "modal-v1":
        tree["postgres"] = {
            "tps": draw(st.floats(500.0, 20_000.0)),
            "connections": draw(st.integers(1, 300)),
            "latency_s": draw(ms(1e-4, 0.005)),
            "writes_per_sandbox": draw(st.integers(2, 5)),
            "schedulers": draw(st.integers(1, 20)),
            "hot_rows": draw(st.integers(1, 64)),
            "workflow_writes": draw(st.integers(0, 5)),
        }
    else:
        tree["kubernetes"] = {
            "apiserver_mutating_inflight": draw(st.integers(1, 300)),
            "etcd_writes_per_s": draw(st.floats(1_000.0, 50_000.0)),
            "etcd_latency_s": draw(ms(1e-3, 0.03)),
            "etcd_clients": draw(st.integers(1, 1000)),
            "cycle_s": draw(ms(1e-5, 1e-3)),
            "node_score_s": draw(ms(1e-6, 1e-4)),
            "sampled_nodes": draw(st.integers(1, 10)),
            "scheduler_qps": draw(st.floats(50.0, 10_000.0)),
            "scheduler_burst": draw(st.floats(1.0, 1000.0)),
            "kubelet_pickup_s": draw(ms(1e-3, 0.2)),
            "lease_interval_s": draw(st.floats(0.5, 20.0)),
            "writes_per_pod": draw(st.integers(2, 4)),
        }
    # a burst the fleet cannot hold at once retries its placements every few milliseconds until slots free up: its
    # first half second exercises that path; ten seconds of it is millions of retries (minutes of a test's time)
    f, sb = tree["fleet"], tree["sandboxes"]
    slots = f["workers"] * min(f["worker_cpu"] // sb["cpu"], f["worker_memory_gib"] // sb["memory_gib"])
    if sb["count"] > slots and not f["allow_overload"]:
        tree["horizon_s"] = min(tree["horizon_s"], 0.5)
    return tree


def scenario(tree: dict) -> creation.SandboxScenario:
    """The drawn tree as a scenario, or the example is rejected (the fleet cannot hold it and may not overload)."""
    try:
        return build(creation.SandboxScenario, tree)
    except ScenarioError:
        assume(False)


# --- comparing runs -----------------------------------------------------------------------------------------------
def run(sc: creation.SandboxScenario, shortcuts: str, seed: int) -> dict:
    """The run, or the example is rejected if the model stalls (a zero-delay loop: every latency of a plane at 0,
    which the engine's backstop ends as bad input with either path) or processes more than ``EXAMPLE_EVENTS`` (a
    storm of retries in a full fleet: one such example took 18 s of the suite); neither is what these properties
    test. The budget is checked as the run goes (sim/guard.py) and changes no number."""
    try:
        return creation.run(
            replace(sc, shortcuts=shortcuts), seed=seed, records=True, series={}, guard=Guard(Budget(EXAMPLE_EVENTS))
        )
    except (Stalled, OverBudget):
        assume(False)
        raise


def differs(on: dict, off: dict) -> str | None:
    """None if the two runs agree to the bit in every metric and record, else what differs."""
    for k in sorted(set(on) | set(off)):
        if k in IGNORED or k == "records":
            continue
        if not same(on.get(k), off.get(k), 0.0):
            return f"{k}: {on.get(k)!r} with, {off.get(k)!r} without"
    if not on["records"].equals(off["records"]):
        return "records differ"
    return None


def check(name: str, tree: dict, seed: int) -> None:
    sc = scenario(tree)
    shortcut = SHORTCUTS[name]
    assert shortcut.claim == "identical"
    assume(name in SHORTCUTS.used(sc))
    on = run(sc, "all", seed)
    off = run(sc, f"all,-{name}", seed)
    assert name in on["shortcuts_used"] and name not in off["shortcuts_used"]
    found = differs(on, off)
    assert found is None, f"{name} is not exact: {found}\nscenario: {tree}\nseed: {seed}"


# --- one property per shortcut ---------------------------------------------------------------------------------
@SETTINGS
@given(bursts(control_plane=st.just("modal-v2")), SEEDS)
def test_same_instant_placements_are_exact(tree, seed):
    """Any v2 burst, lifetimes, horizons that cut it and fleets that fill up included."""
    check("same_instant_placements", tree, seed)


@SETTINGS
@given(bursts(control_plane=st.just("modal-v2"), **{"sandboxes.lifetime_s": st.just(0.0)}), SEEDS)
def test_accept_at_placement_is_exact(tree, seed):
    check("accept_at_placement", tree, seed)


@SETTINGS
@given(bursts(), SEEDS)
def test_every_shortcut_against_none_on_every_plane(tree, seed):
    """All the shortcuts a scenario may take (the engine's among them) against none: the general path everywhere."""
    sc = scenario(tree)
    found = differs(run(sc, "all", seed), run(sc, "none", seed))
    assert found is None, f"{found}\nscenario: {tree}\nseed: {seed}"


# --- no speed constant in the numbers -----------------------------------------------------------------------------
@SETTINGS
@given(bursts(), st.sampled_from([1, 7, 4095]), st.sampled_from([2, 64]), SEEDS)
def test_no_speed_constant_changes_a_number(tree, batch, near, seed):
    """The worker draws' batch (placement.BATCH) and the calendar's threshold (engine.NEAR) are speed constants."""
    sc = scenario(tree)
    before = run(sc, "all", seed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(placement, "BATCH", batch)
        mp.setattr(engine, "NEAR", near)
        after = run(sc, "all", seed)
    found = differs(before, after)
    assert found is None, f"{found}\nscenario: {tree}\nseed: {seed}"


# --- the shapes -------------------------------------------------------------------------------------------------
def test_the_shapes_name_the_regimes_they_leave_out():
    v2 = {"sandboxes": {"count": 100}, "fleet": {"workers": 10}}
    sc = build(creation.SandboxScenario, v2)
    assert SHORTCUTS.used(sc) >= {"same_instant_placements", "accept_at_placement"}
    churn = build(creation.SandboxScenario, {**v2, "sandboxes": {"count": 100, "lifetime_s": 1.0}})
    assert SHORTCUTS["accept_at_placement"].mismatch(churn) == "sandboxes.lifetime_s"
    assert "same_instant_placements" in SHORTCUTS.used(churn)
    full = build(creation.SandboxScenario, {**v2, "fleet": {"workers": 10, "allow_overload": True}})
    assert SHORTCUTS["accept_at_placement"].mismatch(full) == "fleet.allow_overload"
    instant = build(creation.SandboxScenario, {**v2, "client": {"rtt_s": 0.0}, "fleet": {"workers": 10, "rpc_s": 0}})
    assert SHORTCUTS["accept_at_placement"].mismatch(instant) == "a condition across keys"
    for plane in ("modal-v1", "kubernetes"):
        other = build(creation.SandboxScenario, {**v2, "control_plane": plane})
        assert SHORTCUTS.used(other) == {"calendar", "delay_lines"}


def test_every_run_reports_its_shortcuts_and_none_means_none():
    sc = build(creation.SandboxScenario, {"sandboxes": {"count": 200}, "fleet": {"workers": 10}})
    assert creation.run(sc)["shortcuts_used"] == [
        "accept_at_placement",
        "calendar",
        "delay_lines",
        "same_instant_placements",
    ]
    assert creation.run(replace(sc, shortcuts="none"))["shortcuts_used"] == []
    start = build(coldstart.ColdStartScenario, {"coldstart": {"starts": 5}})
    assert coldstart.run(start)["shortcuts_used"] == []  # a loop of starts: no clock, no shortcut


def test_a_shortcut_another_model_has_is_unknown_here():
    sc = build(creation.SandboxScenario, {"shortcuts": "fifo", "sandboxes": {"count": 5}, "fleet": {"workers": 5}})
    with pytest.raises(ScenarioError, match=r"^shortcuts: unknown shortcut 'fifo'"):
        creation.run(sc)
    start = build(coldstart.ColdStartScenario, {"shortcuts": "accept_at_placement", "coldstart": {"starts": 5}})
    with pytest.raises(ScenarioError, match=r"^shortcuts: unknown shortcut"):
        coldstart.run(start)
