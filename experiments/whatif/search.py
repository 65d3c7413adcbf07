"""The what-if questions' search harness: a configuration simulated over the seeds (``Simulator``, ``Evaluation``),
the constraint most questions check (``latency_ok``), the doubling-and-bisection search (``smallest``), the check of a
search's size before it starts, the window a shaped or traced demand is sized on, and an answer under every plausible
model of the calibration (``robustness``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from experiments import uncertainty
from experiments.spec import check_runs
from models.inputs.callers.demand import Shape, parse_shape
from models.registry import MODELS
from models.runs import load_scenario
from sim.cli import progress_bar
from sim.guard import OverBudget
from sim.pools import process_pool
from sim.scenario import ScenarioError

METRICS = (
    "calls_per_s",
    "added_latency_p99_s",
    "added_latency_p50_s",
    "errors",
    "errors_total",
    "container_seconds",
    "cost_usd",
    "cost_per_hour",
    "cost_usd_warmup",
    "containers_mean",
    "inputs_in_flight_mean",
    "calls_issued_per_s",
    "calls_served_per_s",
)
MAX_KNOB = 4096  # the doubling search gives up beyond this many
CLEAR = 2.0  # a first seed this far past a constraint decides its configuration (a sequential test over seeds)


@dataclass
class Evaluation:
    """One configuration simulated over the seeds: per metric (mean, 95% CI half-width), and the constraint."""

    config: dict[str, Any]
    metrics: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    spread: dict[str, tuple[float, float]] = field(default_factory=dict)  # per metric (least, greatest) over seeds
    binding: str = ""
    agreement: float = 1.0  # the share of seeds that name the binding limit
    meets: bool = False
    why: str = ""
    extrapolated: list[str] = field(default_factory=list)  # where any of its runs left the calibrated envelope
    seeds: int = 0  # the seeds it was run at (fewer than asked: a clear miss at its first, Simulator.evaluate_all)
    over: OverBudget | None = None  # why a run of it went past its budget (then it has no figures)

    def settings(self) -> dict:
        """The configuration's autoscaler and function keys (what a question varies)."""
        return {k: v for k, v in self.config.items() if k.startswith(("autoscaler.", "function."))}

    def mean(self, key: str) -> float:
        v = self.metrics.get(key, (None, None))[0]
        return math.inf if v is None else v


class Simulator:
    """Runs a configuration's seeds (in a process pool when jobs > 1) and counts the simulations."""

    def __init__(self, scenario: str, sets: list[str], params: list[str], seeds: int, jobs: int) -> None:
        """``sets``: the question's defaults, then the user's ``--set``s."""
        self.scenario, self.sets, self.params, self.seeds = scenario, sets, params, seeds
        self.user_sets: list[str] = []  # the user's own --sets (the end of ``sets``): what a question may not override
        self.runs = 0
        self.too_costly: tuple[int, str] | None = None  # a search's value past the run budget (``smallest``)
        # every run made, by (scenario, seed): the answer's ranges do not make again the runs its search made
        self.done: dict[tuple[str, int], dict] = {}
        self.sc = load_scenario(scenario, sets, params)  # bad input fails here, before any search
        self.pool = process_pool(jobs) if jobs > 1 else None
        # runs done on stderr, with an ETA against ``expect`` (a search's guess, raised when passed); shown only on a
        # terminal (disable=None) and only once the search has run 3 s
        self.bar = progress_bar(total=None, unit="run", desc="simulations", delay=3.0, leave=False)

    def expect(self, runs: int) -> None:
        """The runs the search expects to make in all (for the bar's ETA)."""
        self.bar.total = max(runs, self.runs)
        self.bar.refresh()

    def builds(self, config: dict[str, Any]) -> Any:
        """The scenario of ``config`` (a ScenarioError if it does not build), nothing run."""
        return load_scenario(self.scenario, [*self.sets, *(f"{k}={v}" for k, v in config.items())], self.params)

    def evaluate(self, config: dict[str, Any]) -> Evaluation:
        return self.evaluate_all([config])[0]

    def evaluate_all(
        self, configs: list[dict[str, Any]], clear_miss: Callable[[Evaluation], bool] | None = None, over: bool = False
    ) -> list[Evaluation]:
        """Configurations simulated over the seeds, every run in the pool at once (the cores kept busy across
        configurations); the same numbers as one at a time. With ``clear_miss``, each is first run at its first
        seed, and one that misses by far there (``clear_miss`` of that seed's evaluation) is not run at the others:
        its figures are that seed's (``Evaluation.seeds`` 1), as a sequential test stops once the answer is clear.
        A run past its budget raises OverBudget (the first in order), or with ``over`` leaves its configuration
        with no figures and why (``Evaluation.over``; not run at its other seeds), the others evaluated."""
        if clear_miss is None or self.seeds == 1:
            runs = self._runs([(c, s) for c in configs for s in range(self.seeds)], over)
            return [_evaluation(c, runs[i * self.seeds : (i + 1) * self.seeds]) for i, c in enumerate(configs)]
        first = self._runs([(c, 0) for c in configs], over)
        screened = [_evaluation(c, [r]) for c, r in zip(configs, first, strict=True)]
        rest = [i for i, e in enumerate(screened) if e.over is None and not clear_miss(e)]
        more = self._runs([(configs[i], s) for i in rest for s in range(1, self.seeds)], over)
        for j, i in enumerate(rest):
            screened[i] = _evaluation(configs[i], [first[i], *more[j * (self.seeds - 1) : (j + 1) * (self.seeds - 1)]])
        return screened

    def _runs(self, jobs: list[tuple[dict[str, Any], int]], over: bool = False) -> list[dict]:
        """The runs of (configuration, seed) pairs, in order, counted on the progress bar; one past its budget raises
        OverBudget, or with ``over`` is what it is (``uncertainty.OVER``: why)."""
        todo = [(self.scenario, [*self.sets, *(f"{k}={v}" for k, v in c.items())], self.params, s) for c, s in jobs]
        runs = []
        run_one = uncertainty.run_one
        for job, r in zip(todo, self.pool.map(run_one, todo) if self.pool else map(run_one, todo), strict=True):
            if uncertainty.OVER in r and not over:
                raise OverBudget(r[uncertainty.OVER], r[uncertainty.MEASURED])
            runs.append(r)
            if uncertainty.OVER not in r:
                self.done[(repr(load_scenario(*job[:3])), job[3])] = r  # as uncertainty.ranges keys its runs
            self.runs += 1
            if self.bar.total is not None and self.runs > self.bar.total:
                self.bar.total = self.runs
            self.bar.update()
        return runs

    def close(self) -> None:
        self.bar.close()
        if self.pool:
            self.pool.shutdown()


