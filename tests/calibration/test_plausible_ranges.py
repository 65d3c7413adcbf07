"""The keys' declared plausible values (``param(plausible=...)``, what ``--uncertainty`` runs for container start and
sandbox creation) are what their fits and sources say: each a valid value of its key, the fitted ones as the fit
computes them."""

from __future__ import annotations

import re
import tomllib

import pytest

from calibration.coldstart import COLDSTART_FITTED, coldstart_bands
from experiments import uncertainty
from models.registry import MODELS
from models.runs import load_scenario
from models.sandboxes.planes.kubernetes import KubernetesParams
from models.sandboxes.planes.modal_v2 import SchedulerParams
from tests.support import ROOT

PRESETS = {"coldstart": "coldstart-torch", "sandboxes": "sandboxes-v2"}


def plausible(cls: type, key: str) -> tuple:
    return cls.__dataclass_fields__[key].metadata["plausible"]


@pytest.mark.parametrize("model", list(PRESETS))
def test_every_declared_value_is_a_valid_value_of_its_key_and_says_where_it_comes_from(model):
    declared = list(uncertainty.declared(MODELS[model].schema))
    assert declared
    for key, values, source in declared:
        assert source, key
        for v in values:
            load_scenario(PRESETS[model], [uncertainty.as_setting(key, v)], [])  # bad: ScenarioError naming the key


def test_the_v2_request_time_ranges_over_the_band_its_fit_reports():
    text = (ROOT / "calibration" / "params" / "sandboxes.toml").read_text()
    low, high = re.search(r"from ([\d.]+) to ([\d.]+) s: the figure bounds it", text).groups()
    assert plausible(SchedulerParams, "request_s") == (float(low), float(high))


def test_the_kubernetes_score_cost_ranges_over_the_ci_floors_pods_per_second():
    # docs/sources.md §2: 680–810 pods/s at 5,000 nodes; the cycle scores max(5, 50 − 5000/125)% = 500 nodes 16-way
    cycle = KubernetesParams().cycle_s
    rates = [1 / (cycle + 500 * x / 16) for x in plausible(KubernetesParams, "node_score_s")]
    assert rates == pytest.approx([810, 680], rel=2e-3)


@pytest.mark.slow
def test_the_fitted_container_start_keys_range_as_the_fit_computes_them():
    fitted = tomllib.loads((ROOT / "calibration" / "params" / "coldstart.toml").read_text())["coldstart"]
    bands = coldstart_bands(fitted, [0, 1, 2])
    schema = MODELS["coldstart"].schema
    for key in COLDSTART_FITTED:
        declared = next(v for k, v, _ in uncertainty.declared(schema) if k == f"coldstart.{key}")
        # a band at the fit's search box is the box (network_file_s was fitted at its least): not a value to run
        assert set(declared) == {v for v in bands[key] if v != fitted[key]}, key
