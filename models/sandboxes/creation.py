"""Sandbox creation at scale under three control planes: the scenario schema, the benchmark client, one run, its
metrics and the model's descriptor (docs/sources.md §2).

A burst of ``sandboxes.count`` creations (models/sandboxes/fleet.py: workload, fleet, start path) goes through one
control plane, chosen by ``control_plane`` (models/sandboxes/planes/):
- ``modal-v2``: a fleet of schedulers over worker state cached from Redis streams;
- ``modal-v1``: creates queued and assigned through one central Postgres;
- ``kubernetes``: API server, etcd, a serial scheduling cycle, kubelets.
Metrics (declared below, sim/metrics.py ``Metrics``): created, makespan, rate, schedule latency, time to interactive,
rejections, retries, per-resource utilization and the bottleneck, and a time series of sandboxes created per second
and running.

The span of a run, over which rates and utilizations are taken: from the first create request until the last
sandbox is running, or until the end of the run (``horizon_s``) when not all are created. ``creation_rate_per_s`` is
sandboxes created ÷ span. ``utilization`` maps each resource to its busy fraction over the span, in [0, 1]: the
server-seconds of service that fall inside the span ÷ (servers × span). Each resource's busy time is read at the
span's start and at its end (``Meter``, models/sandboxes/fleet.py), so service booked for after the span, or done
before it, does not count. The resources are the control plane's own (models/sandboxes/planes/), the workers' rtnl
locks, and the benchmark client; the client and the rate limits are token buckets, read as the requests they let
through in the span over the most they can (burst + rate × span). ``bottleneck`` is the most utilized resource if it
is limiting, that is busy at least ``LIMITING`` of the span, else ``"none"`` (the load itself sets the pace).
A burst the fleet cannot hold (``fleet.allow_overload``; otherwise it is an error before the run) ends as soon as the
fleet is full (its placed sandboxes' start paths are already computed, and they count as created): ``sandboxes_created``
< requested, the rejections so far, and ``bottleneck = "capacity"``; the span ends when the last of them is running
(each resource read as its booked service will have run by then: nothing is booked after the stop). A short
burst's span is mostly the start path's tail (about a second), so there every resource looks less busy than it was
while the creates went through. Fill levels and offered loads are not busy fractions and are reported on their own:
``worker_slots_filled`` (the most slots in use over the fleet at once ÷ all slots), ``worker_slots_in_use_max`` (the
most slots in use on one worker at once, never above its slots), and the planes' own figures (``extra_metrics``, e.g.
``stream_offered_load`` of a v2 Redis stream, which may exceed 1).
"""

from __future__ import annotations

import heapq
import time
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from models.sandboxes import budget, faults, invariants
from models.sandboxes.fleet import BenchmarkClientParams, Fleet, FleetParams, Meter, SandboxParams, capacity_error
from models.sandboxes.planes import PLANES, ControlPlane
from models.sandboxes.shortcuts import SHAPES
from sim.engine import Sim
from sim.guard import UNGUARDED, Guard
from sim.metrics import RUN, Metric, Metrics, percentile_metrics
from sim.model import Figure, Model, TimeSeries, records_frame
from sim.rng import Streams
from sim.scenario import Described, param, section, with_sections
from sim.shortcuts import Shortcuts, engine_shortcuts
from sim.stats import NAN, percentiles

if TYPE_CHECKING:
    import pandas as pd

PlaneName = Literal[tuple(PLANES)]

# assumption: a resource busy at least 80% of the span sets the pace (an FCFS queue's wait is already several
# service times there: 4 for M/M/1); below that no resource is named and the load itself limits the run
LIMITING = 0.8


FIT = "calibration.fit sandboxes: the fit's runs (calibration/params/sandboxes.toml, [envelope])"


