"""The run budgets: a run that grows past its estimate as it goes (a retry storm, a decision grid, a control loop) ends
within seconds with exit 2 and one line saying what grew; a run whose estimate already shows it too big (a trace's
counts, buffer containers, app copies, a thinning loop) is refused before it starts; sweeps and what-if searches are
sized before they start; and the budget never changes a number."""

from __future__ import annotations

import json
import random

import pytest

from experiments import spec
from experiments import whatif as whatif_cmd
from experiments.whatif.capacity import MIN_ARRIVALS
from models.registry import MODELS
from models.runs import check_size, load_scenario, run_scenario
from sim import engine
from sim.engine import Sim
from sim.guard import EVENT_FLOOR, RUN_MARGIN, SAMPLE, Budget, Guard, OverBudget
from sim.model import Estimate
from sim.scenario import ScenarioError
from tests.support import ROOT, one_line, run_module

STORM = ["clients.retry=backoff", "clients.backoff_base_s=0.001", "clients.backoff_max_s=0.001"]


@pytest.mark.slow
def test_a_retry_storm_of_8000_clients_retrying_every_millisecond_ends_with_the_budgets_line():
    sets = [a for s in STORM for a in ("--set", s)]
    r = run_module("experiments.run", "loadtest-remote", *sets)
    err = one_line(r.stderr)
    assert r.returncode == 2, err
    assert "run budget:" in err and "retries" in err and "simulated time" in err, err
    assert "SCALESIM_BUDGET" in err and "clients.backoff_base_s" in err, err


def over_budget(name: str, *sets: str) -> str:
    """The budget's line for a run that grows past it (in this process)."""
    with pytest.raises(OverBudget) as e:
        run_scenario(load_scenario(name, list(sets)))
    return str(e.value)


@pytest.mark.slow
def test_a_retry_storm_on_the_server_path_ends_with_the_budgets_line():
    err = over_budget("loadtest-server", *STORM, "server.max_concurrency=1")
    assert err.startswith("run budget:") and "retries" in err and "SCALESIM_BUDGET" in err, err


@pytest.mark.slow
def test_a_control_loop_of_the_sandbox_models_ends_with_the_budgets_line():
    # a million nodes renewing their leases every 10 s: 100,000 renewals a simulated second, booked in one event
    err = over_budget("sandboxes-k8s", "fleet.workers=1000000", "sandboxes.count=2000")
    assert "node lease renewals" in err and "kubernetes.lease_interval_s" in err, err


# (preset, settings, what the refusal names): each refused before the run by its estimate
UP_FRONT = [
    ("loadtest-remote", ["autoscaler.buffer_containers=1000000", "duration_s=3600"], "containers"),
    ("loadtest-copies", ["function.copies=100000", "clients.count=1"], "app copies"),
    ("loadtest-remote", ["load=arrivals", "arrivals.shape=bursts(3600, 0.001, 1e11)"], "thinning candidates"),
    ("mmc", ["duration_s=1e12"], "run size"),
    ("loadtest-spawn", ["clients.count=1", "clients.in_flight=9000000", "clients.reissue=false"], "memory"),
    ("loadtest-copies", ["autoscaler.interval_s=0.001", "duration_s=3600"], "scaling decisions"),
    ("sandboxes-k8s", ["kubernetes.lease_interval_s=0.001"], "node lease renewals"),
    ("sandboxes-v2", ["scheduler.publish_interval_s=0.001", "sandboxes.count=1000"], "published worker state"),
]


@pytest.mark.parametrize("name, sets, what", UP_FRONT, ids=[f"{n}:{s[0]}" for n, s, _ in UP_FRONT])
def test_a_run_whose_estimate_is_over_budget_is_refused_before_it_starts(name, sets, what):
    with pytest.raises(ScenarioError) as e:
        check_size(load_scenario(name, sets))
    assert what in str(e.value) and "SCALESIM_BUDGET" in str(e.value), e.value


