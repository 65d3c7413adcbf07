"""The invariants every load test's numbers keep (models/inputs/checks/invariants.py): each rule fires on an outcome
broken the way it guards against, and none fires on the presets or on the scales capacity planners ask for (every run
checks them: the fuzz suite's runs too, which must exit 0 or 2, never 1)."""

from __future__ import annotations

import copy

import pytest

from models.inputs import loadtest, parts
from models.inputs.checks import invariants
from models.inputs.platform.autoscaler import AutoscalerParams
from models.inputs.platform.function import SYNC, Function, FunctionParams, LimitParams
from models.inputs.records import CallLog
from sim.engine import Sim
from sim.model import InvariantViolated
from sim.rng import Streams
from tests.support import preset, scenario

INPUT_PRESETS = ["loadtest-remote", "loadtest-spawn", "loadtest-copies", "loadtest-batching", "loadtest-server", "mmc"]


def outcome(name: str, *sets: str) -> tuple:
    sc = preset(name, *sets)
    out, end = parts.simulate(sc, 0, False, False, loadtest.SHORTCUTS.used(sc), 1)
    return sc, out, loadtest.outcome_metrics(sc, out, end)


@pytest.mark.parametrize("name", INPUT_PRESETS)
def test_no_invariant_fires_on_a_preset(name):
    sc, out, m = outcome(name, "duration_s=30" if name != "mmc" else "duration_s=3000")
    assert invariants.violations(sc, out, m) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, sets",
    [
        # the cases: an open loop past the start limit, retrying spawn clients, short and large runs
        ("loadtest-spawn", ("load=arrivals", "arrivals.rate=1400", "duration_s=120")),
        ("loadtest-spawn", ("clients.count=80", "clients.retry=backoff", "duration_s=30")),
        ("loadtest-spawn", ("clients.count=64", "clients.in_flight=1000", "duration_s=20")),
        ("loadtest-copies", ("duration_s=2",)),
        ("loadtest-copies", ("clients.count=80", "function.copies=0", "duration_s=20")),
        ("loadtest-server", ("clients.count=80", "duration_s=10")),
        ("loadtest-remote", ("overhead.submit=uniform(0.05, 0.2)", "overhead.result=exponential(0.1)")),
    ],
)
def test_no_invariant_fires_where_planners_go(name, sets):
    sc, out, m = outcome(name, *sets)
    assert invariants.violations(sc, out, m) == []


def broken(name: str, *sets: str):
    sc, out, m = outcome(name, "duration_s=20", *sets)
    assert invariants.violations(sc, out, m) == []
    return sc, copy.deepcopy(out), dict(m)


def test_accounting_breaks_are_found():
    sc, out, m = broken("loadtest-remote")
    m["calls_completed"] -= 1
    assert any("calls issued" in v for v in invariants.violations(sc, out, m))
    sc, out, m = broken("loadtest-remote")
    out.summary.n["calls"] = out.summary.n["issued_calls"] + 1
    assert any("calls issued in the window" in v for v in invariants.violations(sc, out, m))


def test_a_little_law_break_is_found():
    sc, out, m = broken("loadtest-spawn")
    out.summary.n["overlap_calls"] *= 1 + 1e-6
    assert any("Little's law" in v for v in invariants.violations(sc, out, m))


CONSTANT_LEGS = ("overhead.submit=constant(0.118)", "overhead.result=constant(0.118)")


def test_more_calls_back_than_the_callers_can_make_is_found():
    sc, out, m = broken("loadtest-remote", *CONSTANT_LEGS)
    # 8 × 1,000 slots, calls of at least 1 s of work + 0.236 s of legs, a 20 s window: at most 8,000 × (20/1.236 + 1)
    m["calls_back"] = int(8000 * (20 / 1.236 + 1)) + 1
    assert any("the most the callers can make" in v for v in invariants.violations(sc, out, m))


