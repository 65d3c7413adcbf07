"""A load test's run in independent parts: each part built and run, the run's end, the parts' outcomes added up.

App copies under closed-loop clients fall into independent parts (``Approach.parts``): client i calls copy
i mod copies and nothing else is shared, so each copy with its clients is a run of its own (copies with fewer than
``PART_CALLS`` calls in flight are grouped up to it, and the copies no client calls are one more part). A ``Part`` is
that run: its callers, the Functions they call and a monitor, on a clock of its own, with random streams of its own
named after the model's entities (client i, copy j: never after the part), so a run in parts gives the numbers of
the run on one clock, up to the order in which their sums are added (the ``parts`` shortcut, models/inputs/
shortcuts.py; ``shortcuts = "all,-parts"`` runs the copies together on one clock). Parts are simulated one after
the other (the memory and cache of one part at a time: cost linear in calls), or spread over ``jobs`` worker
processes (models/inputs/fanout.py), and their ``Outcome``s are added up in part order, so the numbers are the same
whatever ``jobs`` is.

The run ends when its last call in flight is back after the duration (``run_end``), which no part knows alone: each
part runs until its own calls are all back (a closed loop then issues no more), the parts' ends give the run's, and
every part runs on to it (its containers and monitor go on while other parts' calls are out). Hence two phases
(``_phases``), and a worker process keeps its parts between them.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass

import numpy as np

from models.inputs.approaches import APPROACHES
from models.inputs.base import Scenario
from models.inputs.fanout import on_processes
from models.inputs.platform import faults
from models.inputs.platform.monitor import BACKLOG, Monitor
from models.inputs.platform.workspace import Workspace
from models.inputs.records import CallLog
from models.inputs.shortcut_names import PARTS
from models.inputs.summary import ERROR_KINDS, CallSummary, Window
from sim.engine import Sim
from sim.guard import UNGUARDED, Guard
from sim.metrics import RUN, Metric, Metrics
from sim.rng import Streams
from sim.stats import TimeBins

MONITOR_DT = 0.5  # seconds between the monitor's samples (models/inputs/platform/monitor.py) ...
TAIL_STEPS = 10_000  # scaledown windows the idle tail may take (a pool with no load is down within a few)
MONITOR_SAMPLES = 1000  # ... or longer, so that a long run takes at most this many

# the metrics a part counts for itself (its callers, pools and clock), each part's added up
COUNTED = Metrics(
    Metric(
        "rejections_by_kind",
        "attempts",
        "sum",
        "rejected attempts of the whole run by kind, retried or not (columns `rejections.<kind>`, `rejections.other`)",
        kind="counts",
        keys=ERROR_KINDS,
        other=True,
    ),
    Metric(
        "containers_peak",
        "containers",
        "sum",
        "each Function's most containers (starting or ready) at once, summed over the Functions (and copies)",
    ),
    Metric("cold_starts", "containers", "sum", "containers started over the whole run"),
    Metric(
        "abandoned",
        "inputs",
        "sum",
        "inputs whose caller stopped waiting (clients.timeout_s) and that the Function still ran or held: work that "
        "reaches nobody",
    ),
    Metric(
        "function_retries",
        "inputs",
        "sum",
        "failed inputs the Function retried (function.retries: a container crash, faults.crash_containers)",
    ),
    Metric(
        "container_seconds",
        "container-s",
        "sum",
        "what Modal bills: each container from its start (cold start included) to its removal, idle or busy; the run "
        "goes on past its last call, with no load, until its pools have scaled down (`billed_until_s`); what a pool "
        "keeps with no load (min_containers) is billed to its pool's last removal",
    ),
    Metric(
        "container_seconds_warmup",
        "container-s",
        "sum",
        "the container-seconds before the window (the warm-up's share of the bill)",
    ),
    Metric(
        "containers_mean",
        "containers",
        "sum",
        "containers (starting or ready) over the window, time-averaged: what a steady load keeps billed",
    ),
    Metric(
        "billed_until_s",
        "s",
        "max",
        "when the last container above what the pools keep with no load was removed, each pool billed to its own "
        "(the run's end if calls were still out)",
    ),
    BACKLOG,
    RUN["events"],
)


@dataclass
class Outcome:
    """What one part left, or several added up: everything the run's metrics come from (and nothing that cannot be
    sent between processes)."""

    summary: CallSummary
    held: dict[str, float]  # input-seconds of the window running and pending by reason (the monitor's)
    series: dict[str, list[float]] | None
    lost: dict[str, float]  # input-seconds lost to rejections, by kind
    counted: dict  # the metrics of COUNTED, combined by their declared rules
    records: dict[str, np.ndarray] | None
    billed: np.ndarray  # container-seconds per bin of the window (sim/stats.py TimeBins): the steady cost's series
    violations: list[
        str
    ]  # what the part's Functions broke of their limits' bounds (models/inputs/checks/invariants.py)

    def absorb(self, other: Outcome) -> None:
        """Add the outcome of the next part (its records aside: ``simulate`` joins them)."""
        self.summary.absorb(other.summary)
        for totals, more in ((self.held, other.held), (self.lost, other.lost)):
            for k, v in more.items():
                totals[k] = totals.get(k, 0) + v
        if self.series is not None and other.series is not None:
            for k, values in self.series.items():
                if k != "t":
                    values[:] = [a + b for a, b in zip(values, other.series[k], strict=True)]
        self.counted = COUNTED.combine(self.counted, other.counted)
        self.billed = self.billed + other.billed
        self.violations += other.violations


class Part:
    """One independent part of a run. Built, it has run until its calls are all back (or the drain ended);
    ``extend`` runs it on to the run's end."""

    def __init__(
        self,
        sc: Scenario,
        seed: int,
        index: int,
        parts: int,
        records: bool,
        series: bool,
        shortcuts: frozenset[str],
        guard: Guard,
    ) -> None:
        self.sim = Sim.taking(shortcuts, guard)
        streams = Streams(seed)
        self.records = records
        self.log = CallLog(Window(sc.warmup_s, sc.duration_s), keep=records)
        approach = APPROACHES[sc.approach]
        self.targets: list = []
        self.load = approach.load(self.sim, sc, self.log, streams, self.targets, index, parts)
        self.targets += approach.targets(self.sim, sc, streams, self.log, self.load, index, parts)
        # the part's autoscaled pools under one cap and placement rate (parts only where neither can bind; fixed
        # pools fit under the cap: the schema's check)
        pools = [t.pool for t in self.targets if not t.pool.fixed]
        ws = sc.workspace
        self.workspace = Workspace(ws, pools) if (ws.max_containers or ws.launch_rate_per_s) and pools else None
        if sc.faults.on:
            faults.install(self.sim, sc.faults, self.targets)
        if parts > 1:  # client i calls copy i mod copies, held here from the part's first copy on
            self.load.route(sc.function.copies or sc.clients.count, approach.copies_of(sc, index, parts).start)
        else:
            self.load.route(len(self.targets))
        dt = max(MONITOR_DT, sc.duration_s / MONITOR_SAMPLES)
        self.window = (sc.warmup_s, sc.duration_s)
        self.monitor = Monitor(self.sim, self.targets, dt, self.window, keep_series=series)
        for t in self.targets:  # the window's container-seconds are kept apart, and per bin of it: the steady cost
            t.pool.marks = self.window  # is the window's after the warm-up MSER-5 detects in them (loadtest.py)
            t.pool.bins = TimeBins(*self.window)
        self.load.begin()
        self.sim.run(until=sc.duration_s + sc.drain_s)  # or until its last call in flight is back
        self.summary = None
        if not self.load.outstanding and not self.log.orphans and not records:
            # every call is back (and no abandoned input holds a row): fold them now, keep one part's rows
            self.summary = self.log.close_out()
            self.log.release()

    def extend(self, end: float) -> None:
        """Run on to the run's ``end``."""
        if self.sim.now < end:
            self.sim.run(until=end)
        self.load.settle()

    def outcome(self, tail: bool) -> Outcome:
        """What the part left at the run's end; then, with ``tail`` (every call of the run is back), the idle tail is
        billed (``_scale_down``)."""
        pools = [t.pool for t in self.targets]
        end = self.sim.now
        out = Outcome(
            summary=self.summary or self.log.close_out(),
            held=dict(self.monitor.held),
            series={k: list(v) for k, v in self.monitor.series.items()} if self.monitor.series else None,
            lost=dict(self.load.lost),
            counted={
                "rejections_by_kind": dict(self.load.rejections),
                "containers_peak": sum(p.peak for p in pools),
                "cold_starts": sum(p.cold_starts for p in pools),
                "abandoned": self.load.abandoned,
                "function_retries": sum(getattr(t, "retried", 0) for t in self.targets),
                "backlog_longest_s": self.monitor.backlog_longest_s,
                "events": self.sim.events,
            },
            records=self.log.arrays() if self.records else None,
            billed=sum((p.container_bins(min(self.window[1], end)) for p in pools), TimeBins(*self.window).sums),
            violations=[v for t in self.targets for v in t.violations(end)]
            + (self.workspace.violations(end) if self.workspace is not None else []),
        )
        w0, w1 = self.window[0], min(self.window[1], end)  # (before the tail: the window's end may be the run's)
        window = sum(p.container_seconds(w1) - p.container_seconds(w0) for p in pools)
        out.counted.update(
            container_seconds_warmup=sum(p.container_seconds(w0) for p in pools),
            containers_mean=window / (w1 - w0) if w1 > w0 else 0.0,
        )
        if tail:
            self._scale_down(pools, out.violations)
        # each pool billed to its own last removal (the run's end if none): what it keeps with no load to then too
        until = [max(end, p.changed_at) if tail else end for p in pools]
        out.counted.update(
            container_seconds=sum(p.container_seconds(t) for p, t in zip(pools, until, strict=True)),
            billed_until_s=max(until, default=end),
        )
        return out

    def _scale_down(self, pools: list, violations: list[str]) -> None:
        """The idle tail: with every call back, run on with no load until each autoscaled pool keeps only what it
        would with none (its scaledown window, then a decision)."""
        auto = [p for p in pools if not p.fixed]
        if not auto:
            return
        step = max(p.p.scaledown_window_s + 2 * p.p.interval_s for p in auto)
        for _ in range(TAIL_STEPS):
            if all(p.settled() for p in auto):
                return
            self.sim.run(until=self.sim.now + step)
        violations.append(f"pools still above their floor {TAIL_STEPS:,} scaledown windows after the last call")


