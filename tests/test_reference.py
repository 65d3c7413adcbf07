"""The calibrated model against the reference load test (domain.md §1), and the baseline's failure."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.fit import OUT, REFERENCE, TOLERANCE
from models.inputs import loadtest
from models.inputs.loadtest import Scenario
from sim.scenario import build, read_toml
from tests.conftest import preset


@pytest.mark.parametrize("approach", sorted(REFERENCE))
def test_fitted_approaches_land_within_the_bands(approach):
    runs = [loadtest.run(preset(f"loadtest-{approach}"), seed=s) for s in range(3)]
    for key, tol in TOLERANCE.items():
        got = np.mean([r[key] for r in runs])
        want = REFERENCE[approach][key]
        assert abs(got - want) <= tol * want, f"{approach} {key}: {got:.4g} vs measured {want:g}"
    assert all(r["errors"] == 0 for r in runs)
    ideal = runs[0]["ideal_calls_per_s"]
    assert ideal == pytest.approx(1455, rel=0.01)


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
