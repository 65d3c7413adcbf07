"""The simulation clock: a SimPy environment driven by one lean loop, with cheap callbacks for hot paths.

SimPy processes read best for slow control loops (the monitor); per-call paths run millions of events, and a generator
process costs several times a plain callback, so hot paths use callbacks. Every entry of the event heap is ``(time,
priority, id, fn, arg)``, ordered by (time, priority, id) (ids are unique, so ``fn`` is never compared), and ``Sim.run``
is one loop: pop the earliest entry, set the clock, call ``fn(arg)``. ``Sim.call_at`` and ``Sim.call_in`` push such
entries; SimPy's own events are pushed by its environment's ``schedule`` as ``(time, priority, id, _step, event)``, and
``_step`` processes one exactly as ``simpy.Environment.step`` does. So callbacks and processes share one clock and one
ordering. (Use ``Sim.run``, not ``env.run``: SimPy's loop does not know these entries.) ``Sim.schedule`` is ``call_at``
with a ``Handle`` whose ``cancel()`` makes the entry do nothing when its time comes (lazy deletion: nothing is searched
for or removed, and ``call_at`` itself pays nothing for it). A per-call hot path may inline ``call_at``: while
``len(sim.heap) < sim.direct`` it is exactly ``heappush(sim.heap, (t, NORMAL, next(sim.ids), fn, arg))``, else call it
(models/inputs/platform/function.py and overhead.py, models/inputs/callers/arrivals.py,
models/inputs/approaches/batching.py).

Two shortcuts keep the heap small (a heap entry costs more the larger the heap: a pop and a push, 1.8 µs at 10,000
entries, 5.6 µs at a million, on this project's bench machine; a load test holds one entry per call in flight). Each
is a *source* of entries that stands in the heap for what it holds by one entry of its own, so the one loop runs
them as it runs any entry, and the order of events is exactly that of one heap:

- The *calendar* (a calendar queue, Brown 1988; sim/calendar.py, whose ``push`` is ``call_at``): once the heap holds
  ``NEAR`` entries, ``call_at`` puts an entry due at or after the *horizon* in a bucket of 1/``BUCKETS_PER_S``
  simulated seconds instead; the earliest bucket stands in the heap by a *load* entry at its start, which sorts the
  bucket into the calendar's *run*, standing in the heap by its head as a delay line's does (below). Every entry due
  before the horizon is in the heap or the run, so every entry is called in its order.
- *Delay lines* (``Sim.line``): ``fn(arg)`` a constant delay after each ``push``, in push order, so the items wait in a
  FIFO beside the heap. Each item is the very entry ``call_in(delay, fn, arg)`` would have pushed (same time, same
  id), but only the line's head is in the heap: when it pops, the line calls the items after it that are due
  before the heap's top (each is then the next event of all), and puts the next one in.

Each has an off switch, ``Sim(calendar=False)`` and ``Sim(delay_lines=False)``: then every entry goes into the heap
(a line's pushes become ``call_at`` entries with the same keys). The events run in the same order, at the same
times, with every combination of the switches and any ``NEAR`` and ``BUCKETS_PER_S`` (tests/sim/test_engine.py draws
random schedules to check it).

While ``Sim.run`` runs, Python's cyclic garbage collector runs less often (``GC_THRESHOLDS``, restored after): a run
holds an entry per call in flight, each a tuple with a callback that the collector must walk, and at 800,000
requests in flight its default thresholds cost a tenth of the run. Collection never changes a number.

A run is watched by its *guard* (sim/guard.py: its budget of events and memory, stalls, a progress hook), handed
to its clock at construction (``Sim(guard=...)``, ``Sim.taking``): ``run`` hands it the loop's look up, every 2^16
entries, so it costs nothing per event.

This reads and writes private attributes of ``simpy.Environment`` 4.x: ``_queue`` (the heap), ``_now`` (the clock),
``_eid`` (the insertion counter), and replaces its ``schedule``. pyproject.toml pins SimPy's major version; ``Sim()``
checks them and fails with a clear message if a SimPy release changes them (tests/sim/test_engine.py).
"""

