"""The recovery what-if (experiments/whatif/recovery.py, models/inputs/checks/recovery.py): a spike's aftermath per
retry policy."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from experiments import whatif
from experiments.whatif.recovery import DEFAULTS, measure, policy_sets, recovery_question
from tests.support import assert_axes_hold_their_data, in_chromium


def test_callers_that_drop_recover_at_once_and_lose_work_while_retrying_ones_lose_none_and_take_longer():
    spike = "arrivals.shape=spike(600, 60, 8)"
    none, _ = measure("mmc", [*DEFAULTS, "clients.retry=none", spike], [], 0, 0.2)
    backoff, s = measure("mmc", [*DEFAULTS, "clients.retry=backoff", spike], [], 0, 0.2)
    assert none["recovered"] and backoff["recovered"]
    assert none["work_lost_s"] > 1000 and backoff["work_lost_s"] == 0  # 7 × 7 × 60 ≈ 2,900 extra calls rejected
    assert backoff["recovery_s"] > none["recovery_s"] + 300  # the orbit drains at c·μ − λ = 3 calls/s
    assert backoff["attempts_per_success"] > 2 > none["attempts_per_success"] >= 1
    assert s["orbit"].max() > 1000 and s["orbit"][-1] < 10  # the orbit fills in the spike and drains


@pytest.mark.slow
def test_timeouts_with_retries_make_a_spike_a_lasting_outage_that_neither_alone_does():
    # metastability (Bronson et al., HotOS'21): work of exactly 1 s on ten warm containers at 70% load, a pending cap
    # of 50 (5 s of queue). A ×2 spike fills the queue; a caller that gives up after 4 s abandons an input the
    # Function still runs, and one that retries (5 attempts) sends another. Both: every input served is one already
    # abandoned, and the retries keep the queue full after the spike (served 0). Either alone: back within the run.
    base = [*DEFAULTS, "work=constant(1)"]
    spike = "arrivals.shape=spike(600, 60, 2)"
    for seed in (0, 1):
        calm, _ = measure(
            "mmc", [*base, *policy_sets("backoff:5@4"), "arrivals.shape=spike(600, 60, 1.01)"], [], seed, 0.2
        )
        assert calm["recovered"] and calm["pre_trigger_calls_per_s"] > 6.5  # the same callers without a spike: fine
        stuck, s = measure("mmc", [*base, *policy_sets("backoff:5@4"), spike], [], seed, 0.2)
        assert not stuck["recovered"] and stuck["recovery_s"] is None
        assert s["served_per_s"][-3:].max() < 0.5 and s["backlog"][-3:].min() > 40
        assert stuck["attempts_per_success"] > 10
        for alone in ("none@4", "backoff:5"):
            back, _ = measure("mmc", [*base, *policy_sets(alone), spike], [], seed, 0.2)
            assert back["recovered"] and back["recovery_s"] < 300, (alone, seed, back)


def test_bad_recovery_options_exit_2(capsys):
    for argv in (
        ["--spikes", "0.5"],
        ["--policies", "backoff:x"],
        ["--policies", "nope"],
        ["--band", "inf"],
        ["--policies", "backoff@0"],
        ["--policies", "backoff@x"],
    ):
        assert whatif.main(["recovery", "--seeds", "1", *argv]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.slow
def test_the_recovery_page_holds_the_answer_and_its_figure_and_renders_in_chromium(tmp_path):
    argv = ["recovery", "--policies", "none@4,backoff:5@4", "--spikes", "2", "--seeds", "1"]
    assert whatif.main([*argv, "--set", "work=constant(1)", "--out", str(tmp_path)]) == 0
    page = tmp_path / "recovery.html"
    text = page.read_text()
    assert "backoff:5@4" in text and "not within the run" in text and text.count("data:image/png;base64,") == 1
    assert (tmp_path / "recovery.png").stat().st_size > 0
    dom = in_chromium(page, tmp_path, "1000,1400")
    assert "<img" in dom and "<pre>" not in dom  # the table is a table, not monospace text
    assert dom.count("<tr>") == 3 and "recovery_s</th>" in dom  # a head and a row per policy


@pytest.mark.slow
def test_the_recovery_figure_draws_the_spike_where_it_happens_and_holds_every_series(tmp_path, monkeypatch):
    # the figure's bins start on the spike: nothing rises before it; every series, the x16 spike and the retries'
    # peak too, lies within its axis
    from experiments.whatif import recovery as rec

    spike = "arrivals.shape=spike(600, 60, 16)"
    _, s = measure("mmc", [*DEFAULTS, "clients.retry=backoff", spike], [], 0, 0.2)
    before = s["t"] < 600
    assert 600 in s["t"] and (s["t"] + (s["t"][1] - s["t"][0]))[before].max() == pytest.approx(600)
    assert s["offered_per_s"][before].max() < 20 < s["offered_per_s"][s["t"] == 600][0]  # 7/s before, 112/s in it
    assert s["retries_per_s"][before].max() < 5 < s["retries_per_s"].max()
    drawn = []
    monkeypatch.setattr(rec.files, "write_figure", lambda fig, path, **kw: drawn.append(fig))
    out = {"spike_at_s": 600.0, "spike_length_s": 60.0}
    rec.figure({"backoff": s}, out, tmp_path)
    (fig,) = drawn
    assert_axes_hold_their_data(fig)
    assert max(ax.get_ylim()[1] for ax in fig.axes) >= s["retries_per_s"].max() > 1000


def test_without_retries_a_spikes_backlog_grows_and_drains_at_the_rates_theory_gives():
    # ten warm containers of exponential work (μ = 1/s), Poisson arrivals at 7/s, ×3 for 60 s from 200 s, no limits
    # and no retries: while a backlog stands every container is busy, so it grows at 3·7 − 10 = 11/s during the spike
    # and drains at c·μ − λ = 3/s after it (Poisson in and out: the change over 100 s has variance 17 × 100 per run).
    from models.inputs import loadtest
    from tests.support import scenario

    seeds, grow, drain = 10, [], []
    for seed in range(seeds):
        tree = {
            "load": "arrivals",
            "arrivals": {"rate": 7.0, "shape": "spike(200, 60, 3)"},
            "function": {"containers": 10},
            "limits": {"enabled": False},
            "work": "exponential(1)",
            "duration_s": 1000.0,
        }
        series: dict = {}
        loadtest.run(scenario(tree), seed=seed, series=series)
        t, pending = np.asarray(series["t"]), np.asarray(series["pending"], dtype=float)

        def at(x: float, t=t, pending=pending) -> float:
            return float(pending[np.searchsorted(t, x)])

        grow.append((at(258.0) - at(210.0)) / 48.0)  # a backlog from the spike's first seconds on
        drain.append((at(380.0) - at(280.0)) / 100.0)  # about 660 at 260 s: still above 300 at 380 s
    for rates, exact in ((grow, 11.0), (drain, -3.0)):
        mean, se = np.mean(rates), np.std(rates, ddof=1) / np.sqrt(seeds)
        assert abs(mean - exact) <= stats.t.ppf(0.975, seeds - 1) * se + 0.05, (rates, exact)


def test_the_runs_on_two_processes_give_the_answer_of_one_after_the_other():
    question = ("mmc", list(DEFAULTS), [], 1, "none,backoff", "4,8")
    one, one_series = recovery_question(*question, jobs=1)
    two, two_series = recovery_question(*question, jobs=2)
    assert json.dumps(two) == json.dumps(one)
    assert two_series.keys() == one_series.keys()
    for policy, series in one_series.items():
        assert series.keys() == two_series[policy].keys()
        for k, v in series.items():
            assert np.array_equal(np.asarray(two_series[policy][k]), np.asarray(v), equal_nan=True), (policy, k)
