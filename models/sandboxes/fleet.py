"""The shared parts of sandbox creation: the workload, the worker fleet and its start path, and FCFS servers
(domain.md §2).

Workload: ``sandboxes.count`` creations from one benchmark client that issues at most ``client.rate`` per second and
keeps at most ``client.concurrency`` creates outstanding (in Modal's test the client itself was the main
bottleneck). Issuing is aggregated: every ``client.tick_s`` the client sends what its rate and concurrency allow.

Fleet: ``fleet.workers`` workers, each with ``fleet.worker_cpu`` CPUs, so ``worker_cpu // sandboxes.cpu`` sandbox
slots; the workers are arrays, not processes. A worker that accepts a sandbox runs its start path: RPC handling,
container create, then network setup under the worker's rtnl lock, held ``fleet.rtnl_hold_s`` per sandbox and
taken in arrival order (the lock that made starts take tens of seconds when many sandboxes landed on one worker at
once, until Modal changed container networking), then the rest of the start.

Servers: a FCFS queue in front of c identical servers (a scheduler's threads, Postgres connections, etcd), computed
at arrival in O(log c): what a request waits and when it is done, without a process per request.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass

from sim.dists import Dist, LogNormal
from sim.engine import Sim
from sim.rng import Streams
from sim.scenario import param


@dataclass(frozen=True)
class SandboxParams:
    count: int = param(1_000_000, ge=1, source="domain.md §2: one million sandboxes created in under a minute")
    cpu: float = param(0.5, gt=0, source="assumption: a small sandbox's CPU request")
    lifetime_s: float = param(0.0, ge=0, doc="how long a sandbox runs once started; 0 = until the end (all at once)")


@dataclass(frozen=True)
class BenchmarkClientParams:
    rate: float = param(
        20_000.0,
        gt=0,
        source="assumption, from domain.md §2: 1M created in under a minute with the benchmark "
        "client as the main bottleneck (≈ 17–20k creates/s)",
    )
    concurrency: int = param(20_000, ge=1, source="assumption: creates outstanding at once")
    tick_s: float = param(0.01, gt=0, doc="the client issues in batches every tick (aggregation, not per sandbox)")
    rtt_s: float = param(0.002, ge=0, source="assumption: an in-region network round trip (one hop each way)")


@dataclass(frozen=True)
class FleetParams:
    workers: int = param(20_000, ge=1, source="domain.md §2: tens of thousands of workers")
    worker_cpu: float = param(64.0, gt=0, source="assumption: CPUs per worker")
    rpc_s: float = param(0.002, ge=0, source="assumption: a worker handles the create RPC")
    container_create: Dist = param(LogNormal(0.25, 0.5), source="assumption: gVisor sandbox create, before networking")
    rtnl_hold_s: float = param(
        0.0008,
        ge=0,
        source="domain.md §2 Linux networking: netns 0.3–0.5 ms + veth add 0.2–0.3 ms under rtnl_lock "
        "(after the networking change; before it, 0.156 s: 64 parallel `docker run` spread over ~10 s)",
    )
    start: Dist = param(LogNormal(0.3, 0.4), source="assumption: the rest of the start, after networking")


class Servers:
    """c FCFS servers; ``done_at(now, service)`` admits a request arriving now and returns when it is done."""

    def __init__(self, c: int) -> None:
        self.c = c
        self._free = [0.0] * c  # a heap of the times each server becomes free
        self.busy = 0.0  # server-seconds of service

    def done_at(self, now: float, service: float) -> float:
        start = max(now, self._free[0])
        end = start + service
        heapq.heapreplace(self._free, end)
        self.busy += service
        return end

    def occupy(self, now: float, until: Callable[[float], float]) -> float:
        """Admit a request arriving now that holds its server until ``until(start)``; return that end."""
        start = max(now, self._free[0])
        end = until(start)
        heapq.heapreplace(self._free, end)
        self.busy += end - start
        return end

    def utilization(self, span: float) -> float:
        return self.busy / (self.c * span) if span > 0 else 0.0


class Fleet:
    """Workers as arrays: slots in use, and the start path with its rtnl lock."""

    def __init__(
        self, sim: Sim, fp: FleetParams, sp: SandboxParams, streams: Streams, on_running: Callable[[int, int], None]
    ) -> None:
        self.sim = sim
        self.fp = fp
        self.slots = max(1, math.floor(fp.worker_cpu / sp.cpu))
        self.used = [0] * fp.workers  # true slots in use: the worker is its own source of truth
        self.lock_free = [0.0] * fp.workers  # when each worker's rtnl lock is next free
        self.lock_busy = 0.0
        self.on_running = on_running
        self._create = fp.container_create.sampler(streams.get("container_create"))
        self._start = fp.start.sampler(streams.get("sandbox_start"))
        self.accepted = 0

    def try_accept(self, worker: int) -> bool:
        """The worker's own check: accept if it has a free slot."""
        if self.used[worker] < self.slots:
            self.used[worker] += 1
            self.accepted += 1
            return True
        return False

    def start(self, sandbox: int, worker: int) -> None:
        """Run the start path of an accepted sandbox; ``on_running(sandbox, worker)`` when it can run user code."""
        self.sim.call_in(self.fp.rpc_s + self._create(), self._network, (sandbox, worker))

    def _network(self, arg: tuple[int, int]) -> None:
        worker = arg[1]
        now = self.sim.env._now
        hold = self.fp.rtnl_hold_s
        begin = max(now, self.lock_free[worker])
        self.lock_free[worker] = begin + hold
        self.lock_busy += hold
        self.sim.call_in(begin + hold - now + self._start(), self._running, arg)

    def _running(self, arg: tuple[int, int]) -> None:
        self.on_running(*arg)

    def release(self, worker: int) -> None:
        self.used[worker] -= 1
