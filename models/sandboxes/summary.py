"""What one sandbox-creation run reports: its summary (``summarize``) and the metrics it declares (``SUMMARY``,
``metrics``: sim/metrics.py ``Metrics``).

Metrics: created, makespan, rate, schedule latency, time to interactive (from each sandbox's first create attempt,
``tti``, and from the burst's start, ``tti_from_burst``), rejections, retries, per-resource utilization and the
bottleneck, and a time series of sandboxes created per second and running. ``caveats``: what an answer bound by the
benchmark client rests on (its assumed rate).

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

import numpy as np

from models.sandboxes import faults
from models.sandboxes.client import Creation
from models.sandboxes.fleet import BenchmarkClientParams, Fleet
from models.sandboxes.planes import PLANES, ControlPlane
from models.sandboxes.scenario import SandboxScenario
from sim.metrics import RUN, Metric, Metrics, percentile_metrics
from sim.stats import percentiles

# assumption: a resource busy at least 80% of the span sets the pace (an FCFS queue's wait is already several
# service times there: 4 for M/M/1); below that no resource is named and the load itself limits the run
LIMITING = 0.8


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
    tti_from_burst = running[done] - first
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
        **percentiles(tti_from_burst, "tti_from_burst"),
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
    + percentile_metrics(
        "tti_from_burst",
        "time to interactive from the burst's start (its first create request) to able to run user code: what a "
        "caller of the whole burst waits, including its own time queued behind `client.concurrency` and "
        "`client.rate`, which `tti` (from each sandbox's own first attempt) leaves out",
    )
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


def caveats(sc: SandboxScenario, metrics: dict) -> list[str]:
    """A run bound by the benchmark client measured the client, not the control plane: its rate is an assumption
    (``client.rate``, models/sandboxes/fleet.py), so the answer says so, with the plane's busiest resource."""
    if metrics["bottleneck"] != "client":
        return []
    plane = {k: v for k, v in metrics["utilization"].items() if k not in SUMMARY["utilization"].keys}
    busiest = max(plane, key=plane.__getitem__)
    rate, default = sc.client.rate, BenchmarkClientParams.rate
    assumed = "an assumption: docs/sources.md §2's benchmark client, about 17-20k/s"
    what = f"the default, {assumed}" if rate == default else f"as set; the default {default:,.0f}/s is {assumed}"
    return [
        f"as fast as the client sends: its rate, client.rate = {rate:,.0f}/s ({what}), set the pace, not the control "
        f"plane (its busiest resource, {busiest}, was {plane[busiest]:.0%} busy); set client.rate to your client's rate"
    ]


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
