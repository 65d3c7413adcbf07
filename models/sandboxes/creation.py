"""Sandbox creation at scale under the control planes (docs/sources.md §2): one run, the model's shortcuts, and its
descriptor (``MODEL``: sim/model.py).

The scenario is models/sandboxes/scenario.py's, the benchmark client models/sandboxes/client.py's, the control plane
``PLANES[sc.control_plane]`` (models/sandboxes/planes/), what the run reports models/sandboxes/summary.py's. The
model's shortcuts are the engine's and the planes' own (``ControlPlane.SHORTCUTS``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from models.sandboxes import budget, invariants
from models.sandboxes.client import Creation
from models.sandboxes.fleet import Fleet
from models.sandboxes.planes import PLANES
from models.sandboxes.scenario import SandboxScenario, extrapolated, unread
from models.sandboxes.summary import caveats, metrics, summarize
from sim.engine import Sim
from sim.guard import UNGUARDED, Guard
from sim.model import Figure, Model, Plausibles, TimeSeries, records_frame
from sim.rng import Streams
from sim.shortcuts import Shortcuts, engine_shortcuts

if TYPE_CHECKING:
    import pandas as pd

SHORTCUTS = Shortcuts(
    engine_shortcuts(SandboxScenario) + tuple(s for p in PLANES.values() for s in p.SHORTCUTS), SandboxScenario
)


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
    ``shortcuts`` key says which shortcuts may run (``SHORTCUTS``); ``shortcuts_used`` lists those that did. ``guard``
    watches its clock (sim/guard.py)."""
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
    if any("client" in (r["bottleneck there"], r["bottleneck at the largest"]) for r in rows):
        intro += (
            " Where it is the client, the rate is the benchmark client's (`client.rate`, an assumption: "
            "docs/sources.md §2), not a limit of the control plane."
        )
    return "Where each series peaks", intro, rows


MODEL = Model(
    name="sandboxes",
    plausible=Plausibles(unread=unread),
    schema=SandboxScenario,
    run=run,
    headline=(
        "sandboxes_created",
        "creation_makespan_s",
        "creation_rate_per_s",
        "schedule_latency_p99_s",
        "tti_p50_s",
        "tti_p99_s",
        "tti_from_burst_p50_s",
        "tti_from_burst_p99_s",
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
    caveats=caveats,
    estimate=budget.estimate,
    events_per_unit=budget.EVENTS_PER_SANDBOX,
    grows=budget.GROWS,
)
