"""A load test against Functions: the scenario schema, one run, and the model's descriptor (domain.md §1, "The
reference load test").

The approach (``approach``: models/inputs/approaches/) says how calls are made and what they reach: ``remote``,
``spawn``, ``copies``, ``batching`` or ``server``. The load (``load``: models/inputs/clients.py) is closed-loop clients
or open-loop Poisson arrivals. Each Function (models/inputs/function.py) accepts and starts inputs on containers that
its autoscaler (models/inputs/autoscaler.py) adds and removes; a monitor (models/inputs/monitor.py) samples what
limits the run. On the Function path each call may pay per-call overhead (``overhead``: models/inputs/overhead.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from models.inputs.approaches import APPROACHES
from models.inputs.autoscaler import AutoscalerParams
from models.inputs.clients import LOADS, ArrivalParams, ClientParams
from models.inputs.demand import TraceParams
from models.inputs.function import FunctionParams, LimitParams
from models.inputs.monitor import Monitor
from models.inputs.overhead import OverheadParams
from models.inputs.records import ERROR_KINDS, CallLog, CallSummary, Window
from sim import engine
from sim.dists import Dist, Uniform
from sim.engine import Sim
from sim.model import Figure, Model, TimeSeries, records_frame
from sim.rng import Streams
from sim.scenario import Described, param, section, with_sections

if TYPE_CHECKING:
    import pandas as pd

ApproachName = Literal[tuple(APPROACHES)]
LoadName = Literal[tuple(LOADS)]


@dataclass(frozen=True)
class _Scenario(Described):
    """A load test; each approach adds its own sections (``server``, ``batching``)."""

    model: Literal["function"] = param("function", doc="which model: function (this), sandboxes or coldstart")
    approach: ApproachName = param("remote")
    load: LoadName = param("clients")
    work: Dist = param(Uniform(1.0, 10.0), source="reference load test: sleep uniform(1, 10) s (domain.md §1)")
    duration_s: float = param(60.0, gt=0, source="reference load test: 60 s")
    warmup_s: float = param(0.0, ge=0, source="reference load test: warm-up 0")
    drain_s: float = param(300.0, ge=0, doc="after the duration, how long the test waits for calls in flight")
    function: FunctionParams = section(FunctionParams)
    limits: LimitParams = section(LimitParams)
    autoscaler: AutoscalerParams = section(AutoscalerParams)
    overhead: OverheadParams = section(OverheadParams)
    clients: ClientParams = section(ClientParams)
    arrivals: ArrivalParams = section(ArrivalParams)
    trace: TraceParams = section(TraceParams)

    def __post_init__(self) -> None:
        if self.warmup_s >= self.duration_s:
            raise ValueError("warmup_s: must be < duration_s")
        if not self.work.mean > 0:
            raise ValueError(f"work: its mean must be > 0 (calls/s derive from it), got {self.work}")
        if self.load == "trace":
            self.trace.counts()  # the file must be readable, the row there (ValueError naming the key)
        APPROACHES[self.approach].check(self)

    def ideal_calls_per_s(self) -> float:
        """Calls per second with no overhead at all (the approach's rule)."""
        return APPROACHES[self.approach].ideal_calls_per_s(self)


Scenario = with_sections(_Scenario, {k: v for a in APPROACHES.values() for k, v in a.sections.items()}, "Scenario")

MONITOR_DT = 0.5  # seconds between the monitor's samples (models/inputs/monitor.py) ...
MONITOR_SAMPLES = 1000  # ... or longer, so that a long run takes at most this many


class Part:
    """One independent part of a run (``Approach.parts``: an app copy and the clients that call it, or the whole
    run): its callers, the Functions they call and a monitor, on a clock of its own, with random streams of its own
    (named ``part-I/...`` when there are several). Built, it has run until its calls are all back (or the drain
    ended); ``extend`` runs it on to the run's end."""

    def __init__(self, sc: Scenario, seed: int, index: int, parts: int, records: bool, series: bool) -> None:
        self.sim = Sim()
        streams = Streams(seed, prefix=f"part-{index}/" if parts > 1 else "")
        self.log = CallLog(Window(sc.warmup_s, sc.duration_s), keep=records)
        approach = APPROACHES[sc.approach]
        self.targets: list = []
        self.load = approach.load(self.sim, sc, self.log, streams, self.targets, index)
        self.targets += approach.targets(self.sim, sc, streams, self.log, self.load.work_ended, index)
        dt = max(MONITOR_DT, sc.duration_s / MONITOR_SAMPLES)
        self.monitor = Monitor(self.sim, self.targets, dt, (sc.warmup_s, sc.duration_s), keep_series=series)
        self.load.begin()
        self.sim.run(until=sc.duration_s + sc.drain_s)  # or until its last call in flight is back
        self.summary = None
        if not self.load.outstanding and not records:  # every call is back: fold them now, keep one part's rows
            self.summary = self.log.close_out()
            self.log.release()

    def extend(self, end: float) -> None:
        """Run on to the run's ``end`` (its containers and monitor go on while others' calls are out)."""
        if self.sim.now < end:
            self.sim.run(until=end)
        self.load.settle()

    def close_out(self) -> CallSummary:
        return self.summary or self.log.close_out()


def run_end(sc: Scenario, loads: list) -> float:
    """When the run ends: when its last call in flight is back after the duration (or at any time if the callers
    issue no more: no reissue), else when the drain ends. Each part's load stopped its clock when its own calls were
    all back (``drained_at``); a part with calls still out ran to the drain's end."""
    until = sc.duration_s + sc.drain_s
    if any(load.outstanding for load in loads):
        return until
    backs = [load.drained_at for load in loads if load.drained_at is not None]
    if not backs:
        return until
    last = max(backs)
    return last if last >= sc.duration_s or not loads[0].reissue else until


def run(sc: Scenario, seed: int = 0, series: dict | None = None, records: bool = False) -> dict:
    """Simulate one scenario; return its metrics (interfaces.md, "Function load tests").

    Pass a dict as ``series`` to receive time series sampled every monitor interval: t, running, pending, containers,
    started (cumulative) and accepted (cumulative: started + pending). With ``records``, ``metrics["records"]`` is a
    DataFrame of one row per input (models/inputs/records.py: issued, started, finished, work, items, kind, ...).

    A run that falls into independent parts (app copies under closed-loop clients) simulates them one at a time, each
    on its own clock, and adds up their results: the same model, with the memory and cache of one part at a time."""
    wall0 = time.perf_counter()
    n = APPROACHES[sc.approach].parts(sc)
    parts = []
    progress = engine.PROGRESS
    try:
        for i in range(n):
            if progress is not None and n > 1:  # the bar goes over the parts, one after the other
                engine.PROGRESS = lambda now, until, i=i: progress((i + now / until) * until / n, until)
            parts.append(Part(sc, seed, i, n, records, series is not None))
    finally:
        engine.PROGRESS = progress
    end = run_end(sc, [p.load for p in parts])
    for p in parts:
        p.extend(end)

    first = parts[0]
    summary, monitor, lost = first.close_out(), first.monitor, dict(first.load.lost)
    rejections = dict(first.load.rejections)
    for p in parts[1:]:
        summary.absorb(p.close_out())
        monitor.absorb(p.monitor)
        for totals, more in ((lost, p.load.lost), (rejections, p.load.rejections)):
            for kind, v in more.items():
                totals[kind] = totals.get(kind, 0) + v
    metrics = summary.metrics()
    metrics["rejections_by_kind"] = dict(sorted(rejections.items()))
    # a run that ends before its duration (all calls back, none reissued) is diagnosed over what it ran
    metrics.update(monitor.diagnosis(lost, first.load.capacity(min(end, sc.duration_s) - sc.warmup_s)))
    if series is not None:
        series.update(monitor.series)
        series["accepted"] = [s + p for s, p in zip(series["started"], series["pending"], strict=True)]
    pools = [t.pool for p in parts for t in p.targets]
    metrics.update(
        ideal_calls_per_s=sc.ideal_calls_per_s(),
        containers_peak=sum(p.peak for p in pools),
        cold_starts=sum(p.cold_starts for p in pools),
        container_seconds=sum(p.container_seconds() for p in pools),
        sim_time_s=end,
        events=sum(p.sim.events for p in parts),
    )
    metrics["wall_s"] = time.perf_counter() - wall0
    if records:
        tables = [p.log.arrays() for p in parts]
        metrics["records"] = records_frame({c: np.concatenate([t[c] for t in tables]) for c in tables[0]}, "input")
    return metrics


SATURATION = 0.8  # a series has left the ideal line where its calls/s falls below this share of the ideal


def findings(summary: pd.DataFrame, scale: str) -> tuple[str, str, list[dict]]:
    """Per series: the first scale where calls/s falls below SATURATION × ideal, and what binds there."""
    rows = []
    for variant, g in summary.groupby("variant", sort=False):
        g = g.sort_values(scale) if scale in g else g
        below = g[g["calls_per_s_mean"] < SATURATION * g["ideal_calls_per_s_mean"]]
        first = below.iloc[0] if len(below) else None
        rows.append(
            {
                "series": variant,
                "leaves ideal at": first[scale] if first is not None and scale in g else "—",
                "binding limit there": first["binding_limit"] if first is not None else "none within the sweep",
                "peak calls/s": g["calls_per_s_mean"].max(),
                "at": g.loc[g["calls_per_s_mean"].idxmax(), scale] if scale in g else "—",
            }
        )
    intro = (
        f"The first {scale} at which calls/s falls below {SATURATION:.0%} of the ideal, and the limit that binds there."
    )
    return "Where each series leaves the ideal line", intro, rows


MODEL = Model(
    name="function",
    schema=Scenario,
    run=run,
    headline=(
        "calls_per_s",
        "ideal_calls_per_s",
        "first_n_back_s",
        "added_latency_p50_s",
        "added_latency_p99_s",
        "containers_peak",
        "errors",
        "errors_by_kind",
        "retries",
        "binding_limit",
        "binding_share",
    ),
    label=lambda sc: f"approach {sc.approach}",
    probe={"duration_s": 1.0, "clients.count": 1, "clients.in_flight": 1, "function.copies": 1},
    # calls over the run, and the calls in flight at the start on top (a short run of a huge burst)
    size=lambda sc: (
        (sc.ideal_calls_per_s() * sc.duration_s if sc.load != "clients" or sc.clients.reissue else 0)
        + sc.clients.count * sc.clients.in_flight
    ),
    unit="calls",
    budget=10e6,  # about a minute and 2 GiB on the bench machine (about 190 bytes a call)
    bottleneck="binding_limit",
    figures=(
        Figure(
            "throughput",
            "lines",
            "Throughput against scale",
            (("calls_per_s", "calls/s (mean, 95% CI)"),),
            reference="ideal_calls_per_s",
            log=True,
        ),
        Figure(
            "latency",
            "lines",
            "Added latency, seconds (response − own work)",
            (("added_latency_p50_s", "p50"), ("added_latency_p99_s", "p99")),
        ),
        Figure("containers", "lines", "Containers", (("containers_peak", "containers (peak)"),)),
        Figure("errors", "errors", "Errors by kind"),
        Figure("binding", "binding", "What binds (the costliest limit)"),
    ),
    timeseries=TimeSeries(
        title="Time series of one point",
        ylabel="inputs",
        lines=(
            ("started", "started (cumulative)"),
            ("accepted", "accepted (cumulative)"),
            ("running", "running"),
            ("pending", "pending"),
        ),
        right=(("containers", "containers"),),
        right_label="containers",
    ),
    findings=findings,
    kinds=ERROR_KINDS,
)
