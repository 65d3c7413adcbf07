"""Invariants over Hypothesis-generated scenarios: no call lost, no negative wait, causality, no pool over its
limits. The input plane's are read from what a run reports (metrics, ``records=True``, ``series``), not from its
internals."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.inputs import loadtest
from models.inputs.monitor import REJECTION_LIMITS
from models.inputs.summary import ERROR_KINDS
from tests.conftest import columns, scenario

dists = st.sampled_from(["constant(1)", "uniform(0.5, 3)", "exponential(1)", "lognormal(1, 0.5)"])

scenarios = st.fixed_dictionaries(
    {
        "approach": st.sampled_from(["remote", "spawn", "batching", "server"]),
        "work": dists,
        "duration_s": st.floats(1, 20),
        "drain_s": st.sampled_from([0.0, 5.0, 300.0]),
        "function": st.fixed_dictionaries(
            {"max_inputs": st.integers(1, 20), "copies": st.integers(1, 3), "containers": st.sampled_from([0, 0, 2])}
        ),
        "limits": st.fixed_dictionaries(
            {
                "sync_accept_rate": st.floats(1, 100),
                "sync_accept_burst": st.floats(1, 50),
                "sync_pending_cap": st.integers(0, 50),
                "sync_in_system_cap": st.integers(0, 100),
                "start_rate": st.floats(0.5, 100),
                "start_burst": st.floats(1, 20),
            }
        ),
        "autoscaler": st.fixed_dictionaries(
            {
                "interval_s": st.floats(0.1, 5),
                "scaleup_step": st.integers(1, 4),
                "cold_start": dists,
                "scaledown_window_s": st.floats(2, 30),
                "max_containers": st.integers(0, 5),
            }
        ),
        "server": st.fixed_dictionaries({"max_concurrency": st.integers(0, 10)}),
        "clients": st.fixed_dictionaries(
            {
                "count": st.integers(1, 4),
                "in_flight": st.integers(1, 30),
                "retry": st.sampled_from(["none", "backoff"]),
                "connection_limit": st.integers(0, 10),
            }
        ),
        "batching": st.fixed_dictionaries(
            {
                "round_items": st.integers(1, 40),
                "chunk_items": st.integers(1, 10),
                "item_failure_prob": st.sampled_from([0.0, 0.1]),
            }
        ),
    }
)


def most_at_once(start: np.ndarray, end: np.ndarray) -> int:
    """The most intervals [start, end) open at one time (an end at t closes before a start at t opens)."""
    times = np.concatenate([start, end])
    steps = np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)])
    order = np.lexsort((steps, times))  # by time, ends (-1) first
    return int(np.cumsum(steps[order]).max(initial=0))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=scenarios, seed=st.integers(0, 2**32))
def test_every_call_is_accounted_for(tree, seed):
    series: dict = {}
    m = loadtest.run(scenario(tree), seed=seed, series=series, records=True)
    a = columns(m["records"])
    items, ok = a["items"], a["ok"]
    out = np.isnan(a["finished"])

    # completed + failed + never back = issued, by the metrics and by the records
    assert m["calls_issued"] == int(items.sum())
    assert m["calls_completed"] == int(items[ok & ~out].sum())
    assert m["errors_total"] == int(items[~ok & ~out].sum())
    assert m["calls_in_flight"] == int(items[out].sum())
    assert m["calls_completed"] + m["errors_total"] + m["calls_in_flight"] == m["calls_issued"]
    assert m["calls"] <= m["calls_completed"] and m["errors"] <= m["errors_total"]
    assert sum(m["errors_by_kind"].values()) == m["errors"] and set(m["errors_by_kind"]) <= set(ERROR_KINDS)
    # the run stops before its drain is over only once nothing is in flight
    if m["sim_time_s"] < tree["duration_s"] + tree["drain_s"]:
        assert m["calls_in_flight"] == 0
    # every rejected attempt was either retried (an attempt more) or ended its call with that kind
    rejected_finally = int(np.isin(a["kind"][~out], list(REJECTION_LIMITS)).sum())
    assert sum(m["rejections_by_kind"].values()) == m["retries"] + rejected_finally
    if tree["clients"]["retry"] == "backoff":  # rejections are retried forever: only a failed item ends a call
        assert set(a["kind"][~out & ~ok]) <= {"item_failed"}
    else:
        assert m["retries"] == 0

    # causality: issued ≤ started ≤ finished, and no negative wait or added latency
    started = ~np.isnan(a["started"])
    assert np.all(a["started"][started] >= a["issued"][started] - 1e-9)
    assert np.all(a["finished"][started & ~out] >= a["started"][started & ~out] - 1e-9)
    back_ok = ok & ~out
    assert np.all(a["finished"][back_ok] - a["issued"][back_ok] - a["work"][back_ok] >= -1e-9)
    assert m["wait_mean_s"] is None or m["wait_mean_s"] >= 0

    # no pool outgrows its limits, and nothing runs without room on a container
    server = tree["approach"] == "server"
    pools = 1 if server else tree["function"]["copies"]  # one Function per app copy; one proxy pool
    fixed = 0 if server else tree["function"]["containers"]  # the server's pool always autoscales
    cap = tree["autoscaler"]["max_containers"]
    if fixed:
        assert m["containers_peak"] == pools * fixed  # an always-warm pool neither grows nor shrinks
    elif cap:
        assert m["containers_peak"] <= pools * cap
    assert min(series["pending"], default=0) >= 0
    assert max(series["containers"], default=0) <= m["containers_peak"]
    per_container = tree["server"]["max_concurrency"] if server else tree["function"]["max_inputs"]
    if per_container:
        running_end = np.where(out, np.inf, a["finished"])
        assert most_at_once(a["started"][started], running_end[started]) <= m["containers_peak"] * per_container
        assert all(r <= c * per_container for r, c in zip(series["running"], series["containers"], strict=True))
