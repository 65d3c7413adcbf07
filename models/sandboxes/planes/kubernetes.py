"""A Kubernetes-style control plane as the foil (docs/sources.md §2, "Kubernetes figures").

A pod create goes to the API server (at most ``apiserver_mutating_inflight`` mutating requests at once, each held
until etcd has committed it; more wait in arrival order) and is written to etcd. The scheduler takes pods one at a
time (a serial scheduling cycle): filter and score over percentageOfNodesToScore = max(5, 50 − nodes/125)% of the
nodes (at least 100), 16-way parallel, at ``node_score_s`` per node plus ``cycle_s``; the pick among the scored nodes
is drawn as the least loaded of ``sampled_nodes`` of them (the cost stays that of scoring them all). The binding is
another etcd write, sent through the scheduler's client rate limit (``scheduler_qps``, ``scheduler_burst``): as
client-go's token bucket, each binding reserves the next token and waits for it, so tokens go out in order and over
any window t at most burst + qps·t bindings are sent; the wait does not hold up the next scheduling cycle (binding is
asynchronous in kube-scheduler). The kubelet of the node picks the pod up after ``kubelet_pickup_s`` and starts it
(the fleet's start path); its status is written to etcd. etcd is one shared write resource: ``etcd_writes_per_s``
writes per second at ``etcd_latency_s``, also carrying every node's lease renewal each ``lease_interval_s`` (O(nodes)
load independent of pod creation).

The defaults are upstream's (docs/sources.md §2), including the scheduler's client rate limit of 50 QPS / burst 100,
which caps binding at about 50 pods/s; scale tests raise it, and the sandboxes-k8s preset does (an assumption, stated
there).

Left out: watch fan-out, controller-manager (pods are created directly, not through ReplicaSets), preemption,
priority queues and the scheduler's backoff.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from models.sandboxes import faults
from models.sandboxes.fleet import Fleet, Meter, Server, Servers
from models.sandboxes.placement import least_of, worker_draws
from models.sandboxes.planes.base import Client, ControlPlane, Cost, Scenario
from sim.engine import Sim
from sim.metrics import Metric, Metrics
from sim.rng import Streams
from sim.scenario import param

LEASE_CHUNK = 2**16  # lease renewals booked between two checks of the run's budget (sim/engine.py ``Sim.charge``)
LEASE_EVENTS = 1 / 8  # a lease renewal booked, as events of the run's budget
# what the renewals are in the run's estimate and budget, and how to make fewer (models/sandboxes/budget.py)
LEASES = ("node lease renewals", "lengthen kubernetes.lease_interval_s (or fewer fleet.workers)")


@dataclass(frozen=True)
class KubernetesParams:
    apiserver_mutating_inflight: int = param(
        200, ge=1, le=1_000_000, source="docs/sources.md §2: apiserver in-flight 200 mutating"
    )
    etcd_writes_per_s: float = param(
        44_000.0,
        gt=0,
        plausible=(50_000.0,),
        source="docs/sources.md §2 etcd: 1,000 clients ~44,000–50,000 writes/s (3 × 8 vCPU, SSD)",
    )
    etcd_latency_s: float = param(0.022, ge=0, source="docs/sources.md §2 etcd: ~22 ms at 1,000 clients")
    etcd_clients: int = param(1000, ge=1, le=1_000_000, source="docs/sources.md §2 etcd benchmark: 1,000 clients")
    cycle_s: float = param(0.0002, ge=0, source="assumption: the fixed part of one scheduling cycle")
    node_score_s: float = param(
        0.000037,
        ge=0,
        plausible=(3.31e-05, 4.07e-05),
        source="fitted: the CI floor at 5,000 nodes (docs/sources.md §2: 680–810 pods/s without kubelets); "
        "plausible: 810 and 680 pods/s (500 nodes scored 16-way, plus cycle_s)",
    )
    sampled_nodes: int = param(
        8,
        ge=1,
        le=10_000,
        source="assumption: a stand-in for the score's pick, not a figure of Kubernetes",
        doc="the pick among the scored nodes is the least loaded of this many of them, drawn at random (the real "
        "scheduler scores every one; a sample keeps a placement O(1) while the cycle is still charged for all)",
    )
    scheduler_qps: float = param(
        50.0, gt=0, source="docs/sources.md §2: kube-scheduler client rate limit, 50 QPS by default"
    )
    scheduler_burst: float = param(
        100.0, ge=1, source="docs/sources.md §2: kube-scheduler client burst, 100 by default"
    )
    kubelet_pickup_s: float = param(0.1, ge=0, source="assumption: watch delivery to the kubelet")
    lease_interval_s: float = param(10.0, ge=0.001, source="docs/sources.md §2: node Lease renewed every 10 s")
    writes_per_pod: int = param(3, ge=2, source="docs/sources.md §2 'several writes to etcd': create, binding, status")


class RateLimit:
    """A client's token bucket that makes requests wait (client-go's rate limiter): ``reserve`` takes the next token,
    in order, and says how long to wait for it. The bucket holds up to ``burst`` tokens and refills at ``rate``;
    tokens owed by waiting requests count as negative, so the k-th request beyond the bucket's content waits k/rate.

    As a ``Meter``: each request sent (``sent``, when its token is due) is 1/rate seconds of the limit's time, and a
    span of t seconds holds at most burst/rate + t of them (burst + rate·t requests in any window)."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = burst
        self._t = 0.0
        self.sent = 0  # requests whose token was due by now

    def reserve(self, now: float) -> float:
        """Take a token for a request made at ``now`` (not before the last one); return the seconds to wait."""
        self._tokens = min(self.burst, self._tokens + (now - self._t) * self.rate) - 1.0
        self._t = now
        return -self._tokens / self.rate if self._tokens < 0 else 0.0

    def busy_by_now(self, now: float | None = None) -> float:
        return self.sent / self.rate

    def capacity(self, span: float) -> float:
        return self.burst / self.rate + span


