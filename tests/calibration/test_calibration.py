"""The calibration machinery (calibration/): targets as data, the objective's formula, leave-one-out, candidates the
model cannot run, profiles, selection and the parameter file. Fast: no reference-sized simulations."""

from __future__ import annotations

import math

import pytest

from calibration import report
from calibration.candidates import CANDIDATES, HALF_RTT, OFF, Candidate, Free, by_name
from calibration.fit import fit_all, main
from calibration.objective import Objective, loss, term
from calibration.search import Fit, profile
from calibration.targets import APPROACHES, PREDICTIONS, TARGETS, Target, predictions, targets
from models.runs import load_scenario
from sim.dists import LogNormal

# docs/sources.md §1, "Measured", copied by hand: every cell, None where the table says "(kept aside)".
MEASURED = {
    "spawn": (589, 34.6, 9.11, 13.6, 19.8, 12, 0),
    "copies": (1391, 18.2, 0.20, 1.48, 5.65, 19, 0),
    "batching": (800, None, None, None, None, 6, 0),
    "server": (1401, 15.6, None, None, None, None, 0),
}
COLUMNS = (
    "calls_per_s",
    "first_n_back_s",
    "added_latency_p50_s",
    "added_latency_p90_s",
    "added_latency_p99_s",
    "containers_peak",
    "errors",
)


def test_targets_are_every_released_cell_and_predictions_every_kept_aside_one():
    released = {(a, c, v) for a, row in MEASURED.items() for c, v in zip(COLUMNS, row, strict=True) if v is not None}
    kept_aside = {(a, c) for a, row in MEASURED.items() for c, v in zip(COLUMNS, row, strict=True) if v is None}
    assert {(t.approach, t.figure, t.measured) for t in TARGETS} == released
    assert len(TARGETS) == len(released) == 20
    assert {(p.approach, p.figure) for p in PREDICTIONS} == kept_aside
    assert not kept_aside & {(t.approach, t.figure) for t in TARGETS}


def test_one_counting_rule_for_calls_and_errors_over_the_whole_run():
    assert {t.key for t in TARGETS if t.figure == "calls_per_s"} == {"calls_per_s"}  # batching too (see Target)
    assert {t.key for t in TARGETS if t.figure == "errors"} == {"errors_total"}


def test_tolerances_are_the_acceptance_bands():
    band = {(t.approach, t.figure): t.tolerance(calls_issued=50_000) for t in TARGETS}
    assert band["spawn", "calls_per_s"] == pytest.approx(58.9)
    assert band["batching", "containers_peak"] == pytest.approx(0.6)
    assert band["server", "first_n_back_s"] == pytest.approx(3.12)
    assert band["spawn", "added_latency_p50_s"] == pytest.approx(0.3 * 9.11)
    assert band["copies", "added_latency_p50_s"] == 0.1  # under 0.5 s: the absolute floor
    assert band["copies", "errors"] == 500  # 1% of the calls issued


def test_loss_of_a_hand_made_figures_dict_is_the_formula():
    tgts = (
        Target("spawn", "calls_per_s", 589.0),
        Target("copies", "added_latency_p50_s", 0.2),
        Target("spawn", "errors", 0.0, metric="errors_total"),
    )
    figs = {
        "spawn": {"calls_per_s": 530.1, "errors_total": 2.0, "calls_issued": 1000.0},
        "copies": {"added_latency_p50_s": 0.35},
    }
    # (530.1 − 589) / 58.9 = −1; (0.35 − 0.2) / 0.1 = 1.5; errors 2 / (1% of 1,000) = 0.2
    assert loss(figs, tgts) == pytest.approx(1.0 + 2.25 + 0.04)
    assert term(Target("server", "calls_per_s", 1401.0), figs) > 1000  # a figure never produced is heavily penalised


