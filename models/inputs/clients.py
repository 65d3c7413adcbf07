"""The callers of a load test (docs/sources.md §1, the reference load test): what every kind shares (``Load``) and the
closed loop (``clients``), one of the family the scenario's ``load`` key names (``LOADS``: models/inputs/approaches/
base.py; open-loop arrivals and trace replay: models/inputs/arrivals.py).

Closed loop (``clients``): ``count`` clients each keep ``in_flight`` calls outstanding; a call that returns before the
test's duration is followed at once by the next. An approach may bring its own callers (batching's rounds of chunks:
models/inputs/approaches/batching.py).

A call leaves its client as one request of its own (``api = "single"``: ``.remote``/``.spawn``) or as an input of the
client's map call (``api = "map"``: ``.map``/``.spawn_map``, with the modal client's batching and retries:
models/inputs/mapcall.py). On the Function path a client's single calls share its one HTTP/2 connection, which carries
at most ``streams`` at once (0: no cap); the rest wait at the client, in order.

A rejected single call is handled by the client's retry policy (modal 1.6.4 client source, docs/sources.md §1):
- ``none``: a single ``.remote``/``.spawn`` raises; the load test's task for that call ends (as an unhandled
  exception ends an asyncio task), so the client keeps one call fewer in flight;
- ``backoff``: the call is retried after min(backoff_max_s, backoff_base_s · 2^attempt), jittered by
  uniform(0.5, 1), forever (the harness's own policy; ``.map``'s is models/inputs/mapcall.py's);
- ``exponential``: the same delays without the jitter (every caller rejected together retries together);
- ``fixed``: after ``retry_delay_s``; ``random``: after an exponential time of mean ``retry_delay_s`` (the
  classical retrial queue's orbit, Falin and Templeton 1997); ``immediate``: at once (at the clock's next tick).
With ``max_attempts`` > 0 a call rejected on its last try fails (kind as rejected) instead of retrying again. These
are the policies users write around a call (assumptions); a retry storm they cause is stopped by the run budget.

Before any of them, the modal client itself (``on_rate_limit``): modal 1.6.4's ``_retry_transient_errors``
(modal/_utils/grpc_utils.py) follows a retry instruction the server attaches to an error (``RPCRetryPolicy``: it
sleeps max(retry_after_secs, 0.1 s) and tries again, on any status and without limit unless ``max_throttle_wait``
is set), while a bare ``RESOURCE_EXHAUSTED`` raises ``ResourceExhaustedError`` to the caller. Which of the two
Modal's input plane sends when a call passes its accept limits (``rate_limited``, ``queue_full``) is not published
(docs/sources.md §1, "Client behaviour"), so it is a structural alternative: ``raise`` (the default: the refusals
the docs quote reached their callers) or ``retry_after`` (the client waits ``retry_after_s`` and tries again, within
``max_throttle_wait_s`` of the call's first try; past it the rejection goes to the retry policy as above). The
ranges carry both (experiments/uncertainty.py). Single calls on the Function path only: a map call has its own
retries (models/inputs/mapcall.py), and the server's 503/429 come from its proxy, not from the input plane.

With ``timeout_s`` > 0 a caller stops waiting for an attempt that is not back that long after it was sent (as
``asyncio.wait_for`` around ``.remote.aio()`` or ``FunctionCall.get(timeout=...)`` does): the attempt counts as
rejected with kind ``timeout`` and the retry policy handles it as any rejection (``none``: the call fails). The
input itself is *abandoned*, not cancelled: modal 1.6.4's client sends ``FunctionCallCancel`` only from
``FunctionCall.cancel()``, never when a caller stops waiting, so the Function still runs it to its end (counted in
``abandoned``; its work reaches nobody). The caller's call moves to a new row of the log for its next try, while the
abandoned row stays the Function's until it is done with it (``CallLog.orphans``): a retry after a timeout adds an
input without taking one away, the mechanism by which retries keep an overloaded Function overloaded (Bronson et al.,
HotOS'21). Timeouts are modelled for single calls on the Function path without a stream cap.
For the server approach the client owns an HTTP connection pool of ``connection_limit`` connections instead.

On the Function path a call reaches the Function's accept ``overhead.submit`` after it is issued (models/inputs/
overhead.py; a leg of 0: at once, no event); the client learns of a rejection when the call arrives.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from models.inputs.mapcall import MapCalls
from models.inputs.overhead import OverheadParams, is_zero, leg
from models.inputs.records import CallLog
from models.inputs.shortcuts import ROUND_TRIPS
from sim.dists import Dist, Exponential, Uniform
from sim.engine import Sim
from sim.rng import PerClient, Streams
from sim.scenario import param

THROTTLED = frozenset(("rate_limited", "queue_full"))  # the input plane's refusals (ResourceExhaustedError)
THROTTLE_FLOOR_S = 0.1  # modal 1.6.4: max(retry_after_secs, 0.1)


@dataclass(frozen=True)
class ClientParams:
    count: int = param(8, ge=1, le=1_000_000, source="reference load test: 8 clients (docs/sources.md §1)")
    in_flight: int = param(1000, ge=1, source="reference load test: 1,000 calls in flight per client")
    retry: Literal["none", "backoff", "exponential", "fixed", "random", "immediate"] = param(
        "none",
        source="modal 1.6.4: a single .remote/.spawn does not retry; the others are the policies callers write "
        "(assumption: what a user's own retry loop does)",
        doc="what a caller does with a rejected call (module docstring): none, backoff (exponential, jittered), "
        "exponential (no jitter), fixed (retry_delay_s), random (exponential times of mean retry_delay_s: the "
        "retrial queue's), immediate (at once)",
    )
    on_rate_limit: Literal["raise", "retry_after"] = param(
        "raise",
        source="modal 1.6.4 _retry_transient_errors: a server retry instruction is followed, a bare "
        "RESOURCE_EXHAUSTED raises; which one Modal's input plane sends is not published (docs/sources.md §1, "
        "'Client behaviour'): an assumption, a structural alternative the ranges carry",
        doc="what the modal client does with a call refused by the accept limits (rate_limited, queue_full): raise "
        "(to the retry policy ``retry``) or retry_after (it waits retry_after_s and tries again, within "
        "max_throttle_wait_s); single calls on the Function path",
    )
    retry_after_s: float = param(
        1.0,
        gt=0,
        le=86400,
        source="assumption: the server's retry_after_secs is not published; modal 1.6.4 waits at least 0.1 s",
        doc="on_rate_limit = retry_after: the wait the server asks for (the client waits max(this, 0.1 s))",
    )
    max_throttle_wait_s: float = param(
        0.0,
        ge=0,
        le=1e9,
        source="modal 1.6.4 config max_throttle_wait (MODAL_MAX_THROTTLE_WAIT; default unset: no limit)",
        doc="on_rate_limit = retry_after: the client stops following retry instructions once the next try would be "
        "this long after the call's first try, and the rejection goes to ``retry``; 0 = no limit (modal's default)",
    )
    backoff_base_s: float = param(0.5, gt=0, source="assumption: first retry delay of the test's HTTP client")
    backoff_max_s: float = param(15.0, gt=0, source="modal 1.6.4 .map: at most 15 s between tries")
    retry_delay_s: float = param(1.0, gt=0, source="assumption", doc="fixed: the delay; random: its mean")
    max_attempts: int = param(
        0, ge=0, le=1_000_000, source="assumption", doc="give up after this many tries of a call (0: never)"
    )
    timeout_s: float = param(
        0.0,
        ge=0,
        source="assumption: a caller's own deadline (asyncio.wait_for, FunctionCall.get(timeout=...)); modal 1.6.4 "
        "does not cancel an input whose caller stops waiting, so it runs on",
        doc="a caller gives up on an attempt not back this many seconds after it was sent (kind timeout, then the "
        "retry policy); the input still runs; 0 = waits forever; single calls on the Function path only",
    )
    reissue: bool = param(
        True,
        doc="false: the calls in flight at the start are made once and not followed by others (N spawned or mapped "
        "calls; the run ends when all are back)",
    )
    connection_limit: int = param(
        1000, ge=0, source="assumption: aiohttp connector limit raised to the calls in flight; 0 = no limit"
    )
    api: Literal["single", "map"] = param(
        "single",
        source="reference load test: one .remote/.spawn per call; map: modal 1.6.4 .map/.spawn_map "
        "(docs/sources.md §1)",
        doc="how a client's calls leave it: one request per call, or one map call over them (.map on the remote "
        "approach, .spawn_map on spawn: models/inputs/mapcall.py)",
    )
    streams: int = param(
        0,
        ge=0,
        source="assumption: Modal's server's HTTP/2 concurrent-stream cap is not published; the reference test's "
        "1,000 calls in flight per client came back at 96% of the ideal (copies), so it did not bind there",
        doc="on the Function path, the calls in flight a client's one HTTP/2 connection carries at once (each holds "
        "a stream until its result is back); the rest wait at the client; 0 = no cap; closed-loop clients only",
    )


class Scenario(Protocol):
    """What the callers read of a load test's scenario (models/inputs/base.py's ``Scenario`` adds the rest)."""

    @property
    def work(self) -> Dist: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def warmup_s(self) -> float: ...
    @property
    def clients(self) -> ClientParams: ...
    @property
    def overhead(self) -> OverheadParams: ...


class Target(Protocol):
    def submit(self, call: int, style: int = 0) -> str | None: ...


class Load:
    """The callers of one run: issue calls, handle rejections, count what is outstanding."""

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
        self.sim = sim
        self.env = sim.env
        self.log = log
        self.cp = cp = sc.clients
        self.targets = targets
        self.style = style
        self._http = http
        self.duration = sc.duration_s
        self._w0 = sc.warmup_s  # the window's start (``_windowed``)
        self.streams = streams
        self.work_of = PerClient(streams, "work", sc.work)  # client i's work draws
        self._jitter = PerClient(streams, "backoff", Uniform(0.5, 1.0))  # client i's retry jitter (drawn in batches)
        self.clients = range(sc.clients.count) if clients is None else clients  # the clients this load drives
        self._copies, self._first = 1, 0  # client i calls targets[i mod copies − first] (``route``)
        self.outstanding = 0  # inputs issued and not yet back: the run ends when none are, after the duration
        self.drained_at: float | None = None  # when the load stopped the clock: nothing in flight, nothing to come
        self._backoff = cp.retry != "none"  # retried at all (the delay: ``_rejected``)
        self._jittered = cp.retry == "backoff"
        self._max_attempts = cp.max_attempts or None
        # the backoff after try k + 1, min(backoff_max_s, backoff_base_s · 2^min(k, 1000)), until it is the same for
        # every try after (the exponent capped: 2 ** 1,100 would not fit a float); the last holds for the rest
        self._delays = [min(cp.backoff_max_s, cp.backoff_base_s * 2.0 ** min(k, 1000)) for k in range(1001)]
        while len(self._delays) > 1 and self._delays[-2] == cp.backoff_max_s:
            self._delays.pop()
        if cp.retry in ("fixed", "immediate"):
            # immediate: the clock's resolution at the run's end, so a retry is a later event, never the same instant
            tick = max(1e-9, math.ulp(sc.duration_s + sc.drain_s) * 4)
            self._delays = [cp.retry_delay_s if cp.retry == "fixed" else tick]
        self._random = PerClient(streams, "retry", Exponential(cp.retry_delay_s)) if cp.retry == "random" else None
        # on_rate_limit = retry_after: the modal client follows the server's retry instruction (module docstring)
        self._throttled = cp.on_rate_limit == "retry_after" and not http and cp.api == "single"
        self._throttle_delay = max(cp.retry_after_s, THROTTLE_FLOOR_S)
        self._throttle_max = cp.max_throttle_wait_s or math.inf
        self._call_at = sim.call_at
        # clients.timeout_s: each attempt's deadline by row, the attempts abandoned (the wrappers are in place before
        # anything takes ``_send``, ``done`` or ``work_ended``)
        self._timeout = cp.timeout_s
        self._deadline: dict[int, float] = {}
        self.abandoned = 0
        if self._timeout:
            self._send, self.done, self._rejected = self._send_timed, self._done_timed, self._rejected_timed
        self._send_cb = self._send  # one bound method for every retry's entry, not one each
        self.rejections: dict[str, int] = {}  # every rejected attempt, retried or not, by kind
        self.lost: dict[str, float] = {}  # input-seconds lost to rejections, by kind (models/inputs/monitor.py)
        # hot-path aliases (the log's columns are the same objects all run)
        self._kinds, self._finished, self._close, self._client = log.kind, log.finished, log.close, log.client
        # .map/.spawn_map: each client's calls leave through its map call (None: one request per call)
        self._map = (
            MapCalls(sim, sc.overhead, streams, style, self._offer, self._map_rejected) if cp.api == "map" else None
        )
        # the client's HTTP connection pool (server) or HTTP/2 connection's streams (Function path) can bind
        self._limit = cp.connection_limit if http else cp.streams if self.connected else 0
        self._pooled = self._map is None and self._pool_binds(self._limit, cp.in_flight)
        pool = cp.count if self._pooled else 0  # connections/streams in use, and calls waiting for one, by client
        self._conns = [0] * pool
        self._conn_wait: list[deque[int]] = [deque() for _ in range(pool)]
        # client → accept on the Function path (overhead.submit); None: the call arrives at once
        self._submit = (
            None if http or self._map is not None else leg(sim, sc.overhead, "submit", streams, self._reach, log.client)
        )
        # what a call whose work ended is told: the result's way back (overhead.result on the Function path), then done
        self.work_ended: Callable[[int], None] = (
            self.done if http else leg(sim, sc.overhead, "result", streams, self.done, log.client) or self.done
        )

    @staticmethod
    def _pool_binds(limit: int, in_flight: int) -> bool:
        """Whether a client's connections (or streams) can ever hold a call back (``limit`` 0: no limit)."""
        return limit > 0

    def route(self, copies: int, first: int = 0) -> None:
        """Client i calls app copy i mod ``copies``, which is ``targets[i mod copies − first]`` (a part holds the
        copies from ``first`` on)."""
        self._copies, self._first = copies, first

    def begin(self) -> None:
        """Issue the calls in flight at the start."""
        self.log.starting = True
        self.start()
        self.log.starting = False

    def start(self) -> None:
        raise NotImplementedError

    # --- sending ---------------------------------------------------------------------------------------------
    def new_call(self, client: int, work: float, items: int = 1, fails: bool = False) -> int:
        log = self.log
        call = log.new(client, self.env._now, work)
        if items != 1:
            log.items[call] = items
        if fails:
            log.kind[call] = "item_failed"  # runs to the end, then reports the failure
        self.outstanding += 1
        self._send(call)
        return call

    def _send(self, call: int) -> None:
        client = self._client[call]
        if self._map is not None:
            self._map.put(client, call)
            return
        if self._pooled:
            if self._conns[client] >= self._limit:
                self._conn_wait[client].append(call)
                return
            self._conns[client] += 1
        if self._submit is not None:
            self._submit(call)
            return
        kind = self.targets[client % self._copies - self._first].submit(call, self.style)
        if kind is not None:
            if self._pooled:
                self._release(client)
            self._rejected(call, kind)

    def _reach(self, call: int) -> None:
        """The call reaches its target after ``overhead.submit`` (the Function path: no connection pool)."""
        kind = self.targets[self.log.client[call] % self._copies - self._first].submit(call, self.style)
        if kind is not None:
            if self._pooled:
                self._release(self.log.client[call])
            self._rejected(call, kind)

    def _offer(self, call: int) -> str | None:
        """Hand ``call`` to its target as it arrives: None (taken) or the rejection's kind (a map call's input)."""
        return self.targets[self.log.client[call] % self._copies - self._first].submit(call, self.style)

    def _map_rejected(self, call: int, kind: str, delay: float) -> None:
        """A map call's input was rejected; the client tries it again after ``delay`` (models/inputs/mapcall.py)."""
        self.rejections[kind] = self.rejections.get(kind, 0) + 1
        self.log.attempts[call] = self.log.attempts.get(call, 1) + 1
        self.lost[kind] = self.lost.get(kind, 0.0) + self._windowed(delay)

    def _release(self, client: int) -> None:
        self._conns[client] -= 1
        if self._conn_wait[client]:
            self._send(self._conn_wait[client].popleft())

    def _rejected(self, call: int, kind: str) -> None:
        self.rejections[kind] = self.rejections.get(kind, 0) + 1
        attempt = self.log.attempts.get(call, 1)
        if self._throttled and kind in THROTTLED:
            delay, now = self._throttle_delay, self.env._now
            if now + delay - self.log.issued[call] < self._throttle_max:  # modal: final once the wait would reach it
                self.log.attempts[call] = attempt + 1
                self.lost[kind] = self.lost.get(kind, 0.0) + self._windowed(delay)
                self._call_at(now + delay, self._send_cb, call)
                return
        if self._backoff and (self._max_attempts is None or attempt < self._max_attempts):
            self.log.attempts[call] = attempt + 1
            if self._random is not None:
                delay = self._random[self._client[call]]()
            else:
                delays = self._delays
                delay = delays[attempt - 1] if attempt <= len(delays) else delays[-1]
                if self._jittered:
                    delay *= self._jitter[self._client[call]]()
            self.lost[kind] = self.lost.get(kind, 0.0) + self._windowed(delay)
            self._call_at(self.env._now + delay, self._send_cb, call)  # call_in, without its check: delay > 0
        else:
            self.lost[kind] = self.lost.get(kind, 0.0) + self._windowed(self.loss_of_failure(call))
            self._failed(call, kind)

    # --- timeouts (clients.timeout_s) --------------------------------------------------------------------------
    def _arm(self, call: int) -> None:
        """An attempt of ``call`` leaves now: it times out at now + timeout_s unless it is back or rejected first."""
        at = self._deadline[call] = self.env._now + self._timeout
        self._call_at(at, self._expire, call)

    def _send_timed(self, call: int) -> None:
        self._arm(call)
        Load._send(self, call)

    def _expire(self, call: int) -> None:
        """A deadline passed: if it is still the attempt's (not back, not rejected, the row not since reused by
        another attempt with another deadline), the caller stops waiting. The input stays the Function's (an
        orphan of the log, kind ``abandoned``); the call goes on in a new row as a rejection of kind ``timeout``."""
        if self._deadline.get(call) != self.env._now:
            return
        del self._deadline[call]
        log = self.log
        log.kind[call] = "abandoned"  # (a kind: nothing that is back with one follows it with a next call)
        log.orphans.add(call)
        self.abandoned += 1
        again = log.new(log.client[call], log.issued[call], log.work[call])
        if log.initial[call]:
            log.initial[again] = 1
        if call in log.attempts:
            log.attempts[again] = log.attempts[call]
        self._rejected(again, "timeout")

    def _rejected_timed(self, call: int, kind: str) -> None:
        if call in self.log.orphans:  # an abandoned input rejected as it arrives: nobody hears of it
            self.rejections[kind] = self.rejections.get(kind, 0) + 1
            self.log.discard(call, self.env._now)
            return
        self._deadline.pop(call, None)
        Load._rejected(self, call, kind)

    def _done_timed(self, call: int) -> None:
        if call in self.log.orphans:  # the Function is done with an abandoned input
            self.log.discard(call, self.env._now)
            return
        self._deadline.pop(call, None)
        Load.done(self, call)

    # --- coming back -----------------------------------------------------------------------------------------
    def done(self, call: int) -> None:
        """A started call finished (the Function's or proxy's callback)."""
        if self._pooled:
            self._release(self._client[call])
        elif self._map is not None:
            self._map.release(self._client[call])
        if call in self._kinds:  # ran, but an item failed (batching)
            self._failed(call, self._kinds[call])
            return
        self._finished[call] = self.env._now
        # _back, inlined: this is every call's way back
        self.outstanding -= 1
        if self.returned is not None:
            self.returned(call)
        self._close(call)
        if self.outstanding == 0:
            self._maybe_drained()

    def _failed(self, call: int, kind: str) -> None:
        log = self.log
        log.finished[call] = self.env._now
        log.kind[call] = kind
        self._back(call)

    def _back(self, call: int) -> None:
        """The call is back for good: the caller moves on, the log folds the call in."""
        self.outstanding -= 1
        if self.returned is not None:
            self.returned(call)
        self._close(call)
        if self.outstanding == 0:
            self._maybe_drained()

    def settle(self) -> None:
        """The run has ended: what the callers did that is still to be told (nothing, unless a subclass defers)."""

    def _maybe_drained(self) -> None:
        if self.env._now >= self.duration or not self.reissue:
            self._stop()

    def _stop(self) -> None:
        """The test is over: nothing more is in flight or will be issued (said once: one stop of the clock)."""
        if self.drained_at != self.env._now:
            self.drained_at = self.env._now
            self.sim.stop()

    reissue = True  # a closed loop follows a call that is back with the next (ClientParams.reissue)
    connected = False  # its callers are clients with a connection of their own to Modal (clients.streams)

    def loss_of_failure(self, call: int) -> float:
        """Input-seconds lost when ``call`` fails unretried: in a closed loop its slot ends."""
        return max(0.0, self.duration - self.env._now)

    def _windowed(self, lost: float) -> float:
        """What of ``lost`` input-seconds from now falls in the measurement window [warm-up, duration): the shares
        the diagnosis takes are of the window's input-seconds (models/inputs/monitor.py), so a backoff past its end
        or a failure before it counts only its part inside."""
        now = self.env._now
        end = now + lost
        return max(0.0, (end if end < self.duration else self.duration) - (now if now > self._w0 else self._w0))

    # What a closed-loop caller does when a call is back (a subclass's method); open loops do nothing.
    returned: Callable[[int], None] | None = None


