"""The shared parts of sandbox creation: the workload, the worker fleet and its start path, and FCFS servers
(docs/sources.md §2).

Workload: ``sandboxes.count`` creations from one benchmark client that issues at most ``client.rate`` per second and
keeps at most ``client.concurrency`` creates outstanding (in Modal's test the client itself was the main
bottleneck). Issuing is aggregated: every ``client.tick_s`` the client sends what its rate and concurrency allow.

Fleet: ``fleet.workers`` workers, each with ``fleet.worker_cpu`` CPUs and ``fleet.worker_memory_gib``, so as many
sandbox slots as both allow; the workers are arrays, not processes. A worker that accepts a sandbox (after handling
the create RPC, ``fleet.rpc_s``) runs its start path: container create, then network setup under the worker's start
lock (the rtnl lock and the kernel work around it: held ``fleet.rtnl_hold_s`` plus ``fleet.contention_s`` per start
already queued there, first come first served; the contention that made starts take tens of seconds when many
sandboxes landed on one worker at once), then the rest of the start.

Servers: a FCFS queue in front of c identical servers (a scheduler's threads, Postgres connections, etcd), computed
at arrival in O(log c): what a request waits and when it is done, without a process per request. A request is booked
when it arrives (now); one that reaches the servers a constant latency after it is sent is booked when sent and its
answer delayed by that latency: the same order and times, read that constant early on the servers' own clock. This
and the workers as arrays are the model, not shortcuts (no slower path beside them; models/sandboxes/shortcuts.py
lists the model's shortcuts).

Busy time (``Meter``): each resource reports how long it has been busy up to now (``busy_by_now``, in server-seconds)
and the most it can be busy in a span (``capacity``), so a run takes its busy fraction over one span as the
difference of two readings over the capacity (models/sandboxes/creation.py).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from sim.dists import Dist, LogNormal
from sim.engine import Sim
from sim.rng import Streams
from sim.scenario import param


@dataclass(frozen=True)
class SandboxParams:
    count: int = param(1_000_000, ge=1, source="docs/sources.md §2: one million sandboxes created in under a minute")
    cpu: float = param(0.5, gt=0, source="assumption: a small sandbox's CPU request")
    memory_gib: float = param(1.0, gt=0, source="assumption: a small sandbox's memory request")
    lifetime_s: float = param(0.0, ge=0, doc="how long a sandbox runs once started; 0 = until the end (all at once)")


@dataclass(frozen=True)
class BenchmarkClientParams:
    rate: float = param(
        20_000.0,
        gt=0,
        source="assumption, from docs/sources.md §2: 1M created in under a minute with the benchmark "
        "client as the main bottleneck (≈ 17–20k creates/s)",
    )
    concurrency: int = param(20_000, ge=1, le=100_000_000, source="assumption: creates outstanding at once")
    tick_s: float = param(
        0.01, ge=0.0001, doc="the client issues in batches every tick (aggregation, not per sandbox; at least 0.1 ms)"
    )
    rtt_s: float = param(0.002, ge=0, source="assumption: an in-region network round trip (one hop each way)")


@dataclass(frozen=True)
class FleetParams:
    workers: int = param(20_000, ge=1, le=10_000_000, source="docs/sources.md §2: tens of thousands of workers")
    worker_cpu: float = param(64.0, gt=0, source="assumption: CPUs per worker")
    worker_memory_gib: float = param(256.0, gt=0, source="assumption: memory per worker (4 GiB per CPU)")
    allow_overload: bool = param(
        False,
        doc="true: run a burst the fleet cannot hold (it ends once the fleet is full); false: such a scenario is an "
        "error before it runs",
    )
    rpc_s: float = param(0.002, ge=0, source="assumption: a worker handles the create RPC before it answers")
    container_create: Dist = param(
        LogNormal(0.2, 0.2),
        source="assumption: gVisor sandbox create, before networking (narrow: contention, not "
        "this spread, makes the tail; docs/sources.md §2)",
    )
    rtnl_hold_s: float = param(
        0.0008,
        ge=0,
        plausible=(0.0005,),
        source="docs/sources.md §2 Linux networking: netns 0.3–0.5 ms + veth add 0.2–0.3 ms under rtnl_lock (their "
        "greatest; plausible down to their least, 0.5 ms)",
    )
    contention_s: float = param(
        0.0011,
        ge=0,
        source="docs/sources.md §2: 64 parallel `docker run` spread over 2–2.5 s with host networking: 64 × 0.8 ms + "
        "2,016 × c = 2.25 s gives c ≈ 1.1 ms (with bridge networking, 5–15 s: c ≈ 4.9 ms)",
        doc="extra hold of the worker's start lock per start already queued or holding it when this one arrives "
        "(the kernel and network work around the rtnl lock)",
    )
    start: Dist = param(LogNormal(0.2, 0.2), source="assumption: the rest of the start, after networking (narrow)")


def slots_per_worker(fp: FleetParams, sp: SandboxParams) -> int:
    """Sandboxes one worker holds at once: as many as its CPUs and its memory both allow."""
    return min(math.floor(fp.worker_cpu / sp.cpu), math.floor(fp.worker_memory_gib / sp.memory_gib))


def capacity_error(fp: FleetParams, sp: SandboxParams) -> str | None:
    """Why the fleet certainly cannot run the burst (one line naming the keys), or None.

    A sandbox bigger than a worker fits nowhere. A burst of sandboxes that run until the end (``lifetime_s`` 0) needs
    a slot each at once: more than the fleet's slots is certain to fail, unless ``fleet.allow_overload`` asks to
    study it."""
    if sp.cpu > fp.worker_cpu:
        return f"sandboxes.cpu: {sp.cpu:g} CPUs is more than a worker has (fleet.worker_cpu {fp.worker_cpu:g})"
    if sp.memory_gib > fp.worker_memory_gib:
        return (
            f"sandboxes.memory_gib: {sp.memory_gib:g} GiB is more than a worker has "
            f"(fleet.worker_memory_gib {fp.worker_memory_gib:g})"
        )
    total = fp.workers * slots_per_worker(fp, sp)
    if sp.lifetime_s == 0 and sp.count > total and not fp.allow_overload:
        return (
            f"sandboxes.count: {sp.count:,} sandboxes running at once need more than the fleet's {total:,} slots "
            f"(fleet.workers {fp.workers:,} × {slots_per_worker(fp, sp)} per worker, by fleet.worker_cpu and "
            "fleet.worker_memory_gib); set fleet.allow_overload = true to study a fleet that cannot hold the burst"
        )
    return None


class Meter(Protocol):
    """A resource whose busy time can be read: servers, threads, connections, locks, rate limits."""

    def busy_by_now(self, now: float | None = None) -> float:
        """Server-seconds of service that lie before ``now`` (default the simulation's; booked service still to come
        is not counted; a ``now`` after the run's end reads what was booked as it will have run by then)."""
        ...

    def capacity(self, span: float) -> float:
        """The most server-seconds the resource can be busy in a span of ``span`` seconds."""
        ...


class Servers:
    """c FCFS servers; ``done_at(service)`` admits a request arriving now and returns when it is done."""

    def __init__(self, sim: Sim, c: int) -> None:
        self.sim = sim
        self.c = c
        # a heap of (when each server is next free, when its current run of back-to-back service began)
        self._free = [(0.0, 0.0)] * c
        self.busy = 0.0  # server-seconds of service booked, including service still to come
        self._done = 0.0  # server-seconds of the runs before each server's current one (all ended by now)
        self.pause: tuple[float, float] | None = None  # no service starts in (start, end): faults.py

    def done_at(self, service: float) -> float:
        now = self.sim.env._now
        free, began = self._free[0]
        if free <= now:  # the server is idle: its run has ended, a new one begins now
            self._done += free - began
            free = began = now
        if self.pause is not None:
            # a fault (a failover, an election): no service starts in [a, e), and one in service at a is aborted and
            # served again from e; the run of service before the pause ends there (the readings the run takes, at
            # its span's start and end, are before the first booking and after the last service)
            a, e = self.pause
            if free < e and free + service > a:
                self._done += free - began
                free = began = e
        end = free + service
        heapq.heapreplace(self._free, (end, began))
        self.busy += service
        return end

    def cut(self, at: float) -> None:
        """The servers crash at ``at`` (faults.py: a scheduler server dies): the service booked past ``at`` is
        dropped (the requests in it are lost; the caller retries them), so a request after the crash waits for none
        of it. Called at or before ``at``, after every booking the crash loses."""
        kept = []
        for free, began in self._free:
            if free > at:
                self.busy -= free - max(at, began)
                free, began = at, min(at, began)
            kept.append((free, began))
        heapq.heapify(kept)
        self._free = kept

    def busy_by_now(self, now: float | None = None) -> float:
        # Every request was booked at its arrival, at or before now; on each server, those whose service ends after
        # the start of its current run follow one another without a gap (each waited for the one before), so its
        # service done by ``now`` is the runs before plus its current run up to ``now``: sums of spans no longer
        # than the run so far, never a difference of the booked total and what is to come (which loses every digit
        # when a service is 1e14 s long). A ``now`` after the simulation's reads the service booked as it will have
        # run by then.
        now = self.sim.env._now if now is None else now
        return self._done + sum((free if free < now else now) - began for free, began in self._free if now > began)

    def capacity(self, span: float) -> float:
        return self.c * span


class Server:
    """One FCFS server: Servers with c = 1 without the heap (the scheduling cycle, a stream, a store)."""

    c = 1

    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.free = 0.0  # when the server is next free
        self.busy = 0.0
        self._began = 0.0  # when the current run of back-to-back service began (at or after now: an ``at`` ahead)
        self._runs: deque[tuple[float, float]] = deque()  # (began, ended) of runs not yet ended by now
        self._done = 0.0  # service of the runs ended by now, before those

    def done_at(self, service: float, at: float | None = None) -> float:
        """Admit a request arriving at ``at`` (default now; never before the one admitted last); when it is done."""
        now = self.sim.env._now
        t = now if at is None else at
        if self.free <= t:  # a new run begins at t (the last one may end after now, when it began ahead)
            runs = self._runs
            runs.append((self._began, self.free))
            while runs and runs[0][1] <= now:
                began, ended = runs.popleft()
                self._done += ended - began
            self._began, self.free = t, t + service
        else:
            self.free += service
        self.busy += service
        return self.free

    def busy_by_now(self, now: float | None = None) -> float:
        """As Servers: the runs' service up to ``now``, each run clipped to it (a run booked to begin later, a
        request ``at`` a hop ahead, adds nothing yet)."""
        now = self.sim.env._now if now is None else now
        total = self._done
        for began, ended in (*self._runs, (self._began, self.free)):
            if now > began:
                total += (ended if ended < now else now) - began
        return total

    def capacity(self, span: float) -> float:
        return span


class Group:
    """Several pools of servers read as one resource (e.g. a fleet of scheduler servers, each with its threads)."""

    def __init__(self, members: list[Servers]) -> None:
        self.members = members
        self.c = sum(m.c for m in members)

    def busy_by_now(self, now: float | None = None) -> float:
        return sum(m.busy_by_now(now) for m in self.members)

    def capacity(self, span: float) -> float:
        return self.c * span


class Locks:
    """One start lock per worker (the rtnl lock and the kernel work around it), taken first come first served.

    A start that arrives while ``k`` others are queued for or holding its worker's lock holds it ``hold + k ×
    contention``: the longer the queue, the slower each setup (docs/sources.md §2: 64 parallel starts on one host spread
    over seconds, not 64 × 0.8 ms). Only workers with a queue keep its end times (``_ends``), so a fleet of idle
    workers costs one float each."""

    def __init__(self, sim: Sim, workers: int, hold: float, contention: float) -> None:
        self.sim = sim
        self.c = workers
        self.hold_s = hold
        self.contention = contention
        self.free = [0.0] * workers  # when each worker's lock is next free
        self._ends: dict[int, list[float]] = {}  # a worker's queue: when each start in it releases the lock
        self.chain = [0.0] * workers  # hold time in each worker's current run of back-to-back holds
        self.busy = 0.0

    def take(self, worker: int, at: float, now: float) -> float:
        """A start, accepted by ``worker`` at ``now``, arrives at its lock at ``at`` (>= now); return when it releases
        the lock."""
        free = self.free[worker]
        if free > at:  # a queue: count the starts still in it at ``at``
            ends = self._ends.get(worker) or [free]
            ends = ends[bisect.bisect_right(ends, at) :]
            hold = self.hold_s + self.contention * len(ends)
            end = free + hold
            ends.append(end)
            self._ends[worker] = ends
            self.chain[worker] += hold
        else:
            if self._ends:
                self._ends.pop(worker, None)
            hold = self.hold_s
            end = at + hold
            # a new run of holds (after a gap); what is left of the old one is still to come
            left = free - now
            self.chain[worker] = (
                hold if left <= 0 else hold + (left if left < self.chain[worker] else self.chain[worker])
            )
        self.free[worker] = end
        self.busy += hold
        return end

    def busy_by_now(self, now: float | None = None) -> float:
        # the holds still to come on a worker are the end of its current run of holds: free − now, but never more
        # than that run holds (a run booked to begin after now, a start still on its way to the lock)
        ahead = np.asarray(self.free) - (self.sim.env._now if now is None else now)
        future = np.minimum(ahead, np.asarray(self.chain))
        return self.busy - float(future[ahead > 0].sum())

    def capacity(self, span: float) -> float:
        return self.c * span


class Fleet:
    """Workers as arrays: slots in use, and the start path with its rtnl lock."""

    def __init__(self, sim: Sim, fp: FleetParams, sp: SandboxParams, streams: Streams) -> None:
        self.sim = sim
        self.fp = fp
        self.slots = slots_per_worker(fp, sp)  # >= 1: a sandbox bigger than a worker is rejected before the run
        self.total = self.slots * fp.workers
        self.used = [0] * fp.workers  # true slots in use: the worker is its own source of truth
        self.locks = Locks(sim, fp.workers, fp.rtnl_hold_s, fp.contention_s)
        self._create = fp.container_create.sampler(streams.get("container_create"))
        self._start = fp.start.sampler(streams.get("sandbox_start"))
        self.in_use = 0  # slots in use over the whole fleet
        self.in_use_peak = 0  # the most slots in use over the whole fleet at once
        self.in_use_max = 0  # the most slots in use on one worker at once (never above ``slots``)
        self.dead: list[bool] | None = None  # which workers died (faults.worker_death; None: none did)

    def kill(self, workers: range) -> None:
        """Workers die (models/sandboxes/faults.py): their slots leave the fleet for good; each looks full from now on
        (so no placement is accepted there, and a publish shows it full). The caller handles their sandboxes."""
        if self.dead is None:
            self.dead = [False] * self.fp.workers
        for w in workers:
            if not self.dead[w]:
                self.dead[w] = True
                self.in_use -= self.used[w]
                self.used[w] = self.slots
                self.total -= self.slots

    def try_accept(self, worker: int) -> bool:
        """The worker's own check: accept if it has a free slot."""
        n = self.used[worker]
        if n < self.slots:
            self.used[worker] = n + 1
            in_use = self.in_use = self.in_use + 1
            if in_use > self.in_use_peak:
                self.in_use_peak = in_use
            if n + 1 > self.in_use_max:
                self.in_use_max = n + 1
            return True
        return False

    def start(self, worker: int, at: float, accepted: float) -> float:
        """The start path of a sandbox the worker accepted at ``accepted``, from time ``at`` (>= accepted): container
        create, the worker's start lock, the rest. Returns when the sandbox can run user code: computed at the
        accept, with no event of its own. This is the model, not a shortcut: the lock is taken in the order the
        worker accepted its sandboxes, which is the order they reach it when the create steps take about as long
        (the narrow create distribution keeps the two close)."""
        released = self.locks.take(worker, at + self._create(), accepted)
        return released + self._start()

    def release(self, worker: int) -> None:
        if self.dead is not None and self.dead[worker]:  # its sandbox went with it (faults.worker_death)
            return
        self.used[worker] -= 1
        self.in_use -= 1
