"""The simulation clock: a SimPy environment driven by a lean loop, with cheap callbacks for hot paths.

SimPy processes read best for slow control loops (the autoscaler); per-call paths run millions of events, and a
generator process costs several times a plain callback (house-style.md, "Hot paths"). ``Sim.call_at`` and
``Sim.call_in`` put an entry ``(time, priority, id, fn, arg)`` on SimPy's own event queue, beside SimPy's
``(time, priority, id, event)`` entries and ordered like them (ids are unique, so the fifth element is never
compared). ``Sim.run`` pops that queue itself: a callback entry is called as ``fn(arg)``, a SimPy event is processed
exactly as ``simpy.Environment.step`` does. So callbacks and processes share one clock and one ordering, and the
per-event cost is a heap pop and a call. (Use ``Sim.run``, not ``env.run``: SimPy's loop does not know callbacks.)

A heap entry costs more the larger the heap (a pop and a push: 1.8 µs at 10,000 entries, 5.6 µs at a million, on
this project's bench machine), and a load test holds one entry per call in flight. So once the heap holds ``NEAR``
entries, ``call_at`` puts an entry due at or after the *horizon* in a *calendar* instead (a calendar queue, Brown
1988): buckets of 1/``BUCKETS_PER_S`` simulated seconds, appended to in O(1). ``run`` moves the earliest bucket into
the heap whenever the heap's top is at or past the horizon, and moves the horizon to that bucket's end; every entry
due before the horizon is in the heap, so the order of events is exactly that of one heap, and the heap holds what
is due soon, not everything in flight.

This reads three private attributes of ``simpy.Environment`` 4.x: ``_queue`` (the heap), ``_now`` (the clock) and
``_eid`` (the insertion counter). pyproject.toml pins SimPy's major version; ``Sim()`` checks them and fails with a
clear message if a SimPy release changes them (tests/test_engine.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection
from heapq import heappop, heappush
from itertools import count
from typing import Any

import simpy
from simpy.events import NORMAL, URGENT

from sim.scenario import ScenarioError


class SimPyInternalsChanged(RuntimeError):
    """The installed SimPy no longer has the internals that ``Sim`` drives."""


def _check_internals(env: simpy.Environment) -> None:
    queue, now, eid = getattr(env, "_queue", None), getattr(env, "_now", None), getattr(env, "_eid", None)
    if not isinstance(queue, list) or not isinstance(now, (int, float)) or not isinstance(eid, count):
        raise SimPyInternalsChanged(
            f"simpy {simpy.__version__}: Environment no longer has _queue (a heap list), _now (a number) and _eid "
            "(an itertools.count), which sim/engine.py drives; install the SimPy major version pinned in pyproject.toml"
        )


class Sim:
    """One run's clock. ``env`` is a plain ``simpy.Environment`` for processes and timeouts."""

    def __init__(self) -> None:
        self.env = simpy.Environment()
        _check_internals(self.env)
        self._queue = self.env._queue  # SimPy's event heap: (time, priority, id, event)
        self._eid = self.env._eid  # its insertion counter (ties in time and priority go in order)
        self.events = 0  # entries processed by run(): callbacks and SimPy events
        # the shortcuts the run's models may take (sim/shortcuts.py; a run sets it from its scenario)
        self.shortcuts: Collection[str] = EVERY_SHORTCUT
        self._lines: list[DelayLine] = []
        # the calendar: callback entries due at or after ``_horizon`` wait in buckets of BUCKET_S seconds
        self._horizon = 0.0
        self._buckets: dict[int, list[tuple]] = {}
        self._bucket_heap: list[int] = []  # the indices of the buckets that hold entries

    @property
    def now(self) -> float:
        return self.env._now

    def call_at(self, t: float, fn: Callable[[Any], Any], arg: Any = None) -> None:
        """Call ``fn(arg)`` at absolute time ``t`` (not before now: the per-call paths guarantee it)."""
        queue, entry = self._queue, (t, NORMAL, next(self._eid), fn, arg)
        if t < self._horizon or len(queue) < NEAR or t >= FAR:
            heappush(queue, entry)
            return
        b = int(t * BUCKETS_PER_S)
        bucket = self._buckets.get(b)
        if bucket is None:
            self._buckets[b] = [entry]
            heappush(self._bucket_heap, b)
        else:
            bucket.append(entry)

    def call_in(self, delay: float, fn: Callable[[Any], Any], arg: Any = None) -> None:
        """Call ``fn(arg)`` after ``delay`` seconds."""
        if delay < 0:
            raise ValueError(f"negative delay {delay}")
        self.call_at(self.env._now + delay, fn, arg)

    def _load(self) -> None:
        """Move the calendar's next bucket into the heap (its entries are due before anything else left there)."""
        b = heappop(self._bucket_heap)
        queue = self._queue
        for entry in self._buckets.pop(b):
            heappush(queue, entry)
        self._horizon = (b + 1) / BUCKETS_PER_S

    def line(self, delay: float, shared: bool = True) -> DelayLine:
        """The delay line of ``delay`` seconds: ``push(fn, arg)`` calls ``fn(arg)`` that long after (one per delay,
        unless not ``shared``: a line of its own, for ``push_at``)."""
        for ln in self._lines:
            if shared and ln.shared and ln.delay == delay:
                return ln
        ln = DelayLine(self, delay, shared)
        self._lines.append(ln)
        return ln

    def stop(self) -> None:
        """End ``run`` before any other event at the current time."""
        heappush(self._queue, (self.env._now, URGENT, next(self._eid), _halt, None))

    def run(self, until: float) -> None:
        """Process events in order until time ``until`` (events at ``until`` itself are left), ``stop()``, or an
        empty queue."""
        if self._lines:
            self._run_with_lines(until)
            return
        env, queue, pop = self.env, self._queue, heappop
        heappush(queue, (until, URGENT, next(self._eid), _halt, None))
        processed = 0
        checkpoint = -1.0  # the clock at the last stall check
        buckets = self._bucket_heap
        try:
            while queue:
                if buckets and queue[0][0] >= self._horizon:
                    self._load()
                    continue
                entry = pop(queue)
                env._now = entry[0]
                processed += 1
                if not processed & CHECK_EVENTS_MASK:  # every 2^16 events: progress, and stalls
                    checkpoint = _look_up(env._now, until, processed, checkpoint)
                try:
                    arg = entry[4]  # a callback: (time, priority, id, fn, arg)
                except IndexError:
                    arg = _EVENT
                if arg is not _EVENT:
                    entry[3](arg)
                    continue
                _step(entry[3])  # a SimPy event, (time, priority, id, event)
        except _Halt:
            processed -= 1  # the halt entry is not an event of the model
        finally:
            self.events += processed

    def _run_with_lines(self, until: float) -> None:
        """``run`` with delay lines: at each step the earliest of the heap's top and the lines' heads, by the same
        (time, priority, id) order a heap entry would have had. (The halt entry at ``until`` keeps the heap from
        emptying before the run ends.)"""
        env, queue, pop = self.env, self._queue, heappop
        lines = [ln.items for ln in self._lines]
        heappush(queue, (until, URGENT, next(self._eid), _halt, None))
        processed = 0
        checkpoint = -1.0  # the clock at the last stall check
        buckets = self._bucket_heap
        try:
            while True:
                if buckets and queue[0][0] >= self._horizon:
                    self._load()
                    continue
                head = None  # the earliest line head, (due, id, fn, arg), and its line
                for items in lines:
                    if items and (head is None or items[0] < head):
                        head, line = items[0], items
                if head is not None:
                    t, top = head[0], queue[0]
                    if t < top[0] or (t == top[0] and (top[1] > NORMAL or (top[1] == NORMAL and head[1] < top[2]))):
                        line.popleft()
                        env._now = t
                        processed += 1
                        if not processed & CHECK_EVENTS_MASK:
                            checkpoint = _look_up(t, until, processed, checkpoint)
                        head[2](head[3])
                        continue
                entry = pop(queue)
                env._now = entry[0]
                processed += 1
                if not processed & CHECK_EVENTS_MASK:  # every 2^16 events: progress, and stalls
                    checkpoint = _look_up(env._now, until, processed, checkpoint)
                try:
                    arg = entry[4]
                except IndexError:
                    arg = _EVENT
                if arg is not _EVENT:
                    entry[3](arg)
                    continue
                _step(entry[3])  # a SimPy event, (time, priority, id, event)
        except _Halt:
            processed -= 1
        finally:
            self.events += processed