@dataclass(frozen=True)
class EnvelopeParams:
    """What the fitted parameter (the v2 create path's ``scheduler.request_s``) was fitted on: its envelope."""

    runs: str = param("sandboxes-v2's fit", source=FIT, doc='what the parameters were calibrated on ("": no check)')
    count: int = param(100_000, ge=0, source=FIT, doc="the most sandboxes of a calibration run")
    workers: int = param(2_000, ge=0, source=FIT, doc="the most workers of a calibration run")


@dataclass(frozen=True)
class _SandboxScenario(Described):
    """A burst of sandbox creations; each control plane adds its own section (``scheduler``, ``postgres``, ...)."""

    model: Literal["sandboxes"] = param("sandboxes")
    control_plane: PlaneName = param("modal-v2")
    horizon_s: float = param(3600.0, gt=0, doc="simulated time after which the run stops, created or not")
    sandboxes: SandboxParams = section(SandboxParams)
    client: BenchmarkClientParams = section(BenchmarkClientParams)
    fleet: FleetParams = section(FleetParams)
    envelope: EnvelopeParams = section(EnvelopeParams)
    faults: faults.FaultParams = section(faults.FaultParams)

    def __post_init__(self) -> None:
        why = capacity_error(self.fleet, self.sandboxes) or faults.error(
            self.faults, self.control_plane, self.fleet.workers, self.horizon_s
        )
        if why:
            raise ValueError(why)


SandboxScenario = with_sections(_SandboxScenario, {p.section: p.Params for p in PLANES.values()}, "SandboxScenario")
SHORTCUTS = Shortcuts(engine_shortcuts(SandboxScenario) + SHAPES, SandboxScenario)


