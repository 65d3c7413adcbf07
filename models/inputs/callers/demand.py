"""Demand for capacity planning: open-loop arrival rates that change over time, and replay of invocation traces.

``arrivals.shape`` gives the Poisson arrival rate over time as ``arrivals.rate`` × a shape (a string, like a
distribution's):

- ``steady``: constant;
- ``steps(STEP_S, F1, F2, ...)``: piecewise constant, F1 for the first STEP_S seconds, then F2, ..., the last held;
- ``sine(PERIOD_S, AMPLITUDE)``: 1 + AMPLITUDE · sin(2πt / PERIOD_S);
- ``daily(DAY_AMPLITUDE, WEEK_AMPLITUDE)``: docs/sources.md §7's daily sine (±30% there) times a weekly sine (±20%),
  t = 0 at midnight on a Monday (without §7's random drift, spikes and noise: the Poisson arrivals are the noise);
- ``bursts(EVERY_S, LENGTH_S, FACTOR)``: FACTOR for LENGTH_S seconds at the start of every EVERY_S, else 1;
- ``spike(AT_S, LENGTH_S, FACTOR)``: FACTOR for LENGTH_S seconds from AT_S, else 1: one traffic spike, the trigger
  whose aftermath models/inputs/checks/recovery.py measures (``Shape.trigger``);
- ``weekdays(FROM_H, HOURS, FACTOR)``: FACTOR for HOURS hours from FROM_H:00 each weekday, else 1 (t = 0 at midnight
  on a Monday): a business-hours peak, "2,000 calls/s for an hour each weekday afternoon" at a base of 400 is
  ``arrivals.rate = 400`` × ``weekdays(14, 1, 5)``. The rise is a step, the worst case of a real ramp.

``arrivals.start_s`` starts the run that far into the shape (a week's peak day, say: ``Shape.peak_window`` finds the
window of a given length with the highest mean rate, which the what-ifs size for; ``Shape.onset`` the steepest rise,
where a plan checks that the pool grows in time; ``Shape.rates`` the factor over one period, what money is integrated
over).

Arrivals at a varying rate are drawn by thinning (Lewis and Shedler, 1979): candidates at the shape's peak rate, each
kept with probability rate(t) / peak. ``load = "trace"`` replays a per-minute invocation-count trace in the Azure
Functions format (docs/sources.md §5: columns HashOwner, HashApp, HashFunction, Trigger, then one column per minute "1",
"2", ...): each minute's invocations are spread at random offsets within the minute (``trace.spread = "random"``) or
all at its start (``"start"``, which inflates cold starts several-fold, §5). ``generate_azure`` writes a trace of that
format whose shapes follow §5 (experiments/demand/azure-sample.csv is its output).
"""

from __future__ import annotations

import csv
import functools
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from sim import files
from sim.scenario import param

DAY_S, WEEK_S = 86_400.0, 7 * 86_400.0
MEAN_GRID = 10_000  # points of the numerical mean of a shape over a run