from __future__ import annotations

import gc
import math
from collections import deque
from collections.abc import Callable, Collection
from heapq import heappop, heappush
from itertools import count, repeat
from operator import length_hint
from typing import Any, Final

import simpy

from sim.calendar import NORMAL, Calendar
from sim.errors import SimPyInternalsChanged
from sim.guard import CHECK_EVENTS_MASK, SAMPLE, UNGUARDED, Guard
from sim.shortcuts import CALENDAR, DELAY_LINES, EVERY_SHORTCUT

# SimPy's event priorities (simpy.events), Final: the compiled modules inline them (Sim() checks they still match);
# NORMAL is the calendar's (sim/calendar.py), which puts entries at it
URGENT: Final = 0


def _check_internals(env: simpy.Environment) -> None:
    queue, now, eid = getattr(env, "_queue", None), getattr(env, "_now", None), getattr(env, "_eid", None)
    if not isinstance(queue, list) or not isinstance(now, (int, float)) or not isinstance(eid, count):
        raise SimPyInternalsChanged(
            f"simpy {simpy.__version__}: Environment no longer has _queue (a heap list), _now (a number) and _eid "
            "(an itertools.count), which sim/engine.py drives; install the SimPy major version pinned in pyproject.toml"
        )
    if (simpy.events.URGENT, simpy.events.NORMAL) != (URGENT, NORMAL):
        raise SimPyInternalsChanged(f"simpy {simpy.__version__}: its event priorities are no longer URGENT 0, NORMAL 1")


class _Environment(simpy.Environment):
    """SimPy's environment, its events queued as the engine's entries: ``(time, priority, id, _step, event)``."""

    def schedule(self, event: simpy.events.Event, priority: int = NORMAL, delay: float = 0) -> None:
        queue: list[Any] = self._queue  # the engine's entries, not SimPy's (time, priority, id, event)
        heappush(queue, (self._now + delay, priority, next(self._eid), _step, event))

    def step(self) -> None:
        raise RuntimeError("this environment is driven by sim.engine.Sim.run, not by env.run or env.step")


class Handle:
    """A scheduled callback that can be cancelled (``Sim.schedule``, ``DelayLine.schedule``)."""

    __slots__ = ("arg", "fn")

    def __init__(self, fn: Callable[[Any], Any], arg: Any) -> None:
        self.fn, self.arg = fn, arg

    def cancel(self) -> None:
        """The callback will not be called (its entry does nothing when its time comes). Harmless once it ran."""
        self.fn, self.arg = _nothing, None

    @property
    def cancelled(self) -> bool:
        return self.fn is _nothing


def _fire(handle: Handle) -> None:
    handle.fn(handle.arg)


def _nothing(_arg: Any) -> None:
    pass


