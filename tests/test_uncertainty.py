"""Ranges over the plausible models (experiments/uncertainty.py): which models a run takes, what a range is, and
that the user's own keys win."""

from __future__ import annotations

import json

import pytest

from experiments import run, uncertainty
from sim.scenario import ScenarioError


def models_file(tmp_path, kept: list[str], models: list[list[str]]):
    params = tmp_path / "fit.toml"
    params.write_text("[limits]\nstart_rate = 363\n")
    doc = {"kept": {"candidate": "x", "loss": 1.0, "settings": kept}, "models": [{"settings": m} for m in models]}
    (tmp_path / "fit.plausible.json").write_text(json.dumps(doc))
    return params


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
    assert u["models"] == 3 and u["of"] == 3 and u["seeds"] == 2 and u["file"].endswith("fit.plausible.json")
    r = u["ranges"]["calls_per_s"]
    assert r["low"] <= r["central"] <= r["high"] and r["low"] < r["high"]  # the start rate moves spawn's calls/s
    # the central value is the kept model's mean over seeds 0 and 1; the other models run at seed 0
    kept = []
    for seed in (0, 1):
        assert run.main([*argv, "--set", "limits.start_rate=363", "--seed", str(seed), "--json"]) == 0
        kept.append(json.loads(capsys.readouterr().out)["calls_per_s"])
    assert r["central"] == pytest.approx(sum(kept) / 2, rel=1e-12)
    # a key the user sets wins over every model's: then nothing moves but the seed
    assert run.main([*argv, "--set", "limits.start_rate=363", "--uncertainty", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["uncertainty"]["ranges"]["ideal_calls_per_s"]
    assert r["low"] == r["high"] == r["central"]


def test_uncertainty_needs_a_load_test_and_a_readable_file(tmp_path, capsys):
    with pytest.raises(ScenarioError, match="only the load-test model"):
        uncertainty.ranges("coldstart-torch", [], [], 1, 1)
    params = tmp_path / "bad.toml"
    params.write_text("[limits]\nstart_rate = 363\n")
    (tmp_path / "bad.plausible.json").write_bytes(b"\x00\x01 not json")
    assert run.main(["loadtest-spawn", "--params", str(params), "--set", "duration_s=5", "--uncertainty"]) == 2
    assert "bad.plausible.json: not a plausible-models file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        run.main(["loadtest-spawn", "--uncertainty", "--uncertainty-seeds", "0"])
    assert stop.value.code == 2 and "--uncertainty-seeds" in capsys.readouterr().err


def test_the_envelope_counts_only_the_keys_the_scenario_reads():
    kept = ["a.x=2", "server.cpu=1"]
    models = [kept, ["a.x=2", "server.cpu=0.1"], ["a.x=2", "server.cpu=9"], ["a.x=1", "server.cpu=1"]]
    # every key read: the server's extremes are models of their own
    assert uncertainty.envelope(kept, models) == [kept, models[3], models[1], models[2]]
    # spawn reads no server key: the models alike on a.x are the kept one, a tie goes to the model already taken
    spawn = uncertainty.envelope(kept, models, uncertainty.unread("spawn"))
    assert spawn == [["a.x=2"], ["a.x=1"]]
    assert uncertainty.unread("server")("server.cpu=1") is False and uncertainty.unread("remote")("batching.x=1")


def test_the_users_run_is_one_of_the_runs_and_the_same_run_runs_once(tmp_path):
    rates = [["limits.start_rate=363"], ["limits.start_rate=150"], ["limits.start_rate=363"]]
    params = models_file(tmp_path, rates[0], rates)  # the file sets the kept model's rate: the user's run is its own
    sets = ["duration_s=5", "clients.count=2"]
    mine, doc = uncertainty.ranges("loadtest-spawn", sets, [str(params)], 2, 1, seed=1)
    assert doc["models"] == 2 and doc["runs"] == 3  # 363 at seeds 1 (the user's run) and 2, 150 at seed 1
    alone = run.run_scenario(run.load_scenario("loadtest-spawn", sets, [str(params)]), seed=1)
    assert {k: v for k, v in mine.items() if k != "wall_s"} == {k: v for k, v in alone.items() if k != "wall_s"}
    # at any seed, with keys of the user's own on top of every model's
    _, doc = uncertainty.ranges("loadtest-spawn", [*sets, "limits.start_burst=5"], [str(params)], 2, 1, seed=7)
    assert doc["runs"] == 3