def _evaluation(config: dict[str, Any], runs: list[dict]) -> Evaluation:
    e = Evaluation(dict(config), seeds=len(runs))
    past = [r for r in runs if uncertainty.OVER in r]
    if past:  # no figures: why
        e.over = OverBudget(past[0][uncertainty.OVER], past[0][uncertainty.MEASURED])
        e.why = str(e.over)
        return e
    for k in METRICS:
        vals = [r[k] for r in runs if r.get(k) is not None]
        e.metrics[k] = _mean_ci(vals) if len(vals) == len(runs) else (None, None)
        if vals:
            e.spread[k] = (min(vals), max(vals))
    if runs[0].get("first_n_back_s") is not None:
        vals = [r["first_n_back_s"] for r in runs if r["first_n_back_s"] is not None]
        e.metrics["first_n_back_s"] = _mean_ci(vals) if len(vals) == len(runs) else (None, None)
    binding = [r.get("binding_limit", "") for r in runs]
    e.binding = max(sorted(set(binding)), key=binding.count)
    e.agreement = binding.count(e.binding) / len(binding)
    e.extrapolated = sorted({x for r in runs for x in r["extrapolated"]})
    return e


def _mean_ci(vals: list[float]) -> tuple[float | None, float | None]:
    if not vals:
        return None, None
    mean = float(np.mean(vals))
    if len(vals) < 2:
        return mean, None
    from scipy import stats  # here, not at the top: scipy.stats takes a third of a second to import

    return mean, float(stats.t.ppf(0.975, len(vals) - 1) * np.std(vals, ddof=1) / math.sqrt(len(vals)))


def latency_ok(p99: float, rate: float | None = None) -> Callable[[Evaluation], None]:
    """The constraint: mean added-latency p99 ≤ ``p99``, no error, and (with a rate) the calls/s sustained: 97% of
    the rate, or of the calls issued in the window if the Poisson arrivals brought fewer."""

    def check(e: Evaluation) -> None:
        got = e.mean("added_latency_p99_s")
        errors = e.mean("errors_total")
        calls = e.mean("calls_served_per_s")  # the demand served, whenever back (an open loop's headline lags it)
        if errors > 0:
            e.meets, e.why = False, f"{errors:g} errors"
        elif got > p99:
            e.meets, e.why = False, f"p99 {got:.3g} s > {p99:g} s"
        elif rate is not None and calls < 0.97 * min(rate, e.mean("calls_issued_per_s")):
            e.meets, e.why = False, f"{calls:.4g} calls/s < 97% of {min(rate, e.mean('calls_issued_per_s')):.4g}"
        else:
            e.meets, e.why = True, "meets"

    return check


def clear_within(p99: float) -> Callable[[Evaluation], bool]:
    """Whether a worst end passes by far (``robustness``): its p99 within ``p99``, a fraction of the limit."""
    return lambda e: e.mean("added_latency_p99_s") <= p99


