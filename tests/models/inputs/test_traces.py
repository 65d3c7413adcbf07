"""Exact event traces on tiny deterministic scenarios, read from the run's own records (``records=True``)."""

from __future__ import annotations

import numpy as np
import pytest

from models.inputs import loadtest
from models.inputs.summary import ERROR_KINDS
from models.runs import load_scenario
from tests.support import columns, scenario


def trace(tree: dict) -> tuple[dict, dict]:
    """Run and return (metrics, record arrays)."""
    m = loadtest.run(scenario(tree), seed=0, records=True)
    return m, columns(m["records"])


def test_closed_loop_on_a_warm_container(tiny):
    # 3 calls in flight, a container runs 2 at once, work 2 s: the third waits for the first slot.
    m, a = trace(tiny)
    assert a["issued"][:3].tolist() == [0, 0, 0]
    assert a["started"][:3].tolist() == [0, 0, 2]
    assert a["finished"][:3].tolist() == [2, 2, 4]
    # each return issues the next call at once, until the 5 s duration: issued at 0,0,0,2,2,4,4
    assert a["issued"].tolist() == [0, 0, 0, 2, 2, 4, 4]
    assert a["finished"].tolist() == [2, 2, 4, 4, 6, 6, 8]
    # calls: issued in the 5 s window and back ok (whenever: the run drains); calls_back: back inside the window
    assert m["calls"] == 7 and m["calls_back"] == 4
    assert m["first_n_back_s"] == 4.0 and m["sim_time_s"] == 8.0


def test_start_limiter_paces_starts(tiny):
    tiny["limits"] = {"start_rate": 1.0, "start_burst": 1.0}
    tiny["function"] = {"containers": 1, "max_inputs": 10}
    tiny["duration_s"] = 0.5
    _, a = trace(tiny)
    assert a["started"].tolist() == [0, 1, 2]  # one token now, then one per second


def test_accept_limits_reject_with_kinds(tiny):
    tiny["limits"] = {"sync_accept_burst": 2.0}
    tiny["function"] = {"containers": 1, "max_inputs": 10}
    m, a = trace(tiny)
    assert a["kind"][:3].tolist() == ["", "", "rate_limited"]
    assert m["errors_by_kind"] == {"rate_limited": 1}
    tiny["limits"] = {"sync_pending_cap": 1, "sync_accept_burst": 10.0}
    tiny["function"] = {"containers": 1, "max_inputs": 1}
    m, _ = trace(tiny)
    assert m["errors_by_kind"] == {"queue_full": 1}  # one running, one pending, the third finds the queue full


def test_backoff_retries_until_accepted(tiny):
    tiny["limits"] = {"sync_accept_burst": 1.0, "sync_accept_rate": 1.0}
    tiny["clients"] = {"count": 1, "in_flight": 2, "retry": "backoff", "backoff_base_s": 4.0}
    tiny["duration_s"] = 0.5
    m, a = trace(tiny)
    assert m["errors"] == 0 and m["retries"] == 1
    assert 2.0 <= a["started"][1] <= 4.0  # retried after 4 s × uniform(0.5, 1)


def test_autoscaler_cold_start_from_zero(tiny):
    tiny["function"] = {"max_inputs": 10}
    tiny["autoscaler"] = {"cold_start": "constant(3)", "interval_s": 1.0}
    _, a = trace(tiny)
    assert a["started"][:3].tolist() == [3, 3, 3]  # the first input triggers a cold start


def test_server_answers_503_until_a_container_is_ready(tiny):
    tiny["approach"] = "server"
    tiny["server"] = {"proxy_latency_s": 0.0}
    tiny["autoscaler"] = {"cold_start": "constant(3)"}
    tiny["clients"] = {"count": 1, "in_flight": 1, "retry": "backoff", "backoff_base_s": 2.0}
    tiny["duration_s"] = 1.0
    m, a = trace(tiny)
    # 503 at 0; retries after 2·u (u in [0.5, 1]) then 4·u ... until the container is ready at 3 s
    assert m["retries"] >= 1 and a["started"][0] >= 3.0
    assert a["finished"][0] == a["started"][0] + 2.0


def test_batching_chunk_is_its_slowest_item(tiny):
    tiny["approach"] = "batching"
    tiny["work"] = "uniform(1, 10)"
    tiny["batching"] = {"round_items": 10, "chunk_items": 4}
    tiny["function"] = {"containers": 1, "max_inputs": 10}
    m, a = trace(tiny)
    assert a["items"][:3].tolist() == [4, 4, 2]
    np.testing.assert_allclose(a["finished"][:3] - a["started"][:3], a["work"][:3])
    ok = a["kind"] == ""
    assert m["calls"] == int(a["items"][(a["issued"] < 5.0) & ok & ~np.isnan(a["finished"])].sum())
    assert m["calls_back"] == int(a["items"][(a["finished"] < 5.0) & ok].sum())


