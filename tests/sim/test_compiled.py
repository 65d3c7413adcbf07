"""The compiled core (``python -m sim.build``) gives the numbers of the source, bit for bit: a sample of presets and
the engine's randomized differential schedules run in a fresh process compiled and again with ``SCALESIM_PURE=1``,
and their JSON output matches exactly. Skipped, saying why, where nothing is compiled.

``python -m tests.sim.test_compiled`` prints the sample's JSON (what each process of the test prints)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import sim
from sim import engine
from tests.support import ROOT, SWITCHES, schedule_run

# (preset, overrides): every model, short runs; the loadtests and mmc through the compiled per-call path, on the
# general event path (shortcuts = none) and with every shortcut
SAMPLE = (
    ("loadtest-remote", ["duration_s=30", "warmup_s=10", "clients.count=2", "clients.in_flight=200"]),
    ("loadtest-spawn", ["duration_s=30", "warmup_s=10", "clients.count=2", "clients.in_flight=300"]),
    ("loadtest-copies", ["duration_s=20", "warmup_s=5", "clients.count=3", "function.copies=3"]),
    ("loadtest-batching", ["duration_s=30", "warmup_s=10", "clients.count=2"]),
    ("loadtest-server", ["duration_s=20", "warmup_s=5", "clients.count=2", "clients.in_flight=100"]),
    # open-loop arrivals past the start limit, its rate ramping under the backlog and relaxing after (sim/limiter.py,
    # models/inputs/platform/startlimit.py)
    (
        "loadtest-spawn",
        [
            "load=arrivals",
            "arrivals.rate=1400",
            "duration_s=20",
            "warmup_s=5",
            "limits.start_ramp_per_s=40",
            "limits.start_rate_max=1000",
            "limits.start_relax_per_s=20",
            "arrivals.shape=bursts(20, 12, 0)",
        ],
    ),
    ("mmc", ["duration_s=2000", "warmup_s=100", "shortcuts=none"]),
    ("mmc", ["duration_s=2000", "warmup_s=100"]),
    ("mmc", ["duration_s=500", "warmup_s=0", "function.containers=100", "arrivals.rate=95", "shortcuts=none"]),
    ("sandboxes-v1", ["sandboxes.count=2000", "fleet.workers=200"]),
    ("coldstart-torch", []),
)
# the engine's randomized schedules (tests/sim/test_engine.py): (seed, near, log2_per_s, grid, burst, inline)
SCHEDULES = ((1, 0, 8, 0.25, 300, 64), (2, 16, -2, 1 / 1024, 800, 1), (3, 1024, 12, 0.1, 1500, 0))


def sample() -> dict:
    """The sample's metrics (wall-clock figures left out) and schedules, and the modules that ran compiled."""
    from models.runs import load_scenario, run_scenario

    runs = []
    for name, sets in SAMPLE:
        metrics = run_scenario(load_scenario(name, sets, []), seed=7)
        runs.append({k: v for k, v in metrics.items() if "wall" not in k})
    saved = engine.NEAR, engine.BUCKETS_PER_S, engine.INLINE
    try:
        schedules = [
            schedule_run(seed, calendar, lines, near, 2.0**log2, grid, burst, inline)
            for seed, near, log2, grid, burst, inline in SCHEDULES
            for calendar, lines in SWITCHES
        ]
    finally:
        engine.NEAR, engine.BUCKETS_PER_S, engine.INLINE = saved
    return {"compiled": sim.compiled(), "runs": runs, "schedules": schedules}


def _child(pure: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != sim.PURE_ENV}
    if pure:
        env[sim.PURE_ENV] = "1"
    cmd = [sys.executable, "-m", "tests.sim.test_compiled"]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


@pytest.mark.slow
def test_the_compiled_core_gives_the_numbers_of_the_source_bit_for_bit():
    if not sim.compiled():
        pytest.skip("nothing is compiled here (python -m sim.build builds the compiled core)")
    compiled, source = _child(pure=False), _child(pure=True)
    assert compiled.pop("compiled") == list(sim.COMPILED) and source.pop("compiled") == []
    assert len(compiled["runs"]) == len(SAMPLE)
    for (name, sets), a, b in zip(SAMPLE, compiled["runs"], source["runs"], strict=True):
        assert a == b, (name, sets)
    assert compiled["schedules"] == source["schedules"]


def test_scalesim_pure_imports_the_source_and_compiled_says_so(monkeypatch):
    monkeypatch.setenv(sim.PURE_ENV, "1")
    assert sim.pure() and sim.compiled() == []
    monkeypatch.setenv(sim.PURE_ENV, "0")
    assert not sim.pure()
    import models.inputs

    spec = sim._SourceOnly.find_spec("models.inputs.records", models.inputs.__path__)
    assert spec is not None and spec.origin == str(ROOT / "models" / "inputs" / "records.py")
    assert sim._SourceOnly.find_spec("sim.engine", sim.__path__) is None  # not compiled: Python's own finders


if __name__ == "__main__":
    print(json.dumps(sample()))
