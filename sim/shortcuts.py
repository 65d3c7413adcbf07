"""Shortcuts: faster paths that claim to give what the general path gives, each for a declared shape of scenario.

The simulator is fast because some scenarios can be computed without simulating every event the general path would
(a FIFO queue by recursion, an idle autoscaler left asleep, two legs of a round trip as one event, ...). Each such
path is a ``Shortcut``: a name, what it claims (``identical``: the same numbers to the bit; ``rounding``: the same
up to the order of floating-point sums, stated as a relative tolerance), and its *shape*, a positive statement of
the scenarios it is exact for. A shortcut runs only where the scenario matches its shape and the scenario's
``shortcuts`` key allows it; every run reports the ones it took (the metric ``shortcuts_used``).

A shape is opt in: it names every scenario key it was proven for, each with the values it holds for (``ANY``, or a
predicate on the value), and a key it does not name must be at its schema default. So a mechanism added later (a new
key: timeouts, failures, faults) turns every shortcut off wherever it is used, until someone proves the shortcut for it
and names the key in its shape; a shortcut is never silently wrong about a mechanism it does not know. The randomized
differential tests (tests/models/inputs/test_shortcuts.py) draw scenarios across each shape and compare every run with
the shortcut against the run without it.

``shortcuts`` (a key of every scenario): ``all`` (the default), ``none`` (the general path everywhere: what the
differential tests compare against), or names separated by commas (only those may run), or ``all,-NAME`` (all but
those after a minus).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sim.dists import Constant, Dist
from sim.scenario import ScenarioError, schema_keys


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()  # a key whose every valid value the shortcut was proven for
Rule = Callable[[Any], bool] | _Any

# keys that say what a scenario is, not what it simulates: free in every shape (a section's name: each of its keys;
# the envelope is what a run is compared with after it ran; billing prices what ran)
DESCRIPTIVE = frozenset({"model", "name", "description", "source", "shortcuts", "envelope", "billing"})


@dataclass(frozen=True)
class Shortcut:
    """A faster path and the scenarios it is exact for."""

    name: str
    shape: str  # the positive statement, in words (the docs, errors, ``--explain``)
    keys: Mapping[str, Rule]  # every key the shape holds for, with the values it holds for
    claim: Literal["identical", "rounding"] = "identical"
    rel_tol: float = 0.0  # claim "rounding": the relative difference allowed in a metric (sums in another order)
    when: Callable[[Any], bool] | None = None  # what no single key says (e.g. slots = containers × max_inputs)
    doc: str = ""  # what it does instead of the general path

    def matches(self, sc: Any) -> bool:
        """Whether scenario ``sc`` is of this shortcut's shape."""
        return self.mismatch(sc) is None

    def mismatch(self, sc: Any) -> str | None:
        """The first key (or the cross-key condition) that puts ``sc`` outside the shape; None if it matches."""
        for key, value, default in _values(sc):
            if key.partition(".")[0] in DESCRIPTIVE:
                continue
            rule = self.keys.get(key)
            if rule is None:
                if value != default:
                    return f"{key} (not in the shape: must be at its default {_text(default)})"
            elif rule is not ANY and not rule(value):
                return key
        if self.when is not None and not self.when(sc):
            return "a condition across keys"
        return None


@dataclass(frozen=True)
class Shortcuts:
    """A model's shortcuts, by name."""

    members: tuple[Shortcut, ...]
    schema: type = field(repr=False)

    def __post_init__(self) -> None:
        known = schema_keys(self.schema)
        for s in self.members:
            stale = set(s.keys) - known
            if stale:
                raise TypeError(f"shortcut {s.name}: its shape names keys the schema does not have: {sorted(stale)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.members)

    def __getitem__(self, name: str) -> Shortcut:
        return next(s for s in self.members if s.name == name)

    def allowed(self, sc: Any) -> frozenset[str]:
        """The shortcuts the scenario's ``shortcuts`` key lets run (ScenarioError naming the key if it names an
        unknown one)."""
        return parse(getattr(sc, "shortcuts", "all"), self.names)

    def used(self, sc: Any) -> frozenset[str]:
        """The shortcuts a run of ``sc`` takes: allowed by its ``shortcuts`` key and matching their shapes."""
        allowed = self.allowed(sc)
        return frozenset(s.name for s in self.members if s.name in allowed and s.matches(sc))


def parse(text: str, names: Iterable[str]) -> frozenset[str]:
    """The names a ``shortcuts`` value allows, out of a model's ``names``."""
    names = tuple(names)
    words = [w.strip() for w in text.split(",")]
    if not all(words):
        raise ScenarioError(f"shortcuts: expected all, none, or names separated by commas; got {text!r}")
    out: set[str] = set()
    for w in words:
        name = w.removeprefix("-")
        if name in ("all", "none") and w == name:
            out = set(names) if name == "all" else set()
        elif name in names:
            (out.discard if w.startswith("-") else out.add)(name)
        else:
            known = ", ".join(names) or "none"
            raise ScenarioError(f"shortcuts: unknown shortcut {name[:60]!r} (this model's: {known}; or all, none)")
    return frozenset(out)


# --- rules ------------------------------------------------------------------------------------------------------
def one_of(*values: Any) -> Callable[[Any], bool]:
    return lambda v: v in values


def constant(v: Any) -> bool:
    return isinstance(v, Constant)


def zero(v: Any) -> bool:
    return isinstance(v, Constant) and v.x == 0


def any_of(keys: str) -> dict[str, _Any]:
    """``{key: ANY}`` for each key in the space-separated ``keys``: written out one by one, never a section's keys
    found at run time (a key added later must not join a shape by itself)."""
    return dict.fromkeys(keys.split(), ANY)


# --- the engine's own shortcuts (sim/engine.py): they hold for any scenario of any model -----------------------------
CALENDAR, DELAY_LINES = "calendar", "delay_lines"  # their names (sim/engine.py ``Sim.taking`` asks by them)


class _Every(frozenset):
    """Every shortcut (the default of a clock built outside a model's run)."""

    def __contains__(self, name: object) -> bool:
        return True


EVERY_SHORTCUT = _Every()


def engine_shortcuts(schema: type) -> tuple[Shortcut, ...]:
    """The calendar and the delay lines keep the order of events of one heap whatever the model does, so their
    shape is every scenario of ``schema`` (tests/sim/test_engine.py proves the order,
    tests/models/inputs/test_shortcuts.py the results)."""
    every = dict.fromkeys(schema_keys(schema), ANY)
    return (
        Shortcut(
            CALENDAR,
            "any scenario: the order of events is that of one heap, ties included",
            every,
            doc="entries due past the horizon wait in buckets, not in the heap (sim/engine.py)",
        ),
        Shortcut(
            DELAY_LINES,
            "any scenario: a constant delay's items keep the (time, id) keys of heap entries",
            every,
            doc="a constant delay's callbacks wait in a FIFO beside the heap (sim/engine.py)",
        ),
    )


def _values(sc: Any, prefix: str = "") -> Iterable[tuple[str, Any, Any]]:
    """(dotted key, value, schema default) of every leaf of a scenario."""
    hints = typing.get_type_hints(type(sc))
    for f in dataclasses.fields(sc):
        value = getattr(sc, f.name)
        if dataclasses.is_dataclass(hints[f.name]) and hints[f.name] is not Dist:
            yield from _values(value, f"{prefix}{f.name}.")
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        yield prefix + f.name, value, default


def _text(v: Any) -> str:
    return str(v) if isinstance(v, Dist) else repr(v)
