"""The simulation clock: a SimPy environment driven by a lean loop, with cheap callbacks for hot paths.

SimPy processes read best for slow control loops (the autoscaler); per-call paths run millions of events, and a
generator process costs several times a plain callback (house-style.md, "Hot paths"). ``Sim.call_in`` puts an
entry ``(time, priority, id, fn, arg)`` on SimPy's own event queue, beside SimPy's ``(time, priority, id, event)``
entries and ordered like them (ids are unique, so the fifth element is never compared). ``Sim.run`` pops that
queue itself: a callback entry is called as ``fn(arg)``, a SimPy event is processed exactly as
``simpy.Environment.step`` does. So callbacks and processes share one clock and one ordering, and the
per-event cost is a heap pop and a call. (Use ``Sim.run``, not ``env.run``: SimPy's loop does not know pairs.)
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

import simpy
from simpy.events import NORMAL, URGENT


class Sim:
    """One run's clock. ``env`` is a plain ``simpy.Environment`` for processes and timeouts."""

    def __init__(self) -> None:
        self.env = self._env = simpy.Environment()
        self._queue = self.queue = self.env._queue  # SimPy's event heap: (time, priority, id, event)
        self._eid = self.eid = self.env._eid  # its insertion counter (ties in time and priority go in order)

    @property
    def now(self) -> float:
        return self.env._now

    def call_in(self, delay: float, fn: Callable[[Any], Any], arg: Any = None) -> None:
        """Call ``fn(arg)`` after ``delay`` seconds."""
        if delay < 0:
            raise ValueError(f"negative delay {delay}")
        heappush(self._queue, (self._env._now + delay, NORMAL, next(self._eid), fn, arg))

    def stop(self) -> None:
        """End ``run`` before any other event at the current time."""
        heappush(self._queue, (self.env._now, URGENT, next(self._eid), _halt, None))

    def run(self, until: float) -> None:
        """Process events in order until time ``until`` (events at ``until`` itself are left), ``stop()``, or an
        empty queue."""
        env, queue, pop = self.env, self._queue, heappop
        heappush(queue, (until, URGENT, next(self._eid), _halt, None))
        try:
            while queue:
                entry = pop(queue)
                env._now = entry[0]
                try:
                    arg = entry[4]  # a callback: (time, priority, id, fn, arg)
                except IndexError:
                    arg = _EVENT
                if arg is not _EVENT:
                    entry[3](arg)
                    continue
                # a SimPy event, (time, priority, id, event): as simpy.Environment.step
                event = entry[3]
                callbacks, event.callbacks = event.callbacks, None
                for callback in callbacks:
                    callback(event)
                if not event._ok and not hasattr(event, "_defused"):
                    exc = type(event._value)(*event._value.args)
                    exc.__cause__ = event._value
                    raise exc
        except _Halt:
            pass

    @property
    def events(self) -> int:
        """Events scheduled so far (SimPy's insertion counter; reading it advances it by one)."""
        return next(self._eid)


_EVENT = object()  # marks a SimPy event entry in run()'s loop


class _Halt(Exception):
    """Raised by the halt entry that ``run`` and ``stop`` schedule."""


def _halt(_arg: None) -> None:
    raise _Halt