class Recorder:
    """A runner that records the jobs it is given and answers with fixed metrics (no simulation)."""

    def __init__(self) -> None:
        self.jobs: list = []

    def map(self, fn, items):
        self.jobs += items
        return [dict.fromkeys(job[3], 1.0) for job in items]


def test_a_leave_out_objective_has_no_term_and_no_run_of_the_left_out_approach():
    for left in APPROACHES:
        tgts = targets(left)
        assert tgts and all(t.approach != left for t in tgts)
        assert {t.approach for t in tgts} == set(APPROACHES) - {left}
        assert {(p.approach, p.figure) for p in set(predictions(left)) - set(PREDICTIONS)} == {
            (t.approach, t.figure) for t in TARGETS if t.approach == left
        }
        runner = Recorder()
        Objective(runner, [0, 1], tgts)(["limits.start_rate=1000"])
        assert runner.jobs and all(job[0].name != left for job in runner.jobs)
    with pytest.raises(ValueError, match="remote"):
        targets("remote")


def test_an_unknown_candidate_key_is_reported_not_a_crash(capsys):
    unknown = Candidate("future", "", ("autoscaler.no_such_switch=true",), CANDIDATES[0].free)
    bad_value = Candidate("bad", "", ("autoscaler.interval_s=-1",), ())
    assert unknown.check(APPROACHES) == "unknown key autoscaler.no_such_switch"
    assert "autoscaler.interval_s" in bad_value.check(APPROACHES)
    fits, tgts = fit_all([unknown, bad_value], [0], jobs=1, quick=True, leave_out=None, max_evals=0, profile_points=2)
    assert [f.skipped for f in fits] == ["unknown key autoscaler.no_such_switch", bad_value.check(APPROACHES)]
    assert report.kept(fits, len(tgts)) is None
    assert "skipped: unknown key autoscaler.no_such_switch" in "\n".join(report.selection_table(fits, len(tgts)))
    assert "future: skipped" in capsys.readouterr().out


def test_candidates_are_named_uniquely_and_an_unknown_name_is_an_error():
    assert [c.name for c in CANDIDATES] == [
        "baseline",
        "overhead",
        "server-cpu",
        "fifo-start",
        "gather",
        "ramp-start",
        "step-cap",
    ]
    assert [c.name for c in by_name(["ramp-start", "baseline", "ramp-start"])] == ["ramp-start", "baseline"]
    with pytest.raises(ValueError, match="nope"):
        by_name(["nope"])


def test_an_unknown_candidate_name_exits_2():
    with pytest.raises(SystemExit) as e:
        main(["--candidate", "nope"])
    assert e.value.code == 2


def test_free_parameters_map_their_range_onto_the_unit_interval():
    f = Free("x", "limits.start_rate", 10.0, 1000.0, 100.0)
    assert f.to_unit(100.0) == pytest.approx(0.5) and f.from_unit(0.5) == pytest.approx(100.0)
    assert f.from_unit(-1) == 10.0 and f.from_unit(2) == pytest.approx(1000.0)
    lin = Free("r", "limits.start_ramp_per_s", 0.0, 200.0, 20.0, log=False)
    assert lin.to_unit(50.0) == 0.25 and lin.from_unit(0.25) == 50.0


def test_every_candidate_states_every_switch_and_a_free_key_overrides_its_switch():
    for c in CANDIDATES:
        keys = [s.split("=", 1)[0] for s in c.settings(c.start())]
        assert len(keys) == len(set(keys)), c.name  # each key set once
        assert set(OFF) <= set(keys), c.name  # the code defaults never decide what a candidate fits


def test_one_free_parameter_can_set_several_keys():
    assert HALF_RTT.setting(0.1) == ["overhead.submit=lognormal(0.1, 0.3)", "overhead.result=lognormal(0.1, 0.3)"]
    cand = Candidate("rtt", "", ("overhead.submit=constant(0)", "overhead.dispatch=constant(0)"), (HALF_RTT,))
    assert cand.settings([0.2]) == [
        "overhead.dispatch=constant(0)",
        "overhead.submit=lognormal(0.2, 0.3)",
        "overhead.result=lognormal(0.2, 0.3)",
    ]