def test_errors_count_failures_back_in_the_window_like_calls(tiny):
    # Every chunk fails (item_failure_prob 1). Rounds of 3 items (chunks of 2 and 1), work 2 s: rounds go out at 0,
    # 2 and 4 s and fail at 2, 4 and 6 s. The window [2.5, 5) holds only the failures at 4 s: errors counts those
    # 3 calls (as calls counts successes back in the window); errors_total counts all 9 of the run.
    tiny["approach"] = "batching"
    tiny["warmup_s"] = 2.5
    tiny["batching"] = {"round_items": 3, "chunk_items": 2, "item_failure_prob": 1.0}
    tiny["function"] = {"containers": 1, "max_inputs": 10}
    m, a = trace(tiny)
    assert a["finished"].tolist() == [2, 2, 4, 4, 6, 6]
    assert m["calls"] == 0 and m["calls_back"] == 0
    assert m["first_n_back_s"] is None  # no call of the run succeeded
    assert m["errors"] == 3 and m["errors_by_kind"] == {"item_failed": 3}
    assert m["errors_total"] == 9


def test_error_kinds_are_exactly_the_kinds_the_model_produces(tiny):
    # One tiny scenario per way an input can fail; together they must produce every kind in ERROR_KINDS and no other.
    limited = {"sync_accept_burst": 2.0}
    queue_full = {"sync_pending_cap": 1, "sync_accept_burst": 10.0}
    cases = [
        {"limits": limited, "function": {"containers": 1, "max_inputs": 10}},  # rate_limited
        {"limits": queue_full, "function": {"containers": 1, "max_inputs": 1}},  # queue_full
        {"approach": "server", "autoscaler": {"cold_start": "constant(3)"}},  # http_503: no container ready yet
        {  # http_429: once the container is ready, retried requests find it at max_concurrency
            "approach": "server",
            "server": {"max_concurrency": 1},
            "clients": {"count": 1, "in_flight": 3, "retry": "backoff"},
        },
        {"approach": "batching", "batching": {"round_items": 3, "chunk_items": 2, "item_failure_prob": 1.0}},
        {"clients": {"count": 1, "in_flight": 3, "timeout_s": 1.0}},  # timeout: work 2 s, the caller waits 1 s
        {"faults": {"crash_at_s": 1.0, "crash_containers": 1}},  # container_crash: the inputs on it fail
    ]
    produced: set[str] = set()
    for case in cases:
        m, a = trace({**tiny, **case})
        # failed calls, rejected attempts; "abandoned" marks a timed-out attempt's row (the call goes on in another
        # row, and the run counts it in `abandoned`), not a call's error
        kinds = set(a["kind"][(a["kind"] != "") & (a["kind"] != "abandoned")]) | set(m["rejections_by_kind"])
        assert kinds, f"nothing failed or was rejected in {case}"
        produced |= kinds
    assert produced == set(ERROR_KINDS)


def test_the_binding_share_is_the_pending_share_of_the_windows_input_seconds(tiny):
    # Batching on one always-warm container that runs 2 chunks at once: chunks queue. The monitor's share for the
    # wait is (pending input-seconds) ÷ (running + pending input-seconds), both sampled; a chunk is one input, so it
    # must match the records, chunk by chunk; the fixed pool's wait is named for its containers.
    tiny.update(approach="batching", work="constant(2)", duration_s=20.0)
    tiny["batching"] = {"round_items": 64, "chunk_items": 8}
    tiny["function"] = {"containers": 1, "max_inputs": 2}
    m = loadtest.run(scenario(tiny), seed=0, records=True)
    r = m["records"]
    pending = (r["started"].clip(upper=20.0) - r["issued"]).clip(lower=0.0)[r["issued"] < 20.0].sum()
    running = (r["finished"].clip(upper=20.0) - r["started"].clip(upper=20.0)).clip(lower=0.0).sum()
    assert m["limit_share_containers"] == pytest.approx(pending / (pending + running), rel=0.1)
    assert m["limit_share_none"] == pytest.approx(running / (pending + running), rel=0.1)
    assert m["binding_limit"] == "containers"
    shares = [v for k, v in m.items() if k.startswith("limit_share_")]
    assert all(0 <= v <= 1 for v in shares) and sum(shares) == pytest.approx(1.0, rel=1e-9)


def test_the_binding_limit_is_named_for_its_cause():
    # a fixed pool, no autoscaler: its waits are the containers'
    assert loadtest.run(load_scenario("mmc", [], []), seed=0)["binding_limit"] == "containers"
    # spawn offered twice its accept rate, rejections not retried: the limit that drops calls binds, not the one
    # that delays the accepted ones
    sets = ["approach=spawn", "load=arrivals", "arrivals.rate=3000", "duration_s=20", "work=constant(1)"]
    m = loadtest.run(load_scenario("loadtest-spawn", sets, []), seed=0)
    assert m["errors_by_kind"].get("rate_limited", 0) > 0
    assert m["binding_limit"] == "accept_rate" and 0 < m["binding_share"] <= 1
