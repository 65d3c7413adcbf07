"""The engine over SimPy's internals: one clock and one order for callbacks and processes, an events count that
reading does not change, and a clear failure if SimPy's internals change."""

from __future__ import annotations

import random

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import engine, guard
from sim.engine import Sim, SimPyInternalsChanged, _check_internals
from sim.scenario import ScenarioError
from tests.support import SWITCHES, examples, schedule_run


def test_callbacks_and_processes_share_one_clock_and_order():
    sim = Sim()
    seen: list[tuple[float, str]] = []

    def proc():
        yield sim.env.timeout(1.0)
        seen.append((sim.now, "process"))
        yield sim.env.timeout(1.0)
        seen.append((sim.now, "process"))

    sim.env.process(proc())  # its first timeout is scheduled when it starts, at t = 0 inside run()
    sim.call_at(1.0, lambda arg: seen.append((sim.now, arg)), "callback at 1")
    sim.call_in(1.5, lambda arg: seen.append((sim.now, arg)), "callback at 1.5")
    sim.call_at(2.0, lambda arg: seen.append((sim.now, arg)), "callback at 2")
    sim.call_at(0.5, lambda _: sim.call_at(1.0, lambda arg: seen.append((sim.now, arg)), "callback at 1, late"))
    sim.run(until=10.0)
    # ties in time go in the order they were scheduled, callbacks and SimPy events alike
    assert seen == [
        (1.0, "callback at 1"),
        (1.0, "process"),
        (1.0, "callback at 1, late"),
        (1.5, "callback at 1.5"),
        (2.0, "callback at 2"),
        (2.0, "process"),
    ]


def test_run_stops_before_until_and_at_stop():
    sim = Sim()
    seen: list[float] = []
    for t in (1.0, 2.0, 3.0):
        sim.call_at(t, seen.append, t)
    sim.run(until=3.0)
    assert seen == [1.0, 2.0] and sim.now == 3.0  # events at `until` itself are left
    sim.call_at(4.0, lambda _: sim.stop())
    sim.call_at(4.0, seen.append, 4.0)
    sim.run(until=10.0)
    assert seen == [1.0, 2.0, 3.0] and sim.now == 4.0  # stop() ends the run before the other event at 4


def test_events_counts_what_ran_and_reading_it_changes_nothing():
    sim = Sim()
    for t in range(5):
        sim.call_at(float(t), lambda _: None)
    assert sim.events == sim.events == 0
    sim.run(until=2.5)
    assert sim.events == sim.events == 3  # t = 0, 1, 2; the run's own halt entry is not counted
    sim.run(until=10.0)
    assert sim.events == 5


def test_negative_delay_is_refused():
    with pytest.raises(ValueError, match="negative delay"):
        Sim().call_in(-1.0, print)


def test_a_simpy_without_the_internals_fails_with_a_clear_message():
    env = simpy.Environment()
    _check_internals(env)  # the installed SimPy has them
    del env._eid
    with pytest.raises(SimPyInternalsChanged, match=r"pinned in pyproject\.toml"):
        _check_internals(env)


def test_a_clock_that_stops_moving_ends_the_run_as_bad_input(monkeypatch):
    monkeypatch.setattr(guard, "STALL_EVENTS_MASK", 2**10 - 1)
    sim = Sim()

    def again(_arg: None) -> None:
        sim.call_in(0.0, again)  # a loop of zero delays

    sim.call_in(1.5, again)
    with pytest.raises(ScenarioError, match=r"stopped making progress: 1,024 events at t = 1\.5 s"):
        sim.run(until=10.0)
    ok = Sim()  # a clock that moves is never stopped, however many events
    ticks = []

    def tick(_arg: None) -> None:
        ticks.append(1)
        if len(ticks) < 5000:
            ok.call_in(1e-3, tick)

    ok.call_in(0.0, tick)
    ok.run(until=100.0)
    assert len(ticks) == 5000


