"""Sandbox creation at scale under three control planes: the scenario schema, the benchmark client, one run, its
metrics and the model's descriptor (domain.md §2).

A burst of ``sandboxes.count`` creations (models/sandboxes/fleet.py: workload, fleet, start path) goes through one
control plane, chosen by ``control_plane`` (models/sandboxes/planes/):
- ``modal-v2``: a fleet of schedulers over worker state cached from Redis streams;
- ``modal-v1``: creates queued and assigned through one central Postgres;
- ``kubernetes``: API server, etcd, a serial scheduling cycle, kubelets.
Metrics (interfaces.md, "Sandbox creation"): created, makespan, rate, schedule latency, time to interactive,
rejections, retries, per-resource utilization and the bottleneck (the resource with the highest utilization), and
a time series of sandboxes created per second and running.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from models.sandboxes.fleet import BenchmarkClientParams, Fleet, FleetParams, SandboxParams
from models.sandboxes.planes import PLANES, ControlPlane
from sim.engine import Sim
from sim.model import Figure, Model, TimeSeries
from sim.rng import Streams
from sim.scenario import param, section, with_sections
from sim.stats import NAN, percentiles

PlaneName = Literal[tuple(PLANES)]


@dataclass(frozen=True)
class _SandboxScenario:
    """A burst of sandbox creations; each control plane adds its own section (``scheduler``, ``postgres``, ...)."""

    model: Literal["sandboxes"] = param("sandboxes")
    name: str = param("")
    description: str = param("")
    source: str = param("")
    control_plane: PlaneName = param("modal-v2")
    horizon_s: float = param(3600.0, gt=0, doc="simulated time after which the run stops, created or not")
    sandboxes: SandboxParams = section(SandboxParams)
    client: BenchmarkClientParams = section(BenchmarkClientParams)
    fleet: FleetParams = section(FleetParams)


SandboxScenario = with_sections(_SandboxScenario, {p.section: p.Params for p in PLANES.values()}, "SandboxScenario")


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

    def returned(self, sandbox: int) -> None:
        """The create call returns: the sandbox is placed (accepted by a worker, assigned, or bound)."""
        self.placed[sandbox] = self.sim.env._now
        self.outstanding -= 1

    def placed_on(self, sandbox: int, worker: int) -> None:
        """The control plane placed the sandbox: the create call returns and the worker's start path begins."""
        self.returned(sandbox)
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
        self.cp.finished(sandbox)


def run(sc: SandboxScenario, seed: int = 0, series: dict | None = None, records: bool = False) -> dict:
    """Simulate one burst of sandbox creations; return its metrics. With ``records``, ``metrics["records"]`` is a
    DataFrame of one row per sandbox: requested (first create attempt), placed (the create call returned) and
    running (able to run user code), NaN where it did not happen."""
    wall0 = time.perf_counter()
    sim = Sim()
    streams = Streams(seed)
    creation = Creation(sim, sc)
    fleet = Fleet(sim, sc.fleet, sc.sandboxes, streams, creation.on_running)
    cp = PLANES[sc.control_plane](sim, sc, streams, fleet, creation)
    creation.cp, creation.fleet = cp, fleet
    creation.start()
    sim.run(until=sc.horizon_s)
    metrics = summarize(creation, sc, cp, fleet, series)
    metrics["events"] = sim.events
    metrics["sim_time_s"] = sim.now
    metrics["wall_s"] = time.perf_counter() - wall0
    if records:
        metrics["records"] = pd.DataFrame(
            {"requested": creation.requested, "placed": creation.placed, "running": creation.running}
        ).rename_axis("sandbox")
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
        **cp.extra_metrics(),
    }


def findings(summary: pd.DataFrame, scale: str) -> tuple[str, str, pd.DataFrame]:
    """Per series: where the creation rate peaks and what is most utilized there and at the largest scale."""
    rows = []
    for variant, g in summary.groupby("variant", sort=False):
        top = g.loc[g["creation_rate_per_s_mean"].idxmax()]
        rows.append(
            {
                "series": variant,
                "peak sandboxes/s": top["creation_rate_per_s_mean"],
                "at": top[scale],
                "bottleneck there": top["binding_limit"],
                "bottleneck at the largest": g.sort_values(scale)["binding_limit"].iloc[-1],
            }
        )
    intro = "The peak creation rate and the limiting resource there."
    return "Where each series peaks", intro, pd.DataFrame(rows)


MODEL = Model(
    name="sandboxes",
    schema=SandboxScenario,
    run=run,
    headline=(
        "sandboxes_created",
        "creation_makespan_s",
        "creation_rate_per_s",
        "schedule_latency_p99_s",
        "tti_p50_s",
        "tti_p99_s",
        "rejections",
        "retries",
        "utilization",
        "bottleneck",
    ),
    label=lambda sc: f"control plane {sc.control_plane}",
    probe={"sandboxes.count": 10, "fleet.workers": 10},
    size=lambda sc: float(sc.sandboxes.count),
    bottleneck="bottleneck",
    figures=(
        Figure(
            "rate",
            "lines",
            "Creation rate against scale",
            (("creation_rate_per_s", "sandboxes created per second (mean, 95% CI)"),),
            reference="client.rate",
        ),
        Figure("tti", "lines", "Time to interactive, seconds", (("tti_p50_s", "p50"), ("tti_p99_s", "p99"))),
        Figure(
            "rejections",
            "lines",
            "Rejections and retries",
            (("rejections", "rejected placements"), ("retries", "retries")),
            log=True,
        ),
        Figure("utilization", "utilization", "Utilization by resource"),
        Figure("binding", "binding", "What binds (the limiting resource)"),
    ),
    timeseries=TimeSeries(
        title="Time series of one point",
        ylabel="sandboxes",
        lines=(("created", "created (cumulative)"),),
        right=(("created_per_s", "created per second"),),
        right_label="per second",
    ),
    findings=findings,
)