class Sim:
    """One run's clock. ``env`` is a SimPy environment for processes and timeouts. ``calendar`` and ``delay_lines``
    switch the engine's two shortcuts (the same events in the same order either way); ``guard`` watches the run
    (sim/guard.py: its budget, stalls, progress)."""

    def __init__(self, calendar: bool = True, delay_lines: bool = True, guard: Guard = UNGUARDED) -> None:
        self.env = _Environment()
        self.guard = guard
        _check_internals(self.env)
        self._queue: list[Any] = self.env._queue  # the event heap: (time, priority, id, fn, arg)
        self._eid = self.env._eid  # its insertion counter (ties in time and priority go in order)
        self.events = 0  # entries of the model processed by run(): callbacks and SimPy events
        self.delay_lines = delay_lines
        # the shortcuts the run's models may take (sim/shortcuts.py; a run sets it from its scenario)
        self.shortcuts: Collection[str] = EVERY_SHORTCUT
        self._lines: list[DelayLine | HeapLine] = []
        self._runs = 0  # run() calls so far: a halt entry belongs to one
        # the calendar: entries due at or after its horizon wait in buckets of 1/BUCKETS_PER_S seconds, once the heap
        # holds NEAR entries (never, without the calendar)
        per_s = float(BUCKETS_PER_S)
        if not (per_s > 0 and math.frexp(per_s)[0] == 0.5):
            raise ValueError(f"BUCKETS_PER_S must be a power of two (bucket bounds exact), got {BUCKETS_PER_S}")
        near = NEAR if calendar else math.inf
        self._calendar = Calendar(self._queue, self._eid, self.env, near, per_s, INLINE, BUCKET_FEWEST, BUCKET_MOST)
        # call_at(t, fn, arg): call fn(arg) at absolute time t (not before now: the per-call paths guarantee it)
        self.call_at: Callable[..., None] = self._calendar.push
        # for hot paths that inline call_at: while the heap holds fewer than ``direct`` entries, call_at(t, fn, arg)
        # is exactly heappush(heap, (t, NORMAL, next(ids), fn, arg)); else call it
        self.heap: list[Any] = self._queue
        self.ids, self.direct = self._eid, near
        self._inlined = 0  # line items called by the line itself, not popped (DelayLine._next)

    @classmethod
    def taking(cls, shortcuts: Collection[str], guard: Guard = UNGUARDED) -> Sim:
        """The clock of a run that may take ``shortcuts`` (sim/shortcuts.py), the engine's own among them, watched by
        ``guard``."""
        sim = cls(calendar=CALENDAR in shortcuts, delay_lines=DELAY_LINES in shortcuts, guard=guard)
        sim.shortcuts = shortcuts
        return sim

    @property
    def now(self) -> float:
        return self.env._now

    def call_in(self, delay: float, fn: Callable[[Any], Any], arg: Any = None) -> None:
        """Call ``fn(arg)`` after ``delay`` seconds."""
        if delay < 0:
            raise ValueError(f"negative delay {delay}")
        self.call_at(self.env._now + delay, fn, arg)

    def schedule(self, t: float, fn: Callable[[Any], Any], arg: Any = None) -> Handle:
        """``call_at``, with a handle to cancel the call."""
        handle = Handle(fn, arg)
        self.call_at(t, _fire, handle)
        return handle

    def schedule_late(self, t: float, fn: Callable[[Any], Any], arg: Any = None) -> Handle:
        """``schedule``, after every other entry due at ``t`` whenever it was scheduled (priority ``LATE``): a control
        loop's decision that sees all that happened at its instant, so its order among same-instant events does not
        depend on when it was scheduled."""
        handle = Handle(fn, arg)
        heappush(self._queue, (t, LATE, next(self._eid), _fire, handle))  # the heap: valid at any t (see _load)
        return handle

    def line(self, delay: float) -> DelayLine | HeapLine:
        """The delay line of ``delay`` seconds: ``push(fn, arg)`` calls ``fn(arg)`` that long after (one per delay).
        Without delay lines, its pushes are heap entries."""
        if not delay > 0:
            raise ValueError(f"a delay line's delay must be > 0, got {delay}")
        for ln in self._lines:
            if ln.delay == delay:
                return ln
        ln = (DelayLine if self.delay_lines else HeapLine)(self, delay)
        self._lines.append(ln)
        return ln

    def charge(self, n: int, what: str) -> None:
        """Count ``n`` units of work done within one event (a loop over nodes, a copied snapshot) against the run's
        budget, as that many events, and check it now (a loop that is the budget's problem never returns to
        ``run``'s check). ``what``: the work's callback name, for the message. Nothing without a budget."""
        budget = self.guard.budget
        if budget is None:
            return
        budget.used += n
        if budget.used >> 16 != (budget.used - n) >> 16 and budget.over(0):  # every 2^16 units, as run() checks
            raise budget.exceeded(0, self.env._now, {what: 1})

    def stop(self) -> None:
        """End ``run`` before any other event at the current time."""
        heappush(self._queue, (self.env._now, URGENT, next(self._eid), _halt, None))

    def run(self, until: float) -> None:
        """Process events in order until time ``until`` (events at ``until`` itself are left) or ``stop()``."""
        env, queue, pop = self.env, self._queue, heappop
        self._runs += 1
        run = self._runs
        heappush(queue, (until, URGENT, next(self._eid), _halt, run))  # the heap is never empty before it pops
        calendar = self._calendar
        processed, loads, inline = 0, calendar.loads, self._inlined + calendar.inlined
        checkpoint = -1.0  # the clock at the last stall check
        guard = self.guard
        budget = guard.budget
        n = CHECK_EVENTS_MASK + 1
        thresholds = gc.get_threshold()
        gc.set_threshold(*GC_THRESHOLDS)
        try:
            while True:
                steps = repeat(None, n)  # what is left of it tells how many ran when a halt ends it
                try:
                    for _ in steps:
                        t, _, _, fn, arg = pop(queue)
                        env._now = t
                        fn(arg)
                except _Halt as halt:
                    processed += n - length_hint(steps) - 1  # the halt entry is not an event of the model
                    if halt.args[0] in (None, run):
                        return
                    continue  # the halt of an earlier run that stop() ended: not this run's end
                processed += n  # every 2^16 entries: progress, and stalls
                checkpoint = guard.look_up(env._now, until, processed, checkpoint)
                if budget is not None:  # the entries popped and those a line or the calendar's run called itself
                    spent = processed + self._inlined + calendar.inlined - inline
                    if budget.over(spent):
                        calendar.inline = 0  # the sample names each event of the run's, popped one by one
                        raise budget.exceeded(spent, env._now, _sample(env, queue, SAMPLE))
        finally:
            gc.set_threshold(*thresholds)
            inlined = self._inlined + calendar.inlined - inline
            self.events += processed - (calendar.loads - loads) + inlined
            if budget is not None:
                budget.used += processed + inlined