def far_miss(p99: float) -> Callable[[Evaluation], bool]:
    """Whether one seed decides a miss (``Simulator.evaluate_all``'s ``clear_miss``): an error (the mean over more
    seeds has one too: a miss for certain), or a p99 CLEAR × past the limit (a sequential test)."""
    return lambda e: e.mean("errors_total") > 0 or e.mean("added_latency_p99_s") > CLEAR * p99


def smallest(sim: Simulator, key: str, check: Callable[[Evaluation], None], fixed: dict, lo: int = 1) -> tuple:
    """The smallest integer value of ``key`` ≥ ``lo`` whose evaluation meets ``check`` (monotone: doubling, then
    bisection); every evaluation made, by value. None if even MAX_KNOB fails, or if the doubling reaches a value
    whose runs are past their budget before one meets (``sim.too_costly``: that value and why; the search so far
    is kept, not discarded)."""
    return smallest_all(sim, key, check, [fixed], lo)[0]


def smallest_all(
    sim: Simulator,
    key: str,
    check: Callable[[Evaluation], None],
    bases: list[dict],
    lo: int = 1,
    clear_miss: Callable[[Evaluation], bool] | None = None,
) -> list[tuple]:
    """``smallest`` over each of ``bases``, the searches side by side: each round simulates every unfinished
    search's next value together (``Simulator.evaluate_all``: both cores busy across searches), so each search makes
    the evaluations it would alone, in the same order. With ``clear_miss``, a value that misses by far at its first
    seed is not run at the others. ``sim.too_costly`` is the last search's (in the order of ``bases``) that set it,
    as one after the other."""
    searches = [_smallest(key, fixed, lo) for fixed in bases]
    wants = {i: next(s) for i, s in enumerate(searches)}  # each search's next configuration
    done: dict[int, tuple] = {}
    failed: dict[int, OverBudget] = {}  # a search that ended the question (one after the other, the first did)
    while wants:
        order = list(wants)
        for i, e in zip(order, sim.evaluate_all([wants[i] for i in order], clear_miss, over=True), strict=True):
            if i not in wants:  # a search before it ended the question: it would not have run
                continue
            if e.over is None:
                check(e)
                if e.seeds < sim.seeds:
                    e.why += f" (on {e.seeds} seed: clear at its first)"
            try:
                wants[i] = searches[i].send(e)
            except StopIteration as end:
                done[i] = end.value
                del wants[i]
            except OverBudget as error:
                failed[i] = error
                wants = {j: w for j, w in wants.items() if j < i}
    if failed:
        raise failed[min(failed)]
    for i in sorted(done):  # as one after the other: the last search that set it
        sim.too_costly = done[i][2] or sim.too_costly
    return [done[i][:2] for i in range(len(bases))]


def _smallest(key: str, fixed: dict, lo: int) -> Generator[dict, Evaluation, tuple]:
    """One search of ``smallest``: yields each configuration to simulate, is sent its evaluation (checked), returns
    (``smallest``'s two, and the value past its budget that stopped it and why, or None)."""
    seen: dict[int, Evaluation] = {}

    def ev(v: int) -> Generator[dict, Evaluation, Evaluation]:
        if v not in seen:
            e = yield {**fixed, key: v}
            if e.over is not None:
                raise e.over
            seen[v] = e
        return seen[v]

    v = lo
    while True:
        try:
            if (yield from ev(v)).meets:
                break
        except OverBudget as e:
            if not seen:  # the first value already: nothing searched to keep
                raise
            return None, seen, (v, str(e))
        if v >= MAX_KNOB:
            return None, seen, None
        v = min(MAX_KNOB, max(v * 2, v + 1))
    bad = max((x for x in seen if not seen[x].meets and x < v), default=lo - 1)
    good = v
    while good - bad > 1:
        mid = (good + bad) // 2
        if (yield from ev(mid)).meets:
            good = mid
        else:
            bad = mid
    return good, seen, None


def size_search(sim: Simulator, what: str, evaluations: float, configs: list[dict]) -> None:
    """Refuse, before it starts, a search of about ``evaluations`` configurations × the seeds whose runs would cost
    more than a sweep may (experiments/spec.py ``check_runs``), a run's cost the mean estimate over ``configs``
    (those that do not build left out: their runs will say why)."""
    sizes = []
    for config in configs:
        try:
            sc = load_scenario(sim.scenario, [*sim.sets, *(f"{k}={v}" for k, v in config.items())], sim.params)
        except ScenarioError:
            continue
        sizes.append(MODELS[sc.model].size(sc))
    if not sizes:
        return
    model = MODELS[sim.sc.model]
    how = f"about {evaluations:,.0f} configurations × {sim.seeds} seed{'s' if sim.seeds != 1 else ''}"
    check_runs(f"whatif {what}", evaluations * sim.seeds, sum(sizes) / len(sizes), model, how, "fewer --seeds")