def test_a_run_may_process_more_than_its_estimate_up_to_the_margin_but_never_past_its_models_budget():
    # an estimate is what a run is expected to process: an overloaded candidate of a plan processed 2% more (it was
    # stopped, and the plan with it, when the running budget was the estimate itself)
    sc = load_scenario("loadtest-remote", ["function.max_inputs=100", "work=constant(2)", "load=arrivals"])
    est = MODELS[sc.model].estimate(sc)
    expected = Estimate.total(est.events) + Estimate.total(est.allowance)
    assert check_size(sc).events == max(EVENT_FLOOR, RUN_MARGIN * expected)
    big = load_scenario("loadtest-remote", ["load=arrivals", "arrivals.rate=40000", "duration_s=200"])
    model = MODELS[big.model]
    assert check_size(big).events == model.events_per_unit * model.budget


def test_the_worst_cases_retries_are_an_allowance_within_the_running_budget_not_a_refusal():
    # 800 clients x 1,000 requests in flight: 800,000 calls that may each retry; it ran in 10.9M events, while its
    # worst case (every call in flight trying about 32 times) would be 5.1e7 events
    sc = load_scenario("loadtest-server", ["clients.count=800"])
    est = MODELS[sc.model].estimate(sc)
    assert Estimate.total(est.allowance) > 5e7 and check_size(sc).events >= 1e7


def test_a_trace_is_sized_by_the_minutes_it_draws_whole(tmp_path):
    # 60.000001 s of a trace draws its second minute whole: 1e11 calls (numpy would try to allocate terabytes)
    trace = tmp_path / "huge.csv"
    trace.write_text("HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,1,1e11\n")
    sets = ["load=trace", f"trace.path={trace}", "duration_s=60.000001"]
    r = run_module("experiments.run", "loadtest-remote", *(a for s in sets for a in ("--set", s)))
    err = one_line(r.stderr)
    assert r.returncode == 2 and "run size" in err and "1e+11" in err, err


@pytest.mark.slow
def test_a_drain_of_ten_million_calls_is_refused_in_seconds():
    r = run_module("experiments.whatif", "drain", "--calls", "10000000")
    err = one_line(r.stderr)
    assert r.returncode == 2 and ("run size" in err or "run memory" in err), err


def test_the_engine_checks_its_budget_every_2_16_events_and_names_what_grew():
    def again(sim: Sim) -> None:
        sim.call_in(1e-3, again, sim)

    sim = Sim(guard=Guard(Budget(2**17, grows={again.__qualname__: ("ticks", "fewer ticks")}, raise_how="raise it")))
    sim.call_in(0.0, again, sim)
    with pytest.raises(OverBudget) as e:
        sim.run(until=1e9)
    assert sim.events <= 2**17 + 2**16 + SAMPLE
    assert "ticks 100%" in str(e.value) and "fewer ticks or raise it" in str(e.value), e.value
    sim = Sim(guard=Guard(Budget(2**17)))  # work within one event, charged: checked as it is charged
    with pytest.raises(OverBudget, match="loop"):
        for _ in range(4):
            sim.charge(2**16, "loop")