# (outstanding, drained_at, reissue) of each part after its first phase: what the run's end is decided from
Ends = list[tuple[int, float | None, bool]]


def run_end(sc: Scenario, ends: Ends) -> float:
    """When the run ends: when its last call in flight is back after the duration (or at any time if the callers
    issue no more: no reissue), else when the drain ends. A part stopped its clock when its own calls were all back
    (``drained_at``); a part with calls still out ran to the drain's end."""
    until = sc.duration_s + sc.drain_s
    if any(out for out, _, _ in ends):
        return until
    backs = [at for _, at, _ in ends if at is not None]
    if not backs:
        return until
    last = max(backs)
    return last if last >= sc.duration_s or not ends[0][2] else until


def _phases(
    sc: Scenario,
    seed: int,
    indices: range,
    parts: int,
    records: bool,
    series: bool,
    shortcuts: frozenset[str],
    guard: Guard,
    built: Callable[[int], None],
) -> Generator[Ends | list[Outcome], tuple[float, bool], None]:
    """The parts ``indices``: yields their ends after the first phase, is sent the run's end and whether to bill
    the idle tail (every call of every part back), yields their outcomes. ``built(i)`` is told as part i finishes
    its first phase."""
    done = []
    for i in indices:
        done.append(Part(sc, seed, i, parts, records, series, shortcuts, guard))
        built(i)
    end, tail = yield [(p.load.outstanding, p.load.drained_at, p.load.reissue) for p in done]
    for p in done:
        p.extend(end)
    yield [p.outcome(tail) for p in done]


