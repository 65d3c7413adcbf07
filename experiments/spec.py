"""Sweep specs: a base scenario, named variants, factors and seeds, expanded into points (experiments/sweeps/*.toml).

A spec is TOML with ``name``, ``description``, ``seeds``, ``scale`` (the report's x axis), ``[base]`` (``scenario``
and ``set``), ``[factors]`` (key → list of values; their cartesian product), ``[[variants]]`` (``name``,
``scenario``, ``set``: each its own scenario, crossed with the factors), ``[report]`` (``point``: whose time series
to draw) and ``[quick]`` (``seeds``, ``factors``, ``set``: the reduced version). A scenario (preset or file) is also
a spec: the sweep of that scenario over the command line's ``--factor``s. Every key is checked against the sweep's
scenario schema, so a bad spec exits 2 naming the key; a value out of range is a point's error, recorded in its row.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from itertools import product
from pathlib import Path
from typing import Any

from models.presets import PRESETS, resolve
from sim.guard import BUDGET_ENV, budget_factor
from sim.model import Model
from sim.scenario import (
    ScenarioError,
    exists,
    flatten,
    parse_value,
    read_toml,
    schema_keys,
    set_dotted,
)

SWEEPS = Path(__file__).resolve().parent / "sweeps"
DEFAULT = "loadtest-scale"
SPEC_FILE = "a sweep spec or scenario file"
PLAUSIBLE = ("plausible", "kept")  # a point's fields of --uncertainty, columns of its rows (``kept`` as kept_point)
SPEC_KEYS = {"name", "description", "seeds", "scale", "base", "factors", "variants", "report", "quick"}
# A sweep's size, checked before it starts (times SCALESIM_BUDGET): its points (expanding more is slow in itself), and
# its runs' estimated cost, each run its model's size estimate plus RUN_COST, within SWEEP_RUNS runs of its model's
# budget (a search of experiments/whatif/search.py the same); COST_SAMPLE points at most are built to estimate it.
MAX_POINTS = 5_000
SWEEP_RUNS = 10
RUN_COST = 1e4  # a run's own cost (a process, the scenario's build), in its model's unit: about 50 ms
COST_SAMPLE = 256


def split_values(text: str) -> list[str]:
    """``V1,V2,...`` split at the commas outside parentheses and brackets: ``uniform(1, 2),constant(3)`` is two."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    return [*out, text[start:]]


@dataclass(frozen=True)
class Point:
    index: int
    variant: str
    scenario: str  # preset name or scenario file
    sets: tuple[tuple[str, Any], ...]  # overrides in order: base, params, plausible model, --set, variant, factors
    plausible: int = 0  # with --uncertainty: the envelope's model it runs (0: the kept fit; experiments/uncertainty.py)
    kept: int | None = None  # with --uncertainty: the index of its kept-model point (its own, for that one)

    def seeds(self, spec_seeds: int) -> int:
        """Its seeds: the spec's, for the kept model and every plausible one alike (common random numbers, as
        ``run --uncertainty`` does)."""
        return spec_seeds

    def tree(self) -> tuple[dict, Path | None]:
        tree, base = resolve(self.scenario)
        for key, value in self.sets:
            set_dotted(tree, key, value)
        return tree, base

    def cost(self) -> float:
        """Calls or sandboxes to simulate, for scheduling the big points first (0 if it does not build)."""
        from models.registry import MODELS  # (the models here and below, not at the top: --help loads none)
        from models.runs import build_scenario

        try:
            tree, base = self.tree()
            sc = build_scenario(tree, base)
        except ScenarioError:
            return 0.0
        return MODELS[sc.model].size(sc)


@dataclass(frozen=True)
class Spec:
    name: str
    description: str
    seeds: int
    scale: str | None  # the report's x axis
    factors: dict[str, list]
    points: tuple[Point, ...]
    report_point: int  # the point whose time series the report draws

    def key(self) -> str:
        """What identifies the sweep's results (a rerun must be the same sweep to continue it)."""
        points = [{k: v for k, v in asdict(p).items() if p.kept is not None or k not in PLAUSIBLE} for p in self.points]
        return json.dumps({"seeds": self.seeds, "points": points}, sort_keys=True)


