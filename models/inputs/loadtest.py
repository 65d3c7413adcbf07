"""A load test against Functions: the scenario schema, one run, and the model's descriptor (docs/sources.md §1, "The
reference load test").

The approach (``approach``: models/inputs/approaches/) says how calls are made and what they reach: ``remote``,
``spawn``, ``batching`` or ``server``; app copies (``function.copies``) are how the Function is deployed, with any of
them (``approach = "copies"``, from when copies were an approach, is a deprecated alias of ``remote``). The load
(``load``) is closed-loop clients (models/inputs/callers/clients.py) or open-loop arrivals
(models/inputs/callers/arrivals.py). Each Function (models/inputs/platform/function.py) accepts and starts inputs on
containers that its autoscaler (models/inputs/platform/autoscaler.py) adds and removes; a monitor
(models/inputs/platform/monitor.py) samples what limits the run. On the Function path each call may pay per-call
overhead (``overhead``: models/inputs/platform/overhead.py). A run of independent parts (app copies) runs as such:
models/inputs/parts.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from models.inputs import parts
from models.inputs.approaches import ALIASES, APPROACHES
from models.inputs.approaches.base import LOADS
from models.inputs.callers.clients import ClientParams
from models.inputs.callers.demand import ArrivalParams, TraceParams
from models.inputs.checks import budget, invariants
from models.inputs.checks.envelope import EnvelopeParams, extrapolated
from models.inputs.platform.autoscaler import AutoscalerParams
from models.inputs.platform.billing import BillingParams
from models.inputs.platform.faults import FaultParams
from models.inputs.platform.function import FunctionParams, LimitParams
from models.inputs.platform.monitor import LIMIT_METRICS, diagnosis
from models.inputs.platform.overhead_params import OverheadParams
from models.inputs.platform.workspace import WorkspaceParams
from models.inputs.plausible import PLAUSIBLE
from models.inputs.shortcut_names import PARTS
from models.inputs.shortcuts import SHAPES
from models.inputs.summary import CALL_METRICS
from sim.dists import Dist, Uniform
from sim.guard import UNGUARDED, Guard
from sim.metrics import RUN, Metric, Metrics
from sim.model import Figure, Model, TimeSeries, records_frame
from sim.scenario import Described, param, section, with_sections
from sim.shortcuts import Shortcuts, engine_shortcuts
from sim.stats import load_scipy, mser5, mser5_settled, window_bins

if TYPE_CHECKING:
    import pandas as pd

ApproachName = Literal[tuple(APPROACHES)]
LoadName = Literal[tuple(LOADS)]


@dataclass(frozen=True)
class _Scenario(Described):
    """A load test; each approach adds its own sections (``server``, ``batching``)."""

    model: Literal["function"] = param("function", doc="which model: function (this), sandboxes or coldstart")
    approach: ApproachName = param(
        "remote",
        doc=f"how calls are made: {', '.join([*APPROACHES][:-1])} or {[*APPROACHES][-1]}; app copies are "
        "function.copies, with any of them ("
        + "; ".join(f'"{old}": a deprecated alias of "{new}"' for old, new in ALIASES.items())
        + ")",
        aliases=ALIASES,
    )
    load: LoadName = param("clients")
    work: Dist = param(Uniform(1.0, 10.0), source="reference load test: sleep uniform(1, 10) s (docs/sources.md §1)")
    duration_s: float = param(60.0, gt=0, source="reference load test: 60 s")
    warmup_s: float = param(0.0, ge=0, source="reference load test: warm-up 0")
    drain_s: float = param(300.0, ge=0, doc="after the duration, how long the test waits for calls in flight")
    function: FunctionParams = section(FunctionParams)
    limits: LimitParams = section(LimitParams)
    autoscaler: AutoscalerParams = section(AutoscalerParams)
    workspace: WorkspaceParams = section(WorkspaceParams)
    overhead: OverheadParams = section(OverheadParams)
    clients: ClientParams = section(ClientParams)
    arrivals: ArrivalParams = section(ArrivalParams)
    trace: TraceParams = section(TraceParams)
    envelope: EnvelopeParams = section(EnvelopeParams)
    billing: BillingParams = section(BillingParams)
    faults: FaultParams = section(FaultParams)

    def __post_init__(self) -> None:
        if self.warmup_s >= self.duration_s:
            raise ValueError("warmup_s: must be < duration_s")
        if not self.work.mean > 0:
            raise ValueError(f"work: its mean must be > 0 (calls/s derive from it), got {self.work}")
        cap, fixed = self.workspace.max_containers, self.function.containers
        approach = APPROACHES[self.approach]
        if cap and fixed and approach.calls_function:
            copies = self.function.copies or self.clients.count
            if copies * fixed > cap:
                raise ValueError(
                    f"workspace.max_containers: {cap:,} is below the {copies:,} × {fixed:,} always-warm containers "
                    "of function.copies × function.containers"
                )
        if self.load == "trace":
            self.trace.counts()  # the file must be readable, the row there (ValueError naming the key)
        if self.clients.api == "map" and (self.load != "clients" or not approach.maps):
            raise ValueError(
                'clients.api: "map" is for closed-loop clients (load = "clients") of the remote or spawn approach'
            )
        cp = self.clients
        if cp.timeout_s and (not approach.call_is_input or cp.api != "single" or cp.streams):
            raise ValueError(
                "clients.timeout_s: modelled for single calls on the Function path (approach remote or spawn, "
                'clients.api = "single", clients.streams = 0)'
            )
        if self.faults.on and not approach.call_is_input:
            key = "crash_containers" if self.faults.crash_containers else "slow_s"
            raise ValueError(f"faults.{key}: faults are modelled on the Function path (approach remote or spawn)")
        if self.function.retries and not self.faults.crash_containers:
            raise ValueError(
                "function.retries: the Function retries failed inputs, and only a crash fails one "
                "(faults.crash_containers)"
            )
        approach.check(self)

    def ideal_calls_per_s(self) -> float:
        """Calls per second with no overhead at all (the approach's rule)."""
        return APPROACHES[self.approach].ideal_calls_per_s(self)


Scenario = with_sections(_Scenario, {k: v for a in APPROACHES.values() for k, v in a.sections.items()}, "Scenario")


SHORTCUTS = Shortcuts(engine_shortcuts(Scenario) + SHAPES, Scenario)


def run(
    sc: Scenario,
    seed: int = 0,
    series: dict | None = None,
    records: bool = False,
    jobs: int = 1,
    guard: Guard = UNGUARDED,
) -> dict:
    """Simulate one scenario; return its metrics (declared in the descriptor below).

    Pass a dict as ``series`` to receive time series sampled every monitor interval: t, running, pending, containers,
    started (cumulative) and accepted (cumulative: started + pending). With ``records``, ``metrics["records"]`` is a
    DataFrame of one row per input (models/inputs/records.py: issued, started, finished, work, items, kind, ...).
    A run of independent parts (app copies under closed-loop clients: models/inputs/parts.py) simulates them one
    after the other, or on up to ``jobs`` processes; the numbers do not depend on ``jobs``. ``guard`` watches its
    clocks (sim/guard.py)."""
    load_scipy()  # its import is not the run's wall time
    wall0 = time.perf_counter()
    used = SHORTCUTS.used(sc)
    if APPROACHES[sc.approach].parts(sc) == 1:
        used -= {PARTS}  # the run is one part: nothing to split
    out, end = parts.simulate(sc, seed, records, series is not None, used, jobs, guard)
    metrics = outcome_metrics(sc, out, end)
    invariants.check(sc, out, metrics)
    metrics["shortcuts_used"] = sorted(used)
    if series is not None:
        series.update(out.series)
        series["accepted"] = [s + p for s, p in zip(series["started"], series["pending"], strict=True)]
    metrics["wall_s"] = time.perf_counter() - wall0
    if records:
        metrics["records"] = records_frame(out.records, "input")
    return metrics


def outcome_metrics(sc: Scenario, out: parts.Outcome, end: float) -> dict:
    """The metrics of a run's outcome (or of one part's: tests/sim/test_metrics.py combines the parts' by METRICS),
    ``wall_s`` aside."""
    calls = out.summary.metrics()
    if sc.load != "clients":  # an open loop or a trace: what comes back in the window (the issued-in-window rule is
        calls["calls_per_s"] = calls["calls_back_per_s"]  # the closed-loop reference test's: summary.py)
    metrics = {
        **calls,
        **out.counted,
        **diagnosis(out.held, out.lost, calls["errors_by_kind"]),
        "ideal_calls_per_s": sc.ideal_calls_per_s(),
        "sim_time_s": end,
    }
    metrics.update(costs(sc, out, end))
    metrics["rejections_by_kind"] = dict(sorted(metrics["rejections_by_kind"].items()))
    metrics["extrapolated"] = extrapolated(sc, metrics)
    if not metrics.pop("cost_settled") and end >= sc.duration_s:  # (calls made once and back: no steady load)
        metrics["extrapolated"].append(UNSETTLED)
    return metrics


# the flag of a cost per hour that rests on no steady state (``extrapolated``)
UNSETTLED = (
    "cost_per_hour: the containers reach no steady state in the window (MSER-5), so it includes the warm-up; a longer "
    "duration_s measures it"
)


def costs(sc: Scenario, out: parts.Outcome, end: float) -> dict:
    """The bill in three parts: before the steady part (the stated warm-up, ``warmup_s``, then the one MSER-5 detects
    in the window's container-seconds per bin, as the steady rate's in the calls back per bin), the steady part's cost
    per hour, and after the window (the drain and scale-down); and whether MSER-5 found a steady part at all."""
    per_s, counted = sc.billing.per_second(), out.counted
    w0, w1 = sc.warmup_s, min(sc.duration_s, end)  # (a load that makes its calls once may end before the duration)
    width, _ = window_bins(w0, sc.duration_s)
    whole = max(0, int((w1 - w0) / width + 1e-9))  # the bins a full width long before the window's end
    cut = mser5(out.billed[:whole])
    start = w0 + cut * width
    steady = float(out.billed[cut:].sum())  # (the bins past the window's end hold nothing)
    window = counted["containers_mean"] * max(w1 - w0, 0.0)  # the window's container-seconds, from its bounds
    return {
        "cost_usd": counted["container_seconds"] * per_s,
        "cost_usd_warmup": (counted["container_seconds_warmup"] + float(out.billed[:cut].sum())) * per_s,
        "cost_per_hour": steady / (w1 - start) * per_s * 3600.0 if w1 > start else 0.0,
        "cost_steady_from_s": start,
        "cost_usd_after": (counted["container_seconds"] - counted["container_seconds_warmup"] - window) * per_s,
        "cost_settled": mser5_settled(out.billed[:whole], cut),
    }


# every metric of a run, in the order of its output and of a results table's columns (that of the tables written
# before the declaration, so that they resume): the parts' counts go in its middle, rejections and events apart
METRICS = (
    CALL_METRICS
    + Metrics(parts.COUNTED["rejections_by_kind"])
    + LIMIT_METRICS
    + Metrics(
        Metric("ideal_calls_per_s", "calls/s", "derived", "calls/s with no overhead at all (the approach's rule)"),
        *(m for m in parts.COUNTED if m.name not in ("rejections_by_kind", "events")),
        Metric("cost_usd", "$", "derived", "`container_seconds` × the container's price per second (`billing`)"),
        Metric(
            "cost_usd_warmup",
            "$",
            "derived",
            "the bill before `cost_steady_from_s`: the stated warm-up's (`container_seconds_warmup` × the price) and "
            "the one MSER-5 detects after it",
        ),
        Metric(
            "cost_per_hour",
            "$/h",
            "derived",
            "the steady cost per hour: the container-seconds billed per second of the window from "
            "`cost_steady_from_s` on × the price × 3,600 (not the whole window's `containers_mean`: the start-up's "
            "extra containers, kept idle for the scaledown window, are the warm-up's); where the containers reach no "
            "steady state in the window, `extrapolated` says so and it includes the warm-up",
        ),
        Metric(
            "cost_steady_from_s",
            "s",
            "derived",
            "when the steady part of `cost_per_hour` begins: after `warmup_s`, the warm-up MSER-5 detects in the "
            "window's container-seconds per bin (the bins of `steady_calls_per_s`)",
        ),
        Metric(
            "cost_usd_after",
            "$",
            "derived",
            "the bill after the window (the calls' drain, the pools' scale-down to removal): `cost_usd` = "
            "`cost_usd_warmup` + `cost_per_hour` × the steady part's hours + this",
        ),
        RUN["sim_time_s"],
        parts.COUNTED["events"],
        RUN["wall_s"],
        RUN["shortcuts_used"],
        RUN["extrapolated"],
    )
)


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
                # a point whose seeds disagree (experiments/report.py): its mean is no prediction
                "unstable at": ", ".join(
                    f"{v:g}" if isinstance(v, float) else str(v) for v in g[g.get("unstable", "") != ""].get(scale, [])
                )
                or "—",
            }
        )
    intro = (
        f"The first {scale} at which calls/s falls below {SATURATION:.0%} of the ideal, and the limit that binds "
        "there; where the seeds of a point disagree (unstable: a collapse or two regimes), its mean is no prediction."
    )
    return "Where each series leaves the ideal line", intro, rows


MODEL = Model(
    name="function",
    plausible=PLAUSIBLE,
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
        "cost_per_hour",
        "cost_usd",
    ),
    label=lambda sc: f"approach {sc.approach}",
    metrics=lambda sc: METRICS,
    # calls over the run, the calls in flight at the start on top (a short run of a huge burst), and what costs as
    # much as calls (models/inputs/checks/budget.py)
    size=budget.size,
    unit="calls",
    budget=10e6,  # app copies: 46 s and 0.5 GiB on the bench machine (23 s with --jobs 2); docs/explanation/speed.md
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
        Figure(
            "cost",
            "lines",
            "Cost at the scenario's billing size (docs/sources.md §6 prices)",
            (("cost_per_hour", "$ per hour at steady state"), ("cost_usd", "$ per run, billed to removal")),
        ),
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
    estimate=budget.estimate,
    events_per_unit=budget.EVENTS_PER_CALL,
    grows=budget.GROWS,
    unmeasurable=invariants.window_error,
)