def test_an_added_latency_below_the_legs_is_found():
    sc, out, m = broken("loadtest-copies", *CONSTANT_LEGS)
    out.summary.added_min = 0.2  # the legs add 0.236 s at least
    assert any("below the legs' least" in v for v in invariants.violations(sc, out, m))
    sc, out, m = broken("loadtest-server", "server.proxy_sigma=0")
    out.summary.added_min = 0.009  # two constant proxy hops of 5 ms
    assert any("below the legs' least" in v for v in invariants.violations(sc, out, m))


def function(limits: LimitParams) -> tuple[Sim, CallLog, Function]:
    sim, log = Sim(), CallLog()
    fn = Function(
        sim, "f", FunctionParams(containers=1, max_inputs=10_000), limits, AutoscalerParams(), Streams(0), log, print
    )
    return sim, log, fn


def test_a_function_past_its_accept_or_start_bounds_is_found():
    _, log, fn = function(LimitParams(sync_accept_rate=10.0, sync_accept_burst=5.0, start_ramp_per_s=0.0))
    taken = [fn.submit(log.new(0, 0.0, 100.0), SYNC) for _ in range(8)]
    assert taken.count(None) == 5 and fn.violations(0.0) == []  # the burst, and no more
    fn.accepted[SYNC] += 1
    assert any("more than the accept limit admits" in v for v in fn.violations(0.0))
    fn.accepted[SYNC] -= 1
    fn.started = 1000
    assert any("more than the start limit admits" in v for v in fn.violations(0.0))


def test_a_start_rate_above_its_ceiling_is_found():
    sim, log, fn = function(LimitParams(start_rate=10.0, start_ramp_per_s=5.0, start_rate_max=20.0))
    for _ in range(200):
        fn.submit(log.new(0, 0.0, 100.0), SYNC)
    sim.run(until=30.0)
    bucket = fn.start_bucket
    assert bucket.peak_rate == 20.0 and fn.violations(30.0) == []  # ramped to the ceiling in 2 s, and stayed
    bucket._peak = 20.5
    assert any("above its ceiling" in v for v in fn.violations(30.0))


def test_a_violation_ends_the_run_with_one_line_and_exit_1(monkeypatch):
    monkeypatch.setattr(invariants, "violations", lambda sc, out, m: ["a rule", "another"])
    with pytest.raises(InvariantViolated, match=r"a bug in the model.*a rule; another"):
        loadtest.run(preset("loadtest-remote", "duration_s=5"))
    from sim.cli import main_guard

    def raising() -> int:
        raise InvariantViolated("invariant violated (a bug in the model): a rule")

    assert main_guard("prog", raising) == 1


@pytest.mark.slow
def test_the_steady_rate_is_what_the_binding_limit_allows():
    # spawn is bound by its start limit once its containers are there: after the warm-up MSER-5 finds (the first
    # starts, the first backs, the containers added one a decision), the calls back per second are the start rate,
    # where the whole-window rate and the reference rule read otherwise
    sc = preset("loadtest-spawn", "duration_s=300")
    m = loadtest.run(sc, seed=0)
    assert 0 < m["steady_from_s"] < 120
    assert m["steady_calls_per_s"] == pytest.approx(sc.limits.start_rate, rel=0.02)
    assert m["calls_back_per_s"] < m["steady_calls_per_s"]
    # a window shorter than one call: nothing back in it, no steady rate (the reference rule still counts 8,000)
    short = loadtest.run(preset("loadtest-copies", "duration_s=2"), seed=0)
    assert short["steady_calls_per_s"] is None and short["calls_per_s"] == 4000


# --- output that cannot be right: windows that measure nothing are refused, the bounds that hold are checked --------
def one_line_exit_2(capsys, argv: list[str], key: str) -> str:
    from experiments import run as run_cmd

    assert run_cmd.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err and f": {key}:" in err, err
    return err


