"""Open-loop callers of a load test (the scenario's ``load`` key: ``arrivals`` and ``trace``;
models/inputs/callers/clients.py has what every caller shares).

Open loop (``arrivals``): Poisson arrivals at ``rate`` per second × a demand shape over time
(models/inputs/callers/demand.py, which holds the ``arrivals`` and ``trace`` sections), drawn by thinning. Trace replay
(``trace``): per-minute invocation counts replayed, each minute's calls at random offsets within it or all at its start.
App copies share an open loop's arrivals round robin.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from heapq import heappush

import numpy as np
from mypy_extensions import mypyc_attr

from models.inputs.base import Scenario
from models.inputs.callers.clients import Load, Target
from models.inputs.callers.demand import Shape
from models.inputs.records import CallLog, Time
from sim.dists import Exponential
from sim.engine import NORMAL, Sim
from sim.rng import Streams


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled (sim.build), subclassed by uncompiled code
class OpenLoop(Load):
    """Poisson arrivals at ``rate`` × the shape per second until the duration ends (models/inputs/callers/demand.py: a
    varying rate by thinning candidates drawn at the shape's peak)."""

    def __init__(
        self,
        sim: Sim,
        sc: Scenario,
        log: CallLog,
        streams: Streams,
        targets: list[Target],
        style: int,
        http: bool,
        clients: Sequence[int] | None = None,
    ) -> None:
        super().__init__(sim, sc, log, streams, targets, style, http, clients)
        profile = sc.arrivals.profile
        self.rate = sc.arrivals.mean_rate(sc.duration_s)
        # the arrivals' work (one stream, as the arrivals) and the gaps between them; each draw is handed on as it is
        # (records.Time: compiled, not unboxed and boxed again)
        self.work: Callable[[], Time] = sc.work.sampler(self.streams.get("work"))
        self.gaps = Exponential(1.0 / (sc.arrivals.rate * profile.peak()))  # between candidates, at the peak rate
        self._gap: Callable[[], Time] = self.gaps.sampler(self.streams.get("arrivals"))
        if profile.kind != "steady":  # thinning: keep a candidate at t with probability factor(t) / peak
            self._gap = thinned(self._gap, profile, self.streams.get("arrivals/thinning"), self.env)
        self.mean_work = sc.work.mean

    def loss_of_failure(self, call: int) -> float:
        return self.log.work[call]  # an open loop loses the call, not a slot

    def start(self) -> None:
        self._new = self.log.new
        self._single = len(self.targets) == 1
        # one target reached at once (no overhead.submit): what _arrive offers each call to
        direct = self._single and self._submit is None and self.timeouts is None
        self._direct = self.targets[0].submit if direct else None
        # no timeouts, through the submit leg: what _arrive sends each call down (_new_arrival and _issue, inlined)
        self._leg = self._submit if self.timeouts is None else None
        self._n_targets = len(self.targets)
        self._arrive_cb = self._arrive
        self._call_at = self.sim.call_at
        self._heap, self._ids, self._heap_below = self.sim.heap, self.sim.ids, self.sim.direct  # call_at inlined
        first = self._gap()
        if first < self.duration:
            self._call_at(first, self._arrive_cb)

    def _new_arrival(self, now: float) -> None:
        """A new call, to the targets in turn (app copies share an open loop's arrivals round robin)."""
        if self._single:
            client = 0
        else:
            client = self._arrivals % len(self.targets)
            self._arrivals += 1
        call = self._new(client, now, self.work())
        self.outstanding += 1
        self._issue(call, client)

    def _issue(self, call: int, target: int) -> None:
        """Send ``call`` to target ``target`` (through the submit leg, if any)."""
        if self.timeouts is not None:
            self.timeouts.arm(call)
        if self._submit is not None:
            self._submit(call)
        else:
            kind = self.targets[target].submit(call, self.style)
            if kind is not None:
                self._rejected(call, kind)

    _arrivals = 0  # calls issued so far (several targets)
    _single = False  # one target: every call goes to it

    _direct: Callable[[int, int], str | None] | None = None
    _leg: Callable[[int], None] | None = None

    def _arrive(self, _arg: None) -> None:
        now = self.env._now
        if self._direct is not None:  # _new_arrival, inlined: the per-call hot path
            call = self.log.new(0, now, self.work())  # the log's method (compiled: a direct call)
            self.outstanding += 1
            kind = self._direct(call, self.style)
            if kind is not None:
                self._rejected(call, kind)
        elif self._leg is not None:  # _new_arrival and _issue, inlined: the per-call hot path through overhead.submit
            if self._single:
                client = 0
            else:
                client = self._arrivals % self._n_targets
                self._arrivals += 1
            call = self.log.new(client, now, self.work())
            self.outstanding += 1
            self._leg(call)
        else:
            self._new_arrival(now)
        nxt = now + self._gap()
        if nxt < self.duration:
            heap = self._heap
            if len(heap) < self._heap_below:  # call_at, inlined
                heappush(heap, (nxt, NORMAL, next(self._ids), self._arrive_cb, None))
            else:
                self._call_at(nxt, self._arrive_cb)


def thinned(gap: Callable[[], float], profile: Shape, rng, env) -> Callable[[], float]:
    """The gap to the next kept candidate of a Poisson stream at the peak rate (Lewis–Shedler thinning)."""
    peak = profile.peak()

    def next_gap() -> float:
        t = env._now
        g = 0.0
        while True:
            g += gap()
            if rng.random() * peak < profile.factor(t + g):
                return g

    return next_gap


class TraceReplay(OpenLoop):
    """A per-minute invocation-count trace replayed (models/inputs/callers/demand.py): each minute's calls at random
    offsets within it, or all at its start."""

    def __init__(
        self,
        sim: Sim,
        sc: Scenario,
        log: CallLog,
        streams: Streams,
        targets: list[Target],
        style: int,
        http: bool,
        clients: Sequence[int] | None = None,
    ) -> None:
        Load.__init__(self, sim, sc, log, streams, targets, style, http, clients)
        self.work = sc.work.sampler(self.streams.get("work"))
        self.tp = sc.trace
        self.counts = sc.trace.counts()
        self.rate = sc.trace.mean_rate(sc.duration_s)
        self.mean_work = sc.work.mean
        self._offsets = self.streams.get("arrivals")

    def start(self) -> None:
        self._new = self.log.new
        self._single = len(self.targets) == 1
        self._minute(0)

    def _minute(self, m: int) -> None:
        """Schedule minute ``m``'s calls, then the next minute's scheduling at its start."""
        start = 60.0 * m
        if m >= len(self.counts) or start >= self.duration:
            return
        n = int(self.counts[m])
        at_start = self.tp.spread == "start"
        times = np.full(n, start) if at_start else np.sort(start + 60.0 * self._offsets.random(n))
        for t in times[times < self.duration]:
            self.sim.call_at(float(t), self._call, None)
        self.sim.call_at(start + 60.0, self._next_minute, m + 1)

    def _next_minute(self, m: int) -> None:
        self._minute(m)

    def _call(self, _arg: None) -> None:
        self._new_arrival(self.env._now)
