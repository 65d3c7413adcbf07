"""Way 3: batching (docs/sources.md §1). The Function takes a list and runs its items concurrently; an input is a chunk
of items. A chunk finishes with its slowest item; if one item fails the whole chunk fails (an error of its items).

Closed-loop clients (``load = "clients"``) send rounds of ``round_items`` items as chunks of ``chunk_items``; the next
round starts when the whole round is back; a rejected chunk that is not retried raises and ends that client's loop.

Open-loop arrivals (``load = "arrivals"``) are single calls that the caller gathers into chunks, as a service in front
of the Function would: a chunk leaves when it holds ``chunk_items`` items or when its first item has waited
``wait_s``, whichever comes first (the size-or-wait rule of modal's ``@modal.batched(max_batch_size, wait_ms)``, modal
1.6.4 source; there the container gathers the batch and each call stays an input of its own, so it does not pass the
accept limit; gathered by the caller, a chunk is one input, as in way 3). A chunk is issued when its first item
arrived, so its response time, and its added latency, include the gathering wait: its first item's, the longest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from heapq import heappush
from typing import Any, ClassVar

from models.inputs.approaches.base import Approach, copies_text
from models.inputs.base import Scenario
from models.inputs.callers.arrivals import OpenLoop
from models.inputs.callers.clients import Load, Target
from models.inputs.records import CallLog
from sim.engine import NORMAL, Sim
from sim.rng import PerClient, Streams
from sim.scenario import param


@dataclass(frozen=True)
class BatchingParams:
    round_items: int = param(1000, ge=1, le=10_000_000, source="reference load test: rounds of 1,000 items per client")
    chunk_items: int = param(32, ge=1, source="reference load test: chunks of 32 items (docs/sources.md §1)")
    item_failure_prob: float = param(0.0, ge=0, le=1, doc="chance that one item fails, failing its whole chunk")
    wait_s: float = param(
        0.1,
        ge=0,
        le=3600,
        source="assumption (a caller's choice, as @modal.batched's wait_ms); open-loop arrivals only",
        doc="the longest a chunk's first item waits for the chunk to fill before it leaves anyway",
    )


class Batching(Approach):
    name = "batching"
    maps = False
    sections: ClassVar[dict[str, type]] = {"batching": BatchingParams}
    chunks = True
    colour = "#8172b3"

    def check(self, sc: Scenario) -> None:
        if sc.load == "trace":
            raise ValueError("load: batching gathers closed-loop rounds or open-loop arrivals, not a trace")

    def parts(self, sc: Scenario) -> int:
        return 1  # rounds are one run (their clients' stop rule is the open loop's)

    def load(
        self,
        sim: Sim,
        sc: Scenario,
        log: CallLog,
        streams: Streams,
        targets: list[Target],
        part: int = 0,
        parts: int = 1,
    ) -> Load:
        kind = BatchedArrivals if sc.load == "arrivals" else BatchedRounds
        return kind(sim, sc, log, streams, targets, self.style, self.http)

    def ideal_calls_per_s(self, sc: Scenario) -> float:
        """A round lasts as long as its slowest item (order statistics, docs/sources.md §4); open loop: the rate."""
        if sc.load == "arrivals":
            return super().ideal_calls_per_s(sc)
        n = sc.batching.round_items
        return sc.clients.count * n / sc.work.expected_max(n)

    def slots_back(self, sc: Scenario, t: float, p_call: Callable[[float], float]) -> tuple[int, float]:
        """A slot is a client's round, back with its slowest item: each item's work within ``t`` past the legs'
        least."""
        legs = self.least_added(sc)
        return sc.clients.count, (sc.work.cdf(t - legs) if t > legs else 0.0) ** sc.batching.round_items

    def plan_settings(self, copies: int, chunk: int, sc: Scenario) -> dict[str, Any]:
        """A container runs max_inputs items at once: max_inputs ÷ chunk chunks."""
        f = sc.function
        per, target = max(1, f.max_inputs // chunk), max(1, f.target // chunk)
        return {
            "approach": self.name,
            "function.copies": copies,
            "batching.chunk_items": chunk,
            "function.max_inputs": per,
            "function.target_inputs": min(per, target),
        }

    def describe(self, config: dict[str, Any]) -> str:
        return f"{copies_text(config['function.copies'])}, chunks of {config['batching.chunk_items']}"


class BatchedRounds(Load):
    """Each client sends rounds of ``round_items`` items as chunks; a chunk's own work is its slowest item."""

    def __init__(self, sim: Sim, sc: Scenario, *args) -> None:
        super().__init__(sim, sc, *args)
        self.bp = sc.batching
        self._left = [0] * self.cp.count  # chunks of the current round not yet back
        self._stopped = [False] * self.cp.count  # a chunk was rejected and not retried: the client's loop raised
        self._fail_rng = PerClient(self.streams, "item_failure")  # client i's draws of failing chunks

    def start(self) -> None:
        for client in range(self.cp.count):
            self._round(client)

    def _round(self, client: int) -> None:
        n, size = self.bp.round_items, self.bp.chunk_items
        chunks = [min(size, n - i) for i in range(0, n, size)]
        self._left[client] = len(chunks)
        for k in chunks:
            work = self.work_of[client]
            works = [work() for _ in range(k)]
            fails = bool(self.bp.item_failure_prob) and self._chunk_fails(client, k)
            self.new_call(client, max(works), items=k, fails=fails)

    def _chunk_fails(self, client: int, k: int) -> bool:
        return bool(self._fail_rng[client].random() < 1.0 - (1.0 - self.bp.item_failure_prob) ** k)

    def returned(self, call: int) -> None:
        client = self.log.client[call]
        self._left[client] -= 1
        kind = self.log.kind.get(call)
        if kind is not None and kind != "item_failed":
            self._stopped[client] = True
        if self._left[client] == 0 and self.env._now < self.duration and not self._stopped[client]:
            self._round(client)