class DelayLine:
    """``fn(arg)`` a fixed ``delay`` after each ``push(fn, arg)``: a constant delay keeps its items in push order, so
    they wait in a FIFO beside the heap instead of in it (a heap entry costs more the larger the heap). Each item keeps
    the (time, id) key a heap entry pushed at the same moment would have had, and ``run`` merges the lines' heads with
    the heap by that key, so the order of events is the same."""

    __slots__ = ("_sim", "delay", "items", "shared")

    def __init__(self, sim: Sim, delay: float, shared: bool = True) -> None:
        self._sim, self.delay, self.shared = sim, delay, shared
        self.items: deque[tuple[float, int, Callable[[Any], Any], Any]] = deque()

    def push(self, fn: Callable[[Any], Any], arg: Any) -> None:
        sim = self._sim
        self.items.append((sim.env._now + self.delay, next(sim._eid), fn, arg))

    def push_at(self, due: float, fn: Callable[[Any], Any], arg: Any) -> None:
        """``fn(arg)`` at ``due``, which is about ``delay`` from now and no earlier than any item's before it (the
        caller's sum of its legs, rounded as it adds them: a line of its own)."""
        self.items.append((due, next(self._sim._eid), fn, arg))


def _look_up(now: float, until: float, processed: int, checkpoint: float) -> float:
    """run()'s look up from its loop, every 2^16 events: tell the progress hook; every 2^25, check that the clock has
    moved since the last check (else Stalled). Returns the clock at the last stall check."""
    if PROGRESS is not None:
        PROGRESS(now, until)
    if not processed & STALL_EVENTS_MASK:
        if now == checkpoint:
            raise Stalled(now, STALL_EVENTS_MASK + 1)
        return now
    return checkpoint


