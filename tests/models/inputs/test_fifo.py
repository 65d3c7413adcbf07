"""A fixed pool under an open loop is served by the workload recursion (models/inputs/platform/fifo.py): the same run as
the Function's events give, to the bit in every time, count, percentile, series and record (sums of many floats, added
in other chunks, to rounding), at a small fraction of the events."""

from __future__ import annotations

import math

import pytest

from models.inputs import loadtest
from models.inputs.platform import fifo
from sim.guard import Guard
from tests.support import preset

CASES = [
    ["duration_s=3000", "warmup_s=100", "function.containers=10", "arrivals.rate=9"],  # mmc, ρ = 0.9
    ["duration_s=300", "warmup_s=0", "function.containers=100", "arrivals.rate=95", "work=lognormal(1, 0.5)"],
    # slots of a container alike (max_inputs 3), the legs constant and not 0, a drain: the run ends at the last back
    [
        "duration_s=400",
        "warmup_s=20",
        "function.containers=2",
        "function.max_inputs=3",
        "arrivals.rate=5",
        "drain_s=50",
        "overhead.submit=constant(0.118)",
        "overhead.result=constant(0.118)",
    ],
    # overloaded, no drain: calls never back, some never started
    ["duration_s=100", "warmup_s=0", "function.containers=1", "arrivals.rate=3", "drain_s=0"],
    ["duration_s=200", "warmup_s=10", "function.containers=3", "arrivals.rate=2", "drain_s=300", "work=uniform(1,10)"],
    # a trickle: the first gap is past the duration, no call at all
    ["duration_s=2", "warmup_s=0", "arrivals.rate=0.001"],
]


def run(sets: list[str], recursion: bool, monkeypatch, seed: int = 2) -> tuple[dict, dict]:
    sc = preset("mmc", *sets, "shortcuts=all" if recursion else "shortcuts=all,-fifo")
    series: dict = {}
    m = loadtest.run(sc, seed=seed, series=series, records=True)
    m.pop("wall_s")
    assert ("fifo" in m.pop("shortcuts_used")) is recursion
    return m, series


@pytest.mark.parametrize("sets", CASES, ids=range(len(CASES)))
def test_the_recursion_gives_the_events_run(sets, monkeypatch):
    (rec, rec_series), (ev, ev_series) = run(sets, True, monkeypatch), run(sets, False, monkeypatch)
    assert rec.pop("records").equals(ev.pop("records"))
    assert rec_series == ev_series
    assert rec.pop("events") <= ev.pop("events")
    assert rec.keys() == ev.keys()
    for k, x in rec.items():
        y = ev[k]
        if isinstance(x, float) and not (math.isnan(x) and math.isnan(y)):
            assert x == pytest.approx(y, rel=1e-12, abs=1e-15), k
        else:
            assert x == y, k


def test_each_case_is_what_it_says(monkeypatch):
    drained, overloaded, trickle = (run(CASES[i], True, monkeypatch)[0] for i in (2, 3, 5))
    assert 400 < drained["sim_time_s"] < 450 and drained["calls_in_flight"] == 0
    assert overloaded["sim_time_s"] == 100 and overloaded["calls_in_flight"] > 50
    assert trickle["calls_issued"] == 0


def test_a_run_of_the_recursion_costs_events_per_block_not_per_call(monkeypatch):
    m, _ = run(CASES[0], True, monkeypatch)
    assert m["inputs"] > 25_000 and m["events"] < m["inputs"] / 20


@pytest.mark.parametrize(
    "change",
    [
        "function.containers=0",  # autoscaled
        "limits.enabled=true",
        "function.target_inputs=1",  # with max_inputs 2: slots not alike
        "overhead.dispatch=constant(0.01)",
        "overhead.submit=exponential(0.1)",
        "overhead.result=uniform(0, 0.1)",
        "arrivals.shape=sine(600, 0.5)",
        "function.copies=2",
        "load=clients",
    ],
)
def test_anything_else_runs_on_events(change):
    sc = preset("mmc", "function.max_inputs=2", change)
    assert not loadtest.SHORTCUTS["fifo"].matches(sc)
    assert loadtest.SHORTCUTS["fifo"].matches(preset("mmc", "function.max_inputs=2"))
    assert not loadtest.SHORTCUTS["fifo"].matches(preset("mmc", "approach=server"))


def test_a_long_run_shows_its_progress_block_by_block():
    seen = []
    guard = Guard(progress=lambda now, until: seen.append((now, until)))
    m = loadtest.run(preset("mmc", *CASES[0], "shortcuts=all"), seed=2, guard=guard)
    assert "fifo" in m["shortcuts_used"]
    assert len(seen) == -(-m["inputs"] // fifo.BLOCK)  # one look up a block
    assert [now for now, _ in seen] == sorted(now for now, _ in seen) and {u for _, u in seen} == {3300.0}