class BatchedArrivals(OpenLoop):
    """Poisson arrivals of single calls gathered into chunks: a chunk leaves full, or when its first item has waited
    ``wait_s`` (app copies: each copy its own chunks, the arrivals round robin)."""

    def __init__(self, sim: Sim, sc: Scenario, *args) -> None:
        super().__init__(sim, sc, *args)
        self.bp = sc.batching
        self._fail_rng = self.streams.get("item_failure")
        self._items: list[list[float]] = []  # each target's chunk being gathered: its items' work
        self._opened: list[float] = []  # when its first item arrived
        self._flush_cb = self._flush_due

    def start(self) -> None:
        self._items = [[] for _ in self.targets]
        self._opened = [0.0] * len(self.targets)
        super().start()

    def _arrive(self, _arg: None) -> None:
        now = self.env._now
        target = self._arrivals % len(self.targets)
        self._arrivals += 1
        self._arrival(target, now)
        nxt = now + self._gap()
        if nxt < self.duration:
            heap = self._heap
            if len(heap) < self._heap_below:  # call_at, inlined
                heappush(heap, (nxt, NORMAL, next(self._ids), self._arrive_cb, None))
            else:
                self._call_at(nxt, self._arrive_cb)

    def _arrival(self, target: int, now: float) -> None:
        items = self._items[target]
        if not items:  # a new chunk: outstanding from its first item on, so that the run waits for it
            self._opened[target] = now
            self.outstanding += 1
            self.sim.call_at(now + self.bp.wait_s, self._flush_cb, (target, now))
        items.append(self.work())
        if len(items) >= self.bp.chunk_items:
            self._flush(target)

    def _flush_due(self, arg: tuple[int, float]) -> None:
        target, first = arg
        if self._items[target] and self._opened[target] == first:  # not sent full in the meantime
            self._flush(target)

    def _flush(self, target: int) -> None:
        works = self._items[target]
        self._items[target] = []
        k = len(works)
        p = self.bp.item_failure_prob
        fails = bool(p) and bool(self._fail_rng.random() < 1.0 - (1.0 - p) ** k)
        call = self._new(target, self._opened[target], max(works))
        if k != 1:
            self.log.items[call] = k
        if fails:
            self.log.kind[call] = "item_failed"
        self._issue(call, target)
