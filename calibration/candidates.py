"""Candidate mechanism sets as data: a name, fixed ``--set`` switches, and the free parameters the fit moves.

A free parameter is a dotted scenario key, a range, a scale (log or linear: the search works in [0, 1] coordinates
of either), the grid the search starts from, and how a value is written (the cold-start median goes into
``autoscaler.cold_start=lognormal(MEDIAN, 0.3)``). A candidate whose keys the model does not know (a mechanism not
built yet) or whose switches it rejects is reported as skipped, with the reason, instead of failing the run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from models.inputs.loadtest import Scenario
from models.runs import load_scenario
from sim.scenario import ScenarioError, leading_number, schema_keys

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
    also: tuple[str, ...] = ()  # further keys set to the same value (one parameter, several legs)

    def value_of(self, settings: Iterable[str]) -> float | None:
        """The parameter's value in a list of ``--set`` overrides (the first number of its ``key``'s value: a
        distribution's median), or None if it is not there."""
        for s in settings:
            key, _, text = s.partition("=")
            if key == self.key:
                return leading_number(text)
        return None

    def setting(self, x: float) -> list[str]:
        """The ``--set`` overrides for value ``x``: ``key`` and every ``also`` key."""
        value = self.fmt.format(x)
        return [f"{k}={value}" for k in (self.key, *self.also)]

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
        free = [s for f, x in zip(self.free, values, strict=True) for s in f.setting(x)]
        return [*(s for s in self.fixed if s.split("=", 1)[0] not in self.free_keys), *free]

    @property
    def free_keys(self) -> set[str]:
        """Every key a free parameter sets (a fixed switch on the same key yields to it)."""
        return {k for f in self.free for k in (f.key, *f.also)}

    def start(self) -> tuple[float, ...]:
        return tuple(f.start for f in self.free)

    def check(self, experiments: Iterable) -> str | None:
        """None if the model accepts this candidate in every experiment (an approach of the reference test, or an
        ``Experiment``: a trace's preset and sets), else why it is skipped ('unknown key ...' or the model's own
        message for a rejected value)."""
        known = schema_keys(Scenario)
        for key in [s.split("=", 1)[0] for s in self.fixed] + sorted(self.free_keys):
            if key not in known:
                return f"unknown key {key}"
        for e in experiments:
            preset, sets = (f"loadtest-{e}", ()) if isinstance(e, str) else (e.preset, e.sets)
            try:
                load_scenario(preset, [*sets, *self.settings(self.start())], [])
            except ScenarioError as e:
                return str(e).split(" (known here")[0]
        return None


# The parameters, with the ranges the search may explore.
START_RATE = Free("start_rate", "limits.start_rate", 100.0, 5000.0, 1000.0, (500.0, 1000.0, 2000.0))
INTERVAL = Free("interval_s", "autoscaler.interval_s", 0.5, 20.0, 4.5, (1.0, 4.5))
COLD_MEDIAN = Free(
    "cold_start_median_s",
    "autoscaler.cold_start",
    0.3,
    10.0,
    1.5,
    (1.0, 2.0),
    fmt="lognormal({:.4g}, " + f"{COLD_START_SIGMA})",
)
# The round trip as two equal legs (client → accept, result → client): one parameter, since no measured figure
# tells the legs apart (each adds to every call's added latency and to its time in the client's loop).
HALF_RTT = Free(
    "overhead_leg_s",
    "overhead.submit",
    0.005,
    2.0,
    0.1,
    # the fitted median, a spread of σ 0.3 (an assumption: models/inputs/platform/overhead.py)
    fmt="lognormal({:.4g}, 0.3)",
    also=("overhead.result",),
)
# The server's CPU per request besides its sleep, on @app.server(cpu=1)'s one core (docs/sources.md §1).
SERVER_CPU = Free("cpu_per_request_s", "server.cpu_per_request_s", 0.0002, 0.05, 0.004, (0.002, 0.006))
START_BURST = Free("start_burst", "limits.start_burst", 1.0, 20000.0, 100.0, (10.0, 1000.0))
# The rate falls back as fast as it ramped up (an assumption: models/inputs/platform/startlimit.py), so the two move
# together.
START_RAMP = Free(
    "start_ramp_per_s",
    "limits.start_ramp_per_s",
    0.0,
    100.0,
    10.0,
    (5.0, 20.0),
    log=False,
    also=("limits.start_relax_per_s",),
)
# A scale-from-zero decision that waits a short window for the inputs the network legs spread out (models/inputs/
# autoscaler.py ``gather_s``).
GATHER = Free("gather_s", "autoscaler.gather_s", 0.01, 5.0, 0.3, (0.1, 1.0))
# Containers added per decision at most (models/inputs/platform/autoscaler.py ``scaleup_step``; undocumented, as a
# Kubernetes HPA's scale-up policy caps pods added per period): an integer, searched on a log scale.
STEP = Free("scaleup_step", "autoscaler.scaleup_step", 1.0, 64.0, 4.0, (2.0, 8.0), fmt="{:.0f}")
# Where a ramp carries the rate up, the base rate starts near the doc's "about 200/s" (docs/sources.md §1);
# a smaller grid.
SERVER_CPU_FIT = replace(SERVER_CPU, grid=())
RAMP_BASE = replace(START_RATE, start=200.0, grid=(200.0, 500.0))

