"""The commands end to end: exit codes, one-line errors, JSON output, determinism (docs/explanation/robustness.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from experiments import run


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    "args, names",
    [
        (["no-such-preset"], "no-such-preset"),
        (["loadtest-spawn", "--set", "clients.cuont=3"], "clients.cuont"),
        (["loadtest-spawn", "--set", "clients.count=many"], "clients.count"),
        (["loadtest-spawn", "--set", "clients.count=2.5"], "clients.count"),
        (["loadtest-spawn", "--set", "limits.start_rate=-5"], "limits.start_rate"),
        (["loadtest-spawn", "--set", "work=uniform(10, 1)"], "work"),
        (["loadtest-spawn", "--set", "work=gaussian(1, 2)"], "work"),
        (["loadtest-spawn", "--set", "approach=teleport"], "approach"),
        (["loadtest-spawn", "--set", "limits.enabled=1"], "limits.enabled"),
        (["loadtest-spawn", "--set", "function.target_inputs=900"], "target_inputs"),
        (["loadtest-spawn", "--set", "clients=3"], "clients"),
        (["loadtest-spawn", "--set", "noequals"], "noequals"),
        (["loadtest-spawn", "--seed", "-1"], "--seed"),
        (["loadtest-spawn", "--seed", "x"], "--seed"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_key(args, names, capsys):
    assert run.main(args) == 2 if "--seed" not in args else _exits_2(args)
    err = capsys.readouterr().err.strip()
    assert names in err and "\n" not in err and "Traceback" not in err


def _exits_2(args: list[str]) -> bool:
    with pytest.raises(SystemExit) as e:
        run.main(args)
    return e.value.code == 2


def test_malformed_toml_and_missing_file(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("approach = \n")
    assert run.main([str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err
    assert run.main([str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml" in capsys.readouterr().err
    params = tmp_path / "p.toml"
    params.write_text("[limits]\nstart_rat = 3\n")
    assert run.main(["loadtest-spawn", "--params", str(params)]) == 2
    assert "limits.start_rat" in capsys.readouterr().err


@pytest.mark.slow
def test_json_is_one_object_and_the_same_seed_gives_the_same_numbers():
    args = ["experiments.run", "loadtest-copies", "--set", "duration_s=5", "--seed", "3", "--json"]
    a, b = cli(*args), cli(*args)
    assert a.returncode == 0, a.stderr
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    for j in (ja, jb):
        del j["wall_s"]
    assert ja == jb  # two processes, identical bit for bit
    assert ja["seed"] == 3 and ja["scenario"]["function"]["copies"] == 8
    c = json.loads(cli(*args[:-3], "--seed", "4", "--json").stdout)
    assert c["calls"] != ja["calls"] or c["first_n_back_s"] != ja["first_n_back_s"]


def test_a_scenario_file_and_set(tmp_path, capsys):
    f = tmp_path / "mine.toml"
    f.write_text('approach = "spawn"\nduration_s = 5.0\n[clients]\ncount = 2\nin_flight = 10\n')
    assert run.main([str(f), "--set", "clients.count=3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scenario"]["clients"]["count"] == 3 and out["calls_issued"] >= 30


@pytest.mark.parametrize(
    "args, shows",
    [
        (["loadtest-batching", "--set", "duration_s=10"], "calls_per_s"),
        (["sandboxes-v2", "--set", "sandboxes.count=500", "--set", "fleet.workers=20"], "creation_rate_per_s"),
        (["coldstart-torch", "--set", "coldstart.starts=20"], "cold_start_p50_s"),
    ],
)
def test_human_output_for_every_model(capsys, args, shows):
    assert run.main(args) == 0
    assert shows in capsys.readouterr().out


@pytest.mark.slow
def test_bench_quick_runs():
    r = cli("experiments.bench", "--quick", "--repeat", "1", "--json", "--only", "loadtests,mmc,startup")
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    from experiments.bench import sections as bench
    from sim import compiled

    # --only: those sections alone, and the core they ran on (sim.compiled(): the compiled modules, or none)
    assert set(figures) == {"core", "loadtests", "mmc", "mmc_100", "startup_s"}
    assert figures["core"] == compiled()
    assert set(figures["loadtests"]) == set(bench.LOADTESTS)
    assert set(figures["startup_s"]) == {" ".join(argv[1:]) for argv in bench.STARTUP}
    assert all(0 < wall < 120 for wall in figures["startup_s"].values())  # measured (a guard, not a speed limit)
    mmc = figures["mmc"]
    # the bench's quick M/M/c run (experiments/bench/sections.py: horizon 2,000 s, no warm-up, no drain, seed 0) served
    # exactly the customers the same scenario run here serves, and its ratio is of the two rates it reports
    import math

    from models.inputs import loadtest
    from models.runs import load_scenario

    same = loadtest.run(load_scenario("mmc", ["duration_s=2000", "warmup_s=0", "drain_s=0"], []), seed=0)
    assert mmc["customers"] == same["calls_issued"] > 0
    assert math.isfinite(mmc["ratio"]) and mmc["ratio"] > 0
    rates = mmc["model_customers_per_wall_s"] / mmc["heapq_customers_per_wall_s"]
    assert mmc["ratio"] == pytest.approx(rates, abs=1e-3)  # both rates are rounded to integers, the ratio to 0.001


@pytest.mark.slow
def test_bench_waits_run_each_command_a_user_waits_for():
    r = cli("experiments.bench", "--quick", "--json", "--only", "waits")
    assert r.returncode == 0, r.stderr
    from experiments.bench import sections as bench

    # each ran, in its smaller quick form, to its end
    assert {name: f["exit"] for name, f in json.loads(r.stdout)["waits"].items()} == {w[0]: 0 for w in bench.WAITS}


def test_simfaas_yardstick_runs_its_readme_example():
    # SimFaaS itself (the bench extra), shorter: Poisson 0.9/s for 2,000 s, about 1,800 requests, few cold starts
    from experiments.bench.yardsticks import simfaas_example

    ref = simfaas_example(2000.0)
    assert ref is not None, "SimFaaS is in the dev extras (pyproject.toml: bench)"
    assert abs(ref["calls"] - 1800) < 5 * 1800**0.5
    assert 0 < ref["cold_start_probability"] < 0.05 and 0 < ref["inputs_running_mean"] < 10


@pytest.mark.slow
def test_calibration_fit_quick_writes_a_parameter_file_that_run_accepts(tmp_path, capsys):
    out = tmp_path / "fitted.toml"
    r = cli("calibration.fit", "--quick", "--seeds", "1", "--jobs", "1", "--out", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "[limits]" in text and "start_rate" in text and "| spawn | calls_per_s | 589 |" in text
    # beside it, the plausible models: the kept one among them, each within max(1, 10%) of its loss, best first
    side = json.loads((tmp_path / "fitted.plausible.json").read_text())
    losses = [m["loss"] for m in side["models"]]
    assert side["kept"]["settings"] in [m["settings"] for m in side["models"]] and losses == sorted(losses)
    assert max(losses) <= side["kept"]["loss"] + max(1.0, 0.1 * side["kept"]["loss"])
    assert run.main(["loadtest-spawn", "--params", str(out), "--set", "duration_s=5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["calls_issued"] > 0
    assert cli("calibration.fit", "--seeds", "0").returncode == 2


def test_app_copies_are_a_deployment_choice_and_copies_a_deprecated_alias_of_remote(tmp_path, capsys):
    # Copies are `function.copies` with any call style: no "copies" approach; a scenario that still says
    # approach = "copies" is built as "remote", to the same numbers, and the choices named in an error are the styles.
    from models.inputs.approaches import APPROACHES
    from models.runs import build_scenario, load_scenario

    assert "copies" not in APPROACHES
    preset = load_scenario("loadtest-copies")
    assert preset.approach == "remote" and preset.function.copies == 8
    f = tmp_path / "old.toml"
    f.write_text(
        'approach = "copies"\nduration_s = 5.0\n[function]\ncopies = 2\n[clients]\ncount = 3\nin_flight = 40\n'
    )
    old = build_scenario({"approach": "copies"})
    assert old.approach == "remote" and old == build_scenario({"approach": "remote"})
    outs = []
    for sets in ([], ["--set", "approach=remote"], ["--set", "approach=spawn"]):
        assert run.main([str(f), *sets, "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
        del outs[-1]["wall_s"]
    assert outs[0] == outs[1] and outs[0]["scenario"]["approach"] == "remote"
    assert (outs[2]["scenario"]["approach"], outs[2]["scenario"]["function"]["copies"]) == ("spawn", 2)  # any style
    assert run.main(["loadtest-spawn", "--set", "approach=copie"]) == 2
    assert "approach: must be one of remote, spawn, batching, server" in capsys.readouterr().err


def test_run_list_and_help_name_every_preset_and_sweep_spec_with_its_description(capsys):
    import tomllib

    from experiments import run as run_cmd
    from models.presets import PRESETS

    assert run_cmd.main(["--list"]) == 0
    listed = capsys.readouterr().out
    for folder in (PRESETS, run_cmd.SWEEPS):
        for path in folder.glob("*.toml"):
            with path.open("rb") as f:
                description = tomllib.load(f)["description"]
            assert f"  {path.stem:22s} {description}" in listed.splitlines(), path
    with pytest.raises(SystemExit) as e:
        run_cmd.main(["--help"])
    assert e.value.code == 0 and "mmc " in capsys.readouterr().out
    p = subprocess.run([sys.executable, "-m", "experiments.run"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--list" in p.stderr
