"""Capacity-planning what-ifs, answered by search over simulations: ``python -m experiments.whatif QUESTION ...``.

- ``capacity``: the fewest of a resource (``--knob``: app copies, max_containers or fixed containers) that sustains
  ``--rate`` calls/s of Poisson demand with added-latency p99 ≤ ``--p99`` and no errors. Search: doubling until the
  constraint holds, then bisection between the last failing and the first passing value; it assumes that more of
  the resource never hurts (monotone), and the answer's next-cheaper value is always among those simulated and shown
  to fail.
- ``autoscaler``: the min_containers, buffer_containers and scaledown window that keep p99 ≤ ``--p99`` at the fewest
  container-seconds under a demand shape (default: docs/sources.md §7's daily shape), checked on the shape's busiest
  window of the run's length (a day: the week's peak day), not its first. Search: for each (buffer, window) of
  a small grid, bisection on min_containers (p99 falls as it rises); the cheapest passing configuration wins. Every
  simulated configuration is a point of the latency-versus-cost frontier drawn in the HTML report (``--out``).
- ``drain``: the time until ``--calls`` N calls, spawned (``--via spawn``) or mapped (``--via map``) at once, are all
  back (retried with backoff when rejected, as ``.map`` does), and which limit binds; the other way is the
  runner-up.
- ``recovery``: after a traffic spike (``--spikes`` factors × ``--spike-s`` seconds from ``--spike-at``), whether the
  Function comes back within the run and how long it takes, per callers' retry policy (``--policies``), side by
  side; each policy's edge is the largest spike after which every seed recovered (experiments/recovery.py).

Each answer gives the configuration, its metrics as means with 95% CIs over ``--seeds`` replications (t), its cost in
container-seconds and in money (billed to each container's removal, at the scenario's ``billing`` size and
docs/sources.md §6's prices: ``--set billing.cpu=2``; per run and per hour at steady state), the
runner-up options, and how many simulations the search ran: in words and a table, or ``--json``. ``--params`` overlays
a calibrated parameter file (calibration.fit ``--out``), ``--set`` any scenario key.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats
from tqdm import tqdm

from experiments import plan as plan_
from experiments import plan_page, uncertainty
from experiments import recovery as recovery_
from experiments.spec import check_runs
from experiments.whatif_report import frontier_report, words
from models.inputs.demand import Shape, parse_shape
from models.registry import MODELS
from models.runs import load_scenario, run_scenario, warn_extrapolated
from sim.cli import ArgParser, add_set_option, cap_jobs, main_guard, out_path
from sim.files import check_out
from sim.guard import OverBudget
from sim.pools import process_pool
from sim.scenario import ScenarioError

METRICS = (
    "calls_per_s",
    "added_latency_p99_s",
    "added_latency_p50_s",
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
KNOBS = {
    "copies": "function.copies",
    "max_containers": "autoscaler.max_containers",
    "containers": "function.containers",
}
MAX_KNOB = 4096  # the doubling search gives up beyond this many
# capacity's probe of the latency floor: the configuration with more capacity than any value of a knob (no accept or
# start limits, one warm container taking every input at once, no workspace cap); its p99 is the least any can have
# (more capacity never adds latency), so a target below it by FLOOR_MARGIN is out of reach whatever the knob
FLOOR = {
    "limits.enabled": "false",
    "function.copies": 1,
    "function.containers": 1,
    "function.max_inputs": 1_000_000,
    "function.target_inputs": 0,
    "workspace.max_containers": 0,
    "workspace.launch_rate_per_s": 0,
}
FLOOR_MARGIN = 1.25  # the floor's p99 over the target: beyond, nothing meets it (seeds' noise is far smaller)
MIN_ARRIVALS = 50  # capacity's window, lengthened (unless duration_s is set) to expect at least this many calls
# Per question, scenario keys set before --set (which overrides them): a window past the first cold starts for a
# steady rate; a day for the daily shape, one input per container (each container its own slot, so scaling shows);
# an hour's window for a drain (the run ends when every call is back); for a plan's steady cost, a warm-up past the
# start-up's extra containers (launched while the first cold starts run, kept idle for the 60 s scaledown window).
DEFAULTS = {
    "capacity": ("duration_s=120", "warmup_s=30"),
    "autoscaler": ("duration_s=86400", "warmup_s=0", "function.max_inputs=1"),
    "drain": ("duration_s=3600", "warmup_s=0"),
    "plan": ("duration_s=210", "warmup_s=90"),
}


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
        self.sc = load_scenario(scenario, sets, params)  # bad input fails here, before any search
        self.pool = process_pool(jobs) if jobs > 1 else None
        # runs done on stderr, with an ETA against ``expect`` (a search's guess, raised when passed); shown only on a
        # terminal (disable=None) and only once the search has run 3 s
        self.bar = tqdm(total=None, unit="run", desc="simulations", disable=None, delay=3.0, leave=False)

    def expect(self, runs: int) -> None:
        """The runs the search expects to make in all (for the bar's ETA)."""
        self.bar.total = max(runs, self.runs)
        self.bar.refresh()

    def builds(self, config: dict[str, Any]) -> Any:
        """The scenario of ``config`` (a ScenarioError if it does not build), nothing run."""
        return load_scenario(self.scenario, [*self.sets, *(f"{k}={v}" for k, v in config.items())], self.params)

    def evaluate(self, config: dict[str, Any]) -> Evaluation:
        settings = [*self.sets, *(f"{k}={v}" for k, v in config.items())]
        jobs = [(self.scenario, settings, self.params, s) for s in range(self.seeds)]
        runs = []
        for r in self.pool.map(_run, jobs) if self.pool else map(_run, jobs):
            runs.append(r)
            self.runs += 1
            if self.bar.total is not None and self.runs > self.bar.total:
                self.bar.total = self.runs
            self.bar.update()
        e = Evaluation(dict(config))
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

    def close(self) -> None:
        self.bar.close()
        if self.pool:
            self.pool.shutdown()


def _run(job: tuple[str, list[str], list[str], int]) -> dict:
    name, sets, params, seed = job
    m = run_scenario(load_scenario(name, sets, params), seed=seed)
    return {k: m.get(k) for k in (*METRICS, "first_n_back_s", "binding_limit", "extrapolated")}


def _mean_ci(vals: list[float]) -> tuple[float | None, float | None]:
    if not vals:
        return None, None
    mean = float(np.mean(vals))
    if len(vals) < 2:
        return mean, None
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


def smallest(sim: Simulator, key: str, check: Callable[[Evaluation], None], fixed: dict, lo: int = 1) -> tuple:
    """The smallest integer value of ``key`` ≥ ``lo`` whose evaluation meets ``check`` (monotone: doubling, then
    bisection); every evaluation made, by value. None if even MAX_KNOB fails, or if the doubling reaches a value
    whose runs are past their budget before one meets (``sim.too_costly``: that value and why; the search so far
    is kept, not discarded)."""
    seen: dict[int, Evaluation] = {}

    def ev(v: int) -> Evaluation:
        if v not in seen:
            seen[v] = sim.evaluate({**fixed, key: v})
            check(seen[v])
        return seen[v]

    v = lo
    while True:
        try:
            if ev(v).meets:
                break
        except OverBudget as e:
            if not seen:  # the first value already: nothing searched to keep
                raise
            sim.too_costly = (v, str(e))
            return None, seen
        if v >= MAX_KNOB:
            return None, seen
        v = min(MAX_KNOB, max(v * 2, v + 1))
    bad = max((x for x in seen if not seen[x].meets and x < v), default=lo - 1)
    good = v
    while good - bad > 1:
        mid = (good + bad) // 2
        if ev(mid).meets:
            good = mid
        else:
            bad = mid
    return good, seen


# --- the questions ------------------------------------------------------------------------------------------------
def capacity(sim: Simulator, rate: float, p99: float, knob: str) -> dict:
    key = KNOBS[knob]
    fixed = {"load": "arrivals", "arrivals.rate": rate, **_window(sim, rate)}
    check = latency_ok(p99, rate)
    question = f"the fewest {knob} for {rate:g} calls/s with added-latency p99 <= {p99:g} s and no errors"
    size_search(sim, "capacity", 2 * math.log2(MAX_KNOB) + 2, [{**fixed, key: 2**k} for k in range(13)])
    floor = latency_floor(sim, fixed)
    if floor is not None and floor.mean("added_latency_p99_s") > FLOOR_MARGIN * p99:
        out = answer(question, None, {}, key)
        out["floor"] = _row(floor)
        out["unreachable"] = (
            f"even with unlimited warm capacity (no accept or start limits, every input started at once) the "
            f"added-latency p99 is {floor.mean('added_latency_p99_s'):.3g} s, above {p99:g} s: no {knob} can meet it"
        )
        return out
    best, seen = smallest(sim, key, check, fixed)
    if best is not None and best + 1 not in seen and best < MAX_KNOB:  # one more may cost less (pools per copy)
        seen[best + 1] = sim.evaluate({**fixed, key: best + 1})
        check(seen[best + 1])
    out = answer(question, best, seen, key)
    if floor is not None:
        out["floor"] = _row(floor)
    if best is None and floor is not None:  # within reach of warm capacity, not of this knob: say what fails
        last = seen[max(seen)]
        gap, window = 1.0 / rate, sim.sc.autoscaler.scaledown_window_s
        idle = (
            f"; at {rate:g} calls/s ({gap:.3g} s apart) containers scale down between calls (scaledown window "
            f"{window:g} s), so calls pay a cold start: keep some warm (--set autoscaler.min_containers=1) or ask "
            "--knob containers"
            if gap > window and key != "function.containers"
            else ""
        )
        out["why_none"] = (
            f"no {knob} up to {max(seen):,} meets it ({knob} {max(seen):,}: {last.why}), although unlimited warm "
            f"capacity would (added-latency p99 {floor.mean('added_latency_p99_s'):.3g} s){idle}"
        )
    if best is None and sim.too_costly:  # the search stopped short of an answer: say where and why
        v, why = sim.too_costly
        out["why_none"] = (
            out.get("why_none", f"no {knob} up to {max(seen):,} meets it") + f"; {knob} {v:,} was not simulated: {why}"
        )
    passing = [v for v in sorted(seen) if seen[v].meets]
    if passing:
        cheapest = min(passing, key=lambda v: seen[v].mean("cost_per_hour"))
        out["cheapest"] = {key: cheapest, **_row(seen[cheapest])}
    return out


def _window(sim: Simulator, rate: float) -> dict:
    """A window long enough to expect MIN_ARRIVALS calls at ``rate`` (duration_s past the warm-up), unless the user
    set duration_s: a rate too low for the default window would measure nothing."""
    if any(s.split("=", 1)[0].strip() == "duration_s" for s in sim.user_sets):
        return {}
    warmup = sim.sc.warmup_s
    if rate * (sim.sc.duration_s - warmup) >= MIN_ARRIVALS:
        return {}
    return {"duration_s": warmup + MIN_ARRIVALS / rate}


def latency_floor(sim: Simulator, fixed: dict) -> Evaluation | None:
    """The probe of the least added latency any configuration can have (``FLOOR``), or None where it does not
    apply (the server approach) or cannot run."""
    if sim.sc.approach == "server":
        return None
    try:
        return sim.evaluate({**fixed, **FLOOR})
    except ScenarioError:  # (the search's own runs will say why, if it is theirs too)
        return None


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
    return {
        "start_s": start,
        "length_s": length,
        "mean_factor": Shape(profile.kind, profile.args, start).mean(length),
        "whole_mean_factor": profile.mean(profile.period()),
        "said": f"the {length / 3600:g} h of the shape with the highest mean rate, from day {day:.0f} "
        f"{hour:02.0f}:00 on (day 0 = Monday 00:00 for daily)",
    }


def autoscaler(
    sim: Simulator, p99: float, buffers: list[int], windows: list[float], shape: str, rate: float
) -> tuple[dict, list[Evaluation]]:
    window = peak_window(sim, shape)
    fixed = {"load": "arrivals", "arrivals.rate": rate, "arrivals.shape": shape, "arrivals.start_s": window["start_s"]}
    # about half the doubling's steps and two more per grid point (a search finds a small floor early)
    size_search(sim, "autoscaler", len(buffers) * len(windows) * (math.log2(MAX_KNOB) / 2 + 2), [fixed])
    every: list[Evaluation] = []
    passing: list[Evaluation] = []
    for b in buffers:
        for w in windows:
            base = {**fixed, "autoscaler.buffer_containers": b, "autoscaler.scaledown_window_s": w}
            best, seen = smallest(sim, "autoscaler.min_containers", latency_ok(p99), base, lo=0)
            every += seen.values()
            if best is not None:
                passing.append(seen[best])
    question = (
        f"min_containers, buffer_containers and scaledown window keeping p99 <= {p99:g} s at the fewest "
        f"container-seconds, for {rate:g} calls/s × {shape}, checked on {window['said']}"
    )
    ranked = sorted(passing, key=lambda e: e.mean("container_seconds"))
    out = {
        "question": question,
        "window": window,
        "answer": ranked[0].settings() if ranked else None,
        "chosen": _row(ranked[0]) if ranked else None,
        "runners_up": [_row(e) for e in ranked[1:4]],
        "next_cheaper_fails": [_row(e) for e in _cheaper_failing(every, ranked[0])] if ranked else [],
    }
    return out, every


def _cheaper_failing(every: list[Evaluation], best: Evaluation) -> list[Evaluation]:
    """The evaluated configurations cheaper than the answer: each fails the constraint."""
    cheaper = [e for e in every if e.mean("container_seconds") < best.mean("container_seconds")]
    return sorted(cheaper, key=lambda e: -e.mean("container_seconds"))[:3]


def drain(sim: Simulator, calls: int, via: str) -> dict:
    size_search(sim, "drain", 2, [_drain_config(calls, "spawn"), _drain_config(calls, "map")])
    results = {}
    for way in (via, "map" if via == "spawn" else "spawn"):
        e = results[way] = sim.evaluate(_drain_config(calls, way))
        e.meets, e.why = True, ""
        back, ci = e.metrics["first_n_back_s"]
        # calls/s while draining: N over the time until all are back (the window's calls/s is not the drain's)
        e.metrics["calls_per_s"] = (calls / back, calls / back**2 * ci if ci else None) if back else (None, None)
    chosen, other = results[via], results["map" if via == "spawn" else "spawn"]
    return {
        "question": f"how long until {calls:,} {via} calls are all back, and what binds",
        "answer": {"first_n_back_s": chosen.metrics["first_n_back_s"][0], "binding_limit": chosen.binding},
        "chosen": _row(chosen),
        "runners_up": [_row(other)],
        "next_cheaper_fails": [],
    }


def _drain_config(calls: int, way: str) -> dict:
    """N calls at once from one caller, made once (no reissue), retried with backoff when rejected."""
    return {
        "approach": "spawn" if way == "spawn" else "remote",
        "load": "clients",
        "clients.count": 1,
        "clients.in_flight": calls,
        "clients.reissue": "false",
        "clients.retry": "backoff",
    }


def answer(question: str, best: int | None, seen: dict[int, Evaluation], key: str) -> dict:
    """The smallest passing value of ``key``, the value below it (fails) and the next two above (costlier)."""
    chosen = seen.get(best) if best is not None else None
    below = seen.get(best - 1) if best is not None else None
    above = [seen[v] for v in sorted(seen) if best is not None and v > best][:2]
    return {
        "question": question,
        "answer": {key: best} if best is not None else None,
        "chosen": _row(chosen) if chosen else None,
        "runners_up": [_row(e) for e in above],
        "next_cheaper_fails": [_row(below)] if below else [],
    }


def _row(e: Evaluation) -> dict:
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


def robustness(sim: Simulator, out: dict, check: Callable[[Evaluation], None] | None, jobs: int) -> dict:
    """The chosen configuration under every plausible model of the calibration (experiments/uncertainty.py): each
    metric's central value and range, and whether the constraint still holds at the range's worst end."""
    config = [f"{k}={v}" for k, v in out["chosen"]["config"].items()]
    _, doc = uncertainty.ranges(sim.scenario, [*sim.sets, *config], sim.params, sim.seeds, jobs)
    sim.runs += doc["runs"]
    doc["ranges"] = {k: v for k, v in doc["ranges"].items() if k in (*METRICS, "first_n_back_s")}
    if check is not None:
        r = doc["ranges"]
        worst = Evaluation(dict(out["chosen"]["config"]))
        for k, lo_hi in r.items():  # fewer calls/s is worse; more of anything else is
            worst.metrics[k] = (lo_hi["low"] if k == "calls_per_s" else lo_hi["high"], None)
        check(worst)
        doc["holds"], doc["why"] = worst.meets, worst.why
    return doc


# --- the command --------------------------------------------------------------------------------------------------
def positive(name: str, cast: type = float, high: float = 1e12) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            if not str(text).isascii():  # float() reads full-width digits; the scenario's parser does not
                raise ValueError(text)
            v = cast(text)
        except ValueError:
            raise ScenarioError(f"{name}: expected a number, got {text!r}") from None
        if not (0 < v <= high) or (isinstance(v, float) and not math.isfinite(v)):
            raise ScenarioError(f"{name}: must be > 0 and <= {high:g}, got {text}")
        return v

    return parse


def main(argv: list[str] | None = None) -> int:
    p = ArgParser(prog="python -m experiments.whatif", description=__doc__.splitlines()[0])
    p.add_argument("question", choices=["plan", "capacity", "autoscaler", "drain", "recovery"])
    p.add_argument("--scenario", help="the base scenario (default: loadtest-copies, loadtest-remote, loadtest-spawn)")
    add_set_option(p)
    p.add_argument("--params", action="append", default=[], metavar="FILE", help="a parameter file (repeatable)")
    p.add_argument("--seeds", default="3", help="replications per configuration (default 3)")
    p.add_argument("--jobs", default="2", help="worker processes (default 2)")
    p.add_argument("--rate", help="capacity: calls/s to sustain; autoscaler: the demand's mean rate (default 1)")
    p.add_argument("--p99", default="2", help="the added-latency p99 limit, s (default 2)")
    p.add_argument("--knob", choices=sorted(KNOBS), default="copies", help="capacity: the resource (default copies)")
    p.add_argument(
        "--shape", help="the demand's shape (arrivals.shape; plan: default steady; autoscaler: daily(0.3, 0.2))"
    )
    p.add_argument("--p50", help="plan: an added-latency p50 limit too, s")
    p.add_argument("--trace", help="plan: the demand as an Azure per-minute trace (its busiest stretch), not --rate")
    p.add_argument("--headroom", default=str(plan_.HEADROOM), help="plan: the share of every limit kept free")
    p.add_argument("--chunk", default="32", help="plan: batching's items per chunk (default 32)")
    p.add_argument("--ways", default=",".join(plan_.WAYS), help="plan: the ways to compare (default all five)")
    p.add_argument("--buffers", default="0,1,2", help="autoscaler: buffer_containers to try (default 0,1,2)")
    p.add_argument("--windows", default="10,60,300", help="autoscaler: scaledown windows to try, s (default 10,60,300)")
    p.add_argument("--calls", help="drain: how many calls")
    p.add_argument("--via", choices=["spawn", "map"], default="spawn", help="drain: how they are made (default spawn)")
    p.add_argument(
        "--policies",
        default=recovery_.POLICIES,
        help="recovery: clients.retry policies, ':N' for max_attempts, '@T' for clients.timeout_s "
        f"(default {recovery_.POLICIES})",
    )
    p.add_argument("--spikes", default=recovery_.SPIKES, help=f"recovery: spike factors (default {recovery_.SPIKES})")
    p.add_argument("--spike-at", default="600", help="recovery: when the spike starts, s (default 600)")
    p.add_argument("--spike-s", default="60", help="recovery: how long it lasts, s (default 60)")
    p.add_argument("--band", default=str(recovery_.BAND), help="recovery: 'back' within this share (default 0.2)")
    p.add_argument(
        "--uncertainty",
        action="store_true",
        help="also run the answer under every plausible model of the calibration (experiments/uncertainty.py): "
        "its figures with ranges, and whether it still meets the constraint at their worst",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", type=out_path, help="plan, autoscaler: a folder for the HTML page")
    args = p.parse_args(argv)

    def go() -> int:
        seeds = positive("--seeds", int, 1000)(args.seeds)
        jobs = positive("--jobs", int, 1024)(args.jobs)
        p99 = positive("--p99")(args.p99)
        if args.out:
            check_out(args.out, folder=True, inside=("*.html", "*.png"))
        if args.question == "recovery":
            return _recovery(args, seeds)
        default = {"capacity": "loadtest-copies", "autoscaler": "loadtest-remote", "drain": "loadtest-spawn"}
        scenario = args.scenario or default.get(args.question, "loadtest-remote")
        sets = [*DEFAULTS[args.question], *args.sets]
        shape = args.shape or ("daily(0.3, 0.2)" if args.question == "autoscaler" else "steady")
        try:
            parse_shape(shape)
        except ValueError as e:
            raise ScenarioError(f"--shape: {e}") from None
        sim = Simulator(scenario, sets, args.params, seeds, cap_jobs(p.prog, jobs, seeds))
        sim.user_sets = list(args.sets)
        try:
            if args.question == "plan":
                return _plan(args, sim, p99, shape, jobs)
            if args.question == "capacity":
                if args.rate is None:
                    raise ScenarioError("--rate: capacity needs the calls/s to sustain")
                rate = positive("--rate")(args.rate)
                out = capacity(sim, rate, p99, args.knob)
                out["search"] = (
                    "the latency floor at unlimited capacity (one probe): out of reach"
                    if "unreachable" in out
                    else "a probe of the latency floor, then doubling and bisection on the knob (monotone)"
                )
                check = latency_ok(p99, rate)
            elif args.question == "autoscaler":
                rate = positive("--rate")(args.rate or "1")
                buffers = [_int_list("--buffers", x) for x in args.buffers.split(",")]
                windows = [positive("--windows", float, 1200)(x) for x in args.windows.split(",")]
                load_scenario(scenario, [*sets, f"arrivals.shape={shape}"], args.params)
                out, every = autoscaler(sim, p99, buffers, windows, shape, rate)
                out["p99_limit"] = p99
                check = latency_ok(p99)
                out["search"] = (
                    f"bisection on min_containers for each of {len(buffers)} buffers × {len(windows)} windows"
                )
            else:
                if args.calls is None:
                    raise ScenarioError("--calls: drain needs how many calls")
                out = drain(sim, positive("--calls", int, 10_000_000)(args.calls), args.via)
                out["search"] = "the chosen way and the other"
                check = None
            if args.uncertainty and out["chosen"]:
                out["uncertainty"] = u = robustness(sim, out, check, jobs)
                back = u["ranges"].get("first_n_back_s")
                if args.question == "drain" and back and back["low"] > 0:  # calls/s while draining, as drain gives
                    n = out["chosen"]["config"]["clients.in_flight"]
                    u["ranges"]["calls_per_s"] = {
                        "central": n / back["central"],
                        "low": n / back["high"],
                        "high": n / back["low"],
                    }
        finally:
            sim.close()
        out["billing"] = load_scenario(scenario, sets, args.params).billing.describe()
        out["simulations"] = sim.runs
        out["seeds"] = seeds
        if out["chosen"]:
            warn_extrapolated(out["chosen"]["extrapolated"], " (the chosen configuration)")
        if args.json:
            print(json.dumps(out, default=_json))
        else:
            print("\n".join(words(out)))
        if args.question == "autoscaler" and args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            page = frontier_report(out, every, args.out)
            print(f"report: {page}", file=sys.stderr)
        return 0

    return main_guard("experiments.whatif", go)


def _recovery(args: Any, seeds: int) -> int:
    band = positive("--band", float, 1.0)(args.band)
    at = positive("--spike-at", float, 1e9)(args.spike_at)
    length = positive("--spike-s", float, 1e9)(args.spike_s)
    scenario = args.scenario or "mmc"
    sets = [*recovery_.DEFAULTS, *args.sets]
    out, figures = recovery_.recovery_question(
        scenario, sets, args.params, seeds, args.policies, args.spikes, at, length, band
    )
    out["simulations"] = len(out["policies"]) * len(out["policies"][next(iter(out["policies"]))]["rows"]) * seeds
    out["seeds"] = seeds
    print(json.dumps(out, default=_json) if args.json else "\n".join(recovery_.words(out)))
    if args.out:
        png = recovery_.figure(figures, out, args.out)
        print(f"figure: {png}\nreport: {recovery_.page(out, png, args.out)}", file=sys.stderr)
    return 0


def _plan(args: Any, sim: Simulator, p99: float, shape: str, jobs: int) -> int:
    """The plan question: every way compared (experiments/plan.py), in words or JSON, and its page with ``--out``."""
    if args.rate is None and args.trace is None:
        raise ScenarioError("--rate: plan needs the calls/s to serve (or --trace, a per-minute invocation trace)")
    p50 = positive("--p50")(args.p50) if args.p50 is not None else None
    headroom = float(args.headroom) if _is_number(args.headroom) else math.nan
    if not 0 <= headroom < 1:
        raise ScenarioError(f"--headroom: a share of every limit, within [0, 1), got {args.headroom!r}")
    chunk = positive("--chunk", int, 100_000)(args.chunk)
    ways = [w.strip() for w in args.ways.split(",") if w.strip()]
    if not ways or set(ways) - set(plan_.WAYS):
        raise ScenarioError(f"--ways: a list of {', '.join(plan_.WAYS)}, got {args.ways!r}")
    window = None
    if args.trace is not None:  # the trace's busiest stretch of the run's length, replayed
        fixed, window = busiest_minutes(sim, args.trace)
        rate = window["rate"]
    else:
        rate = positive("--rate")(args.rate)
        fixed = {"load": "arrivals", "arrivals.rate": rate, "arrivals.shape": shape}
    if args.trace is None and parse_shape(shape).kind != "steady":
        window = peak_window(sim, shape)
        fixed["arrivals.start_s"] = window["start_s"]
    size_search(sim, "plan", 3 + 2 * 3 * len(ways) // 5, [fixed])
    sim.expect(sim.seeds * (3 + 2 * 3 * len(ways) // 5))
    out, every = plan_.plan(sim.evaluate, sim.sc, rate, p99, p50, headroom, chunk, ways, fixed, sim.builds)
    if args.uncertainty and out["answer"]:  # the answer under every plausible model: its ranges
        best = out["answer"]  # (the answer's row of the table too)
        u = robustness(sim, {"chosen": {"config": best["config"]}}, None, jobs)
        for k, r in u["ranges"].items():
            best["figures"][k] = {"mean": r["central"], "low": r["low"], "high": r["high"]}
        best["uncertainty"] = {k: v for k, v in u.items() if k != "ranges"}
    sim.close()
    out.update(
        demand=plan_.demand_label(rate, shape, window, args.trace),
        window=window,
        billing=sim.sc.billing.describe(),
        simulations=sim.runs,
        seeds=sim.seeds,
        scenario=sim.scenario,
        sets=sim.sets,
    )
    if out["answer"]:
        warn_extrapolated(out["answer"]["extrapolated"], " (the plan's answer)")
    print(json.dumps(out, default=_json) if args.json else "\n".join(plan_.words(out)))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        print(f"report: {plan_page.page(out, every, args.out)}", file=sys.stderr)
    return 0


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


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _int_list(name: str, text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise ScenarioError(f"{name}: expected whole numbers separated by commas, got {text!r}") from None
    if not 0 <= v <= 100_000:
        raise ScenarioError(f"{name}: must be within 0 .. 100000, got {v}")
    return v


def _json(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return str(x)


if __name__ == "__main__":
    sys.exit(main())