class Creation:
    """The benchmark client and the sandboxes' records: issues creates, hears them accepted and running (the planes'
    ``Client``: models/sandboxes/planes/base.py)."""

    def __init__(self, sim: Sim, sc: SandboxScenario) -> None:
        self.sim = sim
        self.sc = sc
        n = sc.sandboxes.count
        # raw doubles (array.array), not lists of float objects: ten million sandboxes hold 240 MB, not 1 GB
        self.requested = array("d", [NAN]) * n  # first create attempt
        self.placed = array("d", [NAN]) * n  # the create call returned: placed on a worker and starting
        self.running = array("d", [NAN]) * n  # able to run user code
        self.issued = 0
        self.outstanding = 0
        self.placements = 0
        self.last_running = 0.0
        self._tokens = 0.0
        self.cp: ControlPlane | None = None
        self.fleet: Fleet | None = None
        self.meters: dict[str, Meter] = {}
        # (time, busy time of each resource) at the start and the end of the span (module docstring)
        self.span_start: tuple[float, dict[str, float]] | None = None
        self.span_end: tuple[float, dict[str, float]] | None = None
        self._returns: list[float] = []  # a heap: when each create call still out returns (placed ones)
        self.full = False  # the run ended because the fleet was full for good (module docstring)
        self.lost = 0  # sandboxes gone with their workers (faults.worker_death, policy lost)
        self.restarted = 0  # sandboxes created again after their workers died (policy restart)
        self.worker: array | None = None  # the worker of each placed sandbox (only with faults.worker_death)
        fp = sc.faults
        if faults.on(fp, "worker_death"):
            self.worker = array("l", [-1]) * n
            sim.call_at(fp.worker_death_at_s, self._workers_die, None)

    def reading(self, at: float | None = None) -> tuple[float, dict[str, float]]:
        """``at`` (default now), and the busy time of every resource by then (after the run's end: the service
        booked, as it will have run by then)."""
        at = self.sim.env._now if at is None else at
        return at, {k: m.busy_by_now(at) for k, m in self.meters.items()}

    # the client as a Meter: a token bucket holding one tick's refill (at least one token) refilled at its rate, so
    # each create issued is 1/rate of its time and a span of t seconds holds at most burst/rate + t
    def busy_by_now(self, now: float | None = None) -> float:
        return self.issued / self.sc.client.rate

    def capacity(self, span: float) -> float:
        c = self.sc.client
        return max(1.0, c.rate * c.tick_s) / c.rate + span

    def start(self) -> None:
        self.sim.call_in(0.0, self._tick)

    def _tick(self, _arg: None) -> None:
        c = self.sc.client
        now = self.sim.env._now
        while self._returns and self._returns[0] <= now:  # create calls back by now
            heapq.heappop(self._returns)
            self.outstanding -= 1
        self._tokens = min(self._tokens + c.rate * c.tick_s, max(1.0, c.rate * c.tick_s))
        n = min(int(self._tokens), c.concurrency - self.outstanding, self.sc.sandboxes.count - self.issued)
        if n > 0 and self.span_start is None:
            self.span_start = self.reading()
        if n > 0:
            first = self.issued
            self.issued += n
            self.outstanding += n
            self._tokens -= n
            requested = self.requested
            for sb in range(first, first + n):
                requested[sb] = now
            self.cp.submit_many(range(first, first + n))
        if self.issued < self.sc.sandboxes.count:
            self.sim.call_in(c.tick_s, self._tick)

    def placed_at(
        self, sandbox: int, worker: int, returns: float, starts: float, accepted: float | None = None
    ) -> None:
        """The control plane placed the sandbox: the worker accepted it at ``accepted`` (default now), its create
        call returns to the client at ``returns`` and the worker begins its start path at ``starts`` (both >=
        accepted). Its running time is known at once (the start path is computed, not simulated step by step); the
        run's end waits for the last one."""
        self.placed[sandbox] = returns
        heapq.heappush(self._returns, returns)  # the client counts it outstanding until then
        accepted = self.sim.env._now if accepted is None else accepted
        if self.worker is not None:
            if self.fleet.dead is not None and self.fleet.dead[worker]:  # accepted, then its worker died (kubernetes)
                self._gone([sandbox], redo=False)
                return
            self.worker[sandbox] = worker
        running = self.running[sandbox] = self.fleet.start(worker, starts, accepted)
        placements = self.placements = self.placements + 1
        if running > self.last_running:
            self.last_running = running
        sp = self.sc.sandboxes
        if sp.lifetime_s > 0:
            self.sim.call_at(running + sp.lifetime_s, self._finished, (sandbox, worker))
        if placements == sp.count:  # all placed: the span ends when the last runs (and the run, if none leave)
            self.sim.call_at(self.last_running, self._end, "stop" if sp.lifetime_s == 0 else "")
        elif sp.lifetime_s == 0 and placements - self.lost == self.fleet.total:
            # the fleet is full and nothing will ever leave it (fleet.allow_overload): every create still out
            # would be rejected for good, so the run ends now (no retry storm while the last starts finish); the
            # sandboxes placed will run at their computed times, and count as created
            self._end("full")

    def placed_on(self, sandbox: int, worker: int) -> None:
        """The control plane placed the sandbox now: the create call returns, and the worker, told by RPC, begins its
        start path once it has handled it (``fleet.rpc_s``)."""
        now = self.sim.env._now
        self.placed_at(sandbox, worker, now, now + self.sc.fleet.rpc_s)

    def _end(self, why: str) -> None:
        """The span ends (the last sandbox placed is running); ``why``: "stop" (all created), "full" (the fleet is
        full for good) or "" (sandboxes come and go until the horizon)."""
        if why == "stop" and self.placements < self.sc.sandboxes.count:  # a worker died since: restarts still to come
            return
        self.full = why == "full"
        # full: the sandboxes placed count as created, so the span runs until the last of them is running
        self.span_end = self.reading(self.last_running if self.full else None)
        if why:
            self.sim.stop()

    def cut(self, end: float) -> None:
        """The records as arrays at the end of the run: a create call not back by ``end`` was not placed, a sandbox
        not running by then was not created (their times were computed ahead, beyond the run)."""
        for name in ("requested", "placed", "running"):
            a = np.asarray(getattr(self, name), dtype=float)
            a[a > end] = NAN
            setattr(self, name, a)
        self.running[np.isnan(self.placed)] = NAN

    def _finished(self, arg: tuple[int, int]) -> None:
        sandbox, worker = arg
        if self.fleet.dead is not None and self.fleet.dead[worker]:  # it went with its worker (faults.worker_death)
            return
        self.fleet.release(worker)
        self.cp.finished(sandbox)

    # --- faults.worker_death (models/sandboxes/faults.py) ----------------------------------------------------------
    def _workers_die(self, _arg: None) -> None:
        fp, now = self.sc.faults, self.sim.env._now
        dead = range(fp.worker_death_workers)
        self.fleet.kill(dead)
        worker = np.asarray(self.worker)
        running = np.asarray(self.running)
        on = (worker >= 0) & (worker < fp.worker_death_workers) & ~np.isnan(running)
        if self.sc.sandboxes.lifetime_s > 0:  # those that finished before now had left their worker
            on &= running + self.sc.sandboxes.lifetime_s > now
        self._gone(np.flatnonzero(on).tolist(), redo=True)

    def _gone(self, sandboxes: list[int], redo: bool) -> None:
        """Sandboxes whose worker died: lost, or (``restart``) created again after the detection delay; ``redo``:
        they were counted placed (a placement after the death was not)."""
        if not sandboxes:
            return
        for sb in sandboxes:
            self.running[sb] = NAN
            self.worker[sb] = -1
        if self.sc.faults.worker_death_policy == "lost":
            self.lost += len(sandboxes)
            if not redo:
                self._count_placement()
            elif self.placements - self.lost == self.fleet.total and self.sc.sandboxes.lifetime_s == 0:
                self._end("full")
            return
        self.restarted += len(sandboxes)
        self.cp.retries += len(sandboxes)
        if redo:
            self.placements -= len(sandboxes)  # placed again later
        self.sim.call_in(self.sc.faults.worker_death_detect_s, self._recreate, sandboxes)

    def _recreate(self, sandboxes: list[int]) -> None:
        for sb in sandboxes:
            self.cp.submit(sb)

    def _count_placement(self) -> None:
        """A placement that ends where it was accepted (lost with its worker): the burst's end checks as in
        ``placed_at``."""
        placements = self.placements = self.placements + 1
        sp = self.sc.sandboxes
        if placements == sp.count:
            self.sim.call_at(max(self.last_running, self.sim.env._now), self._end, "stop" if sp.lifetime_s == 0 else "")
        elif sp.lifetime_s == 0 and placements - self.lost == self.fleet.total:
            self._end("full")


