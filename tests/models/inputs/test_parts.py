"""A run in independent parts (models/inputs/loadtest.py ``Part``): app copies under closed-loop clients are
simulated one copy at a time, each with its own clock and streams, and their results added up. The checks: the
parts add up to what their records say, they end together, and they agree with the copies simulated together
(the same model) within confidence intervals over seeds."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import numpy as np
import pytest

from experiments import run as run_cmd
from models.inputs import loadtest
from models.inputs.approaches import APPROACHES, base
from models.inputs.parts import Part
from models.inputs.platform.function import Function
from models.inputs.summary import Window, summarize
from sim.guard import Guard
from sim.scenario import ScenarioError
from tests.support import columns, scenario

COPIES = {
    "approach": "remote",
    "work": "uniform(1, 10)",
    "duration_s": 20.0,
    "function": {"max_inputs": 50, "copies": 0},
    "clients": {"count": 4, "in_flight": 60},
    "overhead": {"submit": "constant(0.118)", "result": "constant(0.118)"},
}


@pytest.fixture(autouse=True)
def a_part_per_copy(monkeypatch):
    """These scenarios are small: each copy is a part of its own here (PART_CALLS groups copies of few calls)."""
    monkeypatch.setattr(base, "PART_CALLS", 1)


def test_the_parts_add_up_to_their_records_and_end_together():
    # more copies than clients: two copies have no caller, their pools still count until the run's end
    tree = {**COPIES, "function": {**COPIES["function"], "copies": 6, "containers": 1}}
    series: dict = {}
    sc = scenario(tree)
    assert APPROACHES["remote"].parts(sc) == 5  # a part per client and its copy, one for the two idle copies
    m = loadtest.run(sc, seed=1, series=series, records=True)
    a = columns(m["records"])
    assert sorted(set(a["client"])) == [0, 1, 2, 3] and len(a["client"]) > 800
    assert a["work"][a["client"] == 0][0] != a["work"][a["client"] == 1][0]  # each part draws from its own streams
    # the metrics are those of the records taken together (sums folded in another order: to 1e-12)
    whole = summarize(a, Window(sc.warmup_s, sc.duration_s))
    for k, v in whole.items():
        assert m[k] == (pytest.approx(v, rel=1e-12) if isinstance(v, float) else v), k
    # the run ends with its last call back (after the duration), every part's clock with it
    assert m["sim_time_s"] == np.nanmax(a["finished"]) > sc.duration_s
    assert m["calls_in_flight"] == 0
    # the monitor's samples, over the same times in every part: six warm containers all along
    assert series["containers"] == [6] * len(series["t"]) and series["t"][-1] < m["sim_time_s"]
    assert m["container_seconds"] == pytest.approx(6 * m["sim_time_s"])


def test_the_parts_give_the_numbers_of_the_copies_simulated_together():
    # The same run two ways: the copies as parts, and together on one clock (the parts shortcut off). Streams are
    # named after clients and copies, not parts, so every number is the same, up to the order of the sums.
    sc = scenario(COPIES)
    apart = loadtest.run(sc, seed=3)
    together = loadtest.run(replace(sc, shortcuts="all,-parts"), seed=3)
    assert "parts" in apart["shortcuts_used"] and "parts" not in together["shortcuts_used"]
    for k, v in apart.items():
        if k not in ("wall_s", "shortcuts_used", "events"):
            assert together[k] == (pytest.approx(v, rel=1e-9) if isinstance(v, float) else v), k


def test_a_part_is_the_same_whatever_the_other_parts():
    # four copies; a fifth client joins copy 0: parts 1 to 3 (clients 1 to 3 and their copies) are as they were
    tree = {**COPIES, "function": {**COPIES["function"], "copies": 4}}
    a = columns(loadtest.run(scenario(tree), seed=3, records=True)["records"])
    tree["clients"] = {**COPIES["clients"], "count": 5}
    b = columns(loadtest.run(scenario(tree), seed=3, records=True)["records"])
    assert (b["client"] == 4).sum() > 0
    for client in (1, 2, 3):
        for k in ("issued", "started", "finished", "work"):
            np.testing.assert_array_equal(a[k][a["client"] == client], b[k][b["client"] == client], err_msg=k)
    # client 0 now shares copy 0 with client 4: other times, but its own work draws (common random numbers)
    w0a, w0b = a["work"][a["client"] == 0], b["work"][b["client"] == 0]
    k = min(len(w0a), len(w0b))
    np.testing.assert_array_equal(w0a[:k], w0b[:k])
    assert not np.array_equal(a["finished"][a["client"] == 0][:k], b["finished"][b["client"] == 0][:k])


def test_parts_on_two_processes_give_the_same_numbers_and_records():
    tree = {**COPIES, "function": {**COPIES["function"], "copies": 5}}
    sc = scenario(tree)
    one, two = {}, {}
    a = loadtest.run(sc, seed=2, series=one, records=True, jobs=1)
    b = loadtest.run(sc, seed=2, series=two, records=True, jobs=2)
    assert a.pop("records").equals(b.pop("records"))
    del a["wall_s"], b["wall_s"]
    assert a == b and one == two


@pytest.mark.parametrize(
    ("failure", "error", "says"),
    [
        (lambda: (_ for _ in ()).throw(ScenarioError("bad part")), ScenarioError, "bad part"),
        (lambda: (_ for _ in ()).throw(ZeroDivisionError("oops")), RuntimeError, "ZeroDivisionError: oops"),
        (lambda: os._exit(3), RuntimeError, "died"),
    ],
)
def test_a_worker_that_fails_or_dies_fails_the_run_with_its_reason(failure, error, says, monkeypatch):
    # fork: the workers inherit the patch; the run's end is sent, then the parts fail as they run on
    monkeypatch.setattr(Part, "extend", lambda self, end: failure())
    with pytest.raises(error, match=says):
        loadtest.run(scenario(COPIES), seed=0, jobs=2)


def test_the_run_command_takes_jobs(capsys):
    argv = ["loadtest-copies", "--set", "duration_s=5", "--set", "clients.in_flight=100", "--json"]
    assert run_cmd.main([*argv, "--jobs", "1"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert run_cmd.main([*argv, "--jobs", "2"]) == 0
    two = json.loads(capsys.readouterr().out)
    del one["wall_s"], two["wall_s"]
    assert one == two and one["calls_issued"] > 800
    with pytest.raises(SystemExit) as e:
        run_cmd.main([*argv, "--jobs", "0"])
    assert e.value.code == 2


def test_copies_with_few_calls_share_a_part_and_each_call_reaches_its_own_copy(monkeypatch):
    # 7 copies, 9 clients of 150 calls (1,350 in flight): parts of at least 1,000 calls in flight hold 5 copies (the
    # last 2); client i calls copy i mod 7 wherever its part is
    monkeypatch.setattr(base, "PART_CALLS", 1000)
    tree = {**COPIES, "function": {**COPIES["function"], "copies": 7}, "clients": {"count": 9, "in_flight": 150}}
    sc = scenario(tree)
    assert APPROACHES["remote"].parts(sc) == 2
    assert [APPROACHES["remote"].copies_of(sc, p, 2) for p in (0, 1)] == [range(0, 5), range(5, 7)]
    seen: set[tuple[str, int]] = set()

    class Watched(Function):  # (a subclass, not a patched Function: the compiled core's class is not patchable)
        def __init__(self, sim, name, fp, limits, ap, streams, log, *rest):
            super().__init__(sim, name, fp, limits, ap, streams, log, *rest)
            self.copy, self.client_of = name, log.client

        def submit(self, call, style=0):
            seen.add((self.copy, self.client_of[call]))
            return super().submit(call, style)

    monkeypatch.setattr(base, "Function", Watched)
    loadtest.run(sc, seed=0)
    assert seen == {(f"function-copy-{i % 7}", i) for i in range(9)}


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_long_runs_progress_goes_over_its_parts(jobs):
    seen: list[tuple[float, float]] = []
    sc = scenario(COPIES)
    loadtest.run(sc, seed=0, jobs=jobs, guard=Guard(progress=lambda now, until: seen.append((now, until))))
    until = sc.duration_s + sc.drain_s
    assert sorted(now for now, _ in seen) == [until * k / 4 for k in (1, 2, 3, 4)]
    assert {u for _, u in seen} == {until}
