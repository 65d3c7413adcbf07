"""Shared helpers: build scenarios from presets or plain dicts; a run's records as arrays."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from experiments.cli import load_scenario
from models.inputs.loadtest import Scenario
from sim.scenario import build


def scenario(tree: dict) -> Scenario:
    return build(Scenario, tree)


def preset(name: str, *sets: str) -> Scenario:
    return load_scenario(name, list(sets), [])


def columns(records: pd.DataFrame) -> dict[str, np.ndarray]:
    """A load test's records (``run(..., records=True)["records"]``) as one numpy array per column, the form
    ``models.inputs.records.summarize`` takes."""
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
