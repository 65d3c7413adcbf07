"""Idle time is free (models/inputs/platform/autoscaler.py): decisions that cannot change anything are skipped, and
results are identical, bit for bit, to deciding at every grid point."""

from __future__ import annotations

import pytest

from experiments.bench.sections import SIMFAAS
from models.inputs import loadtest
from tests.support import preset

# SimFaaS's README example (experiments/bench/sections.py), shorter: scaling per request on a 0.05 s grid
PER_REQUEST = [s for s in SIMFAAS if not s.startswith("duration_s")]
CASES = [
    ("loadtest-spawn", []),
    ("loadtest-copies", ["clients.count=4", "function.copies=4"]),
    ("loadtest-remote", ["autoscaler.size_to=in_system"]),
    ("loadtest-batching", []),
    ("loadtest-server", ["duration_s=20"]),
    ("mmc", [*PER_REQUEST, "duration_s=5000"]),
    ("mmc", [*PER_REQUEST, "duration_s=3000", "autoscaler.scaledown_window_s=30", "arrivals.rate=9", "warmup_s=100"]),
    ("mmc", [*PER_REQUEST, "duration_s=3000", "autoscaler.scaledown_window_s=30", "arrivals.shape=sine(600, 0.8)"]),
    (
        "mmc",
        [
            "function.containers=0",
            "autoscaler.interval_s=1",
            "arrivals.shape=bursts(300, 30, 5)",
            "duration_s=3000",
            "autoscaler.scaledown_window_s=20",
            "autoscaler.buffer_containers=2",
            "autoscaler.min_containers=1",
            "autoscaler.max_containers=12",
        ],
    ),
]


def run(name: str, sets: list[str], skip: bool, seed: int = 1) -> dict:
    m = loadtest.run(preset(name, *sets, "shortcuts=all" if skip else "shortcuts=all,-idle_decisions"), seed=seed)
    m.pop("wall_s")
    assert skip or "idle_decisions" not in m.pop("shortcuts_used")
    m.pop("shortcuts_used", None)
    return m


@pytest.mark.parametrize("name, sets", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_skipping_idle_decisions_changes_no_result(name, sets):
    skipped, every = run(name, sets, True), run(name, sets, False)
    events = skipped.pop("events"), every.pop("events")
    assert skipped == every
    assert events[0] <= events[1]


def test_a_per_request_grid_costs_events_in_proportion_to_the_work():
    sets = [*PER_REQUEST, "duration_s=20000"]
    skipped, every = run("mmc", sets, True), run("mmc", sets, False)
    # about 18,000 calls: two call events each, and a decision only when one can act (every grid point: 400,000)
    assert every["events"] > 400_000 and skipped["events"] < 4 * skipped["inputs"]
    # SimFaaS's figures for this workload: a cold-start probability of about 0.0014, 1.80 inputs running
    assert skipped["cold_starts"] / skipped["inputs"] == pytest.approx(0.0014, abs=0.001)
    assert skipped["inputs_in_flight_mean"] == pytest.approx(1.8, rel=0.05)
