"""Ranges over the plausible models (experiments/uncertainty.py): which models a run takes, what a range is, and
that the user's own keys win."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from experiments import run, uncertainty
from models.inputs import plausible as loadtest_ranges
from models.runs import load_scenario, run_scenario
from sim.cli import human
from sim.scenario import ScenarioError
from tests.support import in_chromium, models_file


def test_the_envelope_is_the_kept_model_and_each_keys_extremes():
    kept = ["a=2", "b=10", "switch=true"]
    models = [kept, ["a=1", "b=10", "switch=true"], ["a=3", "b=12", "switch=true"], ["a=2", "b=8", "switch=false"]]
    chosen = uncertainty.envelope(kept, models)
    # a: least in the second, greatest in the third; b: least in the fourth, greatest in the third (already in)
    assert chosen == [kept, models[1], models[2], models[3]]
    assert uncertainty.envelope(kept, [kept]) == [kept]


def test_a_run_with_uncertainty_reports_central_values_and_ranges(tmp_path, capsys):
    rates = [["limits.start_rate=363"], ["limits.start_rate=150"], ["limits.start_rate=600"]]
    params = models_file(tmp_path, rates[0], rates)
    argv = ["loadtest-spawn", "--params", str(params), "--set", "duration_s=10", "--set", "clients.count=2"]
    assert run.main([*argv, "--uncertainty", "--uncertainty-seeds", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    u = out["uncertainty"]
    assert u["models"] == 6 and u["of"] == 3 and u["seeds"] == 2 and u["file"].endswith("fit.plausible.json")
    r = u["ranges"]["calls_per_s"]
    assert r["low"] <= r["central"] <= r["high"] and r["low"] < r["high"]  # the start rate moves spawn's calls/s
    # the central value is the kept model's mean over seeds 0 and 1; every model runs at both (common random numbers)
    # the file's three models and three assumptions (the accept burst's ends, the client's retry); the burst's least
    # is spawn's default, a run already made: five distinct models at two seeds
    assert u["runs"] == 10
    kept = []
    for seed in (0, 1):
        assert run.main([*argv, "--set", "limits.start_rate=363", "--seed", str(seed), "--json"]) == 0
        kept.append(json.loads(capsys.readouterr().out)["calls_per_s"])
    assert r["central"] == pytest.approx(sum(kept) / 2, rel=1e-12)
    # a key the user sets wins over every model's: then nothing moves but the seed
    assert run.main([*argv, "--set", "limits.start_rate=363", "--uncertainty", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["uncertainty"]["ranges"]["ideal_calls_per_s"]
    assert r["low"] == r["high"] == r["central"]


def test_uncertainty_needs_plausible_models_and_a_readable_file(tmp_path, capsys):
    # a container start whose every key with plausible values the user sets has no range left to run
    sc = load_scenario("coldstart-torch", [], [])
    keys = [k for k, _, _ in uncertainty.declared(type(sc))]
    sets = [f"{k}={v!r}" for k in keys for v in [uncertainty.current(sc, k)]]
    with pytest.raises(ScenarioError, match="reads no key with plausible values"):
        uncertainty.ranges("coldstart-torch", sets, [], 1, 1)
    params = tmp_path / "bad.toml"
    params.write_text("[limits]\nstart_rate = 363\n")
    (tmp_path / "bad.plausible.json").write_bytes(b"\x00\x01 not json")
    assert run.main(["loadtest-spawn", "--params", str(params), "--set", "duration_s=5", "--uncertainty"]) == 2
    assert "bad.plausible.json: not JSON" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        run.main(["loadtest-spawn", "--uncertainty", "--uncertainty-seeds", "0"])
    assert stop.value.code == 2 and "--uncertainty-seeds" in capsys.readouterr().err


def test_the_envelope_orders_distributions_by_their_median_and_takes_the_alternatives_and_assumptions():
    kept = ["autoscaler.cold_start=lognormal(1.86, 0.3)", "x.on=true"]
    low, high = ["autoscaler.cold_start=lognormal(1.2, 0.3)", "x.on=true"], ["autoscaler.cold_start=lognormal(3, 0.3)"]
    alt = ["autoscaler.cold_start=lognormal(1.86, 0.3)", "x.on=false"]
    assert uncertainty.value(kept, "autoscaler.cold_start") == 1.86 and uncertainty.value(kept, "x.on") is None
    chosen = uncertainty.envelope(kept, [kept, low, high, alt], always=[alt], extra=["x.on=false", "y.n=3"])
    assert chosen == [kept, low, high, alt, [*kept, "y.n=3"]]  # x.on=false on the kept model is the alternative


def test_the_envelope_counts_only_the_keys_the_scenario_reads():
    kept = ["a.x=2", "server.cpu=1"]
    models = [kept, ["a.x=2", "server.cpu=0.1"], ["a.x=2", "server.cpu=9"], ["a.x=1", "server.cpu=1"]]
    # every key read: the server's extremes are models of their own
    assert uncertainty.envelope(kept, models) == [kept, models[3], models[1], models[2]]
    # spawn reads no server key: the models alike on a.x are the kept one, a tie goes to the model already taken
    spawn = uncertainty.envelope(kept, models, loadtest_ranges.unread("spawn"))
    assert spawn == [["a.x=2"], ["a.x=1"]]
    assert loadtest_ranges.unread("server")("server.cpu=1") is False
    assert loadtest_ranges.unread("remote")("batching.x=1")


def test_the_users_run_is_one_of_the_runs_and_the_same_run_runs_once(tmp_path):
    rates = [["limits.start_rate=363"], ["limits.start_rate=150"], ["limits.start_rate=363"]]
    params = models_file(tmp_path, rates[0], rates)  # the file sets the kept model's rate: the user's run is its own
    sets = ["duration_s=5", "clients.count=2"]
    mine, doc = uncertainty.ranges("loadtest-spawn", sets, [str(params)], 2, 1, seed=1)
    # 363 and 150 and the three assumptions (the accept burst's ends, the client's retry), each at seeds 1 and 2;
    # 363 at seed 1 is the user's run, and the burst's least (8,000) is spawn's default: 4 distinct models
    assert doc["models"] == 5 and doc["runs"] == 8
    alone = run_scenario(load_scenario("loadtest-spawn", sets, [str(params)]), seed=1)
    assert {k: v for k, v in mine.items() if k != "wall_s"} == {k: v for k, v in alone.items() if k != "wall_s"}
    # at any seed, with keys of the user's own on top of every model's
    _, doc = uncertainty.ranges("loadtest-spawn", [*sets, "limits.start_burst=5"], [str(params)], 2, 1, seed=7)
    assert doc["runs"] == 8
    # a key the user sets is no longer an assumption: the client's retry set by hand is one model fewer
    _, doc = uncertainty.ranges("loadtest-spawn", [*sets, loadtest_ranges.ON_RATE_LIMIT], [str(params)], 2, 1, seed=7)
    assert doc["runs"] == 6


class Bar:
    """What ``ranges`` tells a search's progress bar (tqdm's total, n, update and refresh)."""

    def __init__(self, n: int) -> None:
        self.total, self.n = None, n

    def update(self, n: int = 1) -> None:
        self.n += n

    def refresh(self) -> None:
        pass


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_runs_go_on_the_searchs_bar_as_they_end(tmp_path, jobs):
    """A search's bar (its runs so far, no total yet) gains this call's runs in its total and counts each as it
    ends, serially or in the pool."""
    rates = [["limits.start_rate=363"], ["limits.start_rate=150"]]
    params = models_file(tmp_path, rates[0], rates)
    bar = Bar(3)
    _, doc = uncertainty.ranges("loadtest-spawn", ["duration_s=5", "clients.count=2"], [str(params)], 1, jobs, bar=bar)
    assert doc["runs"] > 1 and bar.total == bar.n == 3 + doc["runs"]


@pytest.mark.slow
def test_a_sweep_with_uncertainty_runs_each_point_under_the_envelope_and_reports_ranges(tmp_path):
    from experiments import sweep

    rates = [["limits.start_rate=363"], ["limits.start_rate=150"], ["limits.start_rate=600"]]
    params = models_file(tmp_path, rates[0], rates)
    out = tmp_path / "sw"
    argv = ["loadtest-spawn", "--params", str(params), "--set", "duration_s=5", "--factor", "clients.count=1,2"]
    assert sweep.main([*argv, "--seeds", "2", "--uncertainty", "--out", str(out), "--jobs", "1"]) == 0
    rows = pd.read_csv(out / "results.csv")
    # per point: every model at seeds 0 and 1 (the three of the file, the three assumptions), each saying whose
    # point it is
    assert len(rows) == 2 * 6 * 2 and set(rows["plausible"]) == {0, 1, 2, 3, 4, 5}
    assert set(rows[rows["plausible"] > 0]["seed"]) == {0, 1}
    for _, r in rows.iterrows():
        kept = rows[rows["point"] == r["kept_point"]]
        assert (kept["plausible"] == 0).all() and (kept["clients.count"] == r["clients.count"]).all()
    assert set(rows["limits.start_rate"]) == {150, 363, 600}
    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == 2 and (summary["seeds"] == 2).all() and (summary["models"] == 6).all()
    for _, s in summary.iterrows():
        mine = rows[rows["kept_point"] == s["point"]]["calls_per_s"]
        kept = rows[(rows["point"] == s["point"])]["calls_per_s"]
        assert s["calls_per_s_low"] == mine.min() and s["calls_per_s_high"] == mine.max()
        assert s["calls_per_s_mean"] == pytest.approx(kept.mean(), rel=1e-12)
    # the report shows each figure's range beside its mean, as the browser draws it
    dom = in_chromium(out / "report.html", tmp_path)
    assert "plausible models" in dom and "calls_per_s range</th>" in dom and "What the numbers rest on" in dom
    low, high = summary["calls_per_s_low"].iloc[0], summary["calls_per_s_high"].iloc[0]
    assert f"{human(low)} .. {human(high)}" in dom
    # a sweep without it has neither column: its results are what they were
    plain = tmp_path / "plain"
    assert sweep.main([*argv, "--seeds", "1", "--out", str(plain), "--jobs", "1", "--no-report"]) == 0
    assert "plausible" not in pd.read_csv(plain / "results.csv")


def test_a_whatif_with_uncertainty_says_whether_the_answer_holds_under_every_model(tmp_path, capsys):
    from experiments import whatif

    rates = [["limits.start_rate=363"], ["limits.start_rate=150"], ["limits.start_rate=600"]]
    params = models_file(tmp_path, rates[0], rates)
    argv = ["drain", "--calls", "300", "--seeds", "1", "--jobs", "1", "--params", str(params), "--json"]
    assert whatif.main([*argv, "--uncertainty"]) == 0
    out = json.loads(capsys.readouterr().out)
    u = out["uncertainty"]
    back = u["ranges"]["first_n_back_s"]
    assert u["models"] == 6 and back["low"] < back["high"]  # a slower start rate drains later
    assert back["central"] == pytest.approx(out["chosen"]["metrics"]["first_n_back_s"]["mean"], rel=1e-12)
    assert u["ranges"]["calls_per_s"]["high"] == pytest.approx(300 / back["low"])


@pytest.mark.slow
def test_a_whatif_page_with_uncertainty_shows_each_figures_range_beside_it(tmp_path):
    from experiments import whatif

    rates = [["limits.start_rate=363"], ["limits.start_rate=150"], ["limits.start_rate=600"]]
    params = models_file(tmp_path, rates[0], rates)
    argv = ["drain", "--calls", "300", "--seeds", "1", "--jobs", "1", "--params", str(params), "--uncertainty"]
    assert whatif.main([*argv, "--out", str(tmp_path / "page")]) == 0
    dom = in_chromium(tmp_path / "page" / "whatif.html", tmp_path)
    assert "Under 6 plausible models" in dom and "range (low .. high)</th>" in dom
    assert re.search(r"first_n_back_s [\d.]+ \.\. [\d.]+", dom)  # beside the chosen option's figures
    assert "within the calibrated range" in dom  # 300 calls from one caller: inside the envelope


def test_a_capacity_answer_that_fails_under_a_plausible_model_says_so(tmp_path, capsys):
    from experiments import whatif

    params = tmp_path / "fit.toml"
    params.write_text("[function]\nmax_inputs = 4\n")
    models = [["function.max_inputs=4"], ["function.max_inputs=1"], ["function.max_inputs=8"]]
    doc = {"kept": {"settings": models[0]}, "models": [{"settings": m} for m in models]}
    (tmp_path / "fit.plausible.json").write_text(json.dumps(doc))
    sets = ["duration_s=20", "warmup_s=5", "work=constant(0.1)", "function.copies=1"]
    argv = ["capacity", "--rate", "20", "--p99", "1", "--knob", "containers", "--seeds", "1", "--jobs", "1"]
    argv += ["--params", str(params), *(x for s in sets for x in ("--set", s))]
    assert whatif.main([*argv, "--uncertainty"]) == 0
    text = capsys.readouterr().out
    # one container of 4 inputs serves 20 calls/s of 0.1 s; of 1 input (10 calls/s at most) it cannot
    assert "Answer: function.containers=1." in text and "fails under some" in text
    assert whatif.main([*argv, "--uncertainty", "--json"]) == 0
    u = json.loads(capsys.readouterr().out)["uncertainty"]
    # the queue of the one-input model grows: its p99, the range's worst end, is over the limit
    assert u["holds"] is False and u["ranges"]["added_latency_p99_s"]["high"] > 1 and u["why"].startswith("p99")


def test_the_envelope_takes_the_models_that_bound_each_recorded_figure():
    kept = ["a=2", "b=10"]
    # the third model sits between the parameters' extremes and gives the greatest calls/s of all
    models = [kept, ["a=1", "b=8"], ["a=1.5", "b=9"], ["a=3", "b=12"]]
    figures = [{"w.calls": [5, 6]}, {"w.calls": [4, 5]}, {"w.calls": [7, 9]}, {"w.calls": [3, float("nan")]}]
    assert uncertainty.envelope(kept, models) == [kept, models[1], models[3]]
    assert uncertainty.envelope(kept, models, figures=figures) == [kept, models[1], models[3], models[2]]
    # a figure's extreme that a model already taken gives adds nothing; a model without the figure is passed over
    figures[2] = {}
    assert uncertainty.envelope(kept, models, figures=figures) == [kept, models[1], models[3]]


def test_a_question_takes_the_figures_of_its_nearest_reference_way():
    ways = {"spawn": {"approach": "spawn", "copies": 1}, "copies": {"approach": "remote", "copies": 8}}

    def nearest(name: str) -> list[str]:
        return loadtest_ranges.nearest(load_scenario(name, [], []), ways)

    assert nearest("loadtest-spawn") == ["spawn"]
    assert nearest("loadtest-copies") == ["copies"]
    assert nearest("loadtest-remote") == ["copies"]  # remote on one copy: the same approach
    assert nearest("loadtest-batching") == ["spawn", "copies"]  # no batching way: every one


@pytest.mark.slow
def test_the_plausible_models_figures_are_recorded_and_bound_the_range(tmp_path, capsys):
    from calibration import plausible

    rates = [["limits.start_rate=710"], ["limits.start_rate=300"]]
    params = models_file(tmp_path, rates[0], rates)
    side = tmp_path / "fit.plausible.json"
    assert plausible.main([str(side), "--seeds", "1", "--jobs", "1"]) == 0
    doc = json.loads(side.read_text())
    assert doc["figures_of"]["seeds"] == [0] and doc["figures_of"]["ways"]["copies"] == {
        "approach": "remote",
        "copies": 8,
    }
    spawn = [m["figures"]["spawn"]["calls_per_s"][0] for m in doc["models"]]
    # the same run as the simulator's own, and the start rate moves spawn's calls/s
    alone = run_scenario(load_scenario("loadtest-spawn", rates[1], []), seed=0)
    assert spawn[1] == pytest.approx(alone["calls_per_s"], rel=1e-5) and spawn[0] > spawn[1]
    _, u = uncertainty.ranges("loadtest-spawn", [], [str(params)], 1, 1)
    assert u["ranges"]["calls_per_s"]["low"] <= spawn[1] and u["ranges"]["calls_per_s"]["high"] >= spawn[0]
    assert plausible.main([str(tmp_path / "nothing.json")]) == 2
    assert "not a plausible-models file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda p: p.write_text('{"kept": {"settings": [1]}, "models": []}'), "kept.settings: expected a list"),
        (lambda p: p.write_text('{"kept": {"settings": []}, "models": [3]}'), "models[0]: expected an object"),
        (lambda p: p.write_text('{"kept": {"settings": []}, "models": [{"settings": ["a=1"], "figures": {"w": 1}}]}'),
         "models[0].figures"),
        (lambda p: p.write_text('{"kept": {"settings": []}, "models": [], "figures_of": {"ways": {"w": 2}}}'),
         "figures_of.ways"),
        (lambda p: p.write_text("[]"), "expected an object"),
        (lambda p: p.mkdir(), "a folder"),
        (lambda p: __import__("os").mkfifo(p), "named pipe"),
        (lambda p: p.symlink_to(p), "symbolic links"),
        (lambda p: p.symlink_to("/dev/zero"), "device"),
    ],
)  # fmt: skip
def test_a_bad_plausible_models_file_is_one_line_exit_2_never_the_shipped_set(tmp_path, capsys, make, says):
    params = tmp_path / "fit.toml"
    params.write_text("[limits]\nstart_rate = 363\n")
    make(tmp_path / "fit.plausible.json")
    argv = ["loadtest-spawn", "--params", str(params), "--set", "duration_s=5", "--uncertainty"]
    assert run.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "fit.plausible.json" in err and says in err, err


@pytest.mark.slow
def test_a_plausible_models_run_past_its_budget_is_named_and_left_out_of_the_ranges(tmp_path, capsys):
    # the kept model retries at the preset's backoff; a plausible one every millisecond: a retry storm past its budget
    kept = ["clients.backoff_base_s=0.5", "clients.backoff_max_s=15"]
    storm = ["clients.backoff_base_s=0.001", "clients.backoff_max_s=0.001"]
    params = models_file(tmp_path, kept, [kept, storm])
    sets = ["clients.retry=backoff", "duration_s=20"]
    mine, doc = uncertainty.ranges("loadtest-remote", sets, [str(params)], 1, 1)
    over = doc["over_budget"]
    assert [o["settings"] for o in over] == [storm] and "run budget" in over[0]["why"]
    assert "1 of" in capsys.readouterr().err  # said, not silent
    alone = run_scenario(load_scenario("loadtest-remote", sets, [str(params)]), seed=0)
    assert doc["ranges"]["calls_per_s"]["low"] <= alone["calls_per_s"] <= doc["ranges"]["calls_per_s"]["high"]
    assert mine["calls_per_s"] == alone["calls_per_s"]
    with pytest.raises(ScenarioError, match="run budget"):  # the user's own run past its budget is the error
        uncertainty.ranges("loadtest-remote", [*sets, *storm], [str(params)], 1, 1)
