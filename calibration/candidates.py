"""Candidate mechanism sets as data: a name, fixed ``--set`` switches, and the free parameters the fit moves.

A free parameter is a dotted scenario key, a range, a scale (log or linear: the search works in [0, 1] coordinates
of either), the grid the search starts from, and how a value is written (the cold-start median goes into
``autoscaler.cold_start=lognormal(MEDIAN, 0.3)``). A candidate whose keys the model does not know (a mechanism not
built yet) or whose switches it rejects is reported as skipped, with the reason, instead of failing the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from experiments.cli import load_scenario
from models.inputs.loadtest import Scenario
from sim.scenario import ScenarioError, schema_keys

COLD_START_SIGMA = 0.3  # assumption: the shape of the cold-start distribution (lognormal sigma)


@dataclass(frozen=True)
class Free:
    """A parameter the fit moves, within [low, high]."""

    name: str  # how reports call it
    key: str  # the dotted scenario key it sets
    low: float
    high: float
    start: float  # the search's starting value (--quick: the only grid point)
    grid: tuple[float, ...] = ()  # grid values (empty: start only)
    log: bool = True
    fmt: str = "{:.4g}"  # the --set value, from the number

    def setting(self, x: float) -> str:
        return f"{self.key}={self.fmt.format(x)}"

    def to_unit(self, x: float) -> float:
        """The value's coordinate in [0, 1] (log or linear in the range)."""
        if self.log:
            return (math.log(x) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        return (x - self.low) / (self.high - self.low)

    def from_unit(self, u: float) -> float:
        if u <= 0 or u >= 1:
            return self.low if u <= 0 else self.high
        if self.log:
            return math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        return self.low + u * (self.high - self.low)


@dataclass(frozen=True)
class Candidate:
    """A set of mechanisms: switches that turn them on, and the parameters fitted."""

    name: str
    doc: str
    fixed: tuple[str, ...]  # KEY=VALUE settings
    free: tuple[Free, ...]

    @property
    def k(self) -> int:
        return len(self.free)

    def settings(self, values: tuple[float, ...] | list[float]) -> list[str]:
        """The ``--set`` overrides of this candidate at ``values`` (one per free parameter)."""
        return [*self.fixed, *(f.setting(x) for f, x in zip(self.free, values, strict=True))]

    def start(self) -> tuple[float, ...]:
        return tuple(f.start for f in self.free)

    def check(self, approaches: tuple[str, ...]) -> str | None:
        """None if the model accepts this candidate, else why it is skipped ('unknown key ...' or the model's
        own message for a rejected value)."""
        known = schema_keys(Scenario)
        for key in [s.split("=", 1)[0] for s in self.fixed] + [f.key for f in self.free]:
            if key not in known:
                return f"unknown key {key}"
        for a in approaches:
            try:
                load_scenario(f"loadtest-{a}", self.settings(self.start()), [])
            except ScenarioError as e:
                return str(e).split(" (known here")[0]
        return None


# The parameters, with the ranges the search may explore.
START_RATE = Free("start_rate", "limits.start_rate", 100.0, 5000.0, 1000.0, (500.0, 1000.0, 2000.0))
INTERVAL = Free("interval_s", "autoscaler.interval_s", 0.5, 20.0, 4.5, (3.0, 4.5, 6.0))
COLD_MEDIAN = Free(
    "cold_start_median_s",
    "autoscaler.cold_start",
    0.3,
    10.0,
    1.5,
    (1.0, 2.0, 3.0),
    fmt="lognormal({:.4g}, " + f"{COLD_START_SIGMA})",
)
SUBMIT = Free("overhead_submit_s", "overhead.submit", 0.005, 2.0, 0.05, fmt="constant({:.4g})")
RESULT = Free("overhead_result_s", "overhead.result", 0.005, 2.0, 0.05, fmt="constant({:.4g})")
START_BURST = Free("start_burst", "limits.start_burst", 1.0, 20000.0, 500.0, (100.0, 1000.0))
START_RAMP = Free("start_ramp_per_s", "limits.start_ramp_per_s", 0.0, 200.0, 20.0, (0.0, 50.0), log=False)

BASELINE = (START_RATE, INTERVAL, COLD_MEDIAN)
BURST_AWARE = ("autoscaler.burst_aware=true", "autoscaler.scaleup_step=0")

CANDIDATES: tuple[Candidate, ...] = (
    Candidate(
        "baseline",
        "today's mechanisms: FIFO token-bucket start limit, one container added per decision",
        ("autoscaler.scaleup_step=1",),
        BASELINE,
    ),
    Candidate(
        "overhead",
        "baseline + per-call round-trip overhead (submit, result)",
        ("autoscaler.scaleup_step=1",),
        (*BASELINE, SUBMIT, RESULT),
    ),
    Candidate(
        "start-limit",
        "a start limit with a burst that ramps while a backlog persists; scaling decisions see the whole backlog",
        BURST_AWARE,
        (START_RATE, START_BURST, START_RAMP),
    ),
    Candidate(
        "full",
        "start-limit + overhead + baseline's autoscaler pace, containers sized to what can start",
        (*BURST_AWARE, "autoscaler.size_to=startable"),
        (START_RATE, START_BURST, START_RAMP, INTERVAL, COLD_MEDIAN, SUBMIT, RESULT),
    ),
)


def by_name(names: list[str] | None) -> list[Candidate]:
    """The candidates named (all if None); ValueError naming an unknown one."""
    if not names:
        return list(CANDIDATES)
    table = {c.name: c for c in CANDIDATES}
    for n in names:
        if n not in table:
            raise ValueError(f"--candidate {n}: unknown (candidates: {', '.join(table)})")
    return [table[n] for n in dict.fromkeys(names)]