class InFlight:
    """At most ``c`` requests at once; more wait in arrival order (the API server's mutating in-flight limit)."""

    def __init__(self, sim: Sim, c: int) -> None:
        self.sim = sim
        self.c = c
        self.n = 0  # requests in flight
        self.waiting: deque = deque()
        self._busy = 0.0  # slot-seconds of the requests that have finished
        self._starts = 0.0  # the sum of the start times of the requests in flight

    def admit(self) -> float:
        """A request takes a slot now; return the time it started (pass it to ``release``)."""
        now = self.sim.env._now
        self.n += 1
        self._starts += now
        return now

    def release(self, started: float) -> None:
        now = self.sim.env._now
        self.n -= 1
        self._starts = self._starts - started if self.n else 0.0  # no rounding residue once none is in flight
        self._busy += now - started

    def busy_by_now(self, now: float | None = None) -> float:
        return self._busy + self.n * (self.sim.env._now if now is None else now) - self._starts

    def capacity(self, span: float) -> float:
        return self.c * span


class Kubernetes(ControlPlane):
    name = "kubernetes"
    section = "kubernetes"
    RESOURCES = ("etcd", "apiserver_inflight", "scheduling_cycle", "binding_rate_limit")
    METRICS = Metrics(
        Metric("etcd_writes", "writes", "sum", "writes through the API server to etcd (kubernetes)"),
        Metric("lease_writes", "writes", "sum", "node lease renewals written to etcd (kubernetes)"),
        Metric(
            "binding_waits",
            "bindings",
            "sum",
            "bindings that waited for a token of the scheduler's rate limit (kubernetes)",
        ),
    )
    Params = KubernetesParams
    FAULTS = ("etcd_election", "worker_death")
    PRESET = "sandboxes-k8s"
    ORDER = 3

    def __init__(self, sim: Sim, sc: Scenario, streams: Streams, fleet: Fleet, creation: Client) -> None:
        super().__init__(sim, sc, streams, fleet, creation)
        p = self.p
        self.nodes = sc.fleet.workers
        self.apiserver = InFlight(sim, p.apiserver_mutating_inflight)
        self.etcd = Servers(sim, p.etcd_clients)
        self.etcd.pause = faults.down(sc.faults, "etcd_election")  # no write commits then (faults.py)
        self.etcd_service = p.etcd_clients / p.etcd_writes_per_s  # so that at most etcd_writes_per_s go through
        pct = max(5.0, 50.0 - self.nodes / 125.0)
        self.nodes_scored = min(self.nodes, max(100, int(self.nodes * pct / 100)))
        self.sampled = min(self.nodes_scored, p.sampled_nodes)
        self.cycle = p.cycle_s + self.nodes_scored * p.node_score_s / 16  # 16-way parallel filter/score
        self.scheduler = Server(sim)  # the serial scheduling cycle
        self.binding_limit = RateLimit(p.scheduler_qps, p.scheduler_burst)
        self.binding_waits = 0  # bindings that waited for a token
        self._draw = worker_draws(streams.get("placement"), self.nodes)
        self.etcd_writes = 0
        self.lease_writes = 0
        sim.call_in(0.0, self._leases)

    def _write(self, fn=None, arg=None) -> None:
        """One etcd write through the API server; ``fn(arg)`` when it is committed (none: nothing waits for it)."""
        self.etcd_writes += 1
        if self.apiserver.n < self.apiserver.c:
            self._admit((fn, arg))
        else:
            self.apiserver.waiting.append((fn, arg))

    def _admit(self, request: tuple) -> None:
        # a mutating request holds one of the API server's in-flight slots until etcd has committed it
        started = self.apiserver.admit()
        done = self.etcd.done_at(self.etcd_service) + self.p.etcd_latency_s
        self.sim.call_in(done - started, self._committed, (started, request))

    def _committed(self, arg: tuple) -> None:
        started, (fn, fn_arg) = arg
        self.apiserver.release(started)
        if self.apiserver.waiting:
            self._admit(self.apiserver.waiting.popleft())
        if fn is not None:
            fn(fn_arg)

    def submit(self, sandbox: int) -> None:
        self.sim.call_in(self.hop, self._create, sandbox)

    def _create(self, sandbox: int) -> None:
        self._write(self._schedule, sandbox)  # the pod object

    def _schedule(self, sandbox: int) -> None:
        done = self.scheduler.done_at(self.cycle)
        self.sim.call_in(done - self.sim.env._now, self._bind, sandbox)

    def _bind(self, sandbox: int) -> None:
        # the cycle was charged for scoring nodes_scored nodes; the least loaded of a sample stands in for its pick
        used = self.fleet.used
        worker = least_of(self._draw, self.sampled, used.__getitem__)
        if not self.fleet.try_accept(worker):
            self.rejections += 1
            self.retries += 1
            self._schedule(sandbox)
            return
        wait = self.binding_limit.reserve(self.sim.env._now)
        if wait > 0:
            self.binding_waits += 1
            self.sim.call_in(wait, self._write_binding, (sandbox, worker))
        else:
            self._write_binding((sandbox, worker))

    def _write_binding(self, arg: tuple[int, int]) -> None:
        self.binding_limit.sent += 1
        self._write(self._bound, arg)

    def _bound(self, arg: tuple[int, int]) -> None:
        # bound: the create call returns; the kubelet picks the pod up later and starts it (after its RPC handling)
        sandbox, worker = arg
        now = self.sim.env._now
        self.creation.placed_at(sandbox, worker, now, now + self.p.kubelet_pickup_s + self.fleet.fp.rpc_s)
        self.sim.call_in(self.p.kubelet_pickup_s, self._kubelet, arg)

    def _kubelet(self, arg: tuple[int, int]) -> None:
        for _ in range(self.p.writes_per_pod - 2):
            self._write()  # status updates

    def _leases(self, _arg: None) -> None:
        """Every node renews its lease each interval: spread evenly, in aggregate (one event per second: a second's
        renewals are booked on etcd at once). This is the model, not a shortcut: renewals one by one would load etcd
        more smoothly and give other numbers, so there is no exact faster path to switch off."""
        n = round(self.nodes / self.p.lease_interval_s)
        for start in range(0, n, LEASE_CHUNK):  # each chunk counted against the run's budget (a renewal: 1/8 event)
            chunk = min(LEASE_CHUNK, n - start)
            self.sim.charge(chunk >> 3, self._leases.__qualname__)
            for _ in range(chunk):
                self.etcd.done_at(self.etcd_service)
        self.lease_writes += n
        self.sim.call_in(1.0, self._leases)

    @classmethod
    def events_per_s(cls, sc: Scenario) -> Cost:
        """Every node's lease renewal each ``lease_interval_s``, each ``LEASE_EVENTS``."""
        interval = getattr(sc, cls.section).lease_interval_s
        return {LEASES[0]: (sc.fleet.workers / interval * LEASE_EVENTS, LEASES[1])}

    @classmethod
    def grows(cls) -> dict[Callable, tuple[str, str]]:
        return {cls._leases: LEASES}

    def extra_metrics(self) -> dict:
        return {"etcd_writes": self.etcd_writes, "lease_writes": self.lease_writes, "binding_waits": self.binding_waits}

    def resources(self) -> dict[str, Meter]:
        return {
            "etcd": self.etcd,
            "apiserver_inflight": self.apiserver,
            "scheduling_cycle": self.scheduler,
            "binding_rate_limit": self.binding_limit,
        }
