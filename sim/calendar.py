"""The engine's calendar (a calendar queue, Brown 1988): where ``Sim.call_at`` puts an entry (sim/engine.py).

Once the event heap holds ``near`` entries, an entry due at or after the *horizon* goes in a bucket of 1/``per_s``
simulated seconds instead of the heap, appended to in O(1). The earliest bucket has a *load* entry in the heap at the
bucket's start (priority ``LOAD``, before any other entry at that time); when it is popped (``load``), the bucket's
entries move into the run (below) and the horizon moves to the bucket's end. Every entry due before the horizon is in
the heap or the run, so every entry is called in its order: the same order as one heap (tests/sim/test_engine.py).

A loaded bucket does not go into the heap entry by entry: it is sorted (by the entries' keys, as the heap orders
them) into the *run*, which stands in the heap by one entry, its head's key with ``next`` as its callback (as a delay
line's head does, sim/engine.py). When it pops, ``next`` calls the head, then the entries after it that are due
before the heap's top (each is then the next event of all; up to ``inline`` of them), and puts the next head in the
heap. So an entry that waited in a bucket costs its share of one sort, not a push and a pop of a heap of ``near``
entries. A bucket keeps its entries column by column (``Bucket``: times, ids, callbacks, arguments), not as a tuple
each: with 800,000 calls in flight a tuple an entry is 800,000 objects made, read cold by the sort and the run seconds
later, and freed cold.
The next load is due at the horizon, after every entry of the run: a run is done before the next bucket is loaded.

The buckets' width follows the density of events (``_rewidth``): every ``REWIDTH_LOADS`` loads, a mean below
``fewest`` entries a bucket makes them twice as wide, above ``most`` half as wide. The waiting entries move to the
buckets of the new width, and a load entry of an earlier width does nothing. Sorting by time alone stays exact: entries
with the same time were in one bucket before, in the order of their ids, and a new bucket takes them in that order.

It is its own module so that the compiled core (sim/build.py) compiles it: ``push`` is what every per-call path that
does not inline it (above ``near`` entries: a load test with a million calls in flight) calls for every entry, and
compiled, a compiled caller calls it without entering the interpreter. The engine's loop stays Python
(docs/explanation/speed.md, "The compiled core").
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from heapq import heapify, heappop, heappush
from itertools import count
from typing import Any, Final

# SimPy's NORMAL event priority (sim/engine.py checks it), and a load entry's: before SimPy's URGENT (0) and NORMAL
# at the same time (Final: inlined where compiled)
NORMAL: Final = 1
LOAD: Final = -1
REWIDTH_LOADS: Final = 32  # buckets loaded between looks at their mean size (``Calendar.load``)
MIN_PER_S: Final = 2.0**-8  # the widest and the narrowest buckets: 256 s and 1/65,536 s
MAX_PER_S: Final = 2.0**16
RAW: Final = object()  # an entry's argument is the int in the bucket's ``ints`` column


class Bucket:
    """One bucket's entries, column by column, in the order they were pushed (the order of their ids): each entry's
    key ``(time, NORMAL, id)`` and its call ``fn(arg)``."""

    def __init__(self) -> None:
        self.times: list[Any] = []  # the callers' times, as they gave them
        self.ids = array("q")  # the entries' ids, as machine integers
        self.add_id = self.ids.append
        self.fns: list[Any] = []
        self.args: list[Any] = []  # (RAW: the int in ``ints``)
        # an argument that is an int (a call's row): as a machine integer, not the object, which by its entry's
        # turn is cold (a fresh one is made to call it with, equal to it)
        self.ints = array("q")
        self.add_int = self.ints.append


class Calendar:
    """The buckets of entries due at or after ``horizon``, beside the heap ``queue`` (the engine's: its entries
    ``(time, priority, id, fn, arg)``, ids from ``ids``), used once the heap holds ``near`` entries (``math.inf``:
    never); ``env`` holds the clock."""

    def __init__(
        self, queue: list[Any], ids: count, env: Any, near: float, per_s: float, inline: int, fewest: int, most: int
    ) -> None:
        self.queue = queue
        self.ids = ids
        self.env = env
        self.near = near
        self.per_s = per_s
        self.far = 2.0**52 / per_s  # entries due this late go to the heap (a bucket index must be an exact integer)
        # the width adapts (``_rewidth``): loaded buckets of fewer than ``fewest`` entries on average, twice as wide;
        # of more than ``most``, half as wide
        self.fewest, self.most = fewest, most
        self.widths = 0  # width changes so far: a load entry of an earlier width does nothing
        self._loaded = self._entries = 0  # buckets loaded, and their entries, since the last change
        self.horizon = 0.0
        self.buckets: dict[int, Bucket] = {}
        self.bucket_heap: list[int] = []  # the indices of the buckets that hold entries
        self.loads = 0  # load entries popped (not events of the model)
        self._load_cb = self.load
        # the loaded bucket, and its entries' positions in the order of their keys; from ``at`` on still to come
        self.run = Bucket()
        self.order: list[int] = []
        self.at = 0
        self.inline = inline  # run entries ``next`` calls after the head, at most, before the next goes in the heap
        self.inlined = 0  # run entries called by ``next`` itself, not popped (events of the model all the same)
        self._next_cb = self.next

    def push(self, t: Any, fn: Callable[[Any], Any], arg: Any = None) -> None:
        """Call ``fn(arg)`` at absolute time ``t`` (not before now: the per-call paths guarantee it): ``Sim.call_at``.
        ``t`` is the caller's float, kept as it is (typed Any: compiled, not unboxed and boxed again)."""
        queue = self.queue
        due: float = t  # its value as a machine double: compared and scaled below without objects
        if len(queue) < self.near or due < self.horizon or due >= self.far:
            heappush(queue, (t, NORMAL, next(self.ids), fn, arg))
            return
        b = int(due * self.per_s)
        bucket = self.buckets.get(b)
        if bucket is None:
            bucket = self.buckets[b] = Bucket()
            buckets = self.bucket_heap
            heappush(buckets, b)
            if buckets[0] == b:  # the earliest bucket: its load entry
                self._load_at(b)
        bucket.times.append(t)
        bucket.add_id(next(self.ids))
        bucket.fns.append(fn)
        if type(arg) is int:
            try:
                bucket.add_int(arg)
            except OverflowError:  # past 64 bits: kept as the object
                bucket.add_int(0)
                bucket.args.append(arg)
            else:
                bucket.args.append(RAW)
        else:
            bucket.add_int(0)
            bucket.args.append(arg)

    def _load_at(self, b: int) -> None:
        """Bucket ``b``'s load entry, at its start (or at the horizon or now, if later: a bucket of a new width may
        start before either)."""
        at = max(b / self.per_s, self.horizon, self.env._now)
        heappush(self.queue, (at, LOAD, 0, self._load_cb, (self.widths, b)))

    def load(self, key: tuple[int, int]) -> None:
        """A load entry: sort bucket ``b`` into the run, its head in the heap (its entries are due before anything
        else left in the buckets), and put the next bucket's load entry in the heap (a second one for a bucket that
        has one, or one of an earlier width, does nothing)."""
        self.loads += 1
        widths, b = key
        if widths != self.widths:
            return
        bucket = self.buckets.pop(b, None)
        if bucket is None:
            return
        buckets, queue = self.bucket_heap, self.queue
        heappop(buckets)  # b: an earlier bucket's load entry would have popped before this one
        # by (time, priority, id): every entry in a bucket is NORMAL and was pushed in the order of its id, so a
        # stable sort by time alone is that order (float keys, not tuples, compared)
        times = bucket.times
        order = sorted(range(len(times)), key=times.__getitem__)
        self.run, self.order, self.at = bucket, order, 0
        head = order[0]
        heappush(queue, (times[head], NORMAL, bucket.ids[head], self._next_cb, None))
        self.horizon = (b + 1) / self.per_s
        self._loaded += 1
        self._entries += len(order)
        if self._loaded == REWIDTH_LOADS:
            mean = self._entries / REWIDTH_LOADS
            self._loaded = self._entries = 0
            if mean < self.fewest and self.per_s > MIN_PER_S:
                self._rewidth(self.per_s / 2)
            elif mean > self.most and self.per_s < MAX_PER_S:
                self._rewidth(self.per_s * 2)
        if self.bucket_heap:  # (a new one, if the width changed)
            self._load_at(self.bucket_heap[0])

    def _rewidth(self, per_s: float) -> None:
        """Buckets of 1/``per_s`` seconds from now on: every waiting entry moves to the bucket of the new width that
        holds its time (or to the heap, past the new ``far``). An entry keeps its place among those of its new
        bucket with its time (they were in one bucket before: the same time, the same bucket), so a bucket's
        entries are still in the order of their ids where times tie."""
        self.per_s, self.far, self.widths = per_s, 2.0**52 / per_s, self.widths + 1
        old, self.buckets, self.bucket_heap = self.buckets, {}, []
        buckets, queue = self.buckets, self.queue
        for b in sorted(old):
            moved = old[b]
            for i in range(len(moved.times)):
                t = moved.times[i]
                due: float = t
                if due >= self.far:
                    arg = moved.args[i]
                    heappush(queue, (t, NORMAL, moved.ids[i], moved.fns[i], moved.ints[i] if arg is RAW else arg))
                    continue
                nb = int(due * per_s)
                bucket = buckets.get(nb)
                if bucket is None:
                    bucket = buckets[nb] = Bucket()
                    self.bucket_heap.append(nb)
                bucket.times.append(t)
                bucket.add_id(moved.ids[i])
                bucket.fns.append(moved.fns[i])
                bucket.args.append(moved.args[i])
                bucket.add_int(moved.ints[i])
        heapify(self.bucket_heap)

    def next(self, _arg: None) -> None:
        """The run's head popped (the clock is at it): call it, then the entries after it due before the heap's top,
        up to ``inline`` of them, and put the next head in the heap. Each entry is let go of once called (its
        memory is reused while it is in the cache, not a bucket later)."""
        run, order, queue, env = self.run, self.order, self.queue, self.env
        times, fns, args = run.times, run.fns, run.args
        at = self.at
        i = order[at]
        fn, arg = fns[i], args[i]
        if arg is RAW:
            arg = run.ints[i]
        times[i] = fns[i] = args[i] = None
        at += 1
        self.at = at
        fn(arg)
        n = len(order)
        for _ in range(self.inline):
            if at >= n:
                return
            i = order[at]
            t = times[i]
            due: float = t
            top: tuple[Any, ...] = queue[0]
            first: float = top[0]
            if due > first:
                break
            if due == first:  # a tie: by priority, then id, as the entry's key (t, NORMAL, id) compares with the top's
                priority = top[1]
                if priority < NORMAL or (priority == NORMAL and run.ids[i] > top[2]):
                    break
            fn, arg = fns[i], args[i]
            if arg is RAW:
                arg = run.ints[i]
            times[i] = fns[i] = args[i] = None
            at += 1
            self.at = at
            env._now = t
            self.inlined += 1
            fn(arg)
        if at < n:
            i = order[at]
            heappush(queue, (times[i], NORMAL, run.ids[i], self._next_cb, None))

    def head(self) -> Any:
        """What the run's head calls (None once the run is done): the callback its entry in the heap stands for."""
        return self.run.fns[self.order[self.at]] if self.at < len(self.order) else None