def _check_keys(where: str, data: dict, allowed: set[str]) -> None:
    for k in data:
        if k not in allowed:
            raise ScenarioError(f"{where}{k}: unknown key (known here: {', '.join(sorted(allowed))})")


def _table(where: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise ScenarioError(f"{where}: expected a table, got {value!r}")
    return value


def _scenario_keys(where: str, sets: dict, schema: type) -> list[tuple[str, Any]]:
    keys = schema_keys(schema)
    for k in sets:
        if k not in keys:
            raise ScenarioError(f"{where}.{k}: not a scenario key")
    return list(sets.items())


def load_spec(
    arg: str | None,
    sets: list[str] = (),
    factors: list[str] = (),
    seeds: int | None = None,
    quick: bool = False,
    params: list[str] = (),
    uncertainty: bool = False,
) -> Spec:
    """Read a sweep spec (or a scenario to sweep), apply the command line (``params``: parameter files, e.g. a
    fit's, overlaid at every point before the ``--set``s), and expand its points; with ``uncertainty`` each point
    also under every other model of its envelope (experiments/uncertainty.py), between the params and the ``--set``s."""
    from models.registry import model_of

    name = arg or DEFAULT
    path = Path(name)
    if exists(SWEEPS / f"{name}.toml"):
        path, raw = SWEEPS / f"{name}.toml", read_toml(SWEEPS / f"{name}.toml")
    elif path.suffix == ".toml" and exists(path) and {"base", "factors", "variants"} & set(read_toml(path, SPEC_FILE)):
        raw = read_toml(path, SPEC_FILE)
    else:  # a scenario: sweep it over the --factors
        resolve(name)  # fails with a clear line if it is neither
        raw = {"name": Path(name).stem, "base": {"scenario": name}}
    base_dir = path.parent if path.suffix == ".toml" else Path.cwd()
    _check_keys("", raw, SPEC_KEYS)
    spec_name = raw.get("name", path.stem)
    if not isinstance(spec_name, str) or not spec_name or "/" in spec_name:
        raise ScenarioError(f"name: expected a plain name, got {spec_name!r}")

    base = _table("base", raw.get("base", {}))
    _check_keys("base.", base, {"scenario", "set"})
    base_scenario = base.get("scenario", "")
    variants = raw.get("variants", [])
    if not isinstance(variants, list):
        raise ScenarioError("variants: expected an array of tables ([[variants]])")
    first = base_scenario or (variants[0].get("scenario", "") if variants and isinstance(variants[0], dict) else "")
    if not first:
        raise ScenarioError("base.scenario: a sweep needs a base scenario or variants with scenarios")
    schema = model_of(resolve(_locate(first, base_dir))[0]).schema
    base_sets = _scenario_keys("base.set", _table("base.set", base.get("set", {})), schema)
    factor_table = dict(_table("factors", raw.get("factors", {})))
    n_seeds = raw.get("seeds", 1)

    if quick:
        q = _table("quick", raw.get("quick")) if "quick" in raw else None
        if q is None:
            raise ScenarioError(f"{name}: has no [quick] table, so there is no --quick version of it")
        _check_keys("quick.", q, {"seeds", "factors", "set"})
        n_seeds = q.get("seeds", n_seeds)
        factor_table.update(_table("quick.factors", q.get("factors", {})))
        base_sets += _scenario_keys("quick.set", _table("quick.set", q.get("set", {})), schema)
    for f in params:
        base_sets += _scenario_keys(f"--params {f}", flatten(read_toml(Path(f), "a parameter file")), schema)
    user_sets: list[tuple[str, Any]] = []
    for s in sets:
        if "=" not in s:
            raise ScenarioError(f"--set {s}: expected KEY=VALUE")
        k, v = s.split("=", 1)
        user_sets += _scenario_keys("--set", {k.strip(): parse_value(v.strip(), f"--set {k.strip()}")}, schema)
    for f in factors:
        if "=" not in f:
            raise ScenarioError(f"--factor {f}: expected KEY=V1,V2,...")
        k, v = f.split("=", 1)
        factor_table[k.strip()] = [
            parse_value(x.strip(), f"--factor {k.strip()}") for x in split_values(v) if x.strip()
        ]
    if seeds is not None:
        n_seeds = seeds
    if isinstance(n_seeds, bool) or not isinstance(n_seeds, int) or n_seeds < 1:
        raise ScenarioError(f"seeds: expected an integer >= 1, got {n_seeds!r}")
    _scenario_keys("factors", factor_table, schema)
    for k, values in factor_table.items():
        if not isinstance(values, list) or not values:
            raise ScenarioError(f"factors.{k}: expected a non-empty list of values, got {values!r}")

    _check_points(max(1, len(variants)), factor_table, uncertainty)
    if not variants:
        if not base_scenario:
            raise ScenarioError("base.scenario: a sweep without variants needs a base scenario")
        variants = [{"name": "base", "scenario": base_scenario}]
    expanded = []
    for i, v in enumerate(variants):
        v = _table(f"variants[{i}]", v)
        _check_keys(f"variants[{i}].", v, {"name", "scenario", "set"})
        vname = v.get("name", f"variant-{i}")
        scenario = v.get("scenario", base_scenario)
        if not scenario:
            raise ScenarioError(f"variants[{i}].scenario: missing (and no base.scenario)")
        scenario = _locate(scenario, base_dir)
        # an unknown preset, an unreadable file or another model is the spec's error, not a point's
        if model_of(resolve(scenario)[0]).schema is not schema:
            raise ScenarioError(f"variants[{i}].scenario: {scenario} is another model than the sweep's first scenario")
        vsets = _scenario_keys(f"variants[{i}].set", _table("set", v.get("set", {})), schema)
        expanded.append((vname, scenario, vsets))

    users = {k for k, _ in user_sets} | set(factor_table) | {k for _, _, vs in expanded for k, _ in vs}
    plausible = _plausible(params, users) if uncertainty else None
    points: list[Point] = []
    keys = list(factor_table)
    for vname, scenario, vsets in expanded:
        for combo in product(*(factor_table[k] for k in keys)):
            top = user_sets + vsets + list(zip(keys, combo, strict=True))
            n = len(points)
            kept = Point(n, vname, scenario, tuple(base_sets + top), kept=n if plausible else None)
            points.append(kept)
            for i, model in enumerate(plausible(kept) if plausible else [], start=1):
                sets_ = tuple(base_sets + model + top)
                points.append(Point(len(points), vname, scenario, sets_, plausible=i, kept=kept.index))

    scale = raw.get("scale", keys[0] if keys else None)
    report = _table("report", raw.get("report", {}))
    _check_keys("report.", report, {"point"})
    return Spec(
        spec_name,
        raw.get("description", ""),
        n_seeds,
        scale,
        factor_table,
        tuple(points),
        _report_point(points, _table("report.point", report.get("point", {})), scale, factor_table),
    )


def _check_points(variants: int, factors: dict[str, list], uncertainty: bool) -> None:
    """Refuse, before they are expanded, more points than MAX_POINTS (times SCALESIM_BUDGET): bad input."""
    n = variants * math.prod(len(v) for v in factors.values())
    most = MAX_POINTS * budget_factor()
    if n > most:
        sizes = " × ".join(
            [f"{variants:,} variants"] * (variants > 1) + [f"{len(v):,} {k}" for k, v in factors.items()]
        )
        raise ScenarioError(
            f"sweep size: {n:,} points ({sizes}{', each with its plausible models' if uncertainty else ''}), more "
            f"than the {most:,.0f} a sweep may have; fewer variants or --factor values, or raise the budget with "
            f"{BUDGET_ENV}=<factor>"
        )


def check_size(spec: Spec) -> None:
    """Refuse, before it starts, a sweep whose runs cost more than SWEEP_RUNS runs of its model's budget (times
    SCALESIM_BUDGET): points × seeds × the estimated cost of a run (its model's size, plus RUN_COST; from a sample of
    COST_SAMPLE points when there are more). Bad input, exit 2, with the estimate."""
    from models.registry import MODELS, model_of

    points = spec.points
    if not points:
        return
    sample = (
        points if len(points) <= COST_SAMPLE else [points[i * len(points) // COST_SAMPLE] for i in range(COST_SAMPLE)]
    )
    runs = sum(p.seeds(spec.seeds) for p in points)
    model = MODELS[model_of(points[0].tree()[0]).name]
    seeds = f"{spec.seeds:,}" if spec.seeds < 1e9 else f"{spec.seeds:.3g}"
    how = f"{len(points):,} points × {seeds} seed{'s' if spec.seeds != 1 else ''}"
    check_runs("sweep", runs, sum(p.cost() for p in sample) / len(sample), model, how, "fewer --seeds or points")


def check_runs(what: str, runs: float, size: float, model: Model, how: str, fewer: str) -> None:
    """Refuse ``runs`` runs of about ``size`` (in ``model``'s unit) each, plus RUN_COST each, beyond SWEEP_RUNS runs
    of its budget (times SCALESIM_BUDGET): a sweep's or a search's size, with ``how`` they are counted and how to
    have ``fewer``. Bad input."""
    per_run = size + RUN_COST
    total, budget = per_run * runs, SWEEP_RUNS * model.budget * budget_factor()
    if total > budget:
        count = f"{runs:,.0f}" if runs < 1e9 else f"{runs:.3g}"
        raise ScenarioError(
            f"{what} size: about {total:.3g} {model.unit} ({count} runs: {how}, about {per_run:.3g} {model.unit} a "
            f"run), more than the budget of {budget:.3g} {model.unit}; {fewer}, or raise the budget with "
            f"{BUDGET_ENV}=<factor>"
        )


def _plausible(params: list[str], users: set[str]) -> Callable[[Point], list[list[tuple[str, Any]]]]:
    """For a point, the settings of its envelope's models other than the kept one (the kept one is the defaults or
    the params: experiments/uncertainty.py), as the point's scenario reads them; the keys the sweep sets on top
    (``users``: its --set, variants' and factors' keys) are not ranges."""
    from experiments import uncertainty
    from models.runs import build_scenario

    def of(point: Point) -> list[list[tuple[str, Any]]]:
        try:
            sc = build_scenario(*point.tree())
        except ScenarioError:
            return []  # the point's own row says why it does not build
        chosen = uncertainty.envelope_of(sc, list(params), users).models[1:]
        return [[(k.strip(), parse_value(v.strip())) for k, _, v in (x.partition("=") for x in m)] for m in chosen]

    return of


def _locate(scenario: str, base_dir: Path) -> str:
    """A preset name stays a name; a relative scenario file is taken relative to the spec."""
    if exists(PRESETS / f"{scenario}.toml") or Path(scenario).is_absolute():
        return scenario
    candidate = base_dir / scenario
    return str(candidate) if exists(candidate) else scenario


def _report_point(points: list[Point], want: dict, scale: str | None, factors: dict) -> int:
    """The point nearest [report] point = {variant = ..., KEY = value} (exact where the sweep has it, e.g. not in a
    --quick version); default: the first variant at the middle scale."""
    if not want and scale and scale in factors:
        want = {scale: factors[scale][len(factors[scale]) // 2]}
    candidates = [p for p in points if p.variant == want.get("variant", p.variant)]
    if not candidates:
        raise ScenarioError(f"report.point: no variant named {want.get('variant')!r}")

    def distance(p: Point) -> float:
        values = dict(p.sets)
        d = 0.0
        for k, v in want.items():
            if k == "variant" or k not in values:
                continue
            got = values[k]
            both_numbers = all(isinstance(x, (int, float)) and math.isfinite(x) for x in (v, got))
            d += abs(math.log2(max(got, 1e-9) / max(v, 1e-9))) if both_numbers else float(got != v)
        return d

    return min(candidates, key=distance).index
