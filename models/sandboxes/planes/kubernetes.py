"""A Kubernetes-style control plane as the foil (domain.md §2, "Kubernetes figures").

A pod create goes to the API server (at most ``apiserver_mutating_inflight`` mutating requests at once; more wait)
and is written to etcd. The scheduler takes pods one at a time (a serial scheduling cycle): filter and score over
percentageOfNodesToScore = max(5, 50 − nodes/125)% of the nodes (at least 100), 16-way parallel, at ``node_score_s``
per node plus ``cycle_s``; the binding is another etcd write, sent through the scheduler's client rate limit
(``scheduler_qps``). The kubelet of the node picks the pod up after ``kubelet_pickup_s`` and starts it (the fleet's
start path); its status is written to etcd. etcd is one shared write resource: ``etcd_writes_per_s`` writes per
second at ``etcd_latency_s``, also carrying every node's lease renewal each ``lease_interval_s`` (O(nodes) load
independent of pod creation).

Left out: watch fan-out, controller-manager (pods are created directly, not through ReplicaSets), preemption,
priority queues and the scheduler's backoff.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from models.sandboxes.fleet import Fleet, Servers
from models.sandboxes.placement import least_of, worker_draws
from models.sandboxes.planes.base import ControlPlane
from sim.engine import Sim
from sim.limiter import TokenBucket
from sim.rng import Streams
from sim.scenario import param

if TYPE_CHECKING:
    from models.sandboxes.creation import Creation, SandboxScenario


@dataclass(frozen=True)
class KubernetesParams:
    apiserver_mutating_inflight: int = param(200, ge=1, source="domain.md §2: apiserver in-flight 200 mutating")
    etcd_writes_per_s: float = param(
        44_000.0, gt=0, source="domain.md §2 etcd: 1,000 clients ~44,000–50,000 writes/s (3 × 8 vCPU, SSD)"
    )
    etcd_latency_s: float = param(0.022, ge=0, source="domain.md §2 etcd: ~22 ms at 1,000 clients")
    etcd_clients: int = param(1000, ge=1, source="domain.md §2 etcd benchmark: 1,000 clients")
    cycle_s: float = param(0.0002, ge=0, source="assumption: the fixed part of one scheduling cycle")
    node_score_s: float = param(
        0.000037, ge=0, source="fitted: ~745 pods/s at 5,000 nodes (domain.md §2 CI floor 680–810 without kubelets)"
    )
    scheduler_qps: float = param(
        5000.0, gt=0, source="domain.md §2 gives 50 QPS/burst 100 by default; assumption: raised, as scale tests do"
    )
    scheduler_burst: float = param(10000.0, ge=1, source="assumption: raised with scheduler_qps")
    kubelet_pickup_s: float = param(0.1, ge=0, source="assumption: watch delivery to the kubelet")
    lease_interval_s: float = param(10.0, gt=0, source="domain.md §2: node Lease renewed every 10 s")
    writes_per_pod: int = param(3, ge=2, source="domain.md §2 'several writes to etcd': create, binding, status")


class Kubernetes(ControlPlane):
    name = "kubernetes"
    section = "kubernetes"
    Params = KubernetesParams

    def __init__(self, sim: Sim, sc: SandboxScenario, streams: Streams, fleet: Fleet, creation: Creation) -> None:
        super().__init__(sim, sc, streams, fleet, creation)
        p = self.p
        self.nodes = sc.fleet.workers
        self.apiserver = Servers(p.apiserver_mutating_inflight)
        self.etcd = Servers(p.etcd_clients)
        self.etcd_service = p.etcd_clients / p.etcd_writes_per_s  # so that at most etcd_writes_per_s go through
        pct = max(5.0, 50.0 - self.nodes / 125.0)
        self.nodes_scored = min(self.nodes, max(100, int(self.nodes * pct / 100)))
        self.cycle = p.cycle_s + self.nodes_scored * p.node_score_s / 16
        self.scheduler_free = 0.0  # the serial scheduling cycle
        self.scheduler_busy = 0.0
        self.binding_limit = TokenBucket(p.scheduler_qps, p.scheduler_burst)
        self._draw = worker_draws(streams.get("placement"), self.nodes)
        self.etcd_writes = 0
        self.lease_writes = 0
        sim.call_in(0.0, self._leases)

    def _write(self, fn=None, arg=None) -> None:
        """One etcd write through the API server; ``fn(arg)`` when it is committed (none: nothing waits for it)."""
        now = self.sim.env._now
        self.etcd_writes += 1
        # a mutating request holds one of the API server's in-flight slots until etcd has committed it
        done = self.apiserver.occupy(
            now, lambda start: self.etcd.done_at(start, self.etcd_service) + self.p.etcd_latency_s
        )
        if fn is not None:
            self.sim.call_in(done - now, fn, arg)

    def submit(self, sandbox: int) -> None:
        self.sim.call_in(self.hop, self._create, sandbox)

    def _create(self, sandbox: int) -> None:
        self._write(self._schedule, sandbox)  # the pod object

    def _schedule(self, sandbox: int) -> None:
        now = self.sim.env._now
        start = max(now, self.scheduler_free)
        self.scheduler_free = start + self.cycle
        self.scheduler_busy += self.cycle
        self.sim.call_in(self.scheduler_free - now, self._bind, sandbox)

    def _bind(self, sandbox: int) -> None:
        # filter/score over nodes_scored nodes: the best of a sample stands in for the score's pick
        used = self.fleet.used
        worker = least_of(self._draw, min(self.nodes_scored, 8), used.__getitem__)
        if not self.fleet.try_accept(worker):
            self.rejections += 1
            self.retries += 1
            self._schedule(sandbox)
            return
        now = self.sim.env._now
        wait = self.binding_limit.next_token_in(now)
        self.binding_limit.try_take(now + wait)
        self.sim.call_in(wait, self._write_binding, (sandbox, worker))

    def _write_binding(self, arg: tuple[int, int]) -> None:
        self._write(self._bound, arg)

    def _bound(self, arg: tuple[int, int]) -> None:
        self.creation.returned(arg[0])  # bound: the create call returns; the kubelet starts the pod later
        self.sim.call_in(self.p.kubelet_pickup_s, self._kubelet, arg)

    def _kubelet(self, arg: tuple[int, int]) -> None:
        sandbox, worker = arg
        self.fleet.start(sandbox, worker)
        for _ in range(self.p.writes_per_pod - 2):
            self._write()  # status updates

    def _leases(self, _arg: None) -> None:
        """Every node renews its lease each interval: spread evenly, in aggregate (one event per second)."""
        n = round(self.nodes / self.p.lease_interval_s)
        now = self.sim.env._now
        for _ in range(n):
            self.etcd.done_at(now, self.etcd_service)
        self.lease_writes += n
        self.sim.call_in(1.0, self._leases)

    def extra_metrics(self) -> dict:
        return {"etcd_writes": self.etcd_writes, "lease_writes": self.lease_writes}

    def utilization(self, span: float) -> dict[str, float]:
        return {
            "etcd": self.etcd.utilization(span),
            "apiserver_inflight": self.apiserver.utilization(span),
            "scheduling_cycle": self.scheduler_busy / span if span > 0 else 0.0,
        }
