"""Closed-loop callers (the scenario's ``load = "clients"``; models/inputs/callers/clients.py has what every caller
shares): ``count`` clients each keep ``in_flight`` calls outstanding; a call that returns before the test's duration is
followed at once by the next (docs/sources.md §1, the reference load test).

Round trips: on the Function path with non-zero ``overhead.result`` and ``overhead.submit`` legs, a call whose work
ends at t is back at t + r (r drawn then from its client's result stream), and when the next call follows (t + r
before the duration, nothing failed) that call's work and submit leg s are drawn then too, from the client's own
streams: each client draws in the order its calls' work ends, whatever the order of the events after. The back is at
t + r; the next call, made then, reaches the Function at (t + r) + s. Nothing sees either call in between (they are
in transit), so with the ``round_trips`` shortcut that is one event, at the arrival, instead of two: the back and
the next call's issue are recorded then, at their own times (``RoundTrips``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mypy_extensions import mypyc_attr

from models.inputs.callers.clients import Load, Scenario, Target
from models.inputs.platform.overhead import is_zero
from models.inputs.platform.overhead_params import OverheadParams
from models.inputs.records import CallLog
from models.inputs.shortcut_names import ROUND_TRIPS
from sim.engine import Sim
from sim.rng import PerClient, Streams


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled (sim.build), subclassed by uncompiled code (a test)
class ClosedLoop(Load):
    """Each client keeps ``in_flight`` calls outstanding until the duration ends (or, without ``reissue``, makes its
    ``in_flight`` calls once). Its calls go round trips where the legs allow (``trips``: None where not)."""

    connected = True

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
        self.reissue = sc.clients.reissue
        op = sc.overhead
        self.trips: RoundTrips | None = None
        # (a call that holds a stream takes its way out through the pool: each leg its own event, drawn as it leaves)
        if (
            self.reissue
            and self._submit is not None
            and self.connections is None
            and not (is_zero(op.result) or is_zero(op.submit))
        ):
            self.trips = RoundTrips(self, op)
            self._submit = self.trips.submit
            self.work_ended = self.trips.work_ended
        elif self._http and self._map is None and self.connections is None and self.reissue:
            # the proxy's callers, with no connection pool that binds: done, returned and _send in one callback
            self.work_ended = self._served
            self._send_cb = self._resend

    def _served(self, call: int) -> None:
        """``done`` for a request to the proxy (``returned`` and ``_send`` inlined: every request but the first of
        each slot follows one here): the same steps, in the same order."""
        if call in self._kinds:
            self.done(call)
            return
        now = self.env._now
        self._finished[call] = now
        if now < self.duration:  # the next request, at once (its outstanding count replaces this one's)
            client = self._client[call]
            nxt = self.log.new(client, now, self.work_of[client]())
            kind = self.targets[client % self._copies - self._first].submit(nxt, self.style)
            if kind is not None:
                self._rejected(nxt, kind)
            self._close(call)
            return
        self.outstanding -= 1
        self._close(call)
        if self.outstanding == 0:
            self._maybe_drained()

    def _resend(self, call: int) -> None:
        """``_send`` for a retried request to the proxy (no pool, no map)."""
        kind = self.targets[self._client[call] % self._copies - self._first].submit(call, self.style)
        if kind is not None:
            self._rejected(call, kind)

    def settle(self) -> None:
        """Trips under way at the end: the call came back and the next was made (it is in flight)."""
        if self.trips is not None:
            self.trips.settle()

    def start(self) -> None:
        for client in self.clients:
            work = self.work_of[client]
            for _ in range(self.cp.in_flight):
                self.new_call(client, work())
        if not self.outstanding:  # no clients here (more app copies than clients), or every call failed at once
            self._stop()

    def _maybe_drained(self) -> None:
        """Nothing in flight: a closed loop issues a call only when one comes back, so nothing will be, whatever the
        time (the run itself goes on to its end: models/inputs/parts.py ``run_end``)."""
        self._stop()

    @staticmethod
    def _pool_binds(limit: int, in_flight: int) -> bool:
        """A client of a closed loop has at most ``in_flight`` calls out, and a call waiting to retry holds no
        connection or stream: a pool of at least that many never holds one back (its bookkeeping is skipped)."""
        return 0 < limit < in_flight

    def loss_of_failure(self, call: int) -> float:
        """Without reissue a failed call loses its own work; else the rest of its slot (Load)."""
        return super().loss_of_failure(call) if self.reissue else self.log.work[call]

    def returned(self, call: int) -> None:
        if self.trips is not None:  # round trips: the next call was drawn when this one's work ended
            self.trips.returned(call)
            return
        now = self.env._now
        if self.reissue and now < self.duration and call not in self._kinds:
            # new_call, inlined: every call but the first of each slot is made here
            client = self._client[call]
            self.outstanding += 1
            self._send(self.log.new(client, now, self.work_of[client]()))


class RoundTrips:
    """A closed loop's round trips (module docstring): the way back and the next call's work and way out drawn when
    a call's work ends, as one event under the ``round_trips`` shortcut. ``submit`` sends the calls made at the start
    and the retries, ``work_ended`` is what the Function tells."""

    def __init__(self, load: ClosedLoop, op: OverheadParams) -> None:
        self.load = load
        self.next: dict[int, tuple[float, float]] = {}  # call → (next call's work, its submit leg)
        self._back_of = PerClient(load.streams, "overhead/result", op.result)  # the streams of ``leg``
        self._out_of = PerClient(load.streams, "overhead/submit", op.submit)
        self._fused = ROUND_TRIPS in load.sim.shortcuts
        # hot-path aliases (the same objects all run)
        self.env, self._log, self._client = load.env, load.log, load.log.client
        self._call_at, self._call_in, self._reach = load.sim.call_at, load.sim.call_in, load._reach
        self._done = load.done
        self._kinds, self._finished, self._work_of = load._kinds, load._finished, load.work_of
        self._timeouts, self._duration = load.timeouts, load.duration

    def submit(self, call: int) -> None:
        """A call leaves without a trip before it (made at the start, or retried): its way out drawn as it leaves
        (Load's leg, same stream)."""
        self._call_in(self._out_of[self._client[call]](), self._reach, call)

    def work_ended(self, call: int) -> None:
        """The work of ``call`` ended: its way back drawn, and the next call's work and way out if one follows. A
        call whose caller stops waiting first (``clients.timeout_s``: its deadline at or before the back) is no
        round trip: it goes back as an abandoned input (``done``), and the caller's retry is the timeout's."""
        client = self._client[call]
        back = self.env._now + self._back_of[client]()
        timeouts = self._timeouts
        deadline = timeouts.deadline.get(call, math.inf) if timeouts is not None else math.inf
        if back < self._duration and call not in self._kinds and back < deadline:
            self.next[call] = nxt = (self._work_of[client](), self._out_of[client]())
            if self._fused:
                self._finished[call] = back
                if timeouts is not None:  # back in time: the caller has it at ``back``, before its deadline
                    timeouts.deadline.pop(call, None)
                self._call_at(back + nxt[1], self._turn, call)
                return
        self._call_at(back, self._done, call)

    def returned(self, call: int) -> None:
        """``call`` is back (unfused): the next call, drawn when its work ended, leaves now."""
        if call in self.next:
            work, out = self.next.pop(call)
            self.load.outstanding += 1
            nxt = self._log.new(self._client[call], self.env._now, work)
            if self._timeouts is not None:
                self._timeouts.arm(nxt)
            self._call_in(out, self._reach, nxt)

    def _turn(self, call: int) -> None:
        """``call`` came back at its ``finished`` time and the next call, made then, reaches the Function now."""
        self._reach(self._reissue(call))

    def _reissue(self, call: int) -> int:
        log = self._log
        nxt = log.new(log.client[call], log.finished[call], self.next.pop(call)[0])
        log.close(call)
        return nxt

    def settle(self) -> None:
        """Trips under way at the end: the call came back and the next was made (it is in flight)."""
        for call in list(self.next):
            self._reissue(call)
