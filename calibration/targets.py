"""What a fit aims at: targets (a measured figure and its band) and predictions (reported, never fitted).

The reference load test's measured table is data, calibration/reference/loadtest.toml (docs/sources.md §1, "Measured": 8
clients × 1,000 calls in flight, work uniform(1, 10) s, 60 s). Every released cell is a ``Target``; the cells marked
"kept aside" are ``Prediction``s: the model's value is reported next to them, never fitted (their measured values are
not released to the project, so there is nothing to fit them to). A recorded trace's figures are targets too, with a
band from the bootstrap over the trace's calls instead (calibration/sources.py).

Tolerances are the acceptance bands, by kind of figure: calls/s and containers 10%, first 8,000 back 20%,
added-latency percentiles 30% (an absolute 0.1 s for measured values under 0.5 s: a predicted 0.00 s is not a 0.20 s
median), errors exactly 0 (a penalty of one band per 1% of the calls issued that fail).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from calibration.ways import WAYS
from sim import files

# The model's metric names (models/inputs/summary.py ``summarize``).
CALLS = "calls_per_s"
FIRST = "first_n_back_s"
P50, P90, P99 = "added_latency_p50_s", "added_latency_p90_s", "added_latency_p99_s"
CONTAINERS = "containers_peak"
ERRORS = "errors"
LATENCIES = (P50, P90, P99)

# Acceptance bands, by figure: (relative, absolute floor, measured values below which the
# floor applies instead of the relative band).
RELATIVE = {CALLS: 0.10, CONTAINERS: 0.10, FIRST: 0.20, P50: 0.30, P90: 0.30, P99: 0.30}
ABSOLUTE_FLOOR_S, FLOOR_BELOW_S = 0.1, 0.5
ERROR_SHARE = 0.01  # errors: measured 0; one band = 1% of the calls issued failing

# the reference test's ways with measured figures (calibration/ways: ``reference``), in the registry's order
APPROACHES = tuple(name for name, way in WAYS.items() if way.reference)


@dataclass(frozen=True)
class Target:
    """One released cell of the measured table: the figure the model must reproduce within its band.

    ``metric`` is the model metric compared with the cell (default: ``figure`` itself). The harness's counting rule
    for calls/s is not published (docs/sources.md §1); every approach uses the model's ``calls_per_s``, one rule for all
    (docs/explanation/input-plane.md, "Reading calls/s"): calls issued in the 60 s window that come back successfully,
    whenever they come back. Calls back inside the window (``calls_back_per_s``) cannot reach batching's measured 800:
    its ~10 s rounds complete inside 60 s only five times.
    """

    approach: str  # the experiment: an approach of the reference test, or a trace's name
    figure: str
    measured: float
    metric: str = ""
    band_s: float = 0.0  # its own band (a trace figure: from the bootstrap), in the figure's unit; 0: the table's

    @property
    def key(self) -> str:
        """The model metric this target reads."""
        return self.metric or self.figure

    def tolerance(self, calls_issued: float = 0.0) -> float:
        """One band, in the figure's own unit (errors: 1% of the model's calls issued, at least one call)."""
        if self.band_s:
            return self.band_s
        if self.figure == ERRORS:
            return max(1.0, ERROR_SHARE * calls_issued)
        if self.figure in LATENCIES and self.measured < FLOOR_BELOW_S:
            return ABSOLUTE_FLOOR_S
        return RELATIVE[self.figure] * self.measured

    def band(self) -> str:
        """The band as text: '10%', '0.1 s' or 'exact'."""
        if self.band_s:
            return f"±{self.band_s:.3g}"
        if self.figure == ERRORS:
            return "exact"
        if self.figure in LATENCIES and self.measured < FLOOR_BELOW_S:
            return f"{ABSOLUTE_FLOOR_S:g} s"
        return f"{RELATIVE[self.figure]:.0%}"

    def within(self, model: float | None) -> bool:
        if model is None:
            return False
        if self.figure == ERRORS and not self.band_s:
            return model == self.measured
        return abs(model - self.measured) <= self.tolerance() * (1 + 1e-9)


@dataclass(frozen=True)
class Prediction:
    """A cell marked "kept aside": the model's value is reported, never fitted."""

    approach: str
    figure: str
    metric: str = ""

    @property
    def key(self) -> str:
        return self.metric or self.figure


REFERENCE = Path(__file__).resolve().parent / "reference" / "loadtest.toml"


def reference_table(path: Path = REFERENCE) -> tuple[tuple[Target, ...], tuple[Prediction, ...]]:
    """The targets and predictions of a reference table: per approach, its released figures and ``kept_aside``."""
    table = files.read_toml(path, "a reference table")
    tgts: list[Target] = []
    preds: list[Prediction] = []
    for approach in APPROACHES:
        row = dict(table.get(approach, {}))
        preds += [Prediction(approach, k) for k in row.pop("kept_aside", [])]
        for figure, value in row.items():
            # errors: every failed call of the run (``errors_total``), not only those back inside the window
            tgts.append(Target(approach, figure, float(value), metric="errors_total" if figure == ERRORS else ""))
    return tuple(tgts), tuple(preds)


TARGETS, PREDICTIONS = reference_table()


def targets(leave_out: str | None = None, path: Path = REFERENCE) -> tuple[Target, ...]:
    """The targets of a reference table (default: the reference load test's) of every approach but ``leave_out``."""
    if leave_out is not None and leave_out not in APPROACHES:
        raise ValueError(f"--leave-out {leave_out}: not an approach of the reference test ({', '.join(APPROACHES)})")
    tgts = TARGETS if path == REFERENCE else reference_table(path)[0]
    return tuple(t for t in tgts if t.approach != leave_out)


def predictions(leave_out: str | None = None, path: Path = REFERENCE) -> tuple[Prediction, ...]:
    """What is reported but not fitted: the kept-aside cells, plus every figure of the left-out approach."""
    tgts, preds = (TARGETS, PREDICTIONS) if path == REFERENCE else reference_table(path)
    left = tuple(Prediction(t.approach, t.figure, t.metric) for t in tgts if t.approach == leave_out)
    return (*left, *preds)


def measured(approach: str, figure: str) -> float | None:
    """The released measurement of a cell (None: kept aside)."""
    return next((t.measured for t in TARGETS if t.approach == approach and t.figure == figure), None)