class DelayLine:
    """``fn(arg)`` a fixed ``delay`` after each ``push(fn, arg)``: a constant delay keeps its items in push order, so
    they wait in a FIFO beside the heap instead of in it. Each item is the entry ``(due, NORMAL, id, ...)`` a heap
    entry pushed at the same moment would have been; only the head is in the heap, and when it pops (``_next``) the
    next item goes in, so the order of events is the same."""

    __slots__ = ("_armed", "_eid", "_env", "_fns", "_next_cb", "_queue", "_sim", "delay", "items")

    def __init__(self, sim: Sim, delay: float) -> None:
        self._sim, self._env, self._eid, self._queue = sim, sim.env, sim._eid, sim._queue
        self.delay = delay
        self._armed = False  # the head is in the heap
        self.items: deque[tuple] = deque()  # (due, NORMAL, id, _next, arg): the head is also in the heap
        self._fns: deque[Callable[[Any], Any]] = deque()  # each item's fn
        self._next_cb = self._next

    def push(self, fn: Callable[[Any], Any], arg: Any) -> None:
        entry = (self._env._now + self.delay, NORMAL, next(self._eid), self._next_cb, arg)
        items = self.items
        if not items:
            heappush(self._queue, entry)
            self._armed = True
        items.append(entry)
        self._fns.append(fn)

    def schedule(self, fn: Callable[[Any], Any], arg: Any = None) -> Handle:
        """``push``, with a handle to cancel the call."""
        handle = Handle(fn, arg)
        self.push(_fire, handle)
        return handle

    def _next(self, arg: Any) -> None:
        """The head popped: call it, then call the items due before anything in the heap (each is then the next event
        of all; up to INLINE of them), and put the next head in the heap."""
        items, fns, queue = self.items, self._fns, self._queue
        self._armed = False
        items.popleft()
        fns.popleft()(arg)
        for _ in range(INLINE):
            if self._armed or not items:  # armed: a push into the empty line put its head in the heap
                return
            head = items[0]
            if not head < queue[0]:
                break
            items.popleft()
            self._env._now = head[0]
            self._sim._inlined += 1
            fns.popleft()(head[4])
        if items and not self._armed:
            heappush(queue, items[0])
            self._armed = True


