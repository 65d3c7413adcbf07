"""Every shortcut against the general path: randomized differential tests (sim/shortcuts.py).

For each shortcut a Hypothesis strategy draws load tests across the mechanisms and parameter ranges its shape claims
(rates, intervals, windows, cold-start and work distributions, min/max/buffer containers, limits, overheads, copies,
clients, durations), runs each with the shortcut and without it, and compares every metric and every record: to
the bit where the shortcut claims ``identical``, to its stated relative tolerance where it claims ``rounding`` (sums
added in another order). No shortcut reorders random draws (streams are named after clients and copies), so no
comparison of distributions is needed.

CI runs ``DEFAULT_EXAMPLES`` examples in all, spread over the properties; ``SCALESIM_DIFF_EXAMPLES=N`` runs N.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from models.inputs import loadtest
from models.inputs.approaches import base
from sim import engine
from sim.scenario import ScenarioError, build, param
from sim.shortcuts import Shortcut, Shortcuts, parse
from tests.support import IGNORED, ROOT, diff_settings, dists, examples, same

SHORTCUTS = loadtest.SHORTCUTS
DEFAULT_EXAMPLES = examples(320)
PROPERTIES = 10  # the properties below that draw examples (each gets an equal share)


SETTINGS = diff_settings(DEFAULT_EXAMPLES, PROPERTIES)


# --- drawing scenarios ------------------------------------------------------------------------------------------
SHAPES = st.one_of(
    st.just("steady"),
    st.tuples(st.floats(1, 20), st.floats(0, 3), st.floats(0.1, 3)).map(
        lambda a: f"steps({a[0]!r}, {a[1]!r}, {a[2]!r})"
    ),
    st.tuples(st.floats(2, 60), st.floats(0, 1)).map(lambda a: f"sine({a[0]!r}, {a[1]!r})"),
    st.tuples(st.floats(2, 30), st.floats(0, 1), st.floats(0, 5)).map(
        lambda a: f"bursts({a[0]!r}, {min(a[1], 1.0) * a[0]!r}, {a[2]!r})"
    ),
)


@st.composite
def load_tests(draw: st.DrawFn, **fixed: st.SearchStrategy) -> dict:
    """A small load test (a few thousand calls at most) of any approach and load, any mechanism on or off; a key
    in ``fixed`` is drawn from its own strategy instead."""

    def pick(key: str, default: st.SearchStrategy):
        return draw(fixed.get(key, default))

    approach = pick("approach", st.sampled_from(["remote", "spawn", "batching", "server"]))
    load = pick("load", st.sampled_from(["clients", "clients", "arrivals", "trace"]))
    if approach == "batching" and load == "trace":
        load = "clients"
    duration = pick("duration_s", st.floats(2.0, 40.0))
    mean_work = pick("mean_work", st.floats(0.05, 4.0))
    tree: dict = {
        "approach": approach,
        "load": load,
        "duration_s": duration,
        "warmup_s": pick("warmup_s", st.floats(0.0, 0.5)) * duration,
        "drain_s": pick("drain_s", st.sampled_from([0.0, 5.0, 60.0, 300.0])),
        "work": pick("work", dists(mean_work / 2, mean_work)),
    }
    limit = pick("limits.enabled", st.booleans())
    tree["limits"] = {
        "enabled": limit,
        "sync_accept_rate": pick("limits.sync_accept_rate", st.floats(1.0, 300.0)),
        "sync_accept_burst": pick("limits.sync_accept_burst", st.floats(1.0, 200.0)),
        "sync_pending_cap": pick("limits.sync_pending_cap", st.integers(0, 200)),
        "sync_in_system_cap": pick("limits.sync_in_system_cap", st.integers(0, 400)),
        "async_accept_rate": pick("limits.async_accept_rate", st.floats(1.0, 300.0)),
        "async_accept_burst": pick("limits.async_accept_burst", st.floats(1.0, 200.0)),
        "async_pending_cap": pick("limits.async_pending_cap", st.integers(0, 400)),
        "start_rate": pick("limits.start_rate", st.floats(1.0, 200.0)),
        "start_burst": pick("limits.start_burst", st.floats(1.0, 30.0)),
        "start_ramp_per_s": pick("limits.start_ramp_per_s", st.sampled_from([0.0, 0.5, 5.0])),
        "start_relax_per_s": pick("limits.start_relax_per_s", st.sampled_from([0.0, 0.5, 5.0, 50.0])),
    }
    if tree["limits"]["start_ramp_per_s"] and draw(st.booleans()):
        tree["limits"]["start_rate_max"] = tree["limits"]["start_rate"] * draw(st.floats(1.0, 3.0))
    max_inputs = pick("function.max_inputs", st.integers(1, 8))
    tree["function"] = {
        "max_inputs": max_inputs,
        "target_inputs": pick("function.target_inputs", st.integers(0, max_inputs)),
        "containers": pick("function.containers", st.sampled_from([0, 0, 0, 1, 2, 5])),
        "copies": pick("function.copies", st.sampled_from([0, 1, 1, 2, 3])),
    }
    lo = pick("autoscaler.min_containers", st.integers(0, 2))
    tree["autoscaler"] = {
        "interval_s": pick("autoscaler.interval_s", st.floats(0.05, 5.0)),
        "scaleup_step": pick("autoscaler.scaleup_step", st.integers(0, 6)),
        "burst_aware": pick("autoscaler.burst_aware", st.booleans()),
        "gather_s": pick("autoscaler.gather_s", st.sampled_from([0.0, 0.0, 0.05, 1.0])),
        "size_to": pick("autoscaler.size_to", st.sampled_from(["in_system", "startable"])),
        "cold_start": pick("autoscaler.cold_start", dists(0.01, 5.0, zero=True)),
        "min_containers": lo,
        "max_containers": pick("autoscaler.max_containers", st.sampled_from([0, max(lo, 1), max(lo, 3), 10])),
        "buffer_containers": pick("autoscaler.buffer_containers", st.integers(0, 2)),
        "scaledown_window_s": pick("autoscaler.scaledown_window_s", st.floats(2.0, 30.0)),
        "launch_rate_per_s": pick("autoscaler.launch_rate_per_s", st.sampled_from([0.0, 0.5, 3.0, 100.0])),
        "launch_burst": pick("autoscaler.launch_burst", st.sampled_from([1.0, 2.0, 100.0])),
    }
    tree["overhead"] = {
        "submit": pick("overhead.submit", dists(0.001, 0.3, zero=True)),
        "dispatch": pick("overhead.dispatch", st.one_of(st.just("constant(0)"), dists(0.001, 0.1))),
        "result": pick("overhead.result", dists(0.001, 0.3, zero=True)),
    }
    retry = pick("clients.retry", st.sampled_from(["none", "backoff"]))
    tree["clients"] = {
        "count": pick("clients.count", st.integers(1, 5)),
        "in_flight": pick("clients.in_flight", st.integers(1, 40)),
        "retry": retry,
        "on_rate_limit": pick("clients.on_rate_limit", st.sampled_from(["raise", "raise", "retry_after"])),
        "retry_after_s": pick("clients.retry_after_s", st.sampled_from([0.05, 1.0])),
        "max_throttle_wait_s": pick("clients.max_throttle_wait_s", st.sampled_from([0.0, 0.0, 2.0])),
        "backoff_base_s": pick("clients.backoff_base_s", st.floats(0.05, 1.0)),
        "backoff_max_s": pick("clients.backoff_max_s", st.floats(0.5, 5.0)),
        "reissue": pick("clients.reissue", st.booleans()),
        "connection_limit": pick("clients.connection_limit", st.integers(0, 30)),
        "streams": pick("clients.streams", st.sampled_from([0, 0, 0, 2, 10])),
    }
    if load == "clients" and approach in ("remote", "spawn"):
        tree["clients"]["api"] = pick("clients.api", st.sampled_from(["single", "single", "map"]))
    # the workspace cap: none, a few containers, or exactly what every copy's pool can hold together (the parts
    # shortcut's edge); never below the always-warm containers (the schema rejects that)
    copies = tree["function"]["copies"] or tree["clients"]["count"]
    fit = copies * (tree["function"]["containers"] or tree["autoscaler"]["max_containers"])
    cap = pick("workspace.max_containers", st.sampled_from([0, 0, 1, 3, 6, 30, fit]))
    tree["workspace"] = {
        "max_containers": max(cap, copies * tree["function"]["containers"]) if cap else 0,
        "launch_rate_per_s": pick("workspace.launch_rate_per_s", st.sampled_from([0.0, 0.0, 0.0, 0.5, 3.0])),
        "launch_burst": pick("workspace.launch_burst", st.sampled_from([1.0, 2.0, 100.0])),
    }
    rate = pick("arrivals.rate", st.floats(0.2, 60.0))
    tree["arrivals"] = {
        "rate": rate,
        "shape": pick("arrivals.shape", SHAPES),
        "start_s": pick("arrivals.start_s", st.sampled_from([0.0, 0.0, 7.5, 3 * 86400.0])),
    }
    if load == "trace":
        tree["trace"] = {
            "path": str(ROOT / "experiments" / "demand" / "azure-sample.csv"),
            "spread": draw(st.sampled_from(["random", "start"])),
            "scale": draw(st.floats(0.001, 0.02)),
            "start_minute": draw(st.integers(0, 30)),
        }
    if approach == "batching":
        tree["batching"] = {
            "round_items": draw(st.integers(1, 64)),
            "chunk_items": draw(st.integers(1, 16)),
            "item_failure_prob": draw(st.sampled_from([0.0, 0.0, 0.05])),
            "wait_s": draw(st.sampled_from([0.0, 0.05, 1.0])),
        }
    if approach == "server":
        tree["server"] = {
            "target_concurrency": draw(st.integers(1, 20)),
            "max_concurrency": draw(st.sampled_from([0, 5, 40])),
            "scaleup_window_s": draw(st.floats(0.5, 20.0)),
            "proxy_latency_s": draw(st.floats(0.0, 0.05)),
            "proxy_sigma": draw(st.sampled_from([0.0, 0.3, 1.0])),
            "cpu_per_request_s": draw(st.sampled_from([0.0, 0.002, 0.05])),
            "container_cpu": 1.0,
        }
    return tree


def scenario(tree: dict) -> loadtest.Scenario:
    """The drawn tree as a scenario, or the example is rejected (a cross-field check, a run too big)."""
    try:
        sc = build(loadtest.Scenario, tree)
    except ScenarioError:
        assume(False)
    calls = loadtest.MODEL.size(sc)
    assume(calls <= 4000)
    return sc


# --- comparing runs -----------------------------------------------------------------------------------------------
def run(sc: loadtest.Scenario, shortcuts: str, seed: int) -> dict:
    from dataclasses import replace

    return loadtest.run(replace(sc, shortcuts=shortcuts), seed=seed, records=True, series={})


def rows(frame: pd.DataFrame, ordered: bool) -> pd.DataFrame:
    """The records, in the order they were made, or as a multiset (sorted by client and issue time, then by every
    other column, so that rows alike in those are in one order both ways): parts make them on several clocks, round
    trips make the next call at its arrival (with varying legs a later trip may arrive first; two calls made at one
    instant may take each other's rows)."""
    if ordered:
        return frame.reset_index(drop=True)
    first = [c for c in ("client", "issued", "work", "started", "finished") if c in frame]
    keys = first + [c for c in frame.columns if c not in first]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


def differs(shortcut: Shortcut, sc: loadtest.Scenario, seed: int) -> str | None:
    """Run ``sc`` with the shortcut and without; None if they agree as the shortcut claims, else what differs."""
    used = SHORTCUTS.used(sc)
    assume(shortcut.name in used)
    on = run(sc, "all", seed)
    assume(shortcut.name in on["shortcuts_used"])  # it engaged (parts: the run did fall into parts)
    off = run(sc, f"all,-{shortcut.name}", seed)
    assert shortcut.name not in off["shortcuts_used"]
    rel = shortcut.rel_tol if shortcut.claim == "rounding" else 0.0
    for k in sorted(set(on) | set(off)):
        if k in IGNORED or k == "records":
            continue
        if not same(on.get(k), off.get(k), rel):
            return f"{k}: {on.get(k)!r} with {shortcut.name}, {off.get(k)!r} without"
    a, b = (rows(m["records"], ordered=shortcut.name not in ("parts", "round_trips")) for m in (on, off))
    if not a.equals(b):
        return f"records differ ({len(a)} rows with, {len(b)} without)"
    return None


def check(name: str, tree: dict, seed: int) -> None:
    sc = scenario(tree)
    shortcut = SHORTCUTS[name]
    assume(shortcut.matches(sc))
    found = differs(shortcut, sc, seed)
    assert found is None, f"{name} is not exact: {found}\nscenario: {tree}\nseed: {seed}"


SEEDS = st.integers(0, 2**16)


# --- one property per shortcut ---------------------------------------------------------------------------------
@SETTINGS
@given(
    load_tests(
        approach=st.sampled_from(["remote", "spawn"]),
        load=st.just("arrivals"),
        **{
            "arrivals.shape": st.just("steady"),
            "function.containers": st.integers(1, 6),
            "function.copies": st.just(1),
            "limits.enabled": st.just(False),
            "overhead.dispatch": st.just("constant(0)"),
            "overhead.submit": st.floats(0, 0.3).map(lambda x: f"constant({x!r})"),
            "overhead.result": st.floats(0, 0.3).map(lambda x: f"constant({x!r})"),
        },
    ),
    st.booleans(),
    SEEDS,
)
def test_fifo_recursion_is_exact(tree, alike, seed):
    if alike:
        tree["function"]["target_inputs"] = tree["function"]["max_inputs"]
    check("fifo", tree, seed)


@SETTINGS
@given(load_tests(**{"function.containers": st.just(0)}), SEEDS)
def test_skipped_idle_decisions_are_exact(tree, seed):
    check("idle_decisions", tree, seed)


@SETTINGS
@given(
    load_tests(
        approach=st.sampled_from(["remote", "spawn"]),
        **{
            "function.containers": st.just(0),
            "function.copies": st.sampled_from([0, 2, 3, 4]),
            "workspace.max_containers": st.sampled_from([0, 1, 2, 4]),
            "workspace.launch_rate_per_s": st.sampled_from([0.0, 0.3, 2.0]),
            "workspace.launch_burst": st.sampled_from([1.0, 3.0]),
        },
    ),
    SEEDS,
)
def test_skipped_idle_decisions_are_exact_under_a_binding_workspace(tree, seed):
    # a pool the workspace's cap or placement rate holds back decides at every grid point; the others sleep as before
    check("idle_decisions", tree, seed)


@SETTINGS
@given(
    load_tests(
        approach=st.sampled_from(["remote", "spawn"]),
        load=st.just("clients"),
        **{
            "clients.reissue": st.just(True),
            "overhead.submit": dists(0.001, 0.3),
            "overhead.result": dists(0.001, 0.3),
        },
    ),
    SEEDS,
)
def test_fused_round_trips_are_exact(tree, seed):
    """Any legs but 0: constant ones (the trips keep their order) and varying ones (a later trip may arrive first)."""
    check("round_trips", tree, seed)


@SETTINGS
@given(
    load_tests(
        approach=st.sampled_from(["remote", "spawn"]),
        load=st.sampled_from(["arrivals", "trace"]),
        **{"clients.api": st.just("single"), "overhead.result": dists(0.001, 0.3)},
    ),
    SEEDS,
)
def test_backs_when_the_work_ends_are_exact(tree, seed):
    """Any load of open-loop callers, limits, retries, copies and autoscaling on the Function path, through a
    result leg with a density (the other legs are the shape's to refuse)."""
    check("backs", tree, seed)


@SETTINGS
@given(
    load_tests(
        approach=st.sampled_from(["remote", "spawn"]),
        load=st.just("clients"),
        **{"function.copies": st.sampled_from([0, 2, 3, 4])},
    ),
    st.integers(1, 60),
    SEEDS,
)
def test_parts_are_exact_up_to_rounding(tree, part_calls, seed):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(base, "PART_CALLS", part_calls)  # how copies group into parts: each grouping is a claim
        check("parts", tree, seed)


# what the properties found, kept as examples: a container went idle while its pool slept, (1) with fewer
# containers wanted than it had, at the same load, (2) with as many wanted, the load falling afterwards; (3) a
# decision's look at the start limit refilled its tokens, so deciding more often rounded them otherwise
FOUND = [
    (
        {
            "approach": "remote",
            "load": "trace",
            "duration_s": 3.0,
            "warmup_s": 0.0,
            "drain_s": 5.0,
            "work": "constant(0.5)",
            "function": {"max_inputs": 1, "target_inputs": 0, "containers": 0, "copies": 0},
            "autoscaler": {
                "interval_s": 1.0,
                "scaleup_step": 0,
                "burst_aware": False,
                "size_to": "in_system",
                "cold_start": "exponential(2.0)",
                "buffer_containers": 1,
                "scaledown_window_s": 2.0,
            },
            "limits": {"enabled": False},
            "overhead": {"submit": "constant(0.25)", "dispatch": "constant(0)", "result": "constant(0.25)"},
            "clients": {"count": 1, "in_flight": 1, "reissue": False},
            "trace": {"path": "TRACE", "spread": "random", "scale": 0.015625, "start_minute": 0},
        },
        0,
    ),
    (
        {
            "approach": "spawn",
            "load": "arrivals",
            "duration_s": 11.350240083832935,
            "warmup_s": 0.32734465319638256,
            "drain_s": 300.0,
            "work": "lognormal(2.9464124379809924, 1.2159616373142426)",
            "limits": {
                "enabled": True,
                "sync_accept_rate": 228.34591826587385,
                "sync_accept_burst": 143.08336359509133,
                "sync_pending_cap": 199,
                "sync_in_system_cap": 199,
                "async_accept_rate": 1.1,
                "async_accept_burst": 17.72545146956166,
                "async_pending_cap": 324,
                "start_rate": 1.0,
                "start_burst": 17.42757084472068,
                "start_ramp_per_s": 5.0,
            },
            "function": {"max_inputs": 7, "target_inputs": 6, "containers": 0, "copies": 1},
            "autoscaler": {
                "interval_s": 2.5,
                "scaleup_step": 0,
                "burst_aware": False,
                "size_to": "in_system",
                "cold_start": "constant(2.951226355537001)",
                "min_containers": 0,
                "max_containers": 0,
                "buffer_containers": 0,
                "scaledown_window_s": 2.00001,
            },
            "overhead": {
                "submit": "uniform(0.1812511654941987, 0.2673666584579181)",
                "dispatch": "constant(0)",
                "result": "lognormal(0.07535701203491238, 0.7612720001043944)",
            },
            "clients": {
                "count": 2,
                "in_flight": 7,
                "retry": "backoff",
                "backoff_base_s": 0.6374939471763531,
                "backoff_max_s": 3.675488619489101,
                "reissue": False,
                "connection_limit": 3,
            },
            "arrivals": {
                "rate": 36.765649001192344,
                "shape": "bursts(14.584633830055129, 2.383108972460457, 1.9250959696266983)",
            },
        },
        10735,
    ),
    (
        {
            "approach": "remote",
            "load": "clients",
            "duration_s": 2.0,
            "warmup_s": 0.0,
            "drain_s": 0.0,
            "work": "constant(1.0)",
            "limits": {
                "enabled": True,
                "sync_accept_rate": 19.0,
                "sync_accept_burst": 2.0,
                "sync_pending_cap": 6,
                "sync_in_system_cap": 8,
                "async_accept_rate": 1.0,
                "async_accept_burst": 1.0,
                "async_pending_cap": 0,
                "start_rate": 1.0,
                "start_burst": 6.0,
                "start_ramp_per_s": 0.0,
            },
            "function": {"max_inputs": 1, "target_inputs": 0, "containers": 0, "copies": 0},
            "autoscaler": {
                "interval_s": 0.5,
                "scaleup_step": 0,
                "burst_aware": False,
                "size_to": "startable",
                "cold_start": "constant(0)",
                "min_containers": 2,
                "max_containers": 0,
                "buffer_containers": 0,
                "scaledown_window_s": 2.0,
            },
            "overhead": {"submit": "constant(0.25)", "dispatch": "constant(0)", "result": "constant(0.25)"},
            "clients": {
                "count": 1,
                "in_flight": 26,
                "retry": "backoff",
                "backoff_base_s": 0.5,
                "backoff_max_s": 1.0,
                "reissue": False,
                "connection_limit": 0,
            },
            "arrivals": {"rate": 1.0, "shape": "steady"},
        },
        0,
    ),
]


@pytest.mark.parametrize(
    ("tree", "seed"), FOUND, ids=["ready-idle-at-the-same-load", "idle-then-the-load-falls", "a-look-that-refilled"]
)
def test_what_the_properties_found_stays_fixed(tree, seed):
    if tree["load"] == "trace":
        tree = {**tree, "trace": {**tree["trace"], "path": str(ROOT / "experiments" / "demand" / "azure-sample.csv")}}
    check("idle_decisions", tree, seed)


@SETTINGS
@given(load_tests(), st.sampled_from(["calendar", "delay_lines"]), SEEDS)
def test_the_engines_shortcuts_are_exact(tree, name, seed):
    """The calendar and the delay lines against the plain heap, on any load test (their shape)."""
    check(name, tree, seed)


@SETTINGS
@given(load_tests(load=st.just("clients")), SEEDS)
def test_every_shortcut_at_once_is_exact(tree, seed):
    """All of them together against none (they may interact): records to the bit, sums to the loosest tolerance."""
    sc = scenario(tree)
    on, off = run(sc, "all", seed), run(sc, "none", seed)
    assume(len(on["shortcuts_used"]) > 2)
    assert off["shortcuts_used"] == []
    for k in on:
        if k not in IGNORED and k != "records":
            assert same(on[k], off[k], 1e-9), (k, on[k], off[k], tree)
    a, b = (rows(m["records"], ordered=False) for m in (on, off))
    assert a.equals(b)


# --- no speed constant in the numbers -----------------------------------------------------------------------------
@SETTINGS
@given(load_tests(), st.integers(1, 50), st.sampled_from([1, 7, 4096]), st.sampled_from([2, 64, 1024]), SEEDS)
def test_no_speed_constant_changes_a_number(tree, part_calls, block, near, seed):
    """PART_CALLS, the FIFO's block and the calendar's threshold are speed constants: any value gives the same
    numbers (up to the order of sums, where parts regroup)."""
    from models.inputs.platform import fifo

    sc = scenario(tree)
    before = run(sc, "all", seed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(base, "PART_CALLS", part_calls)
        mp.setattr(fifo, "BLOCK", block)
        mp.setattr(engine, "NEAR", near)
        after = run(sc, "all", seed)
    for k in before:
        if k not in IGNORED and k != "records":
            assert same(before[k], after[k], 1e-9), (k, before[k], after[k], tree)
    a, b = (rows(m["records"], ordered=False) for m in (before, after))
    assert a.equals(b)


# --- common random numbers ------------------------------------------------------------------------------------
@SETTINGS
@given(
    load_tests(
        approach=st.sampled_from(["remote", "spawn", "server", "batching"]),
        load=st.just("clients"),
        **{"overhead.result": st.sampled_from(["constant(0)", "constant(0.05)"])},
    ),
    st.integers(1, 4),
    st.integers(1, 4),
    st.sampled_from([0, 1, 2]),
    st.sampled_from([0, 1, 3]),
    SEEDS,
)
def test_a_clients_draws_are_the_same_at_every_count_and_copies(tree, n1, n2, copies1, copies2, seed):
    """Client 0's work draws, in the order it makes its calls, are the same whatever the number of clients and of
    app copies: a sweep along either axis compares like with like.

    A round trip draws the next call's work when this call's work ends, and makes the call when this one is back
    (models/inputs/callers/closedloop.py): with a way back that varies, a later draw can be made first, so the records
    (which keep when a call was made, not when its work was drawn) hold the draws in their order only where the way
    back is constant."""
    works = []
    for n, copies in ((n1, copies1), (n2, copies2)):
        t = {**tree, "clients": {**tree["clients"], "count": n}, "function": {**tree["function"], "copies": copies}}
        m = run(scenario(t), "all", seed)
        r = m["records"]
        mine = r[r["client"] == 0].sort_values("issued", kind="stable")
        works.append(mine["work"].to_numpy())
    k = min(len(w) for w in works)
    assume(k > 0)
    if tree["approach"] == "batching":  # a chunk's work is its slowest item: the same rounds, the same maxima
        np.testing.assert_array_equal(np.sort(works[0][:k]), np.sort(works[1][:k]))
    else:
        np.testing.assert_array_equal(works[0][:k], works[1][:k])


# --- the shapes themselves ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Faults:
    """A mechanism of the future: a key that no shape names yet."""

    container_failure_rate: float = param(0.0, ge=0)


@dataclass(frozen=True)
class WithFaults(loadtest.Scenario):
    chaos: Faults = field(default_factory=Faults)


def test_a_key_no_shape_names_turns_every_shortcut_off_but_the_engines():
    """A mechanism added later is a key no shape names: wherever it is off its default, no model shortcut runs."""
    shortcuts = Shortcuts(SHORTCUTS.members, WithFaults)
    calm = {"load": "arrivals", "function": {"containers": 2}, "limits": {"enabled": False}}
    calm["overhead"] = {"dispatch": "constant(0)", "submit": "constant(0.1)", "result": "constant(0.1)"}
    assert shortcuts["fifo"].matches(build(WithFaults, calm))
    faulty = build(WithFaults, {**calm, "chaos": {"container_failure_rate": 0.1}})
    assert not any(s.matches(faulty) for s in shortcuts.members)
    assert shortcuts["fifo"].mismatch(faulty).startswith("chaos.container_failure_rate (not in the shape")


def test_every_key_a_shape_names_is_in_the_schema():
    with pytest.raises(TypeError, match=r"no\.such"):
        Shortcuts((Shortcut("x", "", {"no.such": lambda v: True}),), loadtest.Scenario)


@pytest.mark.parametrize(
    ("text", "allowed"),
    [
        ("all", {"a", "b", "c"}),
        ("none", set()),
        ("a, c", {"a", "c"}),
        ("all,-b", {"a", "c"}),
        ("none,b", {"b"}),
    ],
)
def test_the_shortcuts_key(text, allowed):
    assert parse(text, ("a", "b", "c")) == allowed


@pytest.mark.parametrize("text", ["fast", "", "a,,b", "-all"])
def test_a_bad_shortcuts_key_names_the_key(text):
    with pytest.raises(ScenarioError, match=r"^shortcuts: "):
        parse(text, ("a", "b"))


def test_every_run_reports_its_shortcuts_and_none_means_none():
    legs = {"submit": "constant(0.1)", "result": "constant(0.1)"}  # constant legs: their trips fuse
    sc = build(loadtest.Scenario, {"duration_s": 5.0, "clients": {"count": 2, "in_flight": 5}, "overhead": legs})
    assert set(loadtest.run(sc)["shortcuts_used"]) >= {"round_trips", "idle_decisions"}
    sc = build(loadtest.Scenario, {"duration_s": 5.0, "clients": {"count": 2, "in_flight": 5}})  # lognormal legs
    assert "round_trips" in loadtest.run(sc)["shortcuts_used"]
    sc = build(loadtest.Scenario, {"duration_s": 5.0, "shortcuts": "none", "clients": {"count": 2, "in_flight": 5}})
    assert loadtest.run(sc)["shortcuts_used"] == []
