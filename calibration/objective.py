"""The fit's objective: simulate the reference load test, average each figure over seeds, score against targets.

Each evaluation runs every approach that has a target once per seed, with the same seeds at every evaluation
(common random numbers: two parameter sets differ by their effect, not by their luck), through a process pool. A
figure is the mean over seeds of the model's metric. The loss is

    Σ over targets ((model − measured) / tolerance)²

with the tolerance of calibration/targets.py (the acceptance band: relative × measured, or the absolute floor; for
errors, 1% of the calls issued). A figure the model does not produce (e.g. first 8,000 back when some never come
back) scores MISSING_TERM.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from calibration import trace
from calibration.targets import Prediction, Target, measured
from calibration.ways import WAYS
from models.inputs import loadtest
from models.inputs.summary import Window
from models.runs import load_scenario
from sim.pools import process_pool

MISSING_TERM = 1e4  # a figure the model never produced: as bad as being 100 bands off
EXTRA_METRICS = ("calls_issued", "calls_issued_per_s")  # reported next to the targets (errors' band, counting rule)

Figures = dict[str, dict[str, float | None]]  # approach -> metric -> mean over seeds (None: not produced)


@dataclass(frozen=True)
class Experiment:
    """What a figure's model value comes from: a preset with its own ``--set``s (a trace's experiment), measured
    from the run's metrics or, for a trace (``statistics``), by calibration/trace.py's ``statistics`` of its records:
    the function that measured the trace."""

    name: str
    preset: str
    sets: tuple[str, ...] = ()
    statistics: bool = False


def reference(approach: str) -> Experiment:
    """The reference load test of an approach (docs/sources.md §1): its way's preset (calibration/ways)."""
    return Experiment(approach, WAYS[approach].preset)


def slowest_first(name: str) -> float:
    """The pool's order (the longest runs first: less idle time): by the ways' ``slowness``; an experiment without
    one (a trace's) goes before them."""
    way = WAYS.get(name)
    return -way.slowness if way is not None and way.slowness else -math.inf


def simulate(job: tuple[Experiment, tuple[str, ...], int, tuple[str, ...]]) -> dict:
    """One run of an experiment: only the figures asked for (a pool worker's task)."""
    exp, sets, seed, keys = job
    sc = load_scenario(exp.preset, [*exp.sets, *sets], [])
    m = loadtest.run(sc, seed=seed, records=exp.statistics)
    if exp.statistics:
        stats = trace.statistics(m.pop("records"), Window(sc.warmup_s, sc.duration_s))
        stats["containers_seen"] = m["containers_peak"]  # the simulator's containers: each runs inputs
        m.update(stats)
    return {k: m.get(k) for k in keys}


class Runner:
    """Runs simulations in a process pool of ``jobs`` workers (in this process when jobs is 1)."""

    def __init__(self, jobs: int) -> None:
        self.pool = process_pool(jobs) if jobs > 1 else None

    def map(self, fn: Callable, items: list) -> list:
        return list(self.pool.map(fn, items)) if self.pool else [fn(x) for x in items]

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool:
            self.pool.shutdown()


def mean_figures(runs: Iterable[tuple[str, dict]]) -> Figures:
    """Per approach, each metric's mean over its runs (None if any run lacks it)."""
    grouped: dict[str, list[dict]] = {}
    for approach, m in runs:
        grouped.setdefault(approach, []).append(m)
    out: Figures = {}
    for a, rows in grouped.items():
        out[a] = {}
        for k in rows[0]:
            vals = [r[k] for r in rows]
            out[a][k] = None if any(v is None for v in vals) else float(np.mean(vals))
    return out


def term(t: Target, figs: Figures) -> float:
    """One target's contribution: ((model − measured) / tolerance)²."""
    got = figs.get(t.approach, {}).get(t.key)
    if got is None or not np.isfinite(got):
        return MISSING_TERM
    tol = t.tolerance(figs[t.approach].get("calls_issued") or 0.0)
    return ((got - t.measured) / tol) ** 2


