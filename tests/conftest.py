"""Shared helpers: build scenarios from presets or plain dicts; a run's records as arrays.

``scenario(tree)`` builds a scenario with the switchable mechanisms off (calibration/candidates.py ``OFF``: no
per-call overhead, a plain start bucket, one container per decision sized to the inputs in the system, no server CPU)
beneath whatever the tree sets: the exact traces and invariants here check the machinery, and each mechanism is
switched on explicitly where it is tested (tests/test_mechanisms.py). ``preset`` keeps the code's defaults (the
fitted model).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibration.candidates import OFF
from models.inputs.loadtest import Scenario
from models.runs import load_scenario
from sim.scenario import build, merge, parse_value, set_dotted

MECHANISMS_OFF: dict = {}
for _key, _value in OFF.items():
    set_dotted(MECHANISMS_OFF, _key, parse_value(_value))


def mechanisms_off(tree: dict) -> dict:
    """``tree`` over MECHANISMS_OFF: every mechanism the tree does not set is off."""
    return merge(MECHANISMS_OFF, tree)


def scenario(tree: dict) -> Scenario:
    """The scenario of ``tree`` with every mechanism it does not set switched off."""
    return build(Scenario, mechanisms_off(tree))


def preset(name: str, *sets: str) -> Scenario:
    return load_scenario(name, list(sets), [])


def columns(records: pd.DataFrame) -> dict[str, np.ndarray]:
    """A load test's records (``run(..., records=True)["records"]``) as one numpy array per column, the form
    ``models.inputs.summary.summarize`` takes."""
    return {c: records[c].to_numpy() for c in records.columns}


@pytest.fixture
def tiny() -> dict:
    """One client, a fixed warm pool, constant work, no limits: every time in the trace is exact."""
    return {
        "approach": "remote",
        "work": "constant(2)",
        "duration_s": 5.0,
        "drain_s": 100.0,
        "function": {"containers": 1, "max_inputs": 2},
        "limits": {"enabled": False},
        "clients": {"count": 1, "in_flight": 3},
    }
