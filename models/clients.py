"""Load generators: closed-loop clients and open-loop Poisson arrivals (domain.md §1, the reference load test).

Closed loop: ``count`` clients each keep ``in_flight`` calls outstanding; a call that returns before the test's
duration is followed at once by the next. With batching a client instead runs rounds of ``round_items`` items
sent as chunks of ``chunk_items``; the next round starts when the whole round is back (a chunk whose item failed
is an error of its items; a rejected chunk that is not retried raises and ends that client's loop). Open loop: Poisson
arrivals at ``rate`` per second.

A rejected call is handled by the client's retry policy (modal 1.6.4 client source, domain.md §1):
- ``none``: a single ``.remote``/``.spawn`` raises; the load test's task for that call ends (as an unhandled
  exception ends an asyncio task), so the client keeps one call fewer in flight;
- ``backoff``: the call is retried after min(backoff_max_s, backoff_base_s · 2^attempt), jittered by
  uniform(0.5, 1), forever, as ``.map`` does (at most 15 s between tries).
For the server approach the client also owns an HTTP connection pool of ``connection_limit`` connections.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from heapq import heappush
from typing import Literal, Protocol

from simpy.events import NORMAL

from sim.dists import Dist, Exponential
from sim.engine import Sim
from sim.records import CallLog
from sim.rng import Streams
from sim.scenario import param


@dataclass(frozen=True)
class ClientParams:
    count: int = param(8, ge=1, source="reference load test: 8 clients (domain.md §1)")
    in_flight: int = param(1000, ge=1, source="reference load test: 1,000 calls in flight per client")
    retry: Literal["none", "backoff"] = param("none", source="modal 1.6.4: a single .remote/.spawn does not retry")
    backoff_base_s: float = param(0.5, gt=0, source="assumption: first retry delay of the test's HTTP client")
    backoff_max_s: float = param(15.0, gt=0, source="modal 1.6.4 .map: at most 15 s between tries")
    connection_limit: int = param(
        1000, ge=0, source="assumption: aiohttp connector limit raised to the calls in flight; 0 = no limit"
    )


@dataclass(frozen=True)
class ArrivalParams:
    rate: float = param(1.0, gt=0, doc="Poisson arrivals per second")


@dataclass(frozen=True)
class BatchingParams:
    round_items: int = param(1000, ge=1, source="reference load test: rounds of 1,000 items per client")
    chunk_items: int = param(32, ge=1, source="reference load test: chunks of 32 items (domain.md §1)")
    item_failure_prob: float = param(0.0, ge=0, le=1, doc="chance that one item fails, failing its whole chunk")


class Target(Protocol):
    def submit(self, call: int, style: int = 0) -> str | None: ...


class Load:
    """The callers of one run: issue calls, handle rejections, count what is outstanding."""

    def __init__(
        self,
        sim: Sim,
        log: CallLog,
        streams: Streams,
        work: Dist,
        cp: ClientParams,
        targets: list[Target],
        style: int,
        duration_s: float,
        http: bool = False,
    ) -> None:
        self.sim = sim
        self.env = sim.env
        self.log = log
        self.cp = cp
        self.targets = targets
        self.style = style
        self.duration = duration_s
        self.streams = streams
        self.work = work.sampler(streams.get("work"))
        self._jitter = streams.get("backoff")
        self.outstanding = 0
        self.issued = 0  # calls (items) issued
        self.completed = 0
        self.failed = 0
        self.rejections: dict[str, int] = {}  # every rejected attempt, retried or not, by kind
        self.lost: dict[str, float] = {}  # call-seconds lost to rejections, by kind (models/monitor.py)
        self._kinds, self._finished, self._items = log.kind, log.finished, log.items  # hot-path aliases
        self._pooled = http and cp.connection_limit > 0  # the client's HTTP connection pool binds
        self._conns = [0] * cp.count
        self._conn_wait: list[deque[int]] = [deque() for _ in range(cp.count)]

    def begin(self) -> None:
        """Issue the calls in flight at the start."""
        self.start()
        self.log.n_initial = len(self.log)

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
        self.issued += items
        self._send(call)
        return call

    def _send(self, call: int) -> None:
        client = self.log.client[call]
        if self._pooled:
            if self._conns[client] >= self.cp.connection_limit:
                self._conn_wait[client].append(call)
                return
            self._conns[client] += 1
        kind = self.targets[client % len(self.targets)].submit(call, self.style)
        if kind is not None:
            if self._pooled:
                self._release(client)
            self._rejected(call, kind)

    def _release(self, client: int) -> None:
        self._conns[client] -= 1
        if self._conn_wait[client]:
            self._send(self._conn_wait[client].popleft())

    def _rejected(self, call: int, kind: str) -> None:
        self.rejections[kind] = self.rejections.get(kind, 0) + 1
        if self.cp.retry == "backoff":
            attempt = self.log.attempts.get(call, 1)
            self.log.attempts[call] = attempt + 1
            delay = min(self.cp.backoff_max_s, self.cp.backoff_base_s * 2 ** (attempt - 1))
            delay *= self._jitter.uniform(0.5, 1.0)
            self.lost[kind] = self.lost.get(kind, 0.0) + delay * self.log.items.get(call, 1)
            self.sim.call_in(delay, self._send, call)
        else:
            self.lost[kind] = self.lost.get(kind, 0.0) + self.loss_of_failure(call)
            self._failed(call, kind)

    # --- coming back -----------------------------------------------------------------------------------------
    def done(self, call: int) -> None:
        """A started call finished (the Function's or proxy's callback)."""
        if self._pooled:
            self._release(self.log.client[call])
        if call in self._kinds:  # ran, but an item failed (batching)
            self._failed(call, self._kinds[call])
            return
        self._finished[call] = self.env._now
        self.completed += self._items.get(call, 1) if self._items else 1
        self.outstanding -= 1
        if self.returned is not None:
            self.returned(call)
        if self.outstanding == 0:
            self._maybe_drained()

    def _failed(self, call: int, kind: str) -> None:
        log = self.log
        log.finished[call] = self.env._now
        log.kind[call] = kind
        self.failed += log.items.get(call, 1)
        self.outstanding -= 1
        if self.returned is not None:
            self.returned(call)
        if self.outstanding == 0:
            self._maybe_drained()

    def _maybe_drained(self) -> None:
        if self.env._now >= self.duration:
            self.sim.stop()  # the test is over: nothing more is in flight or will be issued

    def capacity(self, span: float) -> float:
        """Call-seconds the load holds in flight over ``span`` seconds with nothing in its way."""
        return self.cp.count * self.cp.in_flight * span

    def loss_of_failure(self, call: int) -> float:
        """Call-seconds lost when ``call`` fails unretried: in a closed loop its slot ends."""
        return max(0.0, self.duration - self.env._now) * self.log.items.get(call, 1)

    # What a closed-loop caller does when a call is back (a subclass's method); open loops do nothing.
    returned: Callable[[int], None] | None = None


class ClosedLoop(Load):
    """Each client keeps ``in_flight`` calls outstanding until the duration ends."""

    def start(self) -> None:
        for client in range(self.cp.count):
            for _ in range(self.cp.in_flight):
                self.new_call(client, self.work())

    def returned(self, call: int) -> None:
        if call not in self.log.kind and self.env._now < self.duration:
            self.new_call(self.log.client[call], self.work())


class BatchedRounds(Load):
    """Each client sends rounds of ``round_items`` items as chunks; a chunk's own work is its slowest item."""

    def __init__(self, *args, bp: BatchingParams, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.bp = bp
        self._left = [0] * self.cp.count  # chunks of the current round not yet back
        self._stopped = [False] * self.cp.count  # a chunk was rejected and not retried: the client's loop raised
        self._fail_rng = self.streams.get("item_failure")

    def start(self) -> None:
        for client in range(self.cp.count):
            self._round(client)

    def _round(self, client: int) -> None:
        n, size = self.bp.round_items, self.bp.chunk_items
        chunks = [min(size, n - i) for i in range(0, n, size)]
        self._left[client] = len(chunks)
        for k in chunks:
            works = [self.work() for _ in range(k)]
            fails = bool(self.bp.item_failure_prob) and self._chunk_fails(k)
            self.new_call(client, max(works), items=k, fails=fails)

    def capacity(self, span: float) -> float:
        return self.cp.count * self.bp.round_items * span

    def _chunk_fails(self, k: int) -> bool:
        return bool(self._fail_rng.random() < 1.0 - (1.0 - self.bp.item_failure_prob) ** k)

    def returned(self, call: int) -> None:
        client = self.log.client[call]
        self._left[client] -= 1
        kind = self.log.kind.get(call)
        if kind is not None and kind != "item_failed":
            self._stopped[client] = True
        if self._left[client] == 0 and self.env._now < self.duration and not self._stopped[client]:
            self._round(client)


class OpenLoop(Load):
    """Poisson arrivals at ``rate`` per second until the duration ends."""

    def __init__(self, *args, rate: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._gap = Exponential(1.0 / rate).sampler(self.streams.get("arrivals"))
        self.rate = rate
        self.mean_work = kwargs["work"].mean

    def capacity(self, span: float) -> float:
        return self.rate * self.mean_work * span

    def loss_of_failure(self, call: int) -> float:
        return self.log.work[call]  # an open loop loses the call, not a slot

    def start(self) -> None:
        self._target = self.targets[0]
        self._new = self.log.new
        self._arrive_cb = self._arrive
        self.sim.call_in(self._gap(), self._arrive)

    def _arrive(self, _arg: None) -> None:
        # the hot path of open-loop runs: new_call inlined
        now = self.env._now
        call = self._new(0, now, self.work())
        self.outstanding += 1
        self.issued += 1
        kind = self._target.submit(call, self.style)
        if kind is not None:
            self._rejected(call, kind)
        nxt = now + self._gap()
        if nxt < self.duration:  # the next arrival: a callback entry in sim/engine.py's form, pushed directly
            heappush(self.sim.queue, (nxt, NORMAL, next(self.sim.eid), self._arrive_cb, None))
