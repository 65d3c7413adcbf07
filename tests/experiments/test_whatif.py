"""The what-if questions (experiments/whatif/): each answer meets its constraint, the next-cheaper option does not,
and bad questions exit 2 with one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments import api
from experiments import whatif as cmd
from experiments.whatif import search
from sim.guard import OverBudget
from tests.support import in_chromium


def ask(capsys, *argv: str) -> dict:
    assert cmd.main([*argv, "--json", "--jobs", "1"]) == 0
    return json.loads(capsys.readouterr().out)


def p99_mean(scenario: str, sets: dict, seeds: int) -> tuple[float, int]:
    """An independent check: the mean added-latency p99 and the errors over the seeds, run through the API."""
    runs = [api.run(scenario, set=sets, seed=s) for s in range(seeds)]
    return float(np.mean([r["added_latency_p99_s"] for r in runs])), sum(r["errors_total"] for r in runs)


@pytest.mark.slow
def test_capacity_answers_the_fewest_copies_and_one_fewer_fails(capsys):
    window = ("--set", "duration_s=60", "--set", "warmup_s=30")
    out = ask(capsys, "capacity", "--rate", "500", "--p99", "2", "--seeds", "2", *window)
    ((key, best),) = out["answer"].items()
    assert key == "function.copies" and out["chosen"]["meets"] and out["simulations"] > 0
    below = out["next_cheaper_fails"][0]
    assert below["config"][key] == best - 1 and not below["meets"]
    # independently: the answer holds, one copy fewer errs (each copy accepts 200 calls/s: docs/sources.md §1)
    base = {"duration_s": 60, "warmup_s": 30, "load": "arrivals", "arrivals.rate": 500}
    p99, errors = p99_mean("loadtest-copies", {**base, key: best}, 2)
    assert p99 <= 2 and errors == 0
    _, errors = p99_mean("loadtest-copies", {**base, key: best - 1}, 2)
    assert errors > 0
    assert out["chosen"]["cost_usd"] == pytest.approx(out["chosen"]["container_seconds"] * (0.0000131 + 0.00000222))


@pytest.mark.slow
def test_autoscaler_answers_the_cheapest_settings_and_every_cheaper_one_fails(capsys, tmp_path):
    out = ask(
        capsys,
        "autoscaler",
        "--p99", "1.5",
        "--rate", "1",
        "--shape", "sine(3600, 0.5)",
        "--buffers", "0,1",
        "--windows", "10,120",
        "--seeds", "2",
        "--set", "duration_s=7200",
        "--out", str(tmp_path),
    )  # fmt: skip
    chosen = out["chosen"]
    assert chosen["meets"] and chosen["metrics"]["added_latency_p99_s"]["mean"] <= 1.5
    assert all(not r["meets"] for r in out["next_cheaper_fails"])
    assert all(r["container_seconds"] >= chosen["container_seconds"] for r in out["runners_up"])
    page = (tmp_path / "whatif.html").read_text()
    assert "data:image/png;base64," in page and "frontier" in page and (tmp_path / "frontier.png").stat().st_size > 0
    assert "What the numbers rest on" in page and "<th class=text>extrapolated</th>" in page


def test_drain_says_how_long_and_what_binds(capsys):
    out = ask(capsys, "drain", "--calls", "3000", "--seeds", "2")
    assert out["answer"]["first_n_back_s"] > 0 and out["answer"]["binding_limit"]
    assert out["runners_up"][0]["config"]["approach"] == "remote"  # the other way: mapped
    # 3,000 spawns at once: accepted at 1,500/s after the burst (docs/sources.md §1), so at least a second passes
    assert out["answer"]["first_n_back_s"] > 1.0


@pytest.mark.parametrize(
    "argv, name",
    [
        (["capacity"], "--rate"),
        (["capacity", "--rate", "inf"], "--rate"),
        (["capacity", "--rate", "10", "--p99", "-1"], "--p99"),
        (["drain", "--calls", "1e9"], "--calls"),
        (["drain", "--calls", "10", "--seeds", "0"], "--seeds"),
        (["autoscaler", "--buffers", "a"], "--buffers"),
        (["autoscaler", "--shape", "sine(1)"], "--shape"),
        (["capacity", "--rate", "10", "--scenario", "nosuch"], "nosuch"),
    ],
)
def test_a_bad_question_exits_2_with_one_line(argv, name, capsys):
    assert cmd.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and name in err, err


class Knob:
    """A stand-in for ``search.Simulator``: a configuration ``{"base": b, "k": v}`` meets once v reaches base b's
    threshold, and its runs are past their budget at base b's values ``over[b]``; it logs what it evaluates."""

    seeds = 1

    def __init__(self, thresholds: dict, over: dict) -> None:
        self.thresholds, self.over = thresholds, over
        self.too_costly = None
        self.log: list[tuple[int, int]] = []

    def evaluate_all(self, configs, clear_miss=None, over=False):
        out = []
        for c in configs:
            self.log.append((c["base"], c["k"]))
            e = search.Evaluation(dict(c), seeds=1)
            if c["k"] in self.over[c["base"]]:
                e.over = OverBudget(f"base {c['base']}: k {c['k']} past its budget")
                if not over:
                    raise e.over
            out.append(e)
        return out

    def check(self, e):
        e.meets = e.config["k"] >= self.thresholds[e.config["base"]]
        e.why = "meets" if e.meets else "p99 too high"