@pytest.mark.parametrize("seed", range(5))
def test_a_delay_line_runs_its_items_in_the_order_heap_entries_would(seed):
    # Events scheduled from callbacks at times on a coarse grid (so ties are common), some through a constant-delay
    # line, the same ones through call_in in a twin run: the order of every call, and the clock at each, match.
    def scenario(use_line: bool) -> list[tuple[float, str]]:
        rng = random.Random(seed)
        sim, seen = Sim(), []
        line = sim.line(0.5) if use_line else None

        def fire(tag: str) -> None:
            seen.append((sim.now, tag))
            if len(seen) > 3000:
                return
            for k in range(rng.randint(0, 2)):
                child = f"{tag}.{k}"
                if rng.random() < 0.5:
                    if line is not None:
                        line.push(fire, child)
                    else:
                        sim.call_in(0.5, fire, child)
                else:
                    sim.call_in(rng.choice([0.0, 0.25, 0.5, 1.0]), fire, child)

        for i in range(20):
            sim.call_at(rng.choice([0.0, 0.5, 1.0]), fire, str(i))
        sim.run(until=50.0)
        return seen

    with_line, without = scenario(True), scenario(False)
    assert len(with_line) > 100 and with_line == without


@settings(max_examples=examples(40), deadline=None)
@given(
    seed=st.integers(0, 2**32),
    near=st.sampled_from([0, 1, 16, 1024]),
    log2_per_s=st.integers(-2, 12),
    grid=st.sampled_from([1 / 1024, 1 / 256, 0.1, 0.25, 1.0]),
    burst=st.integers(1, 1500),
    inline=st.sampled_from([0, 1, 64]),
    widths=st.sampled_from([(128, 2048), (0, 10**9), (4, 16), (16, 2), (1, 1)]),
)
def test_every_switch_and_constant_gives_the_same_events_in_the_same_order(
    seed, near, log2_per_s, grid, burst, inline, widths
):
    # The calendar and the delay lines on or off, NEAR, BUCKETS_PER_S, INLINE and the bounds at which the buckets'
    # width changes anything (widening, narrowing, both by turns): the same executions, at the same times, in the same
    # order, the same events count. (burst > near: the calendar engages.)
    saved = engine.NEAR, engine.BUCKETS_PER_S, engine.INLINE, engine.BUCKET_FEWEST, engine.BUCKET_MOST
    try:
        runs = [schedule_run(seed, cal, ln, near, 2.0**log2_per_s, grid, burst, inline, widths) for cal, ln in SWITCHES]
        reference = schedule_run(seed, False, False, 10**9, 256.0, grid, burst)  # one heap, nothing else
    finally:
        engine.NEAR, engine.BUCKETS_PER_S, engine.INLINE, engine.BUCKET_FEWEST, engine.BUCKET_MOST = saved
    assert len(reference) > burst
    for run in runs:
        assert run == reference


def test_a_cancelled_call_does_nothing_wherever_it_waits():
    for calendar, lines in SWITCHES:
        sim, seen = Sim(calendar=calendar, delay_lines=lines), []
        engine_near = engine.NEAR
        for i in range(engine_near + 10):  # enough entries that the calendar engages
            sim.call_at(100.0 + i, seen.append, i)
        far = sim.schedule(50.0, seen.append, "calendar")  # in a bucket (once the heap holds NEAR entries)
        near = sim.schedule(0.0, seen.append, "heap")
        line = sim.line(1.0)
        on_line = line.schedule(seen.append, "line")
        kept = line.schedule(seen.append, "kept")
        for h in (far, near, on_line):
            h.cancel()
        assert far.cancelled and not kept.cancelled
        sim.run(until=99.0)
        assert seen == ["kept"] and sim.events == 4  # a cancelled entry still pops (lazy deletion): a no-op
        kept.cancel()  # after it ran: harmless
        assert not [s for s in seen if s in ("calendar", "heap", "line")]


def test_buckets_per_s_must_be_a_power_of_two(monkeypatch):
    monkeypatch.setattr(engine, "BUCKETS_PER_S", 100.0)
    with pytest.raises(ValueError, match="power of two"):
        Sim()