def run(
    sc: SandboxScenario,
    seed: int = 0,
    series: dict | None = None,
    records: bool = False,
    jobs: int = 1,
    guard: Guard = UNGUARDED,
) -> dict:
    """Simulate one burst of sandbox creations; return its metrics. With ``records``, ``metrics["records"]`` is a
    DataFrame of one row per sandbox: requested (first create attempt), placed (the create call returned) and running
    (able to run user code), NaN where it did not happen. ``jobs`` is not used (a run of one part). The scenario's
    ``shortcuts`` key says which shortcuts may run (models/sandboxes/shortcuts.py); ``shortcuts_used`` lists those
    that did. ``guard`` watches its clock (sim/guard.py)."""
    wall0 = time.perf_counter()
    used = SHORTCUTS.used(sc)
    sim = Sim.taking(used, guard)
    streams = Streams(seed)
    creation = Creation(sim, sc)
    fleet = Fleet(sim, sc.fleet, sc.sandboxes, streams)
    cp = PLANES[sc.control_plane](sim, sc, streams, fleet, creation)
    creation.cp, creation.fleet = cp, fleet
    creation.meters = {**cp.resources(), "rtnl_lock": fleet.locks, "client": creation}
    creation.start()
    sim.run(until=sc.horizon_s)
    creation.cut(creation.last_running if creation.full else sim.now)
    if creation.span_end is None:  # not all created: the span ends with the run
        creation.span_end = creation.reading()
    metrics = summarize(creation, sc, cp, fleet, series)
    invariants.check(sc, metrics, fleet.slots)
    metrics["events"] = sim.events
    metrics["sim_time_s"] = sim.now
    metrics["shortcuts_used"] = sorted(used)
    metrics["extrapolated"] = extrapolated(sc)
    metrics["wall_s"] = time.perf_counter() - wall0
    if records:
        metrics["records"] = records_frame(
            {"requested": creation.requested, "placed": creation.placed, "running": creation.running}, "sandbox"
        )
    return metrics


