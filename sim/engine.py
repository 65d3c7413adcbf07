"""The simulation clock: a SimPy environment plus a cheap callback scheduler for hot paths.

SimPy processes read best for slow control loops (the autoscaler); per-call paths run millions of events, and a
generator process costs several times a plain callback (house-style.md, "Hot paths"). ``Sim.call_in`` puts a
minimal event on SimPy's own queue: SimPy's ``step`` pops it and calls its callbacks like any other event, so
callbacks and processes share one clock and one ordering (time, priority, insertion id).
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush
from typing import Any

import simpy
from simpy.events import NORMAL


class Callback:
    """An already-triggered event carrying one argument; what ``Sim.call_in`` schedules."""

    __slots__ = ("arg", "callbacks")
    _ok = True  # read by simpy's step(): this event never fails

    def __init__(self, fn: Callable[[Callback], Any], arg: Any) -> None:
        self.callbacks = [fn]
        self.arg = arg


class Sim:
    """One run's clock. ``env`` is a plain ``simpy.Environment`` for processes."""

    def __init__(self) -> None:
        self.env = simpy.Environment()
        self._queue = self.env._queue  # SimPy's event heap: (time, priority, id, event)
        self._eid = self.env._eid

    @property
    def now(self) -> float:
        return self.env._now

    def call_in(self, delay: float, fn: Callable[[Callback], Any], arg: Any = None) -> None:
        """Call ``fn(event)`` after ``delay`` seconds; ``event.arg`` is ``arg``."""
        if delay < 0:
            raise ValueError(f"negative delay {delay}")
        heappush(self._queue, (self.env._now + delay, NORMAL, next(self._eid), Callback(fn, arg)))

    def run(self, until: float | None = None) -> None:
        self.env.run(until)

    @property
    def events(self) -> int:
        """Events scheduled so far (SimPy's insertion counter; reading it advances it by one)."""
        return next(self._eid)
