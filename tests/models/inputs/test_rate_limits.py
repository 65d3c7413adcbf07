"""What a caller does when the input plane refuses a call (models/inputs/callers/clients.py ``on_rate_limit``), and what
that does to the answers at scale: no cliff in a sweep over clients that the limits do not explain."""

from __future__ import annotations

import itertools

import pytest

from models.inputs import loadtest
from models.inputs.callers.retries import THROTTLE_FLOOR_S
from models.runs import load_scenario

# a Function that accepts one synchronous call a second (a burst of 1) and runs calls of exactly 1 s: the second of
# two calls made at once is refused
TIGHT = [
    "load=clients",
    "clients.count=1",
    "clients.in_flight=2",
    "clients.reissue=false",
    "work=constant(1)",
    "overhead.submit=constant(0)",
    "overhead.result=constant(0)",
    "limits.sync_accept_rate=1",
    "limits.sync_accept_burst=1",
    "function.containers=1",
    "duration_s=30",
]


def run(preset: str, sets: list[str], seed: int = 0) -> dict:
    return loadtest.run(load_scenario(preset, sets, []), seed=seed, records=True)


def test_a_bare_refusal_raises_and_a_retry_instruction_is_followed_after_its_wait():
    raised = run("loadtest-remote", TIGHT)
    assert raised["errors_by_kind"] == {"rate_limited": 1} and raised["calls_completed"] == 1
    for after, waited in ((2.5, 2.5), (0.01, THROTTLE_FLOOR_S)):  # modal waits at least 0.1 s
        m = run("loadtest-remote", [*TIGHT, "clients.on_rate_limit=retry_after", f"clients.retry_after_s={after}"])
        assert m["errors"] == 0 and m["calls_completed"] == 2 and m["retries"] >= 1
        recs = m["records"].sort_values("issued")
        late = recs["finished"].max() - recs["issued"].max()  # refused at 0, tried again after each wait until a
        tries = m["retries"]  # token: a second at the accept rate of 1/s; then it runs for 1 s
        assert late == pytest.approx(tries * waited + 1.0, rel=1e-9)
        assert (tries - 1) * waited < 1.0 <= tries * waited + 1e-9


def test_the_client_stops_following_retry_instructions_at_max_throttle_wait():
    sets = [*TIGHT, "clients.on_rate_limit=retry_after", "clients.retry_after_s=0.3", "clients.max_throttle_wait_s=0.5"]
    m = run("loadtest-remote", sets)
    # tries at 0 and 0.3; the next would be at 0.6 >= 0.5: refused for good, raised to the caller (retry = none)
    assert m["errors_by_kind"] == {"rate_limited": 1} and m["retries"] == 1
    # past the wait, the caller's own retry policy takes the refusal
    m = run("loadtest-remote", [*sets, "clients.retry=fixed", "clients.retry_delay_s=2"])
    assert m["errors"] == 0 and m["calls_completed"] == 2


def test_map_calls_and_the_server_ignore_it():
    for preset, sets in (("loadtest-remote", ["clients.api=map"]), ("loadtest-server", [])):
        base = [*sets, "clients.count=2", "duration_s=15"]
        a, b = run(preset, base), run(preset, [*base, "clients.on_rate_limit=retry_after"])
        assert {k: v for k, v in a.items() if k not in ("wall_s", "records")} == {
            k: v for k, v in b.items() if k not in ("wall_s", "records")
        }


CLIENTS = (4, 8, 16, 32, 40, 48, 64)
PRESETS = {
    "loadtest-spawn": ["clients.in_flight=200"],
    "loadtest-copies": ["clients.in_flight=200"],
    "loadtest-batching": [],
}
TOL = 0.02  # common random numbers: what is left is the runs' own noise


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_calls_back_never_fall_with_more_clients_unless_a_limit_refuses_more(preset):
    """Calls back per second, over a sweep of clients (60 s, seed 0): more clients bring fewer calls back only where
    the accept limits refuse more calls (the limit that binds harder: a refused chunk delays its client's round,
    or, when a refusal raises, ends its client); when the client follows a retry instruction nothing fails."""
    rows = {}
    for on in ("retry_after", "raise"):
        for n in CLIENTS:
            sets = [*PRESETS[preset], f"clients.count={n}", f"clients.on_rate_limit={on}", "duration_s=60"]
            m = loadtest.run(load_scenario(preset, sets, []), seed=0)
            rows[on, n] = (m["calls_back_per_s"], sum(m["rejections_by_kind"].values()), m["errors"])
    for on in ("retry_after", "raise"):
        for a, b in itertools.pairwise(CLIENTS):
            back_a, refused_a, errors_a = rows[on, a]
            back_b, refused_b, errors_b = rows[on, b]
            if on == "retry_after":
                assert errors_a == errors_b == 0
            if back_b < (1 - TOL) * back_a:
                assert refused_b > refused_a, f"{on}: {a} → {b} clients fell from {back_a:.0f} to {back_b:.0f}/s"
