"""The calibrated model against the reference load test (domain.md §1): in sample (the figures the fit was fitted
to), out of sample (the measured figures it was not), and the baseline's failure.

calibration/fit.py fits four parameters to six figures only: calls/s and first 8,000 back of spawn, app copies and
server. Every other measured figure of domain.md §1 is a prediction: containers and added latency of spawn and app
copies, calls/s and containers of batching. Each is checked against the measurement with a band stated next to it;
where the model misses today the check is a strict xfail naming both figures, so it flags the day the model gets it.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from calibration.fit import OUT, REFERENCE, TOLERANCE
from models.inputs import loadtest
from models.inputs.loadtest import Scenario
from sim.scenario import build, read_toml
from tests.conftest import preset

SEEDS = range(3)  # the fit's seeds: the model's figure is its mean over them


@cache
def reference_runs(approach: str) -> tuple[dict, ...]:
    """The reference load test of ``approach`` over SEEDS (cached: the in- and out-of-sample checks share runs)."""
    return tuple(loadtest.run(preset(f"loadtest-{approach}"), seed=s) for s in SEEDS)


def model_figure(approach: str, key: str) -> float:
    return float(np.mean([r[key] for r in reference_runs(approach)]))


@pytest.mark.parametrize("approach", sorted(REFERENCE))
def test_in_sample_fitted_approaches_land_within_the_fit_bands(approach):
    # In sample: these are the fit's own targets and bands (calibration/fit.py), so this checks the fit still holds,
    # not that the model predicts anything.
    runs = reference_runs(approach)
    for key, tol in TOLERANCE.items():
        got = model_figure(approach, key)
        want = REFERENCE[approach][key]
        assert abs(got - want) <= tol * want, f"{approach} {key}: {got:.4g} vs measured {want:g}"
    assert all(r["errors_total"] == 0 for r in runs)  # measured: 0 errors
    ideal = runs[0]["ideal_calls_per_s"]
    assert ideal == pytest.approx(1455, rel=0.01)


# Out-of-sample bands. Rates: the fit's own band for calls/s (10%). Times (added latency percentiles): the fit's band
# for its time figure, first 8,000 back (20%); the measured percentiles are of one run, and the model's own
# seed-to-seed spread of them is about ±10% (spawn's p50 runs 3.7–4.6 s over seeds 0–2), so a single run may sit
# 10–15% off the mean by chance alone. Containers: 20% as well, since the peak is set by the same autoscaler pace
# (one container per decision) that sets first-back time, and never under one container (an integer count).
RATE, TIME, COUNT = 0.10, 0.20, 0.20


def band(key: str, want: float) -> float:
    if key == "containers_peak":
        return max(1.0, COUNT * want)
    return (RATE if key == "calls_per_s" else TIME) * want


def missed(model: float, measured: float, unit: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=f"model {model:g} {unit} vs measured {measured:g} {unit}; see issue 9")


# domain.md §1 "Measured", the cells the fit did not use. Model figures in the xfail reasons: mean over SEEDS, as
# measured when the checks were written.
OUT_OF_SAMPLE = [
    pytest.param("spawn", "containers_peak", 12, id="spawn-containers"),
    pytest.param("spawn", "added_latency_p50_s", 9.11, id="spawn-p50", marks=missed(4.33, 9.11, "s")),
    pytest.param("spawn", "added_latency_p90_s", 13.6, id="spawn-p90"),
    pytest.param("spawn", "added_latency_p99_s", 19.8, id="spawn-p99"),
    pytest.param("copies", "containers_peak", 19, id="copies-containers"),
    pytest.param("copies", "added_latency_p50_s", 0.20, id="copies-p50", marks=missed(0.0, 0.20, "s")),
    pytest.param("copies", "added_latency_p90_s", 1.48, id="copies-p90", marks=missed(0.33, 1.48, "s")),
    pytest.param("copies", "added_latency_p99_s", 5.65, id="copies-p99"),
    # Measured 800 calls/s equals batching's ideal, which a closed loop of ~10 s rounds completing inside 60 s cannot
    # reach (domain.md §1): the harness counted something else. The model's calls_per_s counts calls back in the
    # window (668, mean over SEEDS); its calls_issued_per_s is exactly 800 (six rounds of 8,000 items issued in 60 s).
    pytest.param("batching", "calls_per_s", 800, id="batching-calls-per-s", marks=missed(592, 800, "calls/s")),
    pytest.param("batching", "containers_peak", 6, id="batching-containers"),
]


@pytest.mark.parametrize("approach, key, measured", OUT_OF_SAMPLE)
def test_out_of_sample_prediction_of_a_measured_figure(approach, key, measured):
    got = model_figure(approach, key)
    assert abs(got - measured) <= band(key, measured), f"{approach} {key}: model {got:.4g} vs measured {measured:g}"


def test_the_baseline_fails_with_rate_limit_or_queue_full_errors():
    m = loadtest.run(preset("loadtest-remote"), seed=0)
    assert m["errors"] > 0
    assert set(m["errors_by_kind"]) <= {"rate_limited", "queue_full"}
    assert m["retries"] == 0 and m["calls_per_s"] < 0.2 * m["ideal_calls_per_s"]


def test_code_defaults_are_the_fitted_parameter_file():
    fitted = build(Scenario, read_toml(OUT))
    default = Scenario()
    assert fitted.limits == default.limits
    assert fitted.autoscaler == default.autoscaler
