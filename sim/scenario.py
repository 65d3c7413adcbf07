"""Scenarios: TOML files with dotted keys, ``--set`` overrides, validated into frozen dataclasses.

A scenario's schema is a tree of frozen dataclasses (one per mechanism, defined next to the model that uses it).
Fields carry their range and source in ``param(...)`` metadata. ``build`` walks the tree, so that an unknown key,
a wrongly typed value or an out-of-range value raises ``ScenarioError`` naming the dotted key: nothing else in the
project reads raw dicts, and a mistyped key can never silently fall back to a default.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from sim import files
from sim.dists import Dist, DistError, parse_dist
from sim.errors import ScenarioError


def param(
    default: Any,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    source: str = "",
    doc: str = "",
    aliases: dict[str, str] | None = None,
    plausible: tuple = (),
) -> Any:
    """A schema field: default, bounds, and where its value comes from (a docs/sources.md section or 'assumption'). A
    choice field's ``aliases``: deprecated spellings of its values, each replaced by its value when the scenario is
    built. ``plausible``: the other values the data or the sources leave open (a number's least and greatest, a
    choice's rival mechanisms), each one model of ``--uncertainty``'s (experiments/uncertainty.py); ``source`` says
    where they come from."""
    meta = {"ge": ge, "gt": gt, "le": le, "source": source, "doc": doc, "aliases": aliases or {}}
    meta["plausible"] = plausible
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: default, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def section(cls: type) -> Any:
    """A nested schema section with its own defaults."""
    return dataclasses.field(default_factory=cls)


@dataclass(frozen=True)
class Described:
    """What every scenario says about itself, whatever its model (a schema's base)."""

    name: str = param("", doc="the preset's name")
    description: str = param("")
    source: str = param("", doc="where the scenario's figures come from")
    shortcuts: str = param(
        "all",
        doc="the shortcuts a run may take where the scenario matches their shapes (sim/shortcuts.py): all, none, "
        "names separated by commas, or all,-NAME",
    )


def with_sections(base: type, sections: dict[str, type], name: str) -> type:
    """The frozen schema ``base`` plus one section per (key, parameter class): how a family's members (control
    planes, load-test approaches) bring their own parameters without the scenario naming them."""
    fields = [(key, cls, section(cls)) for key, cls in sections.items()]
    schema = dataclasses.make_dataclass(name, fields, bases=(base,), frozen=True)
    schema.__module__ = base.__module__
    schema.__doc__ = base.__doc__
    return schema


LEADING_NUMBER = re.compile(r"^\s*(?:[a-z_]+\(\s*)?([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")


def leading_number(text: str) -> float | None:
    """A ``--set`` value's number: the value itself, or a distribution's first parameter (a lognormal's median, a
    constant's value); None for a switch or a word."""
    m = LEADING_NUMBER.match(text)
    return float(m.group(1)) if m else None


def parse_value(text: str, where: str = "--set") -> Any:
    """A ``--set`` value: a TOML literal if it parses as one (1, 2.5, true, [1, 2]), else the raw string; nested
    deeper than a document may be (sim/files.py), a ScenarioError naming ``where``."""
    try:
        return files.loads_toml(f"v = {text}", where)["v"]
    except tomllib.TOMLDecodeError:
        return text


def set_dotted(tree: dict, key: str, value: Any) -> None:
    """Set ``a.b.c = value`` in a nested dict, creating sections."""
    parts = key.split(".")
    if not all(parts):
        raise ScenarioError(f"{key}: malformed key")
    node = tree
    for p in parts[:-1]:
        nxt = node.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise ScenarioError(f"{key}: {p} is a value, not a section")
        node = nxt
    node[parts[-1]] = value


def merge(base: dict, over: dict) -> dict:
    """Deep merge: sections merge, values in ``over`` replace those in ``base``."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def read_toml(path: Path, what: str = "a scenario file") -> dict:
    """A TOML file read through the checked path (sim/files.py: a regular file within its size cap, its depth
    capped); ``what`` it should be names it in the error."""
    return files.read_toml(path, what)


def build(cls: type, data: dict, prefix: str = "", base_dir: Path | None = None) -> Any:
    """Validate ``data`` into an instance of dataclass ``cls``; errors name the dotted key."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{prefix.rstrip('.') or 'scenario'}: expected a section (table), got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise ScenarioError(f"{prefix}{key}: unknown key (known here: {known})")
    kwargs = {}
    for name, f in fields.items():
        if name not in data:
            continue
        kwargs[name] = _coerce(hints[name], data[name], f, prefix + name, base_dir)
    try:
        obj = cls(**kwargs)
    except (ValueError, TypeError) as e:  # cross-field checks in __post_init__ name their keys
        raise ScenarioError(f"{prefix}{e}") from None
    return obj


def _coerce(tp: Any, value: Any, f: dataclasses.Field, key: str, base_dir: Path | None) -> Any:
    if tp is Dist:  # before the dataclass check: distributions are (frozen) dataclasses too
        try:
            return parse_dist(value, base_dir)
        except DistError as e:
            raise ScenarioError(f"{key}: {e}") from None
    if dataclasses.is_dataclass(tp):
        return build(tp, value, key + ".", base_dir)
    if get_origin(tp) is Literal:
        choices = get_args(tp)
        value = f.metadata.get("aliases", {}).get(value, value) if isinstance(value, str) else value
        if value not in choices:
            raise ScenarioError(f"{key}: must be one of {', '.join(map(str, choices))}; got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ScenarioError(f"{key}: expected true or false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ScenarioError(f"{key}: expected a string, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScenarioError(f"{key}: expected an integer, got {value!r}")
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ScenarioError(f"{key}: expected a number, got {value!r}")
        try:
            value = float(value)
        except OverflowError:  # an integer of hundreds of digits
            raise ScenarioError(f"{key}: must be within ±{MAX_MAGNITUDE:g} (the range the model computes in)") from None
        if math.isnan(value):
            raise ScenarioError(f"{key}: expected a number, got nan")
        if math.isinf(value):
            raise ScenarioError(f"{key}: must be finite, got {value!r}")
    else:
        raise TypeError(f"schema type {tp!r} of {key} is not supported")
    if abs(value) > MAX_MAGNITUDE:
        raise ScenarioError(
            f"{key}: must be within ±{MAX_MAGNITUDE:g} (the range the model computes in), got {value!r}"
        )
    m = f.metadata
    if m.get("ge") is not None and not value >= m["ge"]:
        raise ScenarioError(f"{key}: must be >= {m['ge']:g}, got {value!r}")
    if m.get("gt") is not None and not value > m["gt"]:
        raise ScenarioError(f"{key}: must be > {m['gt']:g}, got {value!r}")
    if m.get("le") is not None and not value <= m["le"]:
        raise ScenarioError(f"{key}: must be <= {m['le']:g}, got {value!r}")
    return value


# Every number a scenario holds: beyond 1e12 a simulated time (in s) loses sub-millisecond precision in a float, and
# counts that large are refused by the run-size budget anyway (models/runs.py).
MAX_MAGNITUDE = 1e12


def to_dict(obj: Any) -> Any:
    """A scenario as plain data (distributions as their strings), for JSON output and results tables."""
    if isinstance(obj, Dist):
        return str(obj)
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    return obj


def flatten(tree: dict, prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}"""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def exists(path: Path) -> bool:
    """``path.exists()``, False for a name the system cannot even look up (too long, NUL bytes)."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def schema_keys(cls: type, prefix: str = "") -> set[str]:
    """Every dotted key a scenario of schema ``cls`` accepts."""
    out: set[str] = set()
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp) and tp is not Dist:
            out |= schema_keys(tp, f"{prefix}{f.name}.")
        else:
            out.add(prefix + f.name)
    return out