def simulate(
    sc: Scenario,
    seed: int,
    records: bool,
    series: bool,
    shortcuts: frozenset[str],
    jobs: int = 1,
    guard: Guard = UNGUARDED,
) -> tuple[Outcome, float]:
    """The run's outcome, its parts added up, and its end (``shortcuts``: those the run may take; ``guard``: what
    watches its clocks, sim/guard.py)."""
    n = APPROACHES[sc.approach].parts(sc) if PARTS in shortcuts else 1
    progress = guard.progress
    until = sc.duration_s + sc.drain_s

    def built(i: int) -> None:
        if progress is not None and n > 1:
            progress((i + 1) / n * until, until)

    if n > 1:  # the bar goes over the parts (built), not within one
        guard = guard.quiet()

    def phases(block: range, tell: Callable[[int], None]) -> Generator[Ends | list[Outcome], tuple[float, bool], None]:
        return _phases(sc, seed, block, n, records, series, shortcuts, guard, tell)

    if jobs > 1 and n > 1:
        ends, finish = on_processes(phases, n, jobs, built)
    else:
        steps = phases(range(n), built)
        ends = next(steps)
        finish = steps.send
    end = run_end(sc, ends)
    outcomes = finish((end, not any(out for out, _, _ in ends)))
    total = outcomes[0]
    for more in outcomes[1:]:
        total.absorb(more)
    if records:  # concatenated once, in part order (not part by part: that copies them again for every part)
        total.records = {c: np.concatenate([o.records[c] for o in outcomes]) for c in total.records}
    return total, end