def loss(figs: Figures, targets: Iterable[Target]) -> float:
    return float(sum(term(t, figs) for t in targets))


class Objective:
    """The loss of a list of ``--set`` overrides, over ``targets``; ``extra`` applies to every run (--quick)."""

    def __init__(
        self,
        runner: Runner,
        seeds: list[int],
        targets: tuple[Target, ...],
        extra: tuple[str, ...] = (),
        experiments: dict[str, Experiment] | None = None,
    ) -> None:
        self.experiments = experiments or {}  # by name; an approach of the reference test needs no entry
        self.runner = runner
        self.seeds = seeds
        self.targets = targets
        self.extra = extra
        self.evaluations = 0  # distinct parameter sets simulated
        self.seen: list[tuple[tuple[str, ...], float]] = []  # every parameter set scored, and its loss, in order
        self._cache: dict[tuple, Figures] = {}

    def figures(self, sets: list[str], approaches: Iterable[str] | None = None, keys: Iterable[str] = ()) -> Figures:
        """The mean figures of ``approaches`` (default: those with targets) with ``sets``."""
        approaches = tuple(dict.fromkeys(approaches or (t.approach for t in self.targets)))
        keys = tuple(dict.fromkeys([*(t.key for t in self.targets), *keys, *EXTRA_METRICS]))
        memo = (tuple(sets), approaches, keys)
        if memo not in self._cache:
            order = sorted(approaches, key=slowest_first)
            jobs = [(self.experiment(a), (*self.extra, *sets), s, keys) for a in order for s in self.seeds]
            results = self.runner.map(simulate, jobs)
            self._cache[memo] = mean_figures((j[0].name, r) for j, r in zip(jobs, results, strict=True))
            self.evaluations += 1
        return self._cache[memo]

    def experiment(self, name: str) -> Experiment:
        return self.experiments.get(name) or reference(name)

    def __call__(self, sets: list[str]) -> float:
        value = loss(self.figures(sets), self.targets)
        self.seen.append((tuple(sets), value))
        return value


def spread(
    runner: Runner, experiments: Iterable[Experiment], sets: list[str], seeds: list[int], keys: tuple[str, ...]
) -> Figures:
    """Per experiment, each figure's standard deviation over runs of ``seeds``: the run-to-run noise that one recorded
    run holds and its bootstrap over calls cannot see (a cold start, a scaling decision, move every call of a run)."""
    exps = list(experiments)
    jobs = [(e, tuple(sets), s, keys) for e in exps for s in seeds]
    results = runner.map(simulate, jobs)
    out: Figures = {}
    for e in exps:
        rows = [r for j, r in zip(jobs, results, strict=True) if j[0] is e]
        out[e.name] = {}
        for k in keys:
            vals = [r[k] for r in rows if r[k] is not None and np.isfinite(r[k])]
            out[e.name][k] = float(np.std(vals, ddof=1)) if len(vals) > 1 else None
    return out


def residual_rows(figs: Figures, targets: Iterable[Target]) -> list[dict]:
    """Per target: approach, figure, measured, model, relative error, band, within band, loss term."""
    rows = []
    for t in targets:
        got = figs.get(t.approach, {}).get(t.key)
        rel = None if got is None or t.measured == 0 else got / t.measured - 1
        rows.append(
            {
                "approach": t.approach,
                "figure": t.figure if t.key == t.figure else f"{t.figure} ({t.key})",
                "measured": t.measured,
                "model": got,
                "rel_error": rel,
                "band": t.band(),
                "within": t.within(got),
                "term": term(t, figs),
            }
        )
    return rows


def prediction_rows(figs: Figures, preds: Iterable[Prediction]) -> list[dict]:
    """Per prediction: the model's value, and the measurement when it is released (a left-out approach)."""
    rows = []
    for p in preds:
        want = measured(p.approach, p.figure)
        got = figs.get(p.approach, {}).get(p.key)
        rel = None if got is None or not want else got / want - 1
        rows.append({"approach": p.approach, "figure": p.figure, "measured": want, "model": got, "rel_error": rel})
    return rows
