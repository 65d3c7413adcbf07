"""How calls leave a client (models/inputs/callers/mapcall.py, models/inputs/callers/clients.py): ``.map``'s requests of
49 one at a time, ``.spawn_map``'s 256 at once, their retries, and the HTTP/2 stream cap of single calls."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from models.inputs import loadtest
from models.inputs.callers.mapcall import POLICIES, MapCalls
from models.inputs.platform.function import ASYNC, SYNC
from models.inputs.platform.overhead_params import OverheadParams
from models.runs import load_scenario
from sim.dists import Constant
from sim.engine import Sim
from sim.rng import Streams

# one client, no limits, room for every call, constant legs of 0.1 s each way and 1 s of work
FREE = [
    "clients.count=1",
    "limits.enabled=false",
    "function.containers=4",
    "function.max_inputs=1000",
    "function.target_inputs=1000",
    "overhead.submit=constant(0.1)",
    "overhead.result=constant(0.1)",
    "work=uniform(0.5, 1.5)",
    "duration_s=60",
    "warmup_s=20",
]


def run(preset: str, sets: list[str], seed: int = 0) -> dict:
    return loadtest.run(load_scenario(preset, sets), seed=seed)


def test_map_sends_49_inputs_per_round_trip():
    """One pump, a full queue: 49 inputs every request round trip (0.2 s), whatever the calls in flight allow."""
    m = run("loadtest-remote", [*FREE, "clients.api=map", "clients.in_flight=1000"])
    assert m["steady_calls_per_s"] == pytest.approx(49 / 0.2, rel=0.02)
    single = run("loadtest-remote", [*FREE, "clients.in_flight=1000"])
    assert single["steady_calls_per_s"] == pytest.approx(1000 / 1.2, rel=0.02)  # one request per call: no pump


def test_map_keeps_at_most_1000_outstanding():
    """With more calls in flight than .map's 1,000 outstanding, the rest wait at the client: the same rate as 1,000
    when the pump does not bind (legs of 0)."""
    free = [s for s in FREE if not s.startswith("overhead.")]
    free += ["overhead.submit=constant(0)", "overhead.result=constant(0)"]
    capped = run("loadtest-remote", [*free, "clients.api=map", "clients.in_flight=3000"])
    assert capped["steady_calls_per_s"] == pytest.approx(1000 / 1.0, rel=0.02)
    assert capped["added_latency_p50_s"] == pytest.approx(2.0, rel=0.02)  # two calls wait for each place


def test_spawn_map_sends_256_requests_at_once():
    m = run("loadtest-spawn", [*FREE, "clients.api=map", "clients.in_flight=3000"])
    assert m["steady_calls_per_s"] == pytest.approx(256 / 0.2, rel=0.02)  # the closed loop alone: 2,500/s


def test_map_retries_every_rejection_and_fails_none():
    """Eight .map callers against the sync accept limit: no call fails, every rejection is retried, and the steady
    rate is the accept limit's."""
    m = run("loadtest-remote", ["clients.api=map", "duration_s=120", "warmup_s=60"])
    assert m["errors_total"] == 0 and m["retries"] > 0 and m["rejections_by_kind"]["rate_limited"] == m["retries"]
    assert 150 < m["steady_calls_per_s"] <= 200 * 1.02
    single = run("loadtest-remote", ["duration_s=120", "warmup_s=60"])
    assert single["errors_total"] > 0  # a single .remote is not retried


def test_retry_waits_double_to_the_cap():
    """A request rejected every time is tried at 0.1, 0.2, 0.4, ... s apart, at most the style's cap (no jitter)."""
    sim = Sim()
    tries: list[float] = []

    def offer(call: int) -> str | None:
        tries.append(sim.now)
        return "rate_limited"

    legs = OverheadParams(submit=Constant(0.0), result=Constant(0.0))
    calls = MapCalls(sim, legs, Streams(0), SYNC, offer, lambda call, kind, delay: None)
    calls.put(0, 0)
    sim.run(until=100.0)
    gaps = [b - a for a, b in itertools.pairwise(tries)]
    expected = [min(15.0, 0.1 * 2**k) for k in range(len(gaps))]
    assert gaps == pytest.approx(expected)
    assert max(gaps) == POLICIES[SYNC].retry_max_s and POLICIES[ASYNC].retry_max_s == 30.0


def test_streams_cap_single_calls_in_flight():
    """Ten streams for a hundred calls in flight: ten at a time, each a round trip of 1.2 s."""
    m = run("loadtest-remote", [*FREE, "clients.in_flight=100", "clients.streams=10"])
    assert m["steady_calls_per_s"] == pytest.approx(10 / 1.2, rel=0.02)


@pytest.mark.parametrize(
    "sets, words",
    [
        (["clients.api=map"], "clients.api"),
        (["clients.api=mapp"], "clients.api"),
        (["clients.streams=-1"], "clients.streams"),
    ],
)
def test_bad_caller_keys(sets, words):
    args = [a for s in sets for a in ("--set", s)]
    r = subprocess.run(
        [sys.executable, "-m", "experiments.run", "loadtest-server", *args], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1
