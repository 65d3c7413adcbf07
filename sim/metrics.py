"""Declared metrics: what a run reports, each metric declared once by the component that measures it.

A ``Metric`` is a name, a unit, how the values of independent parts of a run combine into the run's (``combine``:
``sum``, ``max``, ``union`` of names, or ``derived``: computed from the run's combined state, such as a
percentile from merged histograms, not from the parts' values), a one-line description, and what kind of value it
is (``kind``): a number (or null when undefined), a text (a name, such as the binding limit), a list of names, or
counts by key (a dict). ``Metrics`` is an ordered declaration; a model's descriptor (sim/model.py) gives the one of a
scenario, and everything that reads metrics works from it: the check that a run reports exactly what it declares
(``check``), the folding of parts (``combine``), a results table's columns (``columns``, ``flatten``) and the
metrics reference page (docs/reference/metrics.md) and the report (``table``).

Columns of a results table: a number or a text is one column of its name; a list of names is one column, the
names joined by ``;``; counts by key are one column per declared key, ``<name>.<key>``, except that a
``*_by_kind`` metric drops the suffix (``errors_by_kind`` → ``errors.rate_limited``) and, when it declares
``other``, adds up any undeclared key under ``<prefix>.other``. ``wall_s`` (the machine's, never reproducible) is
the row's own column, not among the metric columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

COMBINE: dict[str, Callable[[Any, Any], Any] | None] = {
    "sum": lambda a, b: a + b,
    "max": max,
    "union": lambda a, b: sorted({*a, *b}),
    "derived": None,  # from the run's combined state, not from the parts' values
}
KINDS = ("number", "text", "names", "counts")
WALL = "wall_s"


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str  # "calls/s", "s", "share" (a fraction of 1), "name" (a text), "ratio" ...
    combine: str  # a key of COMBINE
    doc: str  # one line: what it counts, over what
    kind: str = "number"  # a key of KINDS
    keys: tuple[str, ...] = ()  # counts: the keys (every one reported), each a column
    other: bool = False  # counts: a run reports the keys it saw, declared or not; undeclared ones add up in ``.other``

    def __post_init__(self) -> None:
        if self.combine not in COMBINE:
            raise ValueError(f"metric {self.name}: combine {self.combine!r} is not one of {', '.join(COMBINE)}")
        if self.kind not in KINDS:
            raise ValueError(f"metric {self.name}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if (self.kind == "counts") != bool(self.keys or self.other):
            raise ValueError(f"metric {self.name}: keys (or other) go with kind counts, and only with it")

    @property
    def prefix(self) -> str:
        """The name its counts' columns start with."""
        return self.name.removesuffix("_by_kind")

    def columns(self) -> list[str]:
        if self.name == WALL:
            return []
        if self.kind != "counts":
            return [self.name]
        return [f"{self.prefix}.{k}" for k in self.keys] + ([f"{self.prefix}.other"] if self.other else [])

    def flatten(self, value: Any) -> dict[str, Any]:
        """The value as its results-table columns."""
        if self.name == WALL:
            return {}
        if self.kind == "names":
            return {self.name: ";".join(value)}
        if self.kind != "counts":
            return {self.name: value}
        out = {f"{self.prefix}.{k}": value.get(k, 0) for k in self.keys}
        if self.other:
            out[f"{self.prefix}.other"] = sum(n for k, n in value.items() if k not in self.keys)
        return out

    def combined(self, a: Any, b: Any) -> Any:
        """The value of two parts together (counts key by key)."""
        rule = COMBINE[self.combine]
        if rule is None:
            raise ValueError(f"metric {self.name}: derived, not combined from the parts' values")
        if self.kind == "counts":
            return {k: rule(a[k], b[k]) if k in a and k in b else a.get(k, b.get(k)) for k in {**a, **b}}
        return rule(a, b)

    def problem(self, value: Any) -> str | None:
        """What is wrong with a run's value of it, if anything."""
        if self.kind == "counts":
            if not isinstance(value, dict):
                return f"counts by key, got {type(value).__name__}"
            if not self.other and set(value) != set(self.keys):
                return f"keys {sorted(value)}, declared {sorted(self.keys)}"
        elif self.kind == "names":
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                return f"a list of names, got {value!r}"
        elif self.kind == "text":
            if not isinstance(value, str):
                return f"a text, got {type(value).__name__}"
        elif value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"a number, got {type(value).__name__}"
        return None