def test_the_budget_counts_the_events_the_calendar_calls_itself(monkeypatch):
    # Entries a second or two ahead: the calendar's runs call most of them without a pop (sim/calendar.py), and the
    # budget counts them all: the run ends within one check of its budget (each pop, up to 1 + INLINE events).
    monkeypatch.setattr(engine, "CHECK_EVENTS_MASK", 2**10 - 1)
    monkeypatch.setattr(engine, "SAMPLE", 1)
    sim = Sim(guard=Guard(Budget(2**16)))
    rng = random.Random(1)
    calls = []

    def again(_arg: None) -> None:
        calls.append(1)
        sim.call_in(1.0 + rng.random(), again)

    for _ in range(50_000):
        sim.call_at(rng.random(), again)
    with pytest.raises(OverBudget):
        sim.run(until=1e9)
    assert sim._calendar.inlined > 2**15  # (the runs took most of them)
    assert 2**16 < len(calls) <= 2**16 + (1 + engine.INLINE) * (2**10 + 1)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, sets",
    [
        ("loadtest-spawn", ["duration_s=10"]),
        ("loadtest-remote", STORM[:1]),
        ("sandboxes-k8s", ["sandboxes.count=3000"]),
    ],
)
def test_the_budget_never_changes_a_number(name, sets, monkeypatch):
    sc = load_scenario(name, sets)
    unchecked = MODELS[sc.model].run(sc, seed=3)  # no budget at all
    monkeypatch.setenv("SCALESIM_BUDGET", "1000000")
    checked = run_scenario(sc, seed=3)
    for m in (unchecked, checked):
        m.pop("wall_s")
    assert checked == unchecked


def test_a_sweep_is_sized_before_it_starts(tmp_path):
    for seeds in (99999999999999999999999, 100000000):
        s = spec.load_spec(None, seeds=seeds)
        with pytest.raises(ScenarioError, match=r"sweep size: .* runs: 40 points .*--seeds.*SCALESIM_BUDGET"):
            spec.check_size(s)
    values = ",".join(str(1 + i / 1000) for i in range(3000))
    with pytest.raises(ScenarioError, match="sweep size"):
        spec.check_size(spec.load_spec("mmc", factors=[f"arrivals.rate={values}"]))
    many = tmp_path / "many.toml"
    variants = "".join(
        f'[[variants]]\nname = "v{i}"\nset = {{ "clients.count" = {i % 50 + 1} }}\n' for i in range(10_000)
    )
    many.write_text(f'name = "many"\n[base]\nscenario = "loadtest-remote"\n{variants}')
    with pytest.raises(ScenarioError, match="10,000 points"):
        spec.load_spec(str(many))
    counts = [f"{k}={','.join(str(i) for i in range(1, 101))}" for k in ("clients.count", "clients.in_flight")]
    with pytest.raises(ScenarioError, match="1,000,000 points"):
        spec.load_spec("loadtest-remote", factors=[*counts, f"duration_s={','.join(str(i) for i in range(10, 110))}"])
    spec.check_size(spec.load_spec(None))  # the default sweep (40 points × 3 seeds) is within it


@pytest.mark.slow
def test_a_refused_sweep_writes_nothing(tmp_path):
    out = tmp_path / "out"
    r = run_module("experiments.sweep", "--seeds", "99999999999999999999999", "--out", str(out))
    err = one_line(r.stderr)
    assert r.returncode == 2 and "sweep size" in err, err
    assert not (out / "results.csv").exists()


def test_whatif_capacity_says_at_once_when_no_capacity_can_meet_the_target(capsys):
    assert whatif_cmd.main(["capacity", "--rate", "10", "--p99", "1e-12", "--jobs", "1"]) == 0
    text = capsys.readouterr().out
    assert "nothing can meet the constraint" in text and "unlimited warm capacity" in text, text


def test_whatif_capacity_at_a_low_rate_measures_a_long_enough_window(capsys):
    assert whatif_cmd.main(["capacity", "--rate", "0.01", "--knob", "containers", "--jobs", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["answer"] == {"function.containers": 1}, out["answer"]
    assert out["chosen"]["config"]["duration_s"] >= 90 + MIN_ARRIVALS / 0.01  # past the 90 s warm-up


def test_whatif_searches_are_sized_before_they_start():
    buffers = ",".join(str(i) for i in range(1000))
    assert whatif_cmd.main(["autoscaler", "--buffers", buffers, "--windows", "10,60", "--jobs", "1"]) == 2


def test_the_budget_is_explained_in_the_docs():
    text = (ROOT / "docs" / "explanation" / "robustness.md").read_text()
    assert "run budget:" in text and "sweep size" in text