class Bowl:
    """A stand-in objective: loss = Σ (ln(x / centre) / width)² over the candidate's free parameters."""

    def __init__(self, cand: Candidate, centres: dict[str, float], widths: dict[str, float]) -> None:
        self.cand, self.centres, self.widths = cand, centres, widths

    def __call__(self, sets: list[str]) -> float:
        values = dict(s.split("=", 1) for s in sets)
        total = 0.0
        for f in self.cand.free:
            x = float(values[f.key].removeprefix("lognormal(").split(",")[0])
            total += (math.log(x / self.centres[f.name]) / self.widths[f.name]) ** 2
        return total


def test_a_profile_flags_a_flat_parameter_and_pins_a_sharp_one():
    cand = Candidate("b", "", (), CANDIDATES[0].free)
    centres = {"start_rate": 1000.0, "interval_s": 4.5, "cold_start_median_s": 1.5}
    widths = {"start_rate": 0.1, "interval_s": 100.0, "cold_start_median_s": 0.5}  # sharp, flat, in between
    values = tuple(centres.values())
    profs = {p.free.name: p for p in profile(Bowl(cand, centres, widths), cand, values, 0.0, points=9)}
    assert profs["start_rate"].pinned and profs["start_rate"].low <= 1000 <= profs["start_rate"].high
    assert not profs["interval_s"].pinned and "bound" in profs["interval_s"].why
    # within +1: |ln(x / 1.5)| <= 0.5, i.e. 0.91 .. 2.47 s: scanned coarsely (9 points over 0.3 .. 10 s)
    assert profs["cold_start_median_s"].pinned
    assert 0.9 <= profs["cold_start_median_s"].low <= 1.5 <= profs["cold_start_median_s"].high <= 2.5


def test_aicc_penalises_parameters_and_the_lowest_is_kept():
    assert report.aicc(10.0, 0, 20) == 10.0
    assert report.aicc(10.0, 3, 20) == pytest.approx(10.0 + 6 + 24 / 16)
    assert report.aicc(1.0, 19, 20) == math.inf
    small = Fit(CANDIDATES[0], values=(1000.0, 4.5, 1.5), loss=12.0)
    big = Fit(CANDIDATES[4], values=(1.0,) * 7, loss=8.0)  # 4 less loss does not pay for 4 more parameters
    assert report.kept([small, big], 20) is small


def test_the_candidate_with_more_figures_within_band_is_kept_before_aicc():
    spawn = (Target("spawn", "calls_per_s", 589.0), Target("spawn", "containers_peak", 12.0))
    near = {"spawn": {"calls_per_s": 590.0, "containers_peak": 12.0, "calls_issued": 1.0}}
    off = {"spawn": {"calls_per_s": 589.0, "containers_peak": 14.0, "calls_issued": 1.0}}  # lower loss? no: 1 miss
    small = Fit(CANDIDATES[0], values=(1000.0, 4.5, 1.5), loss=2.8, figures=off, targets=spawn)
    big = Fit(CANDIDATES[4], values=(1.0,) * 7, loss=0.01, figures=near, targets=spawn)
    assert report.within_bands(small) == 1 and report.within_bands(big) == 2
    assert report.aicc(small.loss, 3, 20) < report.aicc(big.loss, 7, 20)
    assert report.kept([small, big], 20) is big


