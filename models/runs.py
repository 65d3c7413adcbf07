"""A scenario's run as every command and calibration makes it: loaded by preset name or file (``load_scenario``),
sized against its model's budget before it starts (``check_size``: bad input, exit 2, if too large), and run by its
model under the guard that budget gives it (``run_scenario``: sim/guard.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from models.presets import resolve
from models.registry import MODELS, model_of
from sim.guard import BUDGET_ENV, EVENT_FLOOR, MEMORY_BUDGET, RUN_MARGIN, Budget, Guard, OverBudget, budget_factor
from sim.model import Estimate, Parts
from sim.scenario import ScenarioError, build


def build_scenario(tree: dict, base_dir: Path | None = None) -> Any:
    """A raw scenario tree validated into its model's schema."""
    return build(model_of(tree).schema, tree, base_dir=base_dir)


def load_scenario(name: str, sets: list[str] = (), params: list[str] = ()) -> Any:
    """A preset name or scenario file, then parameter files, then ``--set`` overrides, validated."""
    tree, base = resolve(name, sets, params)
    return build_scenario(tree, base)


def check_size(sc: Any) -> Budget:
    """Refuse, before it starts, a run larger than its model's budget (times SCALESIM_BUDGET) in size, expected events
    or memory, by its estimate (sim/model.py ``Estimate``): bad input, exit 2. Returns the budget it runs under:
    RUN_MARGIN times its expected events and worst-case allowance (at least EVENT_FLOOR), at most the model's budget
    of events, and MEMORY_BUDGET, each times SCALESIM_BUDGET where that is above 1 (a factor below 1 shrinks what may
    start, not what a run that started may use)."""
    model = MODELS[sc.model]
    factor = budget_factor()
    raise_how = f"raise the budget with {BUDGET_ENV}=<factor> (e.g. {BUDGET_ENV}=10)"
    est = model.estimate(sc) if model.estimate is not None else Estimate({model.unit: (model.size(sc), "")})
    size = Estimate.total(est.size)
    _refuse("run size", est.size, model.budget * factor, model.unit, raise_how)
    events = Estimate.total(est.events) or model.events_per_unit * size
    most = model.events_per_unit * model.budget
    _refuse("run events", est.events, most * factor, "events", raise_how)
    _refuse("run memory", est.memory, MEMORY_BUDGET * factor, "bytes", raise_how)
    grow = max(1.0, factor)
    limit = min(most, max(EVENT_FLOOR, RUN_MARGIN * (events + Estimate.total(est.allowance)))) * grow
    whole = max(EVENT_FLOOR, events) * grow
    _refuse("events each simulated second", est.per_second, whole, "events", raise_how, "this run's expected events")
    return Budget(
        limit,
        MEMORY_BUDGET * grow,
        model.grows,
        size=f"estimated at {size:.3g} {model.unit}",
        raise_how=f"raise {BUDGET_ENV}=<factor>",
    )


def _refuse(what: str, parts: Parts, budget: float, unit: str, raise_how: str, of: str = "the budget") -> None:
    """Bad input if the parts of an estimate add up to more than ``budget`` (``of``: what that is), saying by how
    much and, when one part is most of it, which and how to make it smaller."""
    total = Estimate.total(parts)
    if total <= budget:  # (NaN or inf: refused)
        return
    part, (amount, how) = max(parts.items(), key=lambda kv: kv[1][0])
    scale, unit = (2**30, "GiB") if unit == "bytes" else (1, unit)
    a, b = _apart(total / scale, budget / scale)
    mostly = f" (mostly {part}: {_apart(amount / scale, 0)[0]})" if part != unit and amount > 0.5 * total else ""
    raise OverBudget(
        f"{what}: about {a} {unit}{mostly}, more than {of} of {b} {unit}; "
        f"{how if mostly and how else 'make the run smaller'}, or {raise_how}"
    )


def _apart(a: float, b: float) -> tuple[str, str]:
    """Two amounts to as few significant digits as tell them apart (3 at least): 1e+07 and 1.00002e+07."""
    for digits in range(3, 17):
        x, y = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if x != y:
            return x, y
    return x, y


MAX_SEED = 2**63 - 1  # numpy's SeedSequence takes any non-negative integer; a results table keeps int64


def run_scenario(
    sc: Any,
    seed: int = 0,
    series: dict | None = None,
    records: bool = False,
    jobs: int = 1,
    progress: Callable[[float, float], None] | None = None,
) -> dict:
    """One run of a validated scenario by its model's run function, within its budget (``jobs``: processes
    for its independent parts, if it has any; ``progress``: told (now, until) as it goes, sim/guard.py); its metrics
    are exactly those its model declares for it (sim/metrics.py: an undeclared one is an error), in their declared
    order."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ScenarioError(f"--seed {seed}: must be a whole number from 0 to {MAX_SEED}")
    why = MODELS[sc.model].unmeasurable
    why = why(sc) if why else None  # a run that could measure nothing (a window no call fits in) is refused
    if why:
        raise ScenarioError(why)
    budget = check_size(sc)
    model = MODELS[sc.model]
    guard = Guard(budget, progress)  # checked as it runs (sim/guard.py)
    metrics = model.run(sc, seed=seed, series=series, records=records, jobs=jobs, guard=guard)
    declared = model.metrics(sc)
    declared.check(metrics, f"model {sc.model}")
    return declared.ordered(metrics)


def warn_extrapolated(extrapolated: list[str], where: str = "") -> None:
    """One line on stderr when a run left the envelope its parameters were calibrated on (its ``extrapolated``)."""
    if extrapolated:
        print(f"warning: extrapolated{where}: {'; '.join(extrapolated)}", file=sys.stderr)