def test_a_search_that_reaches_a_value_past_the_run_budget_keeps_what_it_found():
    """``smallest`` doubles the knob; a value whose runs are past their budget ends the search with what it saw and
    says where (``too_costly``), instead of discarding the search."""
    sim = Knob({0: 10**9}, {0: {8}})
    best, seen = search.smallest(sim, "k", sim.check, {"base": 0})
    assert best is None and sorted(seen) == [1, 2, 4] and sim.too_costly[0] == 8 and "budget" in sim.too_costly[1]
    first = Knob({0: 10**9}, {0: {8}})
    with pytest.raises(OverBudget):  # the first value already past it: nothing searched, the error stands
        search.smallest(first, "k", first.check, {"base": 0}, lo=8)


def test_searches_side_by_side_make_the_evaluations_each_makes_alone():
    """``smallest_all`` runs its searches in lockstep (a round's values simulated together): each search evaluates
    the same values in the same order as alone, finds the same value, and the question ends as one after the other
    would (the same ``too_costly``, or the same error), on random thresholds and budgets."""
    rng = np.random.default_rng(46)
    for _ in range(300):
        n = int(rng.integers(1, 6))
        thresholds = {
            b: int(rng.choice([0, 1, 3, 17, 100, 999, 4096, 5000, int(rng.integers(0, 5000))])) for b in range(n)
        }
        # past the budget at values a search visits: the doubling's, near its threshold, or anywhere
        visited = [
            [0, *(2**i for i in range(13)), t - 1, t, t + 1, t // 2 + 1, int(rng.integers(0, 4200))]
            for t in thresholds.values()
        ]
        over = {b: {int(v) for v in rng.choice(visited[b], int(rng.integers(0, 3)))} for b in range(n)}
        lo = int(rng.integers(0, 3))
        bases = [{"base": b} for b in range(n)]
        expected, logs, too_costly, error = [], [], None, None
        for base in bases:  # one after the other, each on a simulator of its own: the first error ends them
            alone = Knob(thresholds, over)
            try:
                expected.append(search.smallest(alone, "k", alone.check, base, lo))
            except OverBudget as e:
                error = str(e)
                break
            logs += alone.log
            too_costly = alone.too_costly or too_costly  # the last search's that set it
        together = Knob(thresholds, over)
        try:
            got = search.smallest_all(together, "k", together.check, bases, lo)
        except OverBudget as e:
            assert str(e) == error
            continue
        assert error is None
        assert [(b, sorted(s)) for b, s in got] == [(b, sorted(s)) for b, s in expected]
        assert together.too_costly == too_costly
        for b in range(n):  # each search's own order of evaluations
            assert [k for x, k in together.log if x == b] == [k for x, k in logs if x == b]


@pytest.mark.slow
def test_a_capacity_page_says_what_its_numbers_rest_on_in_html_tables_and_renders_in_chromium(tmp_path):
    # nine app copies: more than the calibration's eight (its envelope), so the answer is flagged as extrapolated
    sets = ["duration_s=20", "warmup_s=5", "work=constant(0.1)", "function.copies=9"]
    argv = ["capacity", "--rate", "20", "--p99", "1", "--knob", "containers", "--seeds", "1", "--jobs", "1"]
    assert cmd.main([*argv, *(x for s in sets for x in ("--set", s)), "--out", str(tmp_path)]) == 0
    dom = in_chromium(tmp_path / "whatif.html", tmp_path)
    assert "What the numbers rest on" in dom and "Extrapolated" in dom and "function.copies 9 &gt; 8" in dom
    assert "No ranges: run with --uncertainty" in dom  # (the ranges: tests/experiments/test_uncertainty.py)
    assert "<table>" in dom and "<th>calls/s</th>" in dom and "<pre>" not in dom and "| chosen |" not in dom