def test_the_written_parameter_file_round_trips_through_load_scenario(tmp_path):
    fit = Fit(CANDIDATES[0], values=(1030.0, 4.71, 1.54), loss=1.0)
    path = tmp_path / "fitted.toml"
    report.write(path, fit, ["a comment", "| a | table |"])
    text = path.read_text()
    assert text.startswith("# a comment\n# | a | table |\n") and "[limits]" in text
    sc = load_scenario("loadtest-spawn", [], [str(path)])
    assert sc.limits.start_rate == 1030.0 and sc.autoscaler.interval_s == 4.71 and sc.autoscaler.scaleup_step == 1
    assert sc.autoscaler.cold_start == LogNormal(1.54, 0.3)


def test_setting_values_become_toml_values():
    assert report.toml_value("true") == "true"
    assert report.toml_value("startable") == '"startable"'
    assert report.toml_value("constant(0.05)") == '"constant(0.05)"'
    assert report.toml_value("1030") == "1030" and report.toml_value("4.71") == "4.71"


@pytest.mark.slow
def test_quick_leave_one_out_end_to_end(tmp_path, capsys):
    path = tmp_path / "loo.toml"
    args = ["--quick", "--candidate", "baseline", "--seeds", "1", "--jobs", "1", "--leave-out", "server"]
    assert main([*args, "--out", str(path)]) == 0
    out = capsys.readouterr().out
    residuals = out.split("Residuals")[1].split("Predictions")[0]
    assert "| spawn | calls_per_s | 589 |" in residuals and "| server |" not in residuals
    predicted = out.split("Predictions")[1].split("Intervals")[0]
    assert "| server | calls_per_s | 1401 (left out) |" in predicted and "kept aside" in predicted
    assert "| baseline | 3 |" in out and "kept |" in out and "n=17" in out
    assert load_scenario("loadtest-spawn", [], [str(path)]).limits.start_rate > 0
    # the envelope of the runs it fitted (the quick runs: 5 s, 100 calls in flight; app copies among them)
    envelope = load_scenario("loadtest-spawn", [], [str(path)]).envelope
    assert envelope.runs == "the reference load test without server"
    assert (envelope.duration_s, envelope.clients, envelope.in_flight, envelope.copies) == (5.0, 8, 100, 8)
    assert envelope.backlog_s > 0 and envelope.containers > 0


def test_a_fold_does_not_fit_what_only_the_held_out_way_reads():
    from calibration import crossval

    kept = next(c for c in CANDIDATES if c.name == "fifo-start")
    others = [w for w in APPROACHES if w != "server"]
    # server.* is read by the server alone: without it the CPU per request is not fitted, every other key is
    assert [f.key for f in crossval.unread(kept, others)] == ["server.cpu_per_request_s"]
    assert crossval.unread(kept, [w for w in APPROACHES if w != "spawn"]) == ()
    held = crossval.without(kept, crossval.unread(kept, others))
    assert held.k == kept.k - 1 and "server.cpu_per_request_s=0.004" in held.settings(held.start())


def test_the_candidate_that_predicts_best_is_kept_and_those_within_noise_beside_it():
    from calibration import crossval

    def cv(name: str, scores: list[float]) -> crossval.CrossVal:
        cand = next(c for c in CANDIDATES if c.name == name)
        fold = crossval.Fold("spawn", Fit(cand), scores=scores)
        return crossval.CrossVal(cand, {"spawn": fold})

    best, near, far = cv("fifo-start", [4.0, 4.4]), cv("gather", [4.5, 4.1]), cv("baseline", [30.0, 31.0])
    assert crossval.chosen([far, near, best]) == (best, [near])
    assert best.score == pytest.approx(4.2) and best.se == pytest.approx(0.2)
    fits = [Fit(c.candidate, values=c.candidate.start(), loss=1.0) for c in (best, near, far)]
    cvs = {c.candidate.name: c for c in (best, near, far)}
    assert report.kept(fits, 20, cvs) is fits[0] and report.alternatives(fits, cvs) == [fits[1]]
    rows = report.selection_table(fits, 20, cvs)
    assert "CV spawn" in rows[0] and "kept |" in rows[2] and "alternative |" in rows[3] and rows[4].endswith(" |  |")
