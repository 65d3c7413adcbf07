"""Ranges for container start and sandbox creation (experiments/uncertainty.py): their plausible models are the
values their keys declare (``param(plausible=...)``: the fits' ranges, the sources', the rival mechanisms), each saying
where it comes from, only the keys the scenario reads, and what the user sets is no range."""

from __future__ import annotations

import json

import pytest

from experiments import run, uncertainty
from experiments.spec import load_spec
from models.registry import MODELS
from models.runs import load_scenario
from sim.scenario import ScenarioError
from tests.support import one_line

COLDSTART = ["--set", "coldstart.starts=40"]
SANDBOXES = ["--set", "sandboxes.count=2000", "--set", "fleet.workers=100"]


def ranged(capsys, *argv: str) -> dict:
    assert run.main([*argv, "--uncertainty", "--jobs", "1", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["uncertainty"]


def check(u: dict, moves: str) -> None:
    """Every figure's central value inside its range; ``moves`` not degenerate (the models differ there)."""
    for k, r in u["ranges"].items():
        assert r["low"] <= r["central"] <= r["high"], (k, r)
    assert u["ranges"][moves]["low"] < u["ranges"][moves]["high"]


def test_a_lazy_start_ranges_over_the_keys_it_reads_each_saying_where_it_comes_from(capsys):
    u = ranged(capsys, "coldstart-torch", *COLDSTART)
    check(u, "cold_start_mean_s")
    # a lazy start reads no snapshot key: neither the restore's fitted range nor the CPU pressure is a model of it
    assert not any(s.startswith(("coldstart.restore_s", "coldstart.cpu_pressure")) for s in u["sources"])
    assert {"coldstart.op_s=7.21e-05", "coldstart.op_s=8.96e-05", "coldstart.network_gibps=2.33"} <= set(u["sources"])
    assert all("docs/sources.md" in why or "fitted" in why for why in u["sources"].values())
    # the kept model and one a declared value, each at two seeds (the user's run is the kept model's at its seed)
    assert u["models"] == len(u["sources"]) + 1 and u["runs"] == 2 * u["models"]
    # the same seed, the same ranges; a snapshot restore reads its own keys too
    assert ranged(capsys, "coldstart-torch", *COLDSTART)["ranges"] == u["ranges"]
    snap = ranged(capsys, "coldstart-torch", *COLDSTART, "--set", "coldstart.mode=snapshot")
    check(snap, "cold_start_p50_s")
    assert {"coldstart.restore_s=0.329", "coldstart.restore_s=0.508", "coldstart.cpu_pressure=0"} <= set(
        snap["sources"]
    )


def test_a_key_the_user_sets_is_no_range(capsys):
    u = ranged(capsys, "coldstart-torch", *COLDSTART, "--set", "coldstart.op_s=8e-5")
    assert not any(s.startswith("coldstart.op_s") for s in u["sources"])


def test_sandbox_ranges_take_the_fit_the_sources_and_the_rival_placement(capsys):
    u = ranged(capsys, "sandboxes-v2", *SANDBOXES)
    check(u, "schedule_latency_p99_s")  # the fitted request time over its band
    assert {"scheduler.request_s=0.003", "scheduler.request_s=0.092", "scheduler.placement=random"} <= set(u["sources"])
    assert "fitted" in u["sources"]["scheduler.request_s=0.003"]
    # another control plane reads none of the v2 scheduler's keys, and takes its own
    small = ("sandboxes-v1", "--set", "sandboxes.count=1000", "--set", "fleet.workers=100")
    v1 = ranged(capsys, *small)
    check(v1, "creation_makespan_s")  # the database's throughput over the hardware it could be
    assert {s.partition(".")[0] for s in v1["sources"]} == {"fleet", "postgres"}
    assert ranged(capsys, *small)["ranges"] == v1["ranges"]  # the same seed, the same ranges


def test_the_text_names_each_models_source(capsys):
    assert run.main(["sandboxes-k8s", "--set", "sandboxes.count=500", "--uncertainty", "--jobs", "1"]) == 0
    text = capsys.readouterr().out
    assert "ranges over 5 plausible models (of 5) × 2 seeds" in text
    assert "kubernetes.node_score_s = 3.31e-05, 4.07e-05: fitted: the CI floor" in text


def test_a_sweep_runs_each_point_under_the_declared_ranges_the_point_does_not_set():
    spec = load_spec("coldstart-torch", ["coldstart.starts=10"], ["coldstart.op_s=8e-5,9e-5"], 1, uncertainty=True)
    kept = [p for p in spec.points if p.plausible == 0]
    assert len(kept) == 2 and len(spec.points) > 2
    for p in spec.points:
        assert sum(k == "coldstart.op_s" for k, _ in p.sets) == 1  # the factor's key is never a model's


@pytest.mark.parametrize(
    "argv, says",
    [
        (["coldstart-torch", "--set", "coldstart.starts=0"], "coldstart.starts"),
        (["sandboxes-v2", "--set", "scheduler.nope=1"], "scheduler.nope"),
        (["coldstart-torch", "--uncertainty-seeds", "0"], "--uncertainty-seeds"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, argv, says):
    try:
        code = run.main([*argv, "--uncertainty", "--jobs", "1"])
    except SystemExit as stop:  # argparse's own checks exit
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2 and says in one_line(err) and len(err.strip().splitlines()) == 1, err


def test_a_sweep_of_a_scenario_with_no_range_left_is_bad_input():
    sc = load_scenario("coldstart-torch", [], [])
    sets = [f"{k}={uncertainty.current(sc, k)!r}" for k, _, _ in uncertainty.declared(MODELS["coldstart"].schema)]
    with pytest.raises(ScenarioError, match="reads no key with plausible values"):
        load_spec("coldstart-torch", sets, [], 1, uncertainty=True)