class Metrics:
    """An ordered declaration of metrics (their order is that of a run's output and of a results table's columns).
    ``a + b`` is a's metrics then b's; a name may be declared once."""

    def __init__(self, *metrics: Metric) -> None:
        self._by_name: dict[str, Metric] = {}
        for m in metrics:
            if m.name in self._by_name:
                raise ValueError(f"metric {m.name}: declared twice")
            self._by_name[m.name] = m

    def __add__(self, other: Metrics) -> Metrics:
        return Metrics(*self, *other)

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> Metric:
        return self._by_name[name]

    def names(self) -> list[str]:
        return list(self._by_name)

    def with_keys(self, name: str, keys: Iterable[str]) -> Metrics:
        """The same declaration with the counts metric ``name`` over ``keys`` (keys that vary with the scenario)."""
        return Metrics(*(replace(m, keys=tuple(keys)) if m.name == name else m for m in self))

    def check(self, values: dict, where: str = "a run") -> None:
        """Raise unless ``values`` (a run's metrics, ``records`` aside) has exactly the declared metrics, each of
        its kind: an undeclared counter is a bug of the model, found by its first run."""
        got = [k for k in values if k != "records"]
        undeclared = [k for k in got if k not in self._by_name]
        missing = [k for k in self._by_name if k not in values]
        if undeclared or missing:
            raise RuntimeError(f"{where}: metrics undeclared {undeclared}, declared but not reported {missing}")
        for k in got:
            problem = self._by_name[k].problem(values[k])
            if problem:
                raise RuntimeError(f"{where}: metric {k}: {problem}")

    def ordered(self, values: dict) -> dict:
        """``values`` in the declared order (``records`` last, if there)."""
        out = {k: values[k] for k in self._by_name if k in values}
        if "records" in values:
            out["records"] = values["records"]
        return out

    def combine(self, a: dict, b: dict) -> dict:
        """Two parts' values of the metrics both hold, combined by each one's rule."""
        return {k: self._by_name[k].combined(v, b[k]) for k, v in a.items()}

    def columns(self) -> list[str]:
        """The results-table columns of these metrics, in order."""
        return [c for m in self for c in m.columns()]

    def flatten(self, values: dict) -> dict[str, Any]:
        """A run's metrics as results-table columns."""
        return {c: v for m in self if m.name in values for c, v in m.flatten(values[m.name]).items()}

    def table(self) -> str:
        """A markdown table of the declaration: metric, unit, how parts combine, what it is."""
        rows = [f"| `{m.name}` | {m.unit} | {m.combine} | {m.doc} |" for m in self]
        return "\n".join(["| metric | unit | parts | what |", "|---|---|---|---|", *rows])


def percentile_metrics(prefix: str, doc: str, qs: tuple[int, ...] = (50, 90, 99), unit: str = "s") -> Metrics:
    """The metrics of sim/stats.py ``percentiles``: ``<prefix>_p<q>_s`` for each q (derived: no rule combines
    percentiles of parts)."""
    return Metrics(*(Metric(f"{prefix}_p{q}_s", unit, "derived", f"{q}th percentile of {doc}") for q in qs))


# what every model's run reports about itself (a model declares those it reports)
RUN = Metrics(
    Metric("sim_time_s", "s", "max", "simulated time at the run's end"),
    Metric("events", "events", "sum", "simulation events processed"),
    Metric(WALL, "s", "derived", "wall-clock seconds the run took (the machine's: not reproducible)"),
    Metric(
        "shortcuts_used",
        "names",
        "union",
        "the shortcuts the run took: those its shortcuts key allows whose shapes it matches (sim/shortcuts.py)",
        kind="names",
    ),
    Metric(
        "extrapolated",
        "names",
        "derived",
        "where the run leaves the envelope its parameters were calibrated on (what, its value, the bound), or a "
        "figure rests on no steady state (a load test's `cost_per_hour`); none: []",
        kind="names",
    ),
)
