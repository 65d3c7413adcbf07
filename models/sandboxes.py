"""Sandbox creation at scale under three control planes: the scenario schema, one run, its metrics (domain.md §2).

A burst of ``sandboxes.count`` creations (models/fleet.py: workload, fleet, start path) goes through one control
plane, chosen by ``control_plane``:
- ``modal-v2`` (models/modal_v2.py): a fleet of schedulers over worker state cached from Redis streams;
- ``modal-v1`` (models/modal_v1.py): creates queued and assigned through one central Postgres;
- ``kubernetes`` (models/kubernetes.py): API server, etcd, a serial scheduling cycle, kubelets.
Metrics (interfaces.md, "Sandbox creation"): created, makespan, rate, schedule latency, time to interactive,
rejections, retries, per-resource utilization and the bottleneck (the resource with the highest utilization), and
a time series of sandboxes created per second and running.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from models.fleet import ClientParams, Fleet, FleetParams, SandboxParams
from models.kubernetes import KubernetesParams
from models.modal_v1 import PostgresParams
from models.modal_v2 import SchedulerParams
from sim.engine import Sim
from sim.records import NAN, percentiles
from sim.rng import Streams
from sim.scenario import param, section


@dataclass(frozen=True)
class SandboxScenario:
    model: Literal["sandboxes"] = param("sandboxes")
    name: str = param("")
    description: str = param("")
    source: str = param("")
    control_plane: Literal["modal-v2", "modal-v1", "kubernetes"] = param("modal-v2")
    horizon_s: float = param(3600.0, gt=0, doc="simulated time after which the run stops, created or not")
    sandboxes: SandboxParams = section(SandboxParams)
    client: ClientParams = section(ClientParams)
    fleet: FleetParams = section(FleetParams)
    scheduler: SchedulerParams = section(SchedulerParams)
    postgres: PostgresParams = section(PostgresParams)
    kubernetes: KubernetesParams = section(KubernetesParams)


class ControlPlane(Protocol):
    rejections: int
    retries: int

    def submit(self, sandbox: int) -> None: ...

    def utilization(self, span: float) -> dict[str, float]: ...


class Creation:
    """The benchmark client and the sandboxes' records: issues creates, hears them accepted and running."""

    def __init__(self, sim: Sim, sc: SandboxScenario) -> None:
        self.sim = sim
        self.sc = sc
        n = sc.sandboxes.count
        self.requested = [NAN] * n  # first create attempt
        self.placed = [NAN] * n  # accepted by a worker (v2) / assigned (v1) / bound (kubernetes)
        self.running = [NAN] * n  # able to run user code
        self.issued = 0
        self.outstanding = 0
        self.created = 0
        self._tokens = 0.0
        self.cp: ControlPlane | None = None
        self.fleet: Fleet | None = None

    def start(self) -> None:
        self.sim.call_in(0.0, self._tick)

    def _tick(self, _arg: None) -> None:
        c = self.sc.client
        self._tokens = min(self._tokens + c.rate * c.tick_s, max(1.0, c.rate * c.tick_s))
        n = min(int(self._tokens), c.concurrency - self.outstanding, self.sc.sandboxes.count - self.issued)
        now = self.sim.env._now
        for _ in range(max(0, n)):
            sb = self.issued
            self.issued += 1
            self.outstanding += 1
            self.requested[sb] = now
            self.cp.submit(sb)
        self._tokens -= max(0, n)
        if self.issued < self.sc.sandboxes.count:
            self.sim.call_in(c.tick_s, self._tick)

    def placed_on(self, sandbox: int, worker: int) -> None:
        """The control plane placed the sandbox: the create call returns; start the worker's start path."""
        self.placed[sandbox] = self.sim.env._now
        self.outstanding -= 1
        self.fleet.start(sandbox, worker)

    def on_running(self, sandbox: int, worker: int) -> None:
        self.running[sandbox] = self.sim.env._now
        self.created += 1
        if self.sc.sandboxes.lifetime_s > 0:
            self.sim.call_in(self.sc.sandboxes.lifetime_s, self._finished, (sandbox, worker))
        if self.created == self.sc.sandboxes.count and self.sc.sandboxes.lifetime_s == 0:
            self.sim.stop()

    def _finished(self, arg: tuple[int, int]) -> None:
        sandbox, worker = arg
        self.fleet.release(worker)
        finished = getattr(self.cp, "finished", None)
        if finished is not None:
            finished(sandbox)


def run(sc: SandboxScenario, seed: int = 0, series: dict | None = None) -> dict:
    """Simulate one burst of sandbox creations; return its metrics."""
    from models.kubernetes import Kubernetes
    from models.modal_v1 import ModalV1
    from models.modal_v2 import ModalV2

    wall0 = time.perf_counter()
    sim = Sim()
    streams = Streams(seed)
    creation = Creation(sim, sc)
    fleet = Fleet(sim, sc.fleet, sc.sandboxes, streams, creation.on_running)
    plane = {"modal-v2": ModalV2, "modal-v1": ModalV1, "kubernetes": Kubernetes}[sc.control_plane]
    cp = plane(sim, sc, streams, fleet, creation)
    creation.cp, creation.fleet = cp, fleet
    creation.start()
    sim.run(until=sc.horizon_s)
    metrics = summarize(creation, sc, cp, fleet, series)
    metrics["events"] = sim.events
    metrics["sim_time_s"] = sim.now
    metrics["wall_s"] = time.perf_counter() - wall0
    return metrics


def summarize(creation: Creation, sc: SandboxScenario, cp: ControlPlane, fleet: Fleet, series: dict | None) -> dict:
    req = np.asarray(creation.requested)
    placed = np.asarray(creation.placed)
    running = np.asarray(creation.running)
    done = ~np.isnan(running)
    first = float(np.nanmin(req)) if (~np.isnan(req)).any() else 0.0
    last = float(running[done].max()) if done.any() else float("nan")
    makespan = last - first if done.any() else float("nan")
    span = makespan if done.any() and makespan > 0 else max(creation.sim.now - first, 1e-9)
    created = int(done.sum())
    schedule = (placed - req)[~np.isnan(placed)]
    tti = (running - req)[done]
    util = cp.utilization(span)
    util["client"] = min(1.0, creation.issued / (sc.client.rate * span)) if span > 0 else 0.0
    util["worker_slots"] = fleet.accepted / (fleet.slots * sc.fleet.workers)
    util["rtnl_lock"] = fleet.lock_busy / (sc.fleet.workers * span)
    bottleneck = max(util.items(), key=lambda kv: kv[1])[0]
    if series is not None:
        t = np.arange(0.0, (last if done.any() else creation.sim.now) + 1.0, 1.0)
        created_by = np.searchsorted(np.sort(running[done]), t, side="right")
        series.update(t=t.tolist(), created=created_by.tolist(), created_per_s=np.diff(created_by, prepend=0).tolist())
    return {
        "sandboxes_requested": sc.sandboxes.count,
        "sandboxes_issued": creation.issued,
        "sandboxes_created": created,
        "creation_makespan_s": makespan if done.any() else None,
        "creation_rate_per_s": created / span if created else 0.0,
        **percentiles(schedule, "schedule_latency", (50, 99)),
        **percentiles(tti, "tti"),
        "rejections": cp.rejections,
        "retries": cp.retries,
        "utilization": {k: round(v, 6) for k, v in sorted(util.items())},
        "bottleneck": bottleneck,
        **getattr(cp, "extra_metrics", dict)(),
    }
