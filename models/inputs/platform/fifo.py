"""A fixed pool under an open loop, served by recursion instead of events (aggregation on the hot path).

A Function whose pool is fixed (``function.containers`` > 0: always warm, no autoscaling), with no input limits
(``limits.enabled = false``), every slot alike (``target_inputs`` = ``max_inputs``) and no dispatch overhead, fed by
steady Poisson arrivals (``load = "arrivals"``) through constant submit and result legs, is a FIFO G/G/c queue of
c = containers × max_inputs slots (the mmc preset, docs/sources.md §4). Nothing in it feeds back into the arrivals, and
an input that reaches it at r starts at max(r, the earliest time a slot is free) and holds that slot for its work: the
workload recursion of Kiefer and Wolfowitz (1955), which is what the Function's events compute
(models/inputs/platform/function.py: a free slot takes an arrival at once, a freed slot the next pending input).

So ``FifoQueue`` serves the arrivals in blocks of ``BLOCK`` by that recursion, one heap operation an input, instead of
two events an input: the same issue, start and end times to the bit, from the same random streams drawn in the same
order (tests/models/inputs/test_fifo.py compares every metric, series and record with the events' run). Its events are
one per block (at the block's first arrival), the monitor's samples, answered from the blocks' times, and the stop. The
scenarios it serves are the shape of the ``fifo`` shortcut (models/inputs/shortcuts.py); with ``shortcuts =
"all,-fifo"`` (or ``none``) they run on events instead.
"""

from __future__ import annotations

from heapq import heapreplace
from itertools import islice

import numpy as np

from models.inputs.base import Scenario
from models.inputs.callers.arrivals import OpenLoop
from models.inputs.platform.autoscaler import ContainerPool
from models.inputs.platform.function import full_pool_wait
from sim.engine import Sim

BLOCK = 4096  # arrivals served at a time (any size gives the same numbers: the draws come in their own batches)


class FifoQueue(OpenLoop):
    """The open loop and the Function it calls, as one FIFO queue served by the workload recursion: the load test's
    callers and its one target (what the monitor samples)."""

    def __init__(self, sim: Sim, sc: Scenario, *args) -> None:
        super().__init__(sim, sc, *args)
        self._s, self._r = sc.overhead.submit.x, sc.overhead.result.x
        self._until = sc.duration_s + sc.drain_s
        self._gaps = self.gaps.draws(self.streams.get("arrivals"))
        self._works = sc.work.draws(self.streams.get("work"))
        fixed = sc.function.containers
        self._free = [0.0] * (fixed * sc.function.max_inputs)  # when each slot is next free: a heap
        self.pool = ContainerPool(sim, sc.autoscaler, self.streams, "function", lambda: fixed, _ready, fixed=fixed)
        self.started = 0  # inputs started by the monitor's last sample
        self._served = 0  # inputs served so far (their times known, whether past or to come)
        self._blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (reach, start, end) not all ended
        self._issued = 0.0  # the last arrival drawn
        self._last_back = -np.inf
        self._block = np.empty(0)

    def start(self) -> None:
        self._next_block()

    def _next_block(self) -> None:
        """Draw the next block's arrivals (those before the duration) and serve them at the first; after the last,
        the run stops when its last input is back, if that is after the duration (``Load._maybe_drained``)."""
        if self._issued < self.duration:
            gaps = np.fromiter(islice(self._gaps, BLOCK), float, BLOCK)
            issued = np.cumsum(np.concatenate(([self._issued], gaps)))[1:]  # left to right, as one at a time
            self._issued = float(issued[-1])
            self._block = issued[: np.searchsorted(issued, self.duration)]
            if len(self._block):
                self.sim.call_at(float(self._block[0]), self._serve)
                return
        if not self.outstanding and self._last_back >= self.duration:
            self.sim.call_at(self._last_back, self._drained)

    def _serve(self, _arg: None) -> None:
        issued = self._block
        n = len(issued)
        work = np.fromiter(islice(self._works, n), float, n)
        reach = issued + self._s if self._s else issued
        start, end = (np.array(times) for times in _recursion(self._free, reach.tolist(), work.tolist()))
        back = end + self._r if self._r else end
        never = back >= self._until  # what the run's end (duration + drain) leaves out: never back
        self.outstanding += int(never.sum())
        self.log.extend(issued, work, np.where(start < self._until, start, np.nan), np.where(never, np.nan, back))
        self._served += n
        self._blocks.append((reach, start, end))
        self._last_back = max(self._last_back, float(back.max()))
        progress = self.sim.guard.progress
        if progress is not None:  # a block is thousands of inputs: worth a look up (sim/guard.py)
            progress(self.env._now, self._until)
        self._next_block()

    def _drained(self, _arg: None) -> None:
        self._stop()

    def violations(self, now: float) -> list[str]:
        """What its counts break of its limits' bounds (models/inputs/checks/invariants.py): nothing (the recursion runs
        only without limits: its shape)."""
        return []

    def state(self) -> tuple[int, int, int, str | None]:
        """(running, pending, containers, why pending inputs wait) now, as the Function's events would have left
        them (models/inputs/platform/monitor.py)."""
        t = self.env._now
        started, pending, running = self._served, 0, 0
        live = []
        for reach, start, end in self._blocks:
            s = int(np.searchsorted(start, t, "right"))  # starts are in order: a FIFO queue
            ended = int(np.count_nonzero(end <= t))
            started -= len(start) - s
            pending += int(np.searchsorted(reach, t, "right")) - s
            running += s - ended
            if ended < len(end):
                live.append((reach, start, end))
        self._blocks = live
        self.started = started
        return running, pending, self.pool.size, full_pool_wait(self.pool) if pending else None


def _ready(_container: object) -> None:
    """A fixed pool's container is ready (at the start): the recursion's slots stand for it."""


def _recursion(free: list[float], reach: list[float], work: list[float]) -> tuple[list[float], list[float]]:
    """Each input's start and end in a FIFO queue whose slots are next free at the times in the heap ``free``
    (updated): it starts when it reaches the queue or when the earliest slot is free, whichever is later."""
    starts, ends = [], []
    for r, w in zip(reach, work, strict=True):
        f = free[0]
        s = r if r > f else f
        e = s + w
        heapreplace(free, e)
        starts.append(s)
        ends.append(e)
    return starts, ends