@pytest.mark.parametrize(
    "sets, key",
    [
        # 8,000 calls in flight issued at t = 0 and a window no call fits in: 8,000 calls/s, 8e15 at 1e-12 s
        (("duration_s=1",), "duration_s"),
        (("duration_s=1e-12",), "duration_s"),
        (("work=exponential(5)", "duration_s=1e-6"), "duration_s"),  # no least value, still no second call
        (("clients.count=1", "clients.in_flight=1", "approach=batching", "duration_s=1.5"), "duration_s"),
        (("load=arrivals", "arrivals.rate=1", "duration_s=0.001"), "duration_s"),  # an open loop expecting none
        (("work=constant(1e6)",), "work"),  # no call can come back within the run
        (("overhead.submit=constant(400)",), "work"),  # nor past a leg longer than the run
        (("clients.retry=backoff", "clients.backoff_base_s=1e12"), "clients.backoff_base_s"),
    ],
)
def test_a_window_that_cannot_measure_anything_is_refused_naming_the_key(capsys, sets, key):
    one_line_exit_2(capsys, ["loadtest-spawn", *(x for s in sets for x in ("--set", s))], key)


def test_a_short_window_that_measures_keeps_the_callers_bound():
    # 2 s: some slots make a second call; calls/s reads ideal + N/T (the calls in flight at t = 0), not the ideal,
    # and stays within what the callers can make: slots × (1/shortest + 1/T)
    m = loadtest.run(preset("loadtest-copies", "duration_s=2"), seed=0)
    assert m["calls_per_s"] > m["ideal_calls_per_s"]
    assert m["calls_per_s"] <= 8000 * (1 / 1.0 + 1 / 2)


def test_more_calls_issued_and_back_than_the_callers_can_make_is_found():
    sc, out, m = broken("loadtest-remote", *CONSTANT_LEGS)
    m["calls"] = int(8000 * (20 / 1.236 + 1)) + 1  # the counting rule of calls_per_s, past the callers' bound
    assert any("calls issued in the window and back" in v for v in invariants.violations(sc, out, m))


def test_more_calls_back_than_the_capped_containers_can_run_is_found():
    # 2 always-warm containers × 10 inputs, works of at least 1 s, 20 s: at most 20 × (20 / 1 + 1) calls back
    sc, out, m = broken("loadtest-remote", "function.containers=2", "function.max_inputs=10", "function.copies=1")
    assert m["calls_back"] <= 420
    m["calls_back"] = 421
    assert any("the most the containers can run" in v for v in invariants.violations(sc, out, m))


def test_a_binding_share_outside_its_limit_share_is_found():
    sc, out, m = broken("mmc", "arrivals.rate=20", "duration_s=3000")
    assert 0 <= m["binding_share"] <= 1 and m["binding_share"] == m[f"limit_share_{m['binding_limit']}"]
    m["binding_share"] = 530.8
    assert any("binding_share" in v for v in invariants.violations(sc, out, m))


def test_backoffs_past_the_window_count_only_their_part_in_it():
    # backoffs of 50 to 100 s after a 20 s window's rejections: the input-seconds lost are the window's, so at most
    # the slots × the window (before: every backoff whole, twice that, and the shares skewed to accept_rate)
    _, out, _ = broken("loadtest-remote", "clients.retry=backoff", "clients.backoff_base_s=100", "warmup_s=5")
    assert 0 < sum(out.lost.values()) <= 8000 * (20 - 5)
    huge = broken("loadtest-remote", "clients.retry=backoff", "clients.backoff_max_s=1e12")[2]
    assert 0 <= huge["binding_share"] <= 1 and huge["binding_limit"] == "accept_rate"


@pytest.mark.slow
@pytest.mark.parametrize("horizon", [1e7, 1e8, 1e9])
def test_the_invariants_allow_the_clocks_rounding_at_long_horizons(horizon):
    """At t = 1e9 s the clock holds a time to 1.2e-7 s: a response less its work can read a few ulps below the legs'
    least (0). The invariants allow the clock's resolution (models/inputs/checks/invariants.py ``clock_tolerance``), and
    a run this long is checked like any other."""
    tree = {
        "load": "arrivals",
        "arrivals": {"rate": 3000 / horizon},
        "function": {"max_inputs": 1},
        "work": "exponential(1000)",
        "overhead": {"submit": "constant(0)", "result": "constant(0)"},
        "duration_s": horizon,
        "warmup_s": 0.0,
    }
    for seed in range(3):
        m = loadtest.run(scenario(tree), seed=seed)
        assert m["calls_issued"] == m["calls_completed"] + m["errors_total"] + m["calls_in_flight"]