@dataclass(frozen=True)
class Shape:
    """A rate profile relative to ``arrivals.rate``."""

    kind: str
    args: tuple[float, ...] = ()
    offset: float = 0.0  # the shape's time at the run's t = 0 (arrivals.start_s)

    def factor(self, t: float) -> float:
        a = self.args
        t += self.offset
        if self.kind == "steady":
            return 1.0
        if self.kind == "steps":
            i = min(int(t // a[0]), len(a) - 2)
            return a[1 + i]
        if self.kind == "sine":
            return 1.0 + a[1] * math.sin(2 * math.pi * t / a[0])
        if self.kind == "daily":
            # the daily peak at 14:00, the weekly one mid-week (a shape, not a measurement: docs/sources.md §7)
            day = 1.0 + a[0] * math.sin(2 * math.pi * (t - 8 * 3600) / DAY_S)
            return day * (1.0 + a[1] * math.sin(2 * math.pi * (t - 1.25 * DAY_S) / WEEK_S))
        if self.kind == "spike":
            return a[2] if a[0] <= t < a[0] + a[1] else 1.0
        if self.kind == "weekdays":
            day, into = divmod(t % WEEK_S, DAY_S)
            return a[2] if day < 5 and a[0] * 3600 <= into < (a[0] + a[1]) * 3600 else 1.0
        # bursts
        return a[2] if t % a[0] < a[1] else 1.0

    def peak(self) -> float:
        a = self.args
        if self.kind == "steps":
            return max(a[1:])
        if self.kind == "sine":
            return 1.0 + a[1]
        if self.kind == "daily":
            return (1.0 + a[0]) * (1.0 + a[1])
        if self.kind in ("bursts", "spike", "weekdays"):
            return max(1.0, a[2])
        return 1.0

    def mean(self, duration: float, grid: int = MEAN_GRID, start: float = 0.0) -> float:
        """The shape's mean over [start, duration) of the run: exact for steady, steps, bursts and sine
        (``_integral``; a grid would alias a burst narrower than its spacing), numerically on a fine grid for
        daily."""
        if self.kind == "steady":
            return 1.0
        span = duration - start
        if self.kind != "daily":
            return (self._integral(self.offset + duration) - self._integral(self.offset + start)) / span
        t = start + (np.arange(grid) + 0.5) * span / grid
        return float(np.mean([self.factor(x) for x in t]))

    def _integral(self, x: float) -> float:
        """The factor's integral over the shape's own time [0, x) (steps, bursts, sine)."""
        a = self.args
        if self.kind == "spike":
            return x + (a[2] - 1.0) * min(max(x - a[0], 0.0), a[1])
        if self.kind == "weekdays":
            weeks, into = divmod(x, WEEK_S)
            start, length = a[0] * 3600, a[1] * 3600
            peaks = sum(min(max(into - d * DAY_S - start, 0.0), length) for d in range(5))
            return x + (a[2] - 1.0) * (weeks * 5 * length + peaks)
        if self.kind == "steps":
            full = min(int(x // a[0]), len(a) - 2)  # steps passed whole; the last holds after
            return a[0] * sum(a[1 : 1 + full]) + (x - full * a[0]) * a[1 + full]
        if self.kind == "bursts":
            periods, into = divmod(x, a[0])
            return x + (a[2] - 1.0) * (periods * a[1] + min(into, a[1]))
        return x - a[1] * a[0] / (2 * math.pi) * (math.cos(2 * math.pi * x / a[0]) - 1.0)  # sine

    def period(self) -> float:
        """The time after which the shape repeats (steps: the steps' length, the last held after)."""
        a = self.args
        return {
            "steady": 1.0,
            "steps": a[0] * max(1, len(a) - 1),
            "sine": a[0] if self.kind == "sine" else 1.0,
            "daily": WEEK_S if self.kind == "daily" and a[1] else DAY_S,
            "bursts": a[0] if self.kind == "bursts" else 1.0,
            "spike": a[0] + a[1] if self.kind == "spike" else 1.0,
            "weekdays": WEEK_S,
        }[self.kind]

    def trigger(self) -> tuple[float, float] | None:
        """A spike's start and end in the run's time (None for every other shape)."""
        if self.kind != "spike":
            return None
        return self.args[0] - self.offset, self.args[0] + self.args[1] - self.offset

    def peak_window(self, length: float, candidates: int = 168) -> float:
        """Where in the shape the window of ``length`` seconds with the highest mean rate starts: the best of
        ``candidates`` starts spread over one period (hourly over a week), each window's mean on a grid."""
        if self.kind == "steady":
            return 0.0
        period = self.period()
        starts = np.arange(candidates) * period / candidates
        means = [Shape(self.kind, self.args, float(s)).mean(length, grid=1000) for s in starts]
        return float(starts[int(np.argmax(means))])

    def rates(self, step: float = 60.0) -> np.ndarray:
        """The factor over one period, every ``step`` seconds (each sample an equal share of the time): what a month's
        money is integrated over."""
        n = max(1, min(100_000, round(self.period() / step)))
        return np.array([self.factor(self.period() * (i + 0.5) / n - self.offset) for i in range(n)])

    def onset(self, step: float = 60.0) -> tuple[float, float, int] | None:
        """The steepest rise of the rate within one period: (the shape time it happens, to 0.01 s; the factor before
        it; how many rises at least half as steep a period holds, each a stretch of such steps), or None when nothing
        rises (steady). The rise over each ``step`` (at most a thousandth of the period) is taken on a grid, then the
        step's jump (or steepest point) found by bisection."""
        if self.kind == "steady":
            return None
        period = self.period()
        n = max(1000, min(100_000, round(period / step)))
        g = period / n
        f = np.array([self.factor(i * g - self.offset) for i in range(n + 1)])
        rise = f[1:] - f[:-1]
        i = int(np.argmax(rise))
        if not rise[i] > 0:
            return None
        lo, hi, mid_f = i * g, (i + 1) * g, (f[i] + f[i + 1]) / 2.0
        while hi - lo > 0.01:  # the point where the factor passes the rise's midpoint
            mid = (lo + hi) / 2.0
            lo, hi = (mid, hi) if self.factor(mid - self.offset) < mid_f else (lo, mid)
        steep = rise >= rise[i] / 2.0
        rises = int(np.sum(steep[1:] & ~steep[:-1])) + int(steep[0] and not steep[-1])  # a stretch across the wrap once
        return hi, float(f[i]), max(1, rises)

    def __str__(self) -> str:
        return self.kind if not self.args else f"{self.kind}({', '.join(f'{x:g}' for x in self.args)})"


ARITY = {
    "steady": (0, 0),
    "steps": (2, 10_000),
    "sine": (2, 2),
    "daily": (2, 2),
    "bursts": (3, 3),
    "spike": (3, 3),
    "weekdays": (3, 3),
}


def parse_shape(text: str) -> Shape:
    """A shape string (module docstring); ValueError saying what is wrong."""
    m = re.fullmatch(r"\s*([a-z]+)\s*(?:\(([^()]*)\))?\s*", text)
    if not m or m.group(1) not in ARITY:
        raise ValueError(
            f"unknown shape {text!r} (shapes: steady, steps(...), sine(...), daily(...), bursts(...), spike(...), "
            "weekdays(...))"
        )
    kind, inner = m.group(1), m.group(2)
    try:
        args = tuple(float(x) for x in inner.split(",")) if inner and inner.strip() else ()
    except ValueError:
        raise ValueError(f"{text!r}: arguments must be numbers") from None
    lo, hi = ARITY[kind]
    if not lo <= len(args) <= hi:
        raise ValueError(f"{text!r}: {kind} takes {lo if lo == hi else f'{lo} or more'} arguments")
    if not all(math.isfinite(x) and abs(x) <= 1e12 for x in args):
        raise ValueError(f"{text!r}: arguments must be finite, within ±1e12")
    if kind == "steps" and (args[0] <= 0 or min(args[1:]) < 0 or max(args[1:]) <= 0):
        raise ValueError(f"{text!r}: the step must be > 0, the factors >= 0 and one > 0")
    if kind == "sine" and (args[0] <= 0 or not 0 <= args[1] <= 1):
        raise ValueError(f"{text!r}: the period must be > 0 and the amplitude within [0, 1]")
    if kind == "daily" and not (0 <= args[0] <= 1 and 0 <= args[1] <= 1):
        raise ValueError(f"{text!r}: the amplitudes must be within [0, 1]")
    if kind == "bursts" and not (args[0] > 0 and 0 < args[1] <= args[0] and args[2] >= 0):
        raise ValueError(f"{text!r}: needs EVERY_S > 0, 0 < LENGTH_S <= EVERY_S, FACTOR >= 0")
    if kind == "spike" and not (args[0] >= 0 and args[1] > 0 and args[2] >= 0):
        raise ValueError(f"{text!r}: needs AT_S >= 0, LENGTH_S > 0, FACTOR >= 0")
    if kind == "weekdays" and not (0 <= args[0] < 24 and 0 < args[1] <= 24 - args[0] and args[2] >= 0):
        raise ValueError(f"{text!r}: needs 0 <= FROM_H < 24, 0 < HOURS <= 24 - FROM_H (within the day), FACTOR >= 0")
    return Shape(kind, args)


# --- the arrivals section: a Poisson rate × a shape ---------------------------------------------------------------
@dataclass(frozen=True)
class ArrivalParams:
    rate: float = param(1.0, gt=0, doc="Poisson arrivals per second (× the shape)")
    shape: str = param(
        "steady",
        doc="the rate over time: steady, steps, sine, daily, bursts, spike or weekdays "
        "(models/inputs/callers/demand.py)",
    )
    start_s: float = param(
        0.0,
        ge=0,
        le=1e9,
        doc="how far into the shape the run starts (daily, weekdays: 0 = Monday 00:00; 3 × 86400 = Thursday)",
    )

    def __post_init__(self) -> None:
        try:
            parse_shape(self.shape)
        except ValueError as e:
            raise ValueError(f"shape: {e}") from None

    @property
    def profile(self) -> Shape:
        shape = parse_shape(self.shape)
        return Shape(shape.kind, shape.args, self.start_s)

    def mean_rate(self, duration: float, start: float = 0.0) -> float:
        """Arrivals per second over [start, duration) (default: the whole run)."""
        return self.rate * self.profile.mean(duration, start=start)


# --- traces of per-minute invocation counts (Azure Functions format) ----------------------------------------------
@dataclass(frozen=True)
class TraceParams:
    path: str = param("", doc="an Azure Functions per-minute invocation-count CSV (docs/sources.md §5)")
    function: str = param("", doc="the HashFunction row to replay; '' = the sum of every row")
    spread: Literal["random", "start"] = param(
        "random", source="docs/sources.md §5: invocations at the minute's start inflate cold starts several-fold"
    )
    scale: float = param(1.0, gt=0, le=1e6, doc="multiplies every minute's count")
    start_minute: int = param(0, ge=0, doc="the trace minute replayed at t = 0")

    def counts(self) -> np.ndarray:
        """Invocations per minute from ``start_minute`` on, × scale (rounded to whole calls)."""
        if not self.path:
            raise ValueError('path: load = "trace" needs trace.path (an Azure Functions per-minute CSV)')
        counts = read_azure(self.path, self.function)[self.start_minute :]
        return np.rint(counts * self.scale).astype(np.int64)

    def mean_rate(self, duration: float, start: float = 0.0) -> float:
        """Calls per second over [start, duration) (default: the whole run), each minute's calls spread evenly
        over it."""
        c = self.counts()

        def upto(t: float) -> float:  # the calls of [0, t)
            minutes = t / 60.0
            whole = int(minutes)
            return float(c[:whole].sum() + (c[whole] * (minutes - whole) if whole < len(c) else 0))

        return (upto(duration) - (upto(start) if start > 0 else 0.0)) / (duration - start)


MAX_MINUTE_COUNT = 1e12  # calls in one minute of an invocation trace (16.7 billion a second)


@functools.lru_cache(maxsize=8)
def read_azure(path: str, function: str = "") -> np.ndarray:
    """The per-minute counts of an Azure Functions invocation CSV: one row (HashFunction ``function``) or the sum of
    all rows. ValueError naming the file and what is wrong."""
    text = files.read_text(path, "an Azure Functions per-minute CSV", files.CSV_CAP)  # regular, within its cap
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows or rows[0][:4] != ["HashOwner", "HashApp", "HashFunction", "Trigger"]:
        raise ValueError(f"{path}: not the Azure Functions format (HashOwner,HashApp,HashFunction,Trigger,1,2,...)")
    minutes = rows[0][4:]
    if not minutes or minutes != [str(i) for i in range(1, len(minutes) + 1)]:
        raise ValueError(f"{path}: minute columns must be 1, 2, ... after Trigger")
    total = np.zeros(len(minutes))
    found = False
    for n, row in enumerate(rows[1:], 2):
        if function and row[2:3] != [function]:
            continue
        try:
            values = np.array([float(x) for x in row[4:]])
        except ValueError:
            raise ValueError(f"{path}: line {n}: counts must be numbers") from None
        if len(values) != len(minutes) or not np.isfinite(values).all() or (values < 0).any():
            raise ValueError(f"{path}: line {n}: {len(minutes)} non-negative counts expected")
        if (values > MAX_MINUTE_COUNT).any():  # (past int64 once summed and drawn: no run could hold them anyway)
            raise ValueError(f"{path}: line {n}: a count above {MAX_MINUTE_COUNT:g} calls in a minute")
        total += values
        found = True
    if not found:
        raise ValueError(f"{path}: no row{f' for HashFunction {function}' if function else ''}")
    return total


def generate_azure(path: Path, seed: int = 0, functions: int = 20, minutes: int = 1440) -> Path:
    """Write an invocation trace in the Azure Functions format with docs/sources.md §5's published shapes: function
    rates spread over orders of magnitude (log-uniform mean rates from one an hour to 1,000 a minute), a daily sine on
    the busy ones (§7: ±30%), bursty sparse ones (inter-arrival CV > 1: idle minutes, then clusters), Poisson counts."""
    rng = np.random.default_rng(seed)
    t = np.arange(minutes) * 60.0
    day = 1.0 + 0.3 * np.sin(2 * np.pi * (t - 8 * 3600) / DAY_S)
    lines = [["HashOwner", "HashApp", "HashFunction", "Trigger", *map(str, range(1, minutes + 1))]]
    for i in range(functions):
        per_minute = 10 ** rng.uniform(np.log10(1 / 60), 3)  # one an hour .. 1,000 a minute
        if per_minute < 1:  # sparse: clusters of calls in a few minutes
            active = rng.random(minutes) < per_minute / 3
            counts = np.where(active, rng.poisson(3, minutes), 0)
        else:
            counts = rng.poisson(per_minute * day)
        trigger = "http" if i % 3 else "timer"
        lines.append([f"owner{i % 5}", f"app{i % 7}", f"func{i:03d}", trigger, *map(str, counts)])
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(lines)
    return path
