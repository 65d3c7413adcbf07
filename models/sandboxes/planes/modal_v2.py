"""Modal's v2 sandbox control plane (docs/sources.md §2, "Modal v2").

A load balancer sends each create to one of ``scheduler.count`` scheduler servers (``threads`` at once, a light CPU
step ``cpu_s`` each). The scheduler places the sandbox from its in-memory cache of worker state (``placement``:
random, power of d choices, least loaded) and calls the chosen worker directly; the worker, its own source of
truth, accepts if it has a free slot, else rejects, and the create is retried through the load balancer (counted
as a rejection and a retry). No data store is on this path: sandbox metadata is written asynchronously (a
``metadata_writes_per_s`` store whose queue nothing waits for; its busy fraction is reported), and workers batch
their control messages.

Worker state reaches the caches through Redis streams: every ``publish_interval_s`` each worker publishes its slots
in use to one of ``streams`` streams (at staggered phases, aggregated into ``publish_phases`` groups). A stream is a
queue served at ``stream_msgs_per_s``: a group's messages are delivered after the stream's latency, the M/D/1 wait
while the stream keeps up (offered load ρ = publish rate ÷ capacity < 1), and the backlog ahead of them, which is
tracked as messages in minus capacity × time elapsed (never below zero): it stays empty while ρ ≤ 1 and grows by
(ρ − 1) seconds per second from the first publish once publishes outpace the stream. Between publishes a scheduler
adds its own placements to its view, but not the other schedulers': the staleness that causes rejections.

Two shortcuts (declared below over the keys of models/sandboxes/shortcuts.py, each off with
``shortcuts = "all,-NAME"``): placements at one instant share one event (``same_instant_placements``), and the
worker's accept is computed at the placement, a hop early (``accept_at_placement``); both give the general path's
numbers to the bit (tests/models/sandboxes/test_sandbox_shortcuts.py).

Faults (models/sandboxes/faults.py): ``scheduler_down`` (scheduler 0 dies for a while; the creates in it and those
routed to it while it is down time out and are retried through the load balancer), ``stream_stall`` (no worker state
delivered for a while).

Its part of the run's estimate (models/sandboxes/budget.py): the published worker state (workers ÷
``publish_interval_s`` copied each second, each ``PUBLISH_EVENTS``), and a scheduler outage's retries: its creates
time out and are sent again every ``faults.scheduler_down_detect_s`` while it lasts (at most the client's
concurrency at once, the share routed to the dead scheduler). The retries a stream stall causes (placements on stale
state) are not bounded ahead; the budget checked as the run goes names them (``grows``).

Left out: the load balancer's health checks, regions and worker types, the load balancer's own cost.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from models.sandboxes import faults
from models.sandboxes.fleet import Fleet, Group, Meter, Server, Servers
from models.sandboxes.placement import worker_draws
from models.sandboxes.planes.base import Client, ControlPlane, Cost, Scenario
from models.sandboxes.shortcuts import EVERY
from sim.engine import Sim
from sim.metrics import Metric, Metrics
from sim.rng import Streams
from sim.scenario import param
from sim.shortcuts import Shortcut, one_of


@dataclass(frozen=True)
class SchedulerParams:
    count: int = param(32, ge=1, le=10_000, source="assumption: docs/sources.md §2 'a fleet of scheduler servers'")
    threads: int = param(8, ge=1, le=10_000, source="assumption: creates a scheduler server handles at once")
    cpu_s: float = param(0.001, gt=0, source="assumption: 'one light CPU step' (docs/sources.md §2)")
    request_s: float = param(
        0.0245,
        ge=0,
        plausible=(0.003, 0.092),
        source="fitted to docs/sources.md §2 (scheduling 'tens of milliseconds'; calibration/params/sandboxes.toml); "
        "plausible: the values that keep the schedule p50 within 10–99 ms (the same file)",
        doc="the create request's time in the scheduler besides its CPU step, not holding a thread (authentication, "
        "gRPC, lookups)",
    )
    placement: Literal["random", "power_of_d", "least_loaded"] = param(
        "power_of_d",
        plausible=("random",),
        source="docs/sources.md §2 'a fast scheduling algorithm' (not published); power of d (Mitzenmacher 2001), "
        "and random placement as its rival",
    )
    d: int = param(2, ge=1, le=1000, doc="choices sampled by power_of_d")
    publish_interval_s: float = param(1.0, ge=0.001, source="assumption: 'workers periodically publish their state'")
    streams: int = param(1, ge=1, le=100_000, source="docs/sources.md §2: all workers publish to one Redis stream")
    stream_msgs_per_s: float = param(
        200_000.0,
        gt=0,
        plausible=(100_000.0,),
        source="assumption: one stream takes 100,000 workers at 1 s with room (docs/sources.md §2 "
        "'fine beyond 100,000 workers'); Redis Streams 10k msg/s on 2 cores is a floor; plausible down to the "
        "100,000 a second those workers publish",
    )
    stream_lag_s: float = param(0.002, ge=0, source="docs/sources.md §2: Redis Streams 99.9% delivered within 2 ms")
    metadata_writes_per_s: float = param(
        200_000.0, gt=0, source="assumption: the async metadata store (sandbox objects in Redis)"
    )
    publish_phases: int = param(20, ge=1, le=100, doc="publishes are aggregated into this many groups per interval")


SAMPLE_ROUNDS = 8  # assumption: how often a scheduler samples again when its picks all look full
RETRY_EVENTS = 2.0  # a create sent again: its retry and its arrival, as events of the run's budget
PUBLISH_EVENTS = 1 / 8  # a worker's state copied into a published snapshot, as events of the run's budget
# what the publishes are in the run's estimate and budget, and how to make fewer (models/sandboxes/budget.py)
PUBLISHES = ("published worker state", "lengthen scheduler.publish_interval_s (or fewer fleet.workers)")

NAME = "modal-v2"
V2 = one_of(NAME)
# below this the worker's answer and the accept are at one instant, where ties between events decide the order
MIN_ANSWER_S = 1e-6


def _answer_after_accept(sc: Any) -> bool:
    """The create call returns strictly after the worker accepts: 2 hops + the RPC of at least ``MIN_ANSWER_S``."""
    return sc.client.rtt_s + sc.fleet.rpc_s >= MIN_ANSWER_S


SAME_INSTANT = Shortcut(
    "same_instant_placements",
    "any modal-v2 burst: consecutive create requests that reach the schedulers' placement step at the same instant",
    {**EVERY, "control_plane": V2},
    doc="they share one event instead of one each: they would have been consecutive entries of the event queue, "
    "and a run that stops (the fleet full) stops between two of them as it would between two events "
    "(models/sandboxes/planes/modal_v2.py)",
)

ACCEPT_AT_PLACEMENT = Shortcut(
    "accept_at_placement",
    "a modal-v2 burst of sandboxes that run until the end (sandboxes.lifetime_s = 0: no slot is freed while a "
    "placement is on its way to the worker) on a fleet that holds it (fleet.allow_overload at its default), whose "
    "create call returns at least a microsecond after the worker accepts (client.rtt_s + fleet.rpc_s)",
    {**EVERY, "control_plane": V2, "sandboxes.lifetime_s": lambda v: v == 0, "fleet.allow_overload": one_of(False)},
    when=_answer_after_accept,
    doc="the worker's accept (its check of its own slots, the metadata write, the start path) is computed when the "
    "scheduler places the sandbox, a hop before the RPC reaches the worker: one event per placement instead of two; "
    "the accepts still on their way are kept aside so that a publish sees the worker's slots as they are, and each "
    "accept is booked at the time it happens (models/sandboxes/planes/modal_v2.py)",
)


class ModalV2(ControlPlane):
    name = NAME
    section = "scheduler"
    RESOURCES = ("schedulers", "redis_streams", "metadata_store")
    METRICS = Metrics(
        Metric(
            "stream_offered_load",
            "ratio",
            "derived",
            "publish rate ÷ one Redis stream's capacity; above 1, lag grows (modal-v2)",
        ),
        Metric(
            "stream_lag_max_s", "s", "max", "the longest a worker's published state took to be delivered (modal-v2)"
        ),
        Metric("metadata_writes", "writes", "sum", "writes to the metadata store, off the critical path (modal-v2)"),
    )
    Params = SchedulerParams
    FAULTS = ("scheduler_down", "stream_stall", "worker_death")
    PRESET = "sandboxes-v2"
    ORDER = 2
    # one scheduler: every create waits for the restart
    FAULT_VARIANTS: ClassVar[Mapping[str, tuple[str, ...]]] = {"scheduler_down": ("scheduler.count=1",)}
    FITTED = True  # scheduler.request_s (calibration/params/sandboxes.toml)
    SHORTCUTS = (SAME_INSTANT, ACCEPT_AT_PLACEMENT)

    def __init__(self, sim: Sim, sc: Scenario, streams: Streams, fleet: Fleet, creation: Client) -> None:
        super().__init__(sim, sc, streams, fleet, creation)
        p = self.p
        self.workers = sc.fleet.workers
        self.servers = [Servers(sim, p.threads) for _ in range(p.count)]
        self.visible = [0] * self.workers  # slots in use as last published and delivered
        # each scheduler's own placements since the worker's last delivery, by publish group (cleared per group)
        self.own: list[list[dict[int, int]]] = [[{} for _ in range(p.publish_phases)] for _ in range(p.count)]
        self._lb = worker_draws(streams.get("load_balancer"), p.count)
        self._draw = worker_draws(streams.get("placement"), self.workers)
        self.rpc_s = sc.fleet.rpc_s
        self.answer_s = 2 * self.hop + self.rpc_s  # placement → the worker's answer back at the scheduler
        self.phases = p.publish_phases
        self.metadata_writes = 0
        self.metadata = Server(sim)  # the async metadata store: nothing waits for it, its busy time is reported
        self.metadata_s = 1.0 / p.metadata_writes_per_s
        rate = self.workers / p.publish_interval_s / p.streams
        self.stream_rho = rate / p.stream_msgs_per_s  # offered load of each stream (the streams share publishes evenly)
        self.stream = Server(sim)  # one stream, standing for each of the ``streams`` equally loaded ones
        self.stream_lag_max = 0.0
        self._tick = itertools.count()
        self.horizon = sc.horizon_s
        self._placements = 0  # placements made so far (each one's sequence number)
        # accept_at_placement: the accepts computed ahead, (when the worker accepts, sequence number, worker), and the
        # placements made before the last publish ran (None: every accept is an event of its own)
        self._early: deque[tuple[float, int, int]] | None = (
            deque() if ACCEPT_AT_PLACEMENT.name in sim.shortcuts else None
        )
        self._mark = 0
        self._down = faults.down(sc.faults, "scheduler_down")  # (start, end) of scheduler 0's outage, or None
        self._stall = faults.down(sc.faults, "stream_stall")  # (start, end) of the stream's stall, or None
        self.detect_s = sc.faults.scheduler_down_detect_s
        if self._down is not None:
            # the crash as the booking sees it: a request's service is booked when it is sent, a hop before it
            # reaches the scheduler (fleet.py, Servers), so the service lost at the death is what lies past a - hop
            self._crash_at = max(0.0, self._down[0] - self.hop)
            sim.call_at(self._crash_at, self._crash, None)
            sim.call_at(self._down[1], self._restart, None)
        sim.call_in(0.0, self._publish)

    # --- the create path -------------------------------------------------------------------------------------
    # client → load balancer → scheduler (a hop, then request_s), the scheduler's queue and CPU step, placement,
    # scheduler → worker (a hop), the worker's RPC (rpc_s) and its accept or reject, the answer back to the scheduler
    # and on to the client (two hops): the create call returns then, placed and starting (docs/sources.md §2).
    def submit(self, sandbox: int) -> None:
        self.submit_many(range(sandbox, sandbox + 1))

    def submit_many(self, sandboxes: range) -> None:
        # Each is booked when sent and placed a constant later (fleet.py, Servers: the hop and the request's own time).
        # The shortcut same_instant_placements (``SAME_INSTANT``): consecutive requests placed at the same
        # instant share one event; they would have been consecutive entries of the event queue, so the order of
        # everything is the same as with one event each.
        lb, servers, call_at = self._lb, self.servers, self.sim.call_at
        cpu, delay = self.p.cpu_s, self.hop + self.p.request_s
        if self._down is not None and self.sim.env._now + self.hop < self._down[1]:
            self._submit_around_outage(sandboxes)
            return
        if SAME_INSTANT.name not in self.sim.shortcuts:
            place = self._place
            for sandbox in sandboxes:
                k = next(lb)
                call_at(servers[k].done_at(cpu) + delay, place, (sandbox, k))
            return
        place_all = self._place_all
        batch: list[tuple[int, int]] = []
        at = -1.0
        for sandbox in sandboxes:
            k = next(lb)
            t = servers[k].done_at(cpu) + delay
            if t != at:
                if batch:
                    call_at(at, place_all, batch)
                batch, at = [], t
            batch.append((sandbox, k))
        if batch:
            call_at(at, place_all, batch)

    def _submit_around_outage(self, sandboxes: range) -> None:
        """faults.scheduler_down, for creates sent before the outage ends: one routed to scheduler 0 that reaches it
        while it is down gets no answer, and one still in it when it dies (queued, or in its CPU step or request time)
        is lost with it; either way the client sends it again when its deadline (``faults.scheduler_down_detect_s``
        after it sent it) has passed, not before the death. The rest go as usual (one event each: the model's
        shortcuts are off under faults)."""
        a, _ = self._down
        lb, servers, call_at, place, retry = self._lb, self.servers, self.sim.call_at, self._place, self._retry
        cpu, delay = self.p.cpu_s, self.hop + self.p.request_s
        now = self.sim.env._now
        deadline = now + self.detect_s
        dead_on_arrival = now >= self._crash_at  # it reaches scheduler 0 at or after its death
        for sandbox in sandboxes:
            k = next(lb)
            if k == 0 and dead_on_arrival:
                self.retries += 1
                call_at(deadline, retry, sandbox)
                continue
            t = servers[k].done_at(cpu) + delay
            if k == 0 and t >= a:  # still in scheduler 0 at its death (its service past the death is cut then)
                self.retries += 1
                call_at(max(a, deadline), retry, sandbox)
            else:
                call_at(t, place, (sandbox, k))

    def _place_all(self, batch: list[tuple[int, int]]) -> None:
        place, creation = self._place, self.creation
        for arg in batch:
            if creation.full:  # the run stopped at the one before (the fleet is full): no event after it runs
                return
            place(arg)

    def _place(self, arg: tuple[int, int]) -> None:
        sandbox, k = arg
        worker = self._pick(k)
        group = self.own[k][worker % self.phases]
        group[worker] = group.get(worker, 0) + 1
        # The worker decides on its own truth when the RPC arrives, a hop from now. The shortcut accept_at_placement
        # (``ACCEPT_AT_PLACEMENT``) computes that decision now, one event per placement instead of two; its
        # shape keeps out what could change the worker's truth within the hop (a slot freed, the run's end).
        now = self.sim.env._now
        seq = self._placements
        self._placements = seq + 1
        if self._early is None:
            self.sim.call_at(now + self.hop, self._accept_event, (sandbox, worker, now, seq))
        elif now + self.hop < self.horizon:  # (an accept due at the horizon would not happen in the run)
            self._accept(sandbox, worker, now, seq)

    def _accept_event(self, arg: tuple[int, int, float, int]) -> None:
        self._accept(*arg)

    def _accept(self, sandbox: int, worker: int, placed: float, seq: int) -> None:
        """The worker's answer to the placement made at ``placed`` (its ``seq``-th): it accepts if it has a free
        slot, a hop after ``placed``; times follow from ``placed`` whichever event computes them."""
        accepted = placed + self.hop
        if self.fleet.try_accept(worker):
            self.metadata_writes += 1  # written asynchronously, off the critical path
            self.metadata.done_at(self.metadata_s, accepted)
            if self._early is not None:  # on its way until ``accepted``: a publish before then must not see it
                self._early.append((accepted, seq, worker))
            # the worker starts once it has handled the RPC; the accept is back at the client two hops later
            self.creation.placed_at(
                sandbox, worker, placed + self.answer_s + self.hop, placed + self.hop + self.rpc_s, accepted
            )
        else:
            self.rejections += 1
            self.retries += 1
            self.sim.call_at(placed + self.answer_s, self._retry, sandbox)  # sent again through the load balancer

    def _pick(self, k: int) -> int:
        """Scheduler ``k``'s choice of worker from its view: the published state plus its own placements since."""
        own = self.own[k]
        visible = self.visible
        p = self.p
        phases = p.publish_phases
        if p.placement == "least_loaded":
            view = np.asarray(visible, dtype=np.int64)
            for group in own:
                for w, n in group.items():
                    view[w] += n
            return int(np.argmin(view))
        d = p.d if p.placement == "power_of_d" else 1
        slots = self.fleet.slots
        draw = self._draw
        # power of d on the view (placement.least_of, inlined: this is the hottest loop of a million-sandbox run);
        # a worker the view shows full is not chosen while others may be free
        for _ in range(SAMPLE_ROUNDS):
            best = next(draw)
            best_view = visible[best] + own[best % phases].get(best, 0)
            for _ in range(d - 1):
                w = next(draw)
                v = visible[w] + own[w % phases].get(w, 0)
                if v < best_view:
                    best, best_view = w, v
            if best_view < slots:
                break
        return best

    def _retry(self, sandbox: int) -> None:
        self.submit(sandbox)

    # --- worker state through Redis streams ------------------------------------------------------------------
    def _publish(self, _arg: None) -> None:
        """One phase group of workers publishes; it is delivered after the stream's lag."""
        p = self.p
        group = next(self._tick) % p.publish_phases
        now = self.sim.env._now
        snapshot = self.fleet.used[group :: p.publish_phases]
        self.sim.charge(
            len(snapshot) >> 3, self._publish.__qualname__
        )  # a worker's state copied: 1/8 event of the budget
        early = self._early
        if early is not None:
            # accepts computed ahead (accept_at_placement) are not yet on the worker: drop those already there (due
            # before now, or at now with their event queued before this publish was), take out the rest
            mark = self._mark
            while early and (early[0][0] < now or (early[0][0] == now and early[0][1] < mark)):
                early.popleft()
            for _, _, w in early:
                if w % p.publish_phases == group:
                    snapshot[w // p.publish_phases] -= 1
            self._mark = self._placements  # the placements whose accept would be queued before the next publish
        # the stream's queue: this group's messages wait for the backlog ahead of them (the messages not yet served
        # since the last publish), then take their own service
        service = len(snapshot) / p.streams / p.stream_msgs_per_s
        done = self.stream.done_at(service)
        backlog = done - service - now
        lag = p.stream_lag_s + (backlog if backlog > 0 else 0.0)  # (no backlog: 0, not a rounding residue below it)
        if self.stream_rho < 1:
            lag += self.stream_rho / (2 * p.stream_msgs_per_s * (1 - self.stream_rho))  # M/D/1 wait of one message
        self.stream_lag_max = max(self.stream_lag_max, lag)
        self.sim.call_in(lag, self._deliver, (group, snapshot))
        self.sim.call_in(p.publish_interval_s / p.publish_phases, self._publish)

    def _crash(self, _arg: None) -> None:
        """Scheduler 0 dies (faults.scheduler_down): the creates in it are lost (``_submit_around_outage`` retries
        them), so the service booked for them is dropped."""
        self.servers[0].cut(self.sim.env._now)

    def _restart(self, _arg: None) -> None:
        """Scheduler 0 is back (faults.scheduler_down), its memory of its own placements lost."""
        self.own[0] = [{} for _ in range(self.phases)]

    def _deliver(self, arg: tuple[int, list[int]]) -> None:
        if self._stall is not None and self._stall[0] <= self.sim.env._now < self._stall[1]:
            self.sim.call_at(self._stall[1], self._deliver, arg)  # faults.stream_stall: held until the stream resumes
            return
        group, snapshot = arg
        phases = self.p.publish_phases
        self.visible[group::phases] = snapshot
        for own in self.own:
            own[group] = {}

    @classmethod
    def events_per_s(cls, sc: Scenario) -> Cost:
        """The published worker state (module docstring)."""
        per_s = sc.fleet.workers / getattr(sc, cls.section).publish_interval_s * PUBLISH_EVENTS
        return {PUBLISHES[0]: (per_s, PUBLISHES[1])}

    @classmethod
    def fault_events(cls, sc: Scenario) -> Cost:
        """The retries of a scheduler outage (module docstring)."""
        fp = getattr(sc, "faults", None)
        if fp is None or not fp.scheduler_down_s > 0:
            return {}
        rounds = min(fp.scheduler_down_s, sc.horizon_s) / fp.scheduler_down_detect_s + 1
        retries = (
            min(float(sc.sandboxes.count), sc.client.concurrency)
            * rounds
            / getattr(sc, cls.section).count
            * RETRY_EVENTS
        )
        return {
            "create retries in the scheduler outage": (
                retries,
                "shorten faults.scheduler_down_s or lengthen faults.scheduler_down_detect_s",
            )
        }

    @classmethod
    def grows(cls) -> dict[Callable, tuple[str, str]]:
        return {
            cls._publish: PUBLISHES,
            cls._retry: (
                "create retries",
                "shorten faults.stream_stall_s or faults.scheduler_down_s (or fewer retries)",
            ),
            cls._accept_event: ("placements", "shorten faults.stream_stall_s (placements on stale worker state)"),
        }

    def resources(self) -> dict[str, Meter]:
        return {"schedulers": Group(self.servers), "redis_streams": self.stream, "metadata_store": self.metadata}

    def extra_metrics(self) -> dict:
        return {
            "stream_offered_load": self.stream_rho,  # publish rate ÷ one stream's capacity: above 1, lag grows
            "stream_lag_max_s": self.stream_lag_max,
            "metadata_writes": self.metadata_writes,
        }