# Every mechanism's switch in its "off" position (the model with none of the mechanisms); a candidate turns some on.
OFF = {
    "limits.start_ramp_per_s": "0",
    "limits.start_rate_max": "833",  # a ramp's ceiling (models/inputs/platform/startlimit.py): with no ramp, no effect
    "limits.start_relax_per_s": "0",
    "autoscaler.scaleup_step": "1",
    "autoscaler.burst_aware": "false",
    "autoscaler.gather_s": "0",
    "autoscaler.size_to": "in_system",
    "overhead.submit": "constant(0)",
    "overhead.dispatch": "constant(0)",
    "overhead.result": "constant(0)",
    "server.container_cpu": "0",
    "server.cpu_per_request_s": "0",
}


def switches(**on: str) -> tuple[str, ...]:
    """Every switch of OFF as ``KEY=VALUE``, with those named in ``on`` (dots as ``__``) turned on: a candidate
    states every mechanism, so the code defaults never decide what it fits."""
    table = {**OFF, **{k.replace("__", "."): v for k, v in on.items()}}
    return tuple(f"{k}={v}" for k, v in table.items())


CPU_1 = {"server__container_cpu": "1"}
WHOLE_BACKLOG = {"autoscaler__scaleup_step": "0", "autoscaler__burst_aware": "true", "autoscaler__size_to": "startable"}

CANDIDATES: tuple[Candidate, ...] = (
    Candidate(
        "baseline",
        "none of the mechanisms: a FIFO token-bucket start limit, one container added per decision, no overhead",
        switches(),
        (START_RATE, INTERVAL, COLD_MEDIAN),
    ),
    Candidate(
        "overhead",
        "baseline + a per-call round trip (two equal legs: client → accept, result → client)",
        switches(),
        (START_RATE, INTERVAL, COLD_MEDIAN, HALF_RTT),
    ),
    Candidate(
        "server-cpu",
        "overhead + the server's requests sharing its container's one core (cpu=1)",
        switches(**CPU_1),
        (START_RATE, INTERVAL, COLD_MEDIAN, HALF_RTT, replace(SERVER_CPU, grid=())),
    ),
    Candidate(
        "fifo-start",
        "server-cpu + a start limit with a fitted burst, scaling decisions that see the whole backlog and size "
        "containers to what the start limit can start",
        switches(**CPU_1, **WHOLE_BACKLOG),
        (replace(START_RATE, grid=(200.0, 1000.0)), START_BURST, INTERVAL, COLD_MEDIAN, HALF_RTT, SERVER_CPU_FIT),
    ),
    Candidate(
        "gather",
        "fifo-start + a scale-from-zero decision taken a short window after the first input arrives, sized to all "
        "that arrived by then",
        switches(**CPU_1, **WHOLE_BACKLOG),
        (
            replace(START_RATE, grid=(200.0, 1000.0)),
            replace(START_BURST, grid=()),
            INTERVAL,
            COLD_MEDIAN,
            HALF_RTT,
            SERVER_CPU_FIT,
            GATHER,
        ),
    ),
    Candidate(
        "ramp-start",
        "fifo-start + a start rate that ramps up while a backlog persists, to a ceiling, and falls back as fast",
        switches(**CPU_1, **WHOLE_BACKLOG),
        (RAMP_BASE, replace(START_BURST, grid=()), START_RAMP, INTERVAL, COLD_MEDIAN, HALF_RTT, SERVER_CPU_FIT),
    ),
    Candidate(
        "step-cap",
        "overhead + a fitted cap on the containers added per decision, sized to what the start limit can start",
        switches(autoscaler__size_to="startable"),
        (START_RATE, INTERVAL, COLD_MEDIAN, HALF_RTT, STEP),
    ),
)


def with_range(cands: list[Candidate], text: str) -> list[Candidate]:
    """``cands`` with the free parameter of ``NAME=LOW..HIGH`` searched over [LOW, HIGH] instead (a workspace, or the
    Modal stand-in, whose values lie outside the ranges set for Modal's): its grid spread over the new range (at a
    sixth, half and five sixths of it, on its scale), its start the middle. ValueError naming what is wrong."""
    name, _, rng = text.partition("=")
    low_s, _, high_s = rng.partition("..")
    known = {f.name for c in cands for f in c.free}
    if name not in known:
        raise ValueError(f"--range {text}: no free parameter {name!r} (parameters: {', '.join(sorted(known))})")
    try:
        low, high = float(low_s), float(high_s)
    except ValueError:
        raise ValueError(f"--range {text}: expected NAME=LOW..HIGH with two numbers") from None
    out = []
    for c in cands:
        free = []
        for f in c.free:
            if f.name == name:
                if not (math.isfinite(low) and math.isfinite(high) and (low > 0 or not f.log) and low < high):
                    raise ValueError(f"--range {text}: needs finite LOW < HIGH{' and LOW > 0 (log scale)' * f.log}")
                f = replace(f, low=low, high=high)
                grid = tuple(float(f"{f.from_unit(u):.3g}") for u in (1 / 6, 1 / 2, 5 / 6))
                f = replace(f, start=grid[1], grid=grid if f.grid else ())
            free.append(f)
        out.append(replace(c, free=tuple(free)))
    return out


def by_name(names: list[str] | None) -> list[Candidate]:
    """The candidates named (all if None); ValueError naming an unknown one."""
    if not names:
        return list(CANDIDATES)
    table = {c.name: c for c in CANDIDATES}
    for n in names:
        if n not in table:
            raise ValueError(f"--candidate {n}: unknown (candidates: {', '.join(table)})")
    return [table[n] for n in dict.fromkeys(names)]