def _step(event: simpy.events.Event) -> None:
    """Process a SimPy event as simpy.Environment.step does."""
    callbacks, event.callbacks = event.callbacks, None
    for callback in callbacks:
        callback(event)
    if not event._ok and not hasattr(event, "_defused"):
        exc = type(event._value)(*event._value.args)
        exc.__cause__ = event._value
        raise exc


_EVENT = object()  # marks a SimPy event entry in run()'s loop


class _Every(frozenset):
    """Every shortcut (the default of a clock built outside a model's run)."""

    def __contains__(self, name: object) -> bool:
        return True


EVERY_SHORTCUT = _Every()

# A run whose clock does not move over this many events (2^25, about a minute of wall time) has stopped making
# progress: a time step below the clock's resolution, or a loop of zero delays. More than any legitimate burst at one
# instant: the run-size budgets (experiments/cli.py) allow at most 10 million calls or 20 million sandboxes a run.
STALL_EVENTS_MASK = 2**25 - 1
CHECK_EVENTS_MASK = 2**16 - 1  # how often run() looks up from its loop (progress, then stalls)
NEAR = 1024  # heap entries below which call_at pushes to the heap directly
BUCKETS_PER_S = 256.0  # the calendar's buckets per simulated second (a power of two: bucket bounds are exact)
FAR = 2.0**52 / BUCKETS_PER_S  # entries due this late go to the heap (a bucket index must be an exact integer)

# A hook the commands set to show a long run's progress: called every 2^16 events with (now, until) (None: nothing).
PROGRESS: Callable[[float, float], None] | None = None


class Stalled(ScenarioError):
    """The simulated clock stopped advancing: bad input (exit 2), not a crash."""

    def __init__(self, now: float, events: int) -> None:
        super().__init__(
            f"the simulation stopped making progress: {events:,} events at t = {now:.9g} s without the clock moving "
            "(a time step too small for the clock, or a loop of zero delays)"
        )


class _Halt(Exception):
    """Raised by the halt entry that ``run`` and ``stop`` schedule."""


def _halt(_arg: None) -> None:
    raise _Halt