def peak_window(sim: Simulator, shape: str) -> dict:
    """The window of the run's length with the highest mean rate of ``shape``: where a configuration must hold."""
    length = load_scenario(sim.scenario, [*sim.sets, f"arrivals.shape={shape}"], sim.params).duration_s
    profile = parse_shape(shape)
    start = profile.peak_window(length)
    day, hour = divmod(start / 3600.0, 24.0)
    span = f"{length / 3600:g} h" if length >= 3600 else f"{length:g} s"
    at = f"day {day:.0f} {hour:02.0f}:00 (day 0 = Monday 00:00)" if profile.period() >= 86_400 else f"{start:g} s"
    return {
        "start_s": start,
        "length_s": length,
        "mean_factor": Shape(profile.kind, profile.args, start).mean(length),
        "whole_mean_factor": profile.mean(profile.period()),
        "said": f"the {span} of the shape with the highest mean rate, from {at} on",
    }


def busiest_minutes(sim: Simulator, path: str) -> tuple[dict[str, Any], dict]:
    """The settings that replay a trace's busiest stretch of the run's length, and what it is (its mean rate)."""
    trace = dataclasses.replace(sim.sc.trace, path=path, start_minute=0)
    try:
        counts = trace.counts()
    except ValueError as e:
        raise ScenarioError(f"--trace: {e}") from None
    minutes = max(1, math.ceil(sim.sc.duration_s / 60.0))
    if len(counts) < minutes:
        raise ScenarioError(f"--trace: {path} has {len(counts)} minutes, the run {minutes}")
    sums = np.convolve(counts, np.ones(minutes), mode="valid")
    start = int(np.argmax(sums))
    rate = float(sums[start]) / (minutes * 60.0)
    if not rate > 0:
        raise ScenarioError(f"--trace: {path} has no invocations")
    window = {
        "start_s": start * 60.0,
        "length_s": minutes * 60.0,
        "rate": rate,
        "said": f"its busiest {minutes} minutes (from minute {start}: {rate:,.4g} calls/s on average)",
    }
    return {"load": "trace", "trace.path": path, "trace.start_minute": start}, window


def row(e: Evaluation) -> dict:
    """An evaluation as the answer gives it: its configuration, metrics (mean, 95% CI), binding limit, cost and
    verdict."""
    cs = e.metrics["container_seconds"][0]
    return {
        "config": e.config,
        "metrics": {k: {"mean": m, "ci95": c} for k, (m, c) in e.metrics.items()},
        "binding_limit": e.binding,
        "container_seconds": cs,
        "cost_usd": e.metrics["cost_usd"][0],
        "cost_per_hour": e.metrics["cost_per_hour"][0],
        "meets": e.meets,
        "why": e.why,
        "extrapolated": e.extrapolated,
    }


def robustness(
    sim: Simulator,
    out: dict,
    check: Callable[[Evaluation], None] | None,
    jobs: int,
    clear: Callable[[Evaluation], bool] | None = None,
) -> dict:
    """The chosen configuration under every plausible model of the calibration (experiments/uncertainty.py): each
    metric's central value and range, and whether the constraint still holds at the range's worst end. With
    ``clear`` (and ``check``), a sequential test: every model runs at its first seed, and the others only if the
    answer is not yet decided there: a worst end that fails already fails with more runs (they only widen the
    range), and one that passes by far (``clear`` of it) is taken as passing; ``seeds`` then says 1."""
    config = [f"{k}={v}" for k, v in out["chosen"]["config"].items()]
    known = sim.done  # the search's runs: the kept model's at the search's seeds are among them
    runs = 0
    for seeds in (1, sim.seeds) if clear is not None and check is not None and sim.seeds > 1 else (sim.seeds,):
        _, doc = uncertainty.ranges(
            sim.scenario, [*sim.sets, *config], sim.params, seeds, jobs, known=known, bar=sim.bar
        )
        runs += doc["runs"]
        doc["ranges"] = {k: v for k, v in doc["ranges"].items() if k in (*METRICS, "first_n_back_s")}
        if check is None:
            break
        worst = Evaluation(dict(out["chosen"]["config"]))
        for k, lo_hi in doc["ranges"].items():  # fewer calls/s is worse; more of anything else is
            worst.metrics[k] = (lo_hi["low"] if k == "calls_per_s" else lo_hi["high"], None)
        check(worst)
        doc["holds"], doc["why"] = worst.meets, worst.why
        if seeds < sim.seeds and (not worst.meets or clear(worst)):
            doc["why"] += " (on the first seed of every model: clear there)"
            break
    sim.runs += runs
    doc["runs"] = runs
    return doc
