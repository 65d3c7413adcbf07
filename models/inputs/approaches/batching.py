"""Way 3: batching (domain.md §1). The Function takes a list and runs its items concurrently; each client sends
rounds of ``round_items`` items as chunks of ``chunk_items`` (an input is a chunk); the next round starts when the
whole round is back. A chunk finishes with its slowest item; if one item fails the whole chunk fails (an error of
its items); a rejected chunk that is not retried raises and ends that client's loop."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from models.inputs.approaches.base import Approach
from models.inputs.base import Scenario
from models.inputs.clients import Load, Target
from models.inputs.records import CallLog
from sim.engine import Sim
from sim.rng import PerClient, Streams
from sim.scenario import param


@dataclass(frozen=True)
class BatchingParams:
    round_items: int = param(1000, ge=1, le=10_000_000, source="reference load test: rounds of 1,000 items per client")
    chunk_items: int = param(32, ge=1, source="reference load test: chunks of 32 items (domain.md §1)")
    item_failure_prob: float = param(0.0, ge=0, le=1, doc="chance that one item fails, failing its whole chunk")


class Batching(Approach):
    name = "batching"
    maps = False
    sections: ClassVar[dict[str, type]] = {"batching": BatchingParams}

    def check(self, sc: Scenario) -> None:
        if sc.load != "clients":
            raise ValueError('load: batching runs closed-loop rounds; use load = "clients"')

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
        return BatchedRounds(sim, sc, log, streams, targets, self.style, self.http)

    def ideal_calls_per_s(self, sc: Scenario) -> float:
        """A round lasts as long as its slowest item (order statistics, domain.md §4)."""
        n = sc.batching.round_items
        return sc.clients.count * n / sc.work.expected_max(n)


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

    def capacity(self, span: float) -> float:
        """Input-seconds: a client holds its round's chunks in flight (the monitor counts pending chunks)."""
        return self.cp.count * math.ceil(self.bp.round_items / self.bp.chunk_items) * span

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