def extrapolated(sc: SandboxScenario) -> list[str]:
    """Where a run leaves the envelope its fitted parameter was fitted on (``sc.envelope``): only the v2 plane reads
    it (``scheduler.request_s``); one text per excess, naming the key, its value and the bound."""
    e = sc.envelope
    if not e.runs or sc.control_plane != "modal-v2":
        return []
    keys = (("sandboxes.count", sc.sandboxes.count, e.count), ("fleet.workers", sc.fleet.workers, e.workers))
    return [f"{k} {v:,} > {bound:,}" for k, v, bound in keys if v > bound]


def utilization(creation: Creation) -> tuple[float, dict[str, float]]:
    """The span in seconds and each resource's busy fraction over it (module docstring)."""
    if creation.span_start is None:  # nothing was issued before the run ended
        return 0.0, dict.fromkeys(creation.meters, 0.0)
    t0, busy0 = creation.span_start
    t1, busy1 = creation.span_end
    span = t1 - t0
    if span <= 0:
        return 0.0, dict.fromkeys(creation.meters, 0.0)
    return span, {k: _fraction(busy1[k] - busy0[k], m.capacity(span)) for k, m in creation.meters.items()}


def _fraction(busy: float, capacity: float) -> float:
    """Busy time ÷ capacity, where a busy time that rounding alone put below zero (the holds still to come are
    summed apart from the holds booked: -1.4e-17 s for a lock held through the whole span) reads 0.0; anything
    further below zero stays negative for the invariants to report."""
    if -1e-9 * capacity < busy <= 0.0:
        return 0.0
    return busy / capacity


def summarize(creation: Creation, sc: SandboxScenario, cp: ControlPlane, fleet: Fleet, series: dict | None) -> dict:
    req = np.asarray(creation.requested)
    placed = np.asarray(creation.placed)
    running = np.asarray(creation.running)
    done = ~np.isnan(running)
    first = float(np.nanmin(req)) if (~np.isnan(req)).any() else 0.0
    last = float(running[done].max()) if done.any() else float("nan")
    makespan = last - first if done.any() else float("nan")
    created = int(done.sum())
    schedule = (placed - req)[~np.isnan(placed)]
    tti = (running - req)[done]
    span, util = utilization(creation)
    util = {k: round(v, 6) for k, v in sorted(util.items())}  # rounding also drops float residue below 1e-6
    top = max(util, key=util.__getitem__)
    bottleneck = "capacity" if creation.full else top if util[top] >= LIMITING else "none"
    if series is not None:
        t = np.arange(0.0, (last if done.any() else creation.sim.now) + 1.0, 1.0)
        created_by = np.searchsorted(np.sort(running[done]), t, side="right")
        series.update(t=t.tolist(), created=created_by.tolist(), created_per_s=np.diff(created_by, prepend=0).tolist())
    return {
        "sandboxes_requested": sc.sandboxes.count,
        "sandboxes_issued": creation.issued,
        "sandboxes_created": created,
        "creation_makespan_s": makespan if done.any() else None,
        "creation_rate_per_s": created / span if created and span > 0 else 0.0,
        **percentiles(schedule, "schedule_latency", (50, 99)),
        **percentiles(tti, "tti"),
        "rejections": cp.rejections,
        "retries": cp.retries,
        "utilization": util,
        "bottleneck": bottleneck,
        "worker_slots_filled": fleet.in_use_peak / (fleet.slots * sc.fleet.workers),
        "worker_slots_in_use_max": fleet.in_use_max,
        **cp.extra_metrics(),
        **(
            faults.measure(sc.faults, req, running, sc.sandboxes.count, creation.lost, creation.restarted)
            if faults.any_on(sc.faults)
            else {}
        ),
    }


