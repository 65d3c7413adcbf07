"""What a simulated system declares about itself: one ``Model`` descriptor per model, looked up by a scenario's
``model`` key (models/registry.py).

Everything outside a model (the commands, sweeps, reports, the notebook API) works from its descriptor and never
names a model: the schema a scenario is validated into, the run function, the metrics a run reports (declared:
sim/metrics.py), the headline ones, a run's size, and the report's figures and summary table. Figures are data
(``Figure``, ``TimeSeries``): experiments/plots.py draws each kind, so models import no plotting code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from sim.guard import UNGUARDED, Guard
from sim.metrics import Metrics

if TYPE_CHECKING:
    import pandas as pd


class InvariantViolated(RuntimeError):
    """A run broke a rule its numbers must keep (each model's invariants: models/inputs/checks/invariants.py): a bug in
    the model, not bad input (exit 1, one line)."""


class RunFunction(Protocol):
    def __call__(
        self,
        sc: Any,
        seed: int = 0,
        series: dict | None = None,
        records: bool = False,
        jobs: int = 1,
        guard: Guard = UNGUARDED,
    ) -> dict:
        """Simulate one scenario; return its metrics (with ``records`` also ``metrics["records"]``: a DataFrame of
        per-call, per-sandbox or per-start records). ``jobs``: processes for the run's independent parts, if it has
        any (the numbers do not depend on it); ``guard``: what watches its clocks (sim/guard.py: its budget,
        progress)."""
        ...


@dataclass(frozen=True)
class Figure:
    """A figure of a sweep's report, against the sweep's scale, a line (or panel) per series.

    Kinds (experiments/plots.py): ``lines`` (one panel per metric, 95% CI bands; ``reference`` is a column drawn
    dashed, as the ideal), ``errors`` (stacked failed calls by kind), ``utilization`` (every ``utilization.*``
    column), ``binding`` (what binds at each point)."""

    name: str
    kind: str
    title: str = ""
    metrics: tuple[tuple[str, str], ...] = ()  # (metric, panel label)
    reference: str = ""
    ylabel: str = ""
    log: bool = False


@dataclass(frozen=True)
class TimeSeries:
    """The report's figure of one point's time series (the run's ``series``)."""

    title: str
    ylabel: str
    lines: tuple[tuple[str, str], ...]  # (series key, label) on the left axis
    right: tuple[tuple[str, str], ...] = ()  # on a right axis
    right_label: str = ""
    scatter: bool = False
    log: bool = False


def _reads_all(sc: Any) -> Callable[[str], bool]:
    return lambda setting: False


def _none_assumed(sc: Any) -> list[str]:
    return []


def _every_way(sc: Any, ways: Mapping[str, dict]) -> list[str]:
    return list(ways)


@dataclass(frozen=True)
class Plausibles:
    """What ``--uncertainty`` (experiments/uncertainty.py) asks of a model: its plausible models are the ones a fit
    wrote (``shipped``: the plausible-models file beside the shipped fit in calibration/params/, "" for none; or the
    one beside a ``--params`` file) and the ``plausible`` values its schema's keys declare (``param``,
    sim/scenario.py: the sources' ranges and the rival mechanisms); ``unread``: for a scenario, which settings
    (``key=value``) it does not read, left out of every model; ``assumed``: the assumptions a scenario reads that are
    carried as ranges beside the declared ones (one setting a model); ``nearest``: of the reference ways whose figures
    a plausible-models file records, the ones nearest a scenario."""

    shipped: str = ""
    unread: Callable[[Any], Callable[[str], bool]] = _reads_all
    assumed: Callable[[Any], list[str]] = _none_assumed
    nearest: Callable[[Any, Mapping[str, dict]], list[str]] = _every_way


Parts = dict[str, tuple[float, str]]  # what makes up an amount: {what: (amount, how to make it smaller)}


@dataclass(frozen=True)
class Estimate:
    """What a run will cost, estimated from its scenario before it starts (the run budgets: models/runs.py), each
    by what makes it up, with how to make it smaller.

    ``size``: the run's size in its model's unit, e.g. ``{"calls": (9.5e4, "shorten duration_s"), "app copies":
    (2e7, "lower function.copies")}`` (a part that is not a count of the unit counts what it costs in it: an app copy
    to build costs about as much as 200 calls); ``events``: the events it may process, the budget it runs under
    (none: the model's ``events_per_unit`` per unit of size); ``memory``: the bytes it may hold at once;
    ``per_second``: the events it spends each simulated second whatever its load (a control loop's), refused when
    one second's are more than its whole budget; ``allowance``: the events it may process beyond those it expects in
    the worst case its scenario allows (every call in flight retrying all run long), not refused before it starts but
    within what it may process as it runs (models/runs.py ``check_size``)."""

    size: Parts
    events: Parts = field(default_factory=dict)
    memory: Parts = field(default_factory=dict)
    per_second: Parts = field(default_factory=dict)
    allowance: Parts = field(default_factory=dict)

    @staticmethod
    def total(parts: Parts) -> float:
        return sum(amount for amount, _ in parts.values())


@dataclass(frozen=True)
class Model:
    name: str  # the scenario's ``model`` value
    schema: type  # the scenario's frozen dataclass
    run: RunFunction
    headline: tuple[str, ...]  # what `experiments.run` prints and the report tabulates
    label: Callable[[Any], str]  # one phrase saying which variant a scenario is ("approach spawn")
    metrics: Callable[[Any], Metrics]  # every metric a run of the scenario reports, declared (a plane adds its own)
    size: Callable[[Any], float]  # calls, sandboxes or starts a run simulates (sweeps start the big ones first)
    unit: str  # what ``size`` counts
    budget: float  # the largest size a run may have unless the user raises it (SCALESIM_BUDGET, models/runs.py)
    bottleneck: str  # the metric naming what limits a run
    figures: tuple[Figure, ...]
    timeseries: TimeSeries
    # (heading, intro, rows): the report's first table, one row per series, from the summary (means over seeds)
    findings: Callable[[pd.DataFrame, str], tuple[str, str, list[dict]]]
    # a run's cost estimated before it starts (None: its ``size`` alone); see ``Estimate``
    estimate: Callable[[Any], Estimate] | None = None
    events_per_unit: float = 8.0  # the events a run may process per unit of size, unless its estimate says
    # what a run over its budget spends its events on, by callback (sim/guard.py ``Budget``): (what, how to have less)
    grows: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # why a run of the scenario could measure nothing (None: it can), naming the key to change: the commands refuse it
    # before it starts (models/runs.py ``run_scenario``, exit 2); the model's run function still simulates it
    unmeasurable: Callable[[Any], str | None] | None = None
    plausible: Plausibles = Plausibles()  # its plausible models, for --uncertainty (see ``Plausibles``)
    # what a run's answer rests on that its numbers do not show (an assumed input that set its pace), one line each,
    # from the scenario and the run's metrics: printed under the answer (experiments.run, the API)
    caveats: Callable[[Any, dict], list[str]] = lambda sc, metrics: []


def records_frame(columns: dict, index: str) -> pd.DataFrame:
    """A run's records as a DataFrame, one row per ``index`` (input, sandbox, start)."""
    import pandas as pd  # here, not at the top: it costs ~60 MiB and ~0.4 s to import, more than most runs

    return pd.DataFrame(columns).rename_axis(index)
