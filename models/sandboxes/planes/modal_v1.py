"""Modal's v1 sandbox control plane: one central Postgres on the create path (docs/sources.md §2, "Modal v1").

A create is queued by a write to Postgres; one of ``schedulers`` optimistic schedulers claims it and commits the
assignment to a worker in another transaction; with several schedulers claiming from the same queue head, a commit
conflicts with probability (schedulers − 1) / (schedulers − 1 + hot_rows) and is retried (Omega-style optimistic
concurrency; hot-row contention, docs/sources.md §2; counted as a rejection and a retry); the worker starts the sandbox
and its status is written. So ``writes_per_sandbox`` transactions (plus retries) of one unsharded Postgres are on the
critical path: ``connections`` FCFS servers at ``tps`` transactions per second in all, each with ``latency_s`` of
round trip. A scheduler reads exact state from the database, so no worker refuses a placement; when both workers it
sampled are full it claims again (a retry and a ``resample``, not a rejection). A finished sandbox
(``sandboxes.lifetime_s`` > 0) runs a durable workflow of ``workflow_writes`` transactions that competes for the
same database: under churn its backlog grows.

Left out: the RPC storms and node management of the blog's list; Postgres replicas; the v1 placement algorithm
(placements go to the emptiest of two sampled workers, as in v2, with exact state from the database).
"""

from __future__ import annotations

from dataclasses import dataclass

from models.sandboxes import faults
from models.sandboxes.fleet import Fleet, Meter, Servers
from models.sandboxes.placement import least_of, worker_draws
from models.sandboxes.planes.base import Client, ControlPlane, Scenario
from sim.engine import Sim
from sim.metrics import Metric, Metrics
from sim.rng import Streams
from sim.scenario import param


@dataclass(frozen=True)
class PostgresParams:
    tps: float = param(
        7_600.0,
        gt=0,
        plausible=(3_700.0, 26_000.0),
        source="docs/sources.md §2 pgbench TPC-B, 256 clients, 16 vCPU network disk: 7.2–8.1k; Modal's database "
        "hardware is not published: plausible from 3.7k (4 vCPU) to 26k (16 vCPU, local NVMe)",
    )
    connections: int = param(256, ge=1, le=100_000, source="docs/sources.md §2: pgbench at 256 clients")
    latency_s: float = param(0.002, ge=0, source="assumption: an in-region round trip to the database")
    writes_per_sandbox: int = param(
        3,
        ge=2,
        source="docs/sources.md §2: queued, assigned, ... (several writes); assumption: enqueue, assignment, status",
    )
    schedulers: int = param(16, ge=1, le=10_000, source="assumption: optimistic parallel schedulers")
    hot_rows: int = param(32, ge=1, le=1_000_000, source="assumption: queue-head rows the schedulers claim from")
    workflow_writes: int = param(4, ge=0, source="assumption: transactions of one finished sandbox's workflow")


class ModalV1(ControlPlane):
    name = "modal-v1"
    section = "postgres"
    RESOURCES = ("postgres",)
    METRICS = Metrics(
        Metric(
            "workflow_backlog_peak", "workflows", "max", "most finished sandboxes' workflows pending at once (modal-v1)"
        ),
        Metric("postgres_transactions", "transactions", "sum", "Postgres transactions (modal-v1)"),
        Metric(
            "resamples", "attempts", "sum", "placements tried again because both sampled workers were full (modal-v1)"
        ),
    )
    Params = PostgresParams
    FAULTS = ("postgres_failover", "worker_death")
    PRESET = "sandboxes-v1"
    ORDER = 1

    def __init__(self, sim: Sim, sc: Scenario, streams: Streams, fleet: Fleet, creation: Client) -> None:
        super().__init__(sim, sc, streams, fleet, creation)
        p = self.p
        self.db = Servers(sim, p.connections)
        self.db.pause = faults.down(sc.faults, "postgres_failover")  # no transaction starts then (faults.py)
        self.txn_s = p.connections / p.tps  # per-connection service time: at most tps transactions per second
        self._draw = worker_draws(streams.get("placement"), sc.fleet.workers)
        self._conflict = streams.get("conflicts")
        self.p_conflict = (p.schedulers - 1) / (p.schedulers - 1 + p.hot_rows)
        self.workflows_pending = 0
        self.workflow_backlog_peak = 0
        self.transactions = 0
        self.resamples = 0

    def _txn(self, fn=None, arg=None) -> None:
        """One Postgres transaction; ``fn(arg)`` when it has committed (none: nothing waits for it)."""
        self.transactions += 1
        # booked when sent, answered a whole round trip after the service (fleet.py, Servers)
        done = self.db.done_at(self.txn_s)
        if fn is not None:
            self.sim.call_in(done - self.sim.env._now + self.p.latency_s, fn, arg)

    def submit(self, sandbox: int) -> None:
        self.sim.call_in(self.hop, self._enqueue, sandbox)

    def _enqueue(self, sandbox: int) -> None:
        self._txn(self._claim, sandbox)  # the create is queued in Postgres

    def _claim(self, sandbox: int) -> None:
        self._txn(self._assigned, sandbox)  # a scheduler reads state and commits an assignment

    def _assigned(self, sandbox: int) -> None:
        if self._conflict.random() < self.p_conflict:
            self.rejections += 1
            self.retries += 1
            self._claim(sandbox)
            return
        used = self.fleet.used
        worker = least_of(self._draw, 2, used.__getitem__)
        if not self.fleet.try_accept(worker):
            self.retries += 1
            self.resamples += 1
            self._claim(sandbox)
            return
        self.creation.placed_on(sandbox, worker)
        for _ in range(self.p.writes_per_sandbox - 2):  # status writes as the sandbox starts
            self._txn()

    def finished(self, sandbox: int) -> None:
        """A finished sandbox's durable workflow: its transactions queue behind everything else."""
        self.workflows_pending += 1
        self.workflow_backlog_peak = max(self.workflow_backlog_peak, self.workflows_pending)
        for i in range(self.p.workflow_writes):
            self._txn(self._workflow_step, i == self.p.workflow_writes - 1)

    def _workflow_step(self, last: bool) -> None:
        if last:
            self.workflows_pending -= 1

    def resources(self) -> dict[str, Meter]:
        return {"postgres": self.db}

    def extra_metrics(self) -> dict:
        return {
            "workflow_backlog_peak": self.workflow_backlog_peak,
            "postgres_transactions": self.transactions,
            "resamples": self.resamples,  # retries = rejections (conflicts) + resamples
        }
