"""Demand shapes and trace replay (models/inputs/callers/demand.py): arrivals follow the rate they are given."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from experiments import run as run_cmd
from models.inputs import loadtest
from models.inputs.callers.demand import DAY_S, WEEK_S, Shape, generate_azure, parse_shape, read_azure
from tests.support import examples, preset

SAMPLE = "experiments/demand/azure-sample.csv"


def issued(sets: list[str], seed: int = 0):
    """Issue times of an open loop into warm containers (no waiting, so the arrivals are all there is)."""
    sc = preset("mmc", "warmup_s=0", "function.containers=50", "work=constant(0.01)", *sets)
    m = loadtest.run(sc, seed=seed, records=True)
    return m, m["records"]["issued"].to_numpy()


def test_steps_give_each_step_its_rate():
    # rate 10/s × (1, 3, 0.5) for 200 s each: Poisson counts, each within its 99.9% interval
    _, t = issued(["duration_s=600", "arrivals.rate=10", "arrivals.shape=steps(200, 1, 3, 0.5)"])
    for i, factor in enumerate((1, 3, 0.5)):
        n = ((t >= 200 * i) & (t < 200 * (i + 1))).sum()
        lo, hi = stats.poisson.ppf([0.0005, 0.9995], 10 * factor * 200)
        assert lo <= n <= hi, (i, n, lo, hi)


def test_a_sine_rate_peaks_and_troughs_where_it_should():
    _, t = issued(["duration_s=4000", "arrivals.rate=20", "arrivals.shape=sine(1000, 0.8)"])
    phase = (t % 1000) / 1000
    peak = ((phase > 0.2) & (phase < 0.3)).sum()  # sin near 1: rate 36/s
    trough = ((phase > 0.7) & (phase < 0.8)).sum()  # sin near −1: rate 4/s
    assert peak > 6 * trough
    assert len(t) == pytest.approx(20 * 4000, rel=0.02)  # the mean rate over whole periods


def test_bursts_and_the_ideal_rate_is_the_shapes_mean():
    m, t = issued(["duration_s=1000", "arrivals.rate=5", "arrivals.shape=bursts(100, 10, 4)"])
    assert m["ideal_calls_per_s"] == pytest.approx(5 * (0.9 + 0.1 * 4), rel=1e-3)
    inside = ((t % 100) < 10).sum()
    assert inside / len(t) == pytest.approx(0.4 / 1.3, abs=0.03)  # 10% of the time at 4×


@pytest.mark.parametrize(
    "text",
    [
        "steps(7, 2, 0.5, 3)",
        "bursts(10, 1, 1e6)",
        "bursts(3.3, 0.001, 50)",
        "sine(60, 0.9)",
        "spike(30, 0.01, 1e4)",
        "weekdays(0, 0.0001, 1e4)",
    ],
)
@pytest.mark.parametrize("offset", [0.0, 4.5, 1234.567])
def test_a_shapes_mean_is_its_integral_exactly_however_narrow_its_bursts(text, offset):
    # a grid of 10,000 points aliased narrow bursts: bursts(10, 1, 1e6) over mmc's window came out negative
    shape = parse_shape(text)
    shape = type(shape)(shape.kind, shape.args, offset)
    for d in (0.5, 33.3):  # against a grid fine enough for the narrowest burst (spacing 1e-4 s at most)
        t = (np.arange(400_000) + 0.5) * d / 400_000
        brute = float(np.mean(np.vectorize(shape.factor)(t)))
        assert shape.mean(d) == pytest.approx(brute, rel=0.01), (d, brute)
    a = shape.args
    d, long_run = 1e6, {"steps": a[-1], "sine": 1.0, "spike": 1.0}.get(shape.kind)  # a million seconds: whole periods
    if shape.kind == "bursts":
        long_run = 1 + (a[-1] - 1) * a[1] / a[0]
    if shape.kind == "weekdays":  # the peak 5 days a week, over 20 whole weeks
        d, long_run = 20 * WEEK_S, 1 + (a[2] - 1) * 5 * a[1] * 3600 / WEEK_S
    assert shape.mean(d) == pytest.approx(long_run, rel=1e-3)


def test_a_weekday_peak_is_on_weekdays_only_and_its_onset_is_its_start():
    peak = parse_shape("weekdays(14, 1, 5)")
    at = {(d, h): peak.factor(d * DAY_S + h * 3600 + 1) for d in range(7) for h in range(24)}
    assert {k for k, v in at.items() if v == 5} == {(d, 14) for d in range(5)} and set(at.values()) == {1.0, 5.0}
    assert peak.mean(WEEK_S) == pytest.approx(np.mean(peak.rates()), rel=1e-9)  # minutes: equal shares of the time
    assert peak.onset() == (pytest.approx(14 * 3600, abs=0.01), 1.0, 5)  # Monday 14:00, from 1×, five a week
    assert peak.peak_window(3600) == 14 * 3600


@settings(max_examples=examples(60), deadline=None)
@given(
    step=st.floats(1, 1e5),
    factors=st.lists(st.floats(0, 100).map(lambda x: round(x, 3)), min_size=2, max_size=8),
    offset=st.floats(0, 1e5),
)
def test_the_onset_of_steps_is_the_start_of_their_steepest_rise(step, factors, offset):
    shape = Shape("steps", (step, *factors), offset)
    rises = np.diff(factors)
    on = shape.onset()
    if not (rises > 0).any():
        assert on is None
        return
    i = int(np.argmax(rises))  # the first of the steepest: the step i + 1 begins at (i + 1) × step, shape time
    at, before, count = on
    assert shape.factor(at - offset) == factors[i + 1] and shape.factor(at - offset - 0.02) == before
    assert before == factors[i] and abs(at - (i + 1) * step) <= 0.02
    assert 1 <= count <= int((rises >= rises[i] / 2).sum())


def test_daily_shape_follows_domain_section_7():
    s = parse_shape("daily(0.3, 0.2)")
    hours = [s.factor(h * 3600) for h in range(24)]
    assert max(hours) == pytest.approx(s.factor(14 * 3600)) and min(hours) == pytest.approx(s.factor(2 * 3600))
    assert s.peak() == pytest.approx(1.3 * 1.2) and s.mean(7 * 86400) == pytest.approx(1.0, abs=1e-3)


def test_a_trace_replays_each_minutes_count_exactly():
    counts = read_azure(SAMPLE, "func004")
    for spread in ("random", "start"):
        sets = ["load=trace", f"trace.path={SAMPLE}", "trace.function=func004", f"trace.spread={spread}"]
        _, t = issued([*sets, "duration_s=3600"])
        per_minute = np.bincount((t // 60).astype(int), minlength=60)[:60]
        np.testing.assert_array_equal(per_minute, counts[:60])
        if spread == "start":
            assert (t % 60 == 0).all()
        else:
            assert (t % 60 != 0).mean() > 0.99


def test_a_trace_and_its_generator_are_the_shipped_sample(tmp_path):
    path = generate_azure(tmp_path / "a.csv")
    assert path.read_text() == Path(SAMPLE).read_text()  # the sample is the generator's output, seed 0
    total = read_azure(str(path))
    assert len(total) == 1440 and total.sum() > 0


@pytest.mark.parametrize(
    "setting, names",
    [
        ("arrivals.shape=sine(10)", "arrivals.shape"),
        ("arrivals.shape=steps(0, 1)", "arrivals.shape"),
        ("arrivals.shape=bursts(10, 20, 2)", "arrivals.shape"),
        ("arrivals.shape=nope", "arrivals.shape"),
        ("arrivals.shape=sine(1e400, 0.5)", "arrivals.shape"),
        ("trace.path=/etc/hostname", "hostname"),
        ("trace.path=/no/such.csv", "no such file"),
        ("trace.function=nosuch", "nosuch"),
    ],
)
def test_bad_demand_exits_2_naming_it(setting, names, capsys, tmp_path):
    load = "arrivals" if setting.startswith("arrivals") else "trace"
    base = [] if "trace.path" in setting else [f"trace.path={SAMPLE}"]
    argv = ["mmc", "--set", f"load={load}", *(x for s in [*base, setting] for x in ("--set", s))]
    assert run_cmd.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and names in err, err