class HeapLine:
    """A delay line without the shortcut (``Sim(delay_lines=False)``): each push is a heap entry with the key a
    ``DelayLine`` item would have had."""

    __slots__ = ("_sim", "delay")

    def __init__(self, sim: Sim, delay: float) -> None:
        self._sim, self.delay = sim, delay

    def push(self, fn: Callable[[Any], Any], arg: Any) -> None:
        self._sim.call_at(self._sim.env._now + self.delay, fn, arg)

    def schedule(self, fn: Callable[[Any], Any], arg: Any = None) -> Handle:
        handle = Handle(fn, arg)
        self.push(_fire, handle)
        return handle


def _sample(env: simpy.Environment, queue: list, n: int) -> dict[str, int]:
    """The callbacks of the next ``n`` entries (or fewer, if the run ends first), run as the loop runs them and
    counted by qualified name: what a run over its budget spends its events on (the run ends after: what they do is
    never seen)."""
    counts: dict[str, int] = {}
    try:
        for _ in range(n):
            t, _, _, fn, arg = heappop(queue)
            env._now = t
            name = _name(fn, arg)
            counts[name] = counts.get(name, 0) + 1
            fn(arg)
    except Exception:  # a halt, or whatever the model raises next: the sample so far
        pass
    return counts


def _name(fn: Callable[[Any], Any], arg: Any) -> str:
    """The qualified name of what an entry calls: through a handle, a SimPy event's first callback (a process: its
    generator) and a delay line's head."""
    if fn is _fire:
        fn = arg.fn
    elif fn is _step:
        callbacks = arg.callbacks or ()
        fn = callbacks[0] if callbacks else type(arg)
        generator = getattr(getattr(fn, "__self__", None), "_generator", None)
        if generator is not None:
            return generator.__qualname__
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, DelayLine) and owner._fns:
        fn = owner._fns[0]
        owner = getattr(fn, "__self__", None)
    elif isinstance(owner, Calendar) and owner.head() is not None:  # the calendar's run: its head's callback
        fn = owner.head()
        owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", "")
    if owner is not None and not hasattr(getattr(fn, "__func__", fn), "__code__"):
        # a compiled method (sim/build.py) takes the name of the class of the object it is bound to: name it by the
        # class that defines it, as the source's is
        for cls in type(owner).__mro__:
            if name in vars(cls):
                return f"{cls.__qualname__}.{name}"
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, "__qualname__", type(fn).__name__)


def _step(event: Any) -> None:
    """Process a SimPy event (``simpy.events.Event``) as simpy.Environment.step does."""
    callbacks, event.callbacks = event.callbacks, None
    for callback in callbacks:
        callback(event)
    if not event._ok and not hasattr(event, "_defused"):
        exc = type(event._value)(*event._value.args)
        exc.__cause__ = event._value
        raise exc


NEAR = 16  # heap entries below which call_at pushes to the heap directly (read by Sim()): below, a heap is faster
BUCKETS_PER_S = 256.0  # the calendar's first buckets per simulated second (a power of two: bucket bounds are exact)
# the mean entries of a loaded bucket below which the calendar's buckets get twice as wide, and above which half as wide
# (high: a burst, such as the server's 800,000 requests answered 503 at once, would narrow them, then widen them again,
# each time moving every waiting entry; measured, 2,048 cost the server at 800 clients 8% in six such moves)
BUCKET_FEWEST = 128
BUCKET_MOST = 65_536
# the collector's thresholds during a run: a young collection every 100,000 allocations (Python's default: 700), a
# full one after 50 × 20 of them; what cyclic garbage a run makes is still collected, in fewer passes
GC_THRESHOLDS = (100_000, 50, 20)
INLINE = 64  # line items a line calls itself, at most, before its head goes through the heap again (stall checks)
LATE = 2  # after URGENT and NORMAL at the same time (Sim.schedule_late)


class _Halt(Exception):
    """Raised by the halt entries that ``run`` (its run's number) and ``stop`` (None: the run going) schedule."""


def _halt(run: int | None) -> None:
    raise _Halt(run)