class ClosedLoop(Load):
    """Each client keeps ``in_flight`` calls outstanding until the duration ends (or, without ``reissue``, makes its
    ``in_flight`` calls once).

    Round trips: on the Function path with non-zero ``overhead.result`` and ``overhead.submit`` legs, a call whose
    work ends at t is back at t + r (r drawn then from its client's result stream), and when the next call follows
    (t + r before the duration, nothing failed) that call's work and submit leg s are drawn then too, from the
    client's own streams: each client draws in the order its calls' work ends, whatever the order of the events
    after. The back is at t + r; the next call, made then, reaches the Function at (t + r) + s. Nothing sees either
    call in between (they are in transit), so with the ``round_trips`` shortcut that is one event, at the arrival,
    instead of two: the back and the next call's issue are recorded then, at their own times. ``settle`` records
    the trips the run's end cut short."""

    connected = True

    def __init__(self, sim: Sim, sc: Scenario, *args) -> None:
        super().__init__(sim, sc, *args)
        self.reissue = sc.clients.reissue
        op = sc.overhead
        self._next: dict[int, tuple[float, float]] | None = None  # call → (next call's work, its submit leg)
        # (a call that holds a stream takes its way out through the pool: each leg its own event, drawn as it leaves)
        if (
            self.reissue
            and self._submit is not None
            and not self._pooled
            and not (is_zero(op.result) or is_zero(op.submit))
        ):
            self._next = {}
            self._back_of = PerClient(self.streams, "overhead/result", op.result)  # the streams of ``leg``
            out = self._out_of = PerClient(self.streams, "overhead/submit", op.submit)
            client_of, call_in, reach = self.log.client, sim.call_in, self._reach
            # the calls made at the start and the retries: each drawn when it leaves (Load's leg, same stream)
            self._submit = lambda call: call_in(out[client_of[call]](), reach, call)
            self._fused = ROUND_TRIPS.name in sim.shortcuts
            self.work_ended = self._work_ended
        elif self._http and self._map is None and not self._pooled and self.reissue:
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

    def _work_ended(self, call: int) -> None:
        """The work of ``call`` ended: its way back drawn, and the next call's work and way out if one follows. A
        call whose caller stops waiting first (``clients.timeout_s``: its deadline at or before the back) is no
        round trip: it goes back as an abandoned input (``done``), and the caller's retry is the timeout's."""
        client = self.log.client[call]
        back = self.env._now + self._back_of[client]()
        deadline = self._deadline.get(call, math.inf) if self._timeout else math.inf
        if back < self.duration and call not in self._kinds and back < deadline:
            self._next[call] = nxt = (self.work_of[client](), self._out_of[client]())
            if self._fused:
                self._finished[call] = back
                if self._timeout:  # back in time: the caller has it at ``back``, before its deadline
                    self._deadline.pop(call, None)
                self.sim.call_at(back + nxt[1], self._turn, call)
                return
        self.sim.call_at(back, self.done, call)

    def _turn(self, call: int) -> None:
        """``call`` came back at its ``finished`` time and the next call, made then, reaches the Function now."""
        self._reach(self._reissue(call))

    def _reissue(self, call: int) -> int:
        log = self.log
        nxt = log.new(log.client[call], log.finished[call], self._next.pop(call)[0])
        self._close(call)
        return nxt

    def settle(self) -> None:
        """Trips under way at the end: the call came back and the next was made (it is in flight)."""
        if self._next:
            for call in list(self._next):
                self._reissue(call)

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
        now = self.env._now
        if self._next is not None:  # round trips: the next call was drawn when this one's work ended
            if call in self._next:
                work, out = self._next.pop(call)
                self.outstanding += 1
                nxt = self.log.new(self.log.client[call], now, work)
                if self._timeout:
                    self._arm(nxt)
                self.sim.call_in(out, self._reach, nxt)
        elif self.reissue and now < self.duration and call not in self._kinds:
            # new_call, inlined: every call but the first of each slot is made here
            client = self._client[call]
            self.outstanding += 1
            self._send(self.log.new(client, now, self.work_of[client]()))
