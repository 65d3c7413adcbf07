"""The model against queueing theory (docs/sources.md §4), with tolerances from CIs over replications; and Little's law
as an exact accounting identity between the reported metrics of any run, for every approach."""

from __future__ import annotations

import numpy as np
import pytest

from models.inputs import loadtest
from models.inputs.summary import Window, summarize
from tests.support import ci95, columns, erlang_c_wait, preset


@pytest.mark.slow
@pytest.mark.parametrize("recursion", [True, False], ids=["recursion", "events"])  # models/inputs/platform/fifo.py
@pytest.mark.parametrize("lam, c", [(5.0, 10), (8.0, 10), (9.0, 10)])
def test_mmc_mean_wait_matches_erlang_c(lam, c, recursion, monkeypatch):
    on = "shortcuts=all" if recursion else "shortcuts=all,-fifo"
    sc = preset("mmc", f"arrivals.rate={lam}", f"function.containers={c}", "duration_s=6000", "warmup_s=500", on)
    waits = [loadtest.run(sc, seed=s)["wait_mean_s"] for s in range(12)]
    mean, half = ci95(waits)
    theory = erlang_c_wait(lam, 1.0, c)
    assert abs(mean - theory) <= half, f"ρ={lam / c}: simulated {mean:.4f} ± {half:.4f}, Erlang C {theory:.4f}"


@pytest.mark.slow
@pytest.mark.parametrize("reference", ["heapq_mmc", "simpy_mmc", "engine_mmc"])
def test_bench_reference_queues_are_mmc(reference):
    # the speed bench's yardsticks (experiments/bench/yardsticks.py) are M/M/c queues: a ratio to them means something
    from experiments.bench import yardsticks

    queue = getattr(yardsticks, reference)
    waits = [queue(8.0, 10, 1.0, 6000.0, seed)[1] for seed in range(12)]
    mean, half = ci95(waits)
    theory = erlang_c_wait(8.0, 1.0, 10)
    assert abs(mean - theory) <= half, f"{reference}: {mean:.4f} ± {half:.4f}, Erlang C {theory:.4f}"


def test_mm1_time_in_system():
    sc = preset("mmc", "arrivals.rate=0.7", "function.containers=1", "duration_s=20000", "warmup_s=1000")
    w = [loadtest.run(sc, seed=s)["wait_mean_s"] + 1.0 for s in range(10)]  # + E[service]
    mean, half = ci95(w)
    assert abs(mean - 1 / (1.0 - 0.7)) <= half


def test_littles_law_in_steady_state():
    # L (time-average of calls in flight over the window) against λ·W (arrival rate in the window × mean time in
    # system of the calls that arrived in it): equal in steady state up to edge effects, which cancel in expectation
    # (what is in flight at the window's start and is not counted in λ matches, on average, what is still in flight
    # at its end and is counted in W); so their gap's CI over replications must cover 0. And L against M/M/c.
    lam, c = 8.0, 10
    gaps, ls = [], []
    for seed in range(12):
        m = loadtest.run(preset("mmc", f"arrivals.rate={lam}", "duration_s=6000", "warmup_s=500"), seed=seed)
        gaps.append(m["calls_in_flight_mean"] - m["calls_issued_per_s"] * m["calls_time_in_system_mean_s"])
        ls.append(m["calls_in_flight_mean"])
    mean, half = ci95(gaps)
    assert abs(mean) <= half
    mean, half = ci95(ls)
    assert abs(mean - lam * (erlang_c_wait(lam, 1.0, c) + 1.0)) <= half


# Small versions of the reference load test (closed loop) and open-loop arrivals, for every approach that allows
# each; the extra settings make some calls fail (a rejection or a failed item), since failed calls are in the system
# too, until they are back as failures.
SMALL = ("clients.count=2", "clients.in_flight=200", "duration_s=20")
OPEN = ("load=arrivals", "arrivals.rate=50", "duration_s=30", "warmup_s=5")
FAILING = (
    ("remote", "closed", (*SMALL, "limits.sync_accept_burst=300")),  # 100 of the first 400 calls rejected
    ("batching", "closed", (*SMALL, "batching.round_items=200", "batching.item_failure_prob=0.01")),  # chunks 32, 8
    ("remote", "open", (*OPEN, "limits.sync_accept_rate=30", "limits.sync_accept_burst=10")),
)
LITTLE = [
    *FAILING,
    ("spawn", "closed", SMALL),
    ("copies", "closed", (*SMALL, "function.copies=2")),
    ("server", "closed", SMALL),  # 503s retried until the first container is ready
    ("spawn", "open", OPEN),
    ("copies", "open", OPEN),
    ("server", "open", OPEN),
]


@pytest.mark.parametrize("approach, load, sets", LITTLE, ids=[f"{a}-{load}" for a, load, _ in LITTLE])
def test_littles_law_holds_between_the_reported_metrics(approach, load, sets):
    # Little's law as an accounting identity, exact for any run (no steady state needed), in each unit the metrics
    # use (calls: items; inputs: a batched chunk is one). Over a window [s, e): L·T = λ·T·W − (time past e of the
    # calls issued in the window) + (time in the window of the calls issued before s), T = e − s. Over a window that
    # holds the whole run every call issued in it is back inside it and L = λW exactly. Both up to float rounding.
    sc = preset(f"loadtest-{approach}", *sets)
    m = loadtest.run(sc, seed=0, records=True)
    a = columns(m["records"])
    assert m["calls_in_flight"] == 0  # W is over calls that are back: the drain brings them all back
    if (approach, load, sets) in FAILING:
        assert m["errors_total"] > 0  # failed calls were in the system too, until they came back failed
    s, e = sc.warmup_s, sc.duration_s
    issued, back = a["issued"], a["finished"]
    whole = summarize(a, Window(0.0, float(back.max()) + 1.0))
    for unit, weight in (("calls", a["items"]), ("inputs", np.ones(len(issued)))):
        inside = (issued >= s) & (issued < e)
        past_end = np.sum(weight[inside] * np.maximum(back[inside] - e, 0.0))
        before = issued < s
        in_window_from_before = np.sum(weight[before] * np.maximum(np.minimum(back[before], e) - s, 0.0))
        lam, w, ell = (m[f"{unit}_{k}"] for k in ("issued_per_s", "time_in_system_mean_s", "in_flight_mean"))
        assert ell * (e - s) == pytest.approx(lam * (e - s) * w - past_end + in_window_from_before, rel=1e-9)
        lam, w, ell = (whole[f"{unit}_{k}"] for k in ("issued_per_s", "time_in_system_mean_s", "in_flight_mean"))
        assert ell == pytest.approx(lam * w, rel=1e-9), unit


def test_batching_ideal_follows_order_statistics():
    sc = preset("loadtest-batching")
    # 8 clients × 1,000 items per round; a round lasts E[max of 1,000 uniform(1, 10)] = 1 + 9·1000/1001
    assert sc.ideal_calls_per_s() == pytest.approx(8 * 1000 / (1 + 9 * 1000 / 1001))
    assert preset("loadtest-spawn").ideal_calls_per_s() == pytest.approx(8000 / 5.5)
