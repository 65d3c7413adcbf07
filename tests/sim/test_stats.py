"""Streaming summaries: the log-spaced histogram's stated error bound, and a run's metrics folded in chunks while it
goes against the same metrics computed from its whole table of records."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.inputs import loadtest, parts
from models.inputs.records import CallLog
from models.inputs.summary import Window, summarize
from sim.stats import LogHistogram, percentiles
from tests.support import columns, examples, preset

QS = (0, 1, 50, 90, 99, 99.9, 100)


def assert_within_bound(values: np.ndarray, h: LogHistogram) -> None:
    """|estimate − exact| ≤ α · max(|x_lo|, |x_hi|) + ZERO, x_lo and x_hi the order statistics np.percentile uses."""
    xs = np.sort(values)
    estimates = h.percentiles("x", QS)
    for q, exact in zip(QS, np.percentile(values, QS), strict=True):
        rank = q / 100 * (len(xs) - 1)
        scale = max(abs(xs[math.floor(rank)]), abs(xs[math.ceil(rank)]))
        bound = h.alpha * scale * (1 + 1e-9) + h.ZERO
        assert abs(estimates[f"x_p{q}_s"] - exact) <= bound, (q, estimates[f"x_p{q}_s"], exact)


@pytest.mark.parametrize(
    "draw",
    [
        lambda r: r.lognormal(0.0, 2.0, 100_000),  # latencies over many decades
        lambda r: r.exponential(1.0, 50_001) - 0.3,  # both signs
        lambda r: np.concatenate([np.zeros(1000), r.uniform(0, 1e-10, 500), r.pareto(1.2, 10_000)]),  # zeros, tail
        lambda r: np.full(7, 0.236),  # one value
    ],
    ids=["lognormal", "signed", "zeros-and-tail", "constant"],
)
def test_histogram_percentiles_are_within_the_stated_bound(draw):
    values = draw(np.random.default_rng(1))
    h = LogHistogram()
    for part in np.array_split(values, 7):  # in parts, as a run folds its chunks
        h.add(part)
    assert len(h) == len(values)
    assert_within_bound(values, h)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.floats(-1e9, 1e9, allow_nan=False), min_size=1, max_size=300))
def test_histogram_bound_holds_for_any_values(values):
    h = LogHistogram()
    h.add(np.array(values))
    assert_within_bound(np.array(values), h)


def test_an_empty_histogram_has_no_percentiles():
    assert LogHistogram().percentiles("x") == percentiles(np.array([]), "x")


def test_a_run_folded_in_chunks_gives_the_metrics_of_its_whole_table(monkeypatch):
    # small chunks so that the run folds many times and reuses rows
    monkeypatch.setattr(CallLog, "CHUNK", 97)
    sc = preset("loadtest-spawn", "duration_s=20", "clients.count=2", "clients.in_flight=300")
    streamed = loadtest.run(sc, seed=3)
    kept = loadtest.run(sc, seed=3, records=True)
    a = columns(kept.pop("records"))
    whole = summarize(a, Window(sc.warmup_s, sc.duration_s))
    for m in (streamed, kept):
        m.pop("wall_s")
    assert streamed == kept  # keeping the records changes nothing
    exact = percentiles(
        (a["finished"] - a["issued"] - a["work"])[
            a["ok"] & (a["issued"] >= sc.warmup_s) & (a["issued"] < sc.duration_s) & ~np.isnan(a["finished"])
        ],
        "added_latency",
    )
    for k, v in whole.items():
        if k in exact:
            assert v == pytest.approx(exact[k], rel=LogHistogram.ALPHA), k
        else:
            assert streamed[k] == pytest.approx(v, rel=1e-12), k  # counts, sums and means: exact up to rounding


def test_calls_still_out_at_the_end_are_folded_in_from_reused_rows_as_from_kept_ones(monkeypatch):
    # an overloaded queue cut off with calls pending: rows are reset as they are folded, reused, and at the end the
    # calls still out are folded in (the free rows, reset too, are not calls)
    monkeypatch.setattr(CallLog, "CHUNK", 97)
    sc = preset("mmc", "duration_s=500", "warmup_s=0", "drain_s=0", "arrivals.rate=11", "shortcuts=none")
    streamed = loadtest.run(sc, seed=1)
    kept = loadtest.run(sc, seed=1, records=True)
    a = columns(kept.pop("records"))
    for m in (streamed, kept):
        m.pop("wall_s")
    assert streamed["calls_in_flight"] == int(np.isnan(a["finished"]).sum()) > 100
    assert streamed == kept


def test_a_long_run_keeps_rows_only_for_what_is_in_flight(monkeypatch):
    logs: list[CallLog] = []

    class Watched(CallLog):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            logs.append(self)

    monkeypatch.setattr(parts, "CallLog", Watched)
    m = loadtest.run(preset("mmc"), seed=0)  # about 180,000 calls, a handful in flight at a time
    (log,) = logs
    assert m["inputs"] > 5 * CallLog.CHUNK
    assert len(log) <= CallLog.CHUNK + 1000  # the rows of one chunk waiting to be folded, and those in flight


def test_mser5_cuts_a_warm_up_and_leaves_a_steady_series():
    from sim.stats import mser5

    rng = np.random.default_rng(0)
    steady = rng.poisson(500, 200).astype(float)
    assert mser5(steady) <= 20  # a stationary series: little or nothing cut (MSER may trim a noisy start)
    ramp = np.concatenate([np.linspace(0, 500, 30), rng.poisson(500, 170)])
    assert 20 <= mser5(ramp) <= 45  # the ramp's 30 bins, to the batch of 5
    assert mser5(np.ones(9)) == 0  # under two batches: nothing cut


def test_mser5_says_when_a_series_has_not_settled():
    from sim.stats import mser5, mser5_settled

    rng = np.random.default_rng(0)
    steady = rng.poisson(500, 200).astype(float)
    assert mser5_settled(steady, mser5(steady))
    # a ramp over 60% of the series: MSER-5 cuts at most half, and says it stopped there
    late = np.concatenate([np.linspace(0, 500, 120), rng.poisson(500, 80)])
    assert mser5(late) == 100 and not mser5_settled(late, mser5(late))
    assert not mser5_settled(np.ones(9), 0)  # under two batches: nothing can be detected


def test_time_bins_integrate_a_step_function_per_bin():
    from sim.stats import TimeBins, window_bins

    assert window_bins(10.0, 130.0) == (1.0, 120) and window_bins(0.0, 5000.0) == (5.0, 1000)
    bins = TimeBins(10.0, 130.0)
    rng = np.random.default_rng(1)
    changes = np.sort(rng.uniform(0.0, 200.0, 50))
    levels = rng.integers(0, 9, 50)
    for t0, t1, level in zip(changes[:-1], changes[1:], levels, strict=False):
        bins.add(t0, t1, int(level))
    # the same integral by brute force: the level at each of 1,000 points of every bin
    grid = 10.0 + (np.arange(120 * 1000) + 0.5) / 1000
    at = np.searchsorted(changes, grid, side="right") - 1
    level = np.where((at >= 0) & (at < 49), levels[np.clip(at, 0, 48)], 0)
    assert np.allclose(bins.sums, level.reshape(120, 1000).mean(axis=1), atol=1e-2)
    # a step not yet ended is added to a copy
    before = bins.sums.copy()
    after = bins.upto(125.5, 200.0, 4)  # to the window's end, 130 s: half of bin [125, 126), the 4 after it whole
    assert np.allclose(after - before, [0] * 115 + [2, 4, 4, 4, 4])
    assert np.array_equal(bins.sums, before)