# what ``summarize`` reports before the control plane's own figures (``metrics`` adds them and the plane's resources)
SUMMARY = (
    Metrics(
        Metric("sandboxes_requested", "sandboxes", "sum", "sandboxes the burst asks for (`sandboxes.count`)"),
        Metric("sandboxes_issued", "sandboxes", "sum", "create requests the client sent before the run ended"),
        Metric("sandboxes_created", "sandboxes", "sum", "sandboxes able to run user code by the run's end"),
        Metric(
            "creation_makespan_s", "s", "derived", "first create request to the last sandbox running (null: none ran)"
        ),
        Metric("creation_rate_per_s", "sandboxes/s", "derived", "`sandboxes_created` ÷ the span"),
    )
    + percentile_metrics("schedule_latency", "the time from first create attempt to the create call's return", (50, 99))
    + percentile_metrics("tti", "time to interactive (first create attempt to able to run user code)")
    + Metrics(
        Metric("rejections", "placements", "sum", "placements refused (by a worker, or a conflicting commit)"),
        Metric("retries", "attempts", "sum", "create attempts made again"),
        Metric(
            "utilization",
            "share",
            "derived",
            "resource → busy fraction in [0, 1] over the span (the plane's resources, `rtnl_lock`, `client`; "
            "columns `utilization.<resource>`)",
            kind="counts",
            keys=("client", "rtnl_lock"),  # and the plane's: ``metrics``
        ),
        Metric(
            "bottleneck",
            "name",
            "derived",
            f"`capacity` (the fleet was full), else the most utilized resource if at least {LIMITING:.0%} busy, "
            "else `none`",
            kind="text",
        ),
        Metric("worker_slots_filled", "share", "derived", "the most slots in use over the fleet at once ÷ all slots"),
        Metric("worker_slots_in_use_max", "slots", "max", "the most slots in use on one worker at once"),
    )
)


def metrics(sc: SandboxScenario) -> Metrics:
    """Every metric a run of ``sc`` reports, in order: the summary's, its control plane's, the run's."""
    plane = PLANES[sc.control_plane]
    resources = sorted((*SUMMARY["utilization"].keys, *plane.RESOURCES))
    return (
        SUMMARY.with_keys("utilization", resources)
        + plane.METRICS
        + (faults.METRICS if faults.any_on(sc.faults) else Metrics())
        + Metrics(RUN["events"], RUN["sim_time_s"], RUN["wall_s"], RUN["shortcuts_used"], RUN["extrapolated"])
    )


def findings(summary: pd.DataFrame, scale: str) -> tuple[str, str, list[dict]]:
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
    return "Where each series peaks", intro, rows


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
        "worker_slots_filled",
    ),
    label=lambda sc: f"control plane {sc.control_plane}",
    metrics=metrics,
    size=lambda sc: float(sc.sandboxes.count),
    unit="sandboxes",
    budget=20e6,  # about a minute or two of wall time on the bench machine
    bottleneck="bottleneck",
    figures=(
        Figure(
            "rate",
            "lines",
            "Creation rate against scale",
            (("creation_rate_per_s", "sandboxes created per second (mean, 95% CI)"),),
            reference="client.rate",
        ),
        Figure(
            "tti",
            "lines",
            "Time to interactive, seconds",
            (("tti_p50_s", "p50"), ("tti_p90_s", "p90"), ("tti_p99_s", "p99")),
        ),
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
    estimate=budget.estimate,
    events_per_unit=budget.EVENTS_PER_SANDBOX,
    grows=budget.GROWS,
)
