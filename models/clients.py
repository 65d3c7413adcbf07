"""Load generators: closed-loop clients and open-loop Poisson arrivals (domain.md §1, the reference load test).

Closed loop: ``count`` clients each keep ``in_flight`` calls outstanding; a call that returns before the test's
duration is followed at once by the next. With batching a client instead runs rounds of ``round_items`` items
sent as chunks of ``chunk_items``; the next round starts when the whole round is back. Open loop: Poisson
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
from dataclasses import dataclass
from typing import Literal, Protocol

from sim.dists import Dist
from sim.engine import Callback, Sim
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
        self.drained = sim.env.event()
        self.http = http
        self._conns = [0] * cp.count
        self._conn_wait: list[deque[int]] = [deque() for _ in range(cp.count)]

    # --- sending ---------------------------------------------------------------------------------------------
    def new_call(self, client: int, work: float, items: int = 1, initial: bool = False, fails: bool = False) -> int:
        call = self.log.new(client, self.sim.now, work, items, initial)
        if fails:
            self.log.kind[call] = "item_failed"  # runs to the end, then reports the failure
        self.outstanding += 1
        self.issued += items
        self._send(call)
        return call

    def _send(self, call: int) -> None:
        client = self.log.client[call]
        if self.http and self.cp.connection_limit:
            if self._conns[client] >= self.cp.connection_limit:
                self._conn_wait[client].append(call)
                return
            self._conns[client] += 1
        kind = self.targets[client % len(self.targets)].submit(call, self.style)
        if kind is not None:
            self._release(client)
            self._rejected(call, kind)

    def _release(self, client: int) -> None:
        if self.http and self.cp.connection_limit:
            self._conns[client] -= 1
            if self._conn_wait[client]:
                self._send(self._conn_wait[client].popleft())

    def _rejected(self, call: int, kind: str) -> None:
        if self.cp.retry == "backoff":
            attempt = self.log.attempts[call]
            self.log.attempts[call] = attempt + 1
            delay = min(self.cp.backoff_max_s, self.cp.backoff_base_s * 2 ** (attempt - 1))
            self.sim.call_in(delay * self._jitter.uniform(0.5, 1.0), self._retry, call)
        else:
            self._failed(call, kind)

    def _retry(self, event: Callback) -> None:
        self._send(event.arg)

    # --- coming back -----------------------------------------------------------------------------------------
    def done(self, call: int) -> None:
        """A started call finished (the Function's or proxy's callback)."""
        log = self.log
        self._release(log.client[call])
        if log.kind[call]:  # ran, but an item failed (batching)
            self._failed(call, log.kind[call])
            return
        log.finished[call] = self.sim.now
        self.completed += log.items[call]
        self._back(call)

    def _failed(self, call: int, kind: str) -> None:
        self.log.finished[call] = self.sim.now
        self.log.kind[call] = kind
        self.failed += self.log.items[call]
        self._back(call)

    def _back(self, call: int) -> None:
        self.outstanding -= 1
        self.returned(call)
        if self.outstanding == 0 and self.sim.now >= self.duration and not self.drained.triggered:
            self.drained.succeed()

    def returned(self, call: int) -> None:
        """What a caller does when a call is back (a subclass's loop)."""

    def start(self) -> None:
        raise NotImplementedError


class ClosedLoop(Load):
    """Each client keeps ``in_flight`` calls outstanding until the duration ends."""

    def start(self) -> None:
        for client in range(self.cp.count):
            for _ in range(self.cp.in_flight):
                self.new_call(client, self.work(), initial=True)

    def returned(self, call: int) -> None:
        if self.log.kind[call] == "" and self.sim.now < self.duration:
            self.new_call(self.log.client[call], self.work())


class BatchedRounds(Load):
    """Each client sends rounds of ``round_items`` items as chunks; a chunk's own work is its slowest item."""

    def __init__(self, *args, bp: BatchingParams, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.bp = bp
        self._left = [0] * self.cp.count  # chunks of the current round not yet back
        self._fail_rng = self.streams.get("item_failure")

    def start(self) -> None:
        for client in range(self.cp.count):
            self._round(client, initial=True)

    def _round(self, client: int, initial: bool = False) -> None:
        n, size = self.bp.round_items, self.bp.chunk_items
        chunks = [min(size, n - i) for i in range(0, n, size)]
        self._left[client] = len(chunks)
        for k in chunks:
            works = [self.work() for _ in range(k)]
            fails = bool(self.bp.item_failure_prob) and self._chunk_fails(k)
            self.new_call(client, max(works), items=k, initial=initial, fails=fails)

    def _chunk_fails(self, k: int) -> bool:
        return bool(self._fail_rng.random() < 1.0 - (1.0 - self.bp.item_failure_prob) ** k)

    def returned(self, call: int) -> None:
        client = self.log.client[call]
        self._left[client] -= 1
        if self._left[client] == 0 and self.sim.now < self.duration:
            self._round(client)


class OpenLoop(Load):
    """Poisson arrivals at ``rate`` per second until the duration ends."""

    def __init__(self, *args, rate: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._gap = self.streams.get("arrivals")
        self.rate = rate
        self._gaps: list[float] = []

    def start(self) -> None:
        self.sim.call_in(self._next_gap(), self._arrive)

    def _next_gap(self) -> float:
        if not self._gaps:
            self._gaps = self._gap.exponential(1.0 / self.rate, 4096).tolist()[::-1]
        return self._gaps.pop()

    def _arrive(self, _event: Callback) -> None:
        self.new_call(0, self.work())
        gap = self._next_gap()
        if self.sim.now + gap < self.duration:
            self.sim.call_in(gap, self._arrive)
