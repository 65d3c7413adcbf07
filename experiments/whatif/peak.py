"""A plan over the demand, not one rate (experiments/whatif/plan.py): the onset of the peak checked, pre-warming where
the pool does not grow in time, and money integrated over the demand.

- **The onset.** The plan's answer is sized on the busiest window at steady state; a real peak starts from the rate
  before it. ``onset`` runs the answer through the demand's steepest rise (``Shape.onset``; a trace's largest
  minute-to-minute rise): the run starts ``lead_s`` before the rise at the rate there and measures the calls that
  arrive from the rise on, for the plan's window. Where that misses the target, the fix is pre-warming: each app
  copy's ``autoscaler.min_containers`` raised from ``lead_s`` before the peak (on Modal a scheduled Function calling
  ``Function.update_autoscaler(min_containers=N)``, modal/_functions.py, on a ``modal.Cron``, and back after the
  peak), the least N that meets it (from the peak's own pool per copy, halved while it meets: at most ``PREWARM_TRIES``
  runs; one whose first seed's p99 is CLEAR × past the limit is not run at its other seeds). Its cost per onset is
  measured, the same arrivals with and without it (common random numbers), and per month × the rises a period
  holds; a standing minimum of N (no schedule) is priced beside it.
- **Money.** $/month is the demand's hours at each rate × the cost per steady-state hour at that rate: the answer's
  configuration simulated at the demand's levels (its distinct rates if at most ``LEVELS``, else the least, the
  median and the greatest over a period; a level within 2% of the sized rate, or the sized rate itself, is the
  answer's own run at the busiest window), linear in between, held beyond.
  The peak 24×7 is given as an upper bound, labelled as such.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from experiments.whatif.search import CLEAR, Evaluation, Simulator
from models.inputs.callers.demand import parse_shape
from models.inputs.platform.billing import HOURS_PER_MONTH

LEAD_S = 120.0  # default: how long before the rise the run starts, and the pre-warm's lead (an assumption to state)
PREWARM_TRIES = 3  # pre-warm sizes simulated at most after the one without
LEVELS = 3  # a demand with more distinct rates is costed at its least, median and greatest


def onset_point(shape: str | None, counts: np.ndarray | None) -> dict | None:
    """The demand's steepest rise: when (shape time, s), the factor (shape) or rate (trace) before it, and how many
    such rises a period holds (a trace: its length); None when nothing rises."""
    if counts is not None:
        rise = np.diff(counts.astype(float))
        if not len(rise) or rise.max() <= 0:
            return None
        i = int(np.argmax(rise))
        steep = rise >= rise[i] / 2.0
        return {
            "at_s": 60.0 * (i + 1),
            "before": counts[i] / 60.0,
            "rises": max(1, int(np.sum(steep[1:] & ~steep[:-1]) + steep[0])),
            "period_h": len(counts) / 60.0,
        }
    on = parse_shape(shape).onset()
    if on is None:
        return None
    return {"at_s": on[0], "before": on[1], "rises": on[2], "period_h": parse_shape(shape).period() / 3600.0}


def onset_config(config: dict[str, Any], point: dict, lead_s: float, window_s: float) -> dict[str, Any]:
    """The answer's configuration run through the rise: from ``lead_s`` before it (the warm-up), ``window_s``
    measured from it."""
    lead = min(lead_s, point["at_s"])
    if config.get("load") == "trace":  # whole minutes: the replay starts at a minute
        lead = 60.0 * max(1, math.floor(lead / 60.0)) if point["at_s"] >= 60 else 0.0
        start = {"trace.start_minute": int((point["at_s"] - lead) // 60)}
    else:
        start = {"arrivals.start_s": point["at_s"] - lead}
    return {**config, **start, "warmup_s": lead, "duration_s": lead + window_s}


def onset(sim: Simulator, answer: dict, point: dict, p99: float, lead_s: float, window_s: float) -> dict:
    """The answer through the demand's steepest rise; pre-warming where it misses (this module's docstring)."""

    def check(e: Evaluation) -> None:  # the calls from the rise on: none failed, p99 within the limit
        errors, got = e.mean("errors"), e.mean("added_latency_p99_s")
        e.meets = errors == 0 and got <= p99
        e.why = f"{errors:,.0f} errors" if errors else f"p99 {got:.3g} s > {p99:g} s" if got > p99 else "meets"

    base = onset_config(answer["config"], point, lead_s, window_s)
    copies = answer["config"].get("function.copies", 1)
    full = max(1, math.ceil((answer["figures"].get("containers_mean", {}).get("mean") or 1.0) / copies))
    tries: list[dict] = []

    def clear_miss(e: Evaluation) -> bool:  # on one seed: far past the limit (Simulator.evaluate_all)
        return e.mean("added_latency_p99_s") > CLEAR * p99

    def run(*ns: int, screen: bool = True) -> list[Evaluation]:
        configs = [{**base, "autoscaler.min_containers": n} if n else base for n in ns]
        evaluations = sim.evaluate_all(configs, clear_miss if screen else None)
        for n, e in zip(ns, evaluations, strict=True):
            check(e)
            tries.append(_try(n, e))
        return evaluations

    # side by side, at every seed (the pre-warm's cost is the difference, same arrivals): its first size is
    # simulated whether needed or not
    without, e = run(0, full, screen=False)
    out = {**point, "lead_s": base["warmup_s"], "window_s": window_s, "tries": tries, "prewarm": None}
    out["meets"] = without.meets
    if without.meets:
        return out
    best = None
    if e.meets:
        best, lo, hi = (full, e), 0, full  # the least that meets lies in (lo, hi]
        while len(tries) < 1 + PREWARM_TRIES and hi - lo > 1:
            mid = (lo + hi) // 2
            (e,) = run(mid)
            if e.meets:
                best, hi = (mid, e), mid
            else:
                lo = mid
    if best is None:
        ahead = f"{base['warmup_s']:g} s ahead"
        out["why"] = f"pre-warming each copy to its peak pool ({full} containers) from {ahead}: {tries[-1]['why']}"
        return out
    n, e = best
    per_onset = e.mean("cost_usd") - without.mean("cost_usd")
    out["prewarm"] = {
        "min_containers": n,
        "copies": copies,
        "lead_s": base["warmup_s"],
        "cost_per_onset": per_onset,
        "p99_s": e.mean("added_latency_p99_s"),
    }
    return out


def _try(n: int, e: Evaluation) -> dict:
    return {
        "min_containers": n,
        "p99_s": e.mean("added_latency_p99_s"),
        "errors": e.mean("errors"),
        "cost_usd": e.mean("cost_usd"),
        "meets": e.meets,
        "why": e.why,
        "seeds": e.seeds,
        "extrapolated": e.extrapolated,
    }


def rates(base_rate: float, shape: str | None, counts: np.ndarray | None) -> np.ndarray:
    """The demand's rate over one period, each sample an equal share of the time (calls/s)."""
    if counts is not None:
        return counts.astype(float) / 60.0
    return base_rate * parse_shape(shape).rates()


def levels(demand: np.ndarray) -> list[float]:
    """The rates the money is simulated at: the distinct ones if at most LEVELS, else least, median, greatest."""
    distinct = np.unique(demand)
    if len(distinct) <= LEVELS:
        return [float(x) for x in distinct]
    return [float(np.min(demand)), float(np.median(demand)), float(np.max(demand))]


def month(
    sim: Simulator, answer: dict, sized_rate: float, demand: np.ndarray, prewarm: dict | None, rises: dict | None
) -> dict:
    """$/month over the demand (this module's docstring), its levels, the pre-warm's share and the 24×7 bound."""
    peak_cost = answer["cost_per_hour"]
    at = levels(demand)
    sized = next((r for r in at if math.isclose(r, sized_rate, rel_tol=0.02)), sized_rate)  # the answer's own run
    want = [r for r in at if r > 0 and r != sized]
    config = {k: v for k, v in answer["config"].items() if not k.startswith(("trace.", "arrivals."))}
    configs = [{**config, "load": "arrivals", "arrivals.rate": r, "arrivals.shape": "steady"} for r in want]
    points = {sized: peak_cost}
    table = [{"rate": sized, "cost_per_hour": peak_cost, "simulated": "the answer's own run (the busiest window)"}]
    for r, e in zip(want, sim.evaluate_all(configs) if configs else [], strict=True):
        points[r] = e.mean("cost_per_hour")
        table.append({"rate": r, "cost_per_hour": points[r], "simulated": "steady at this rate"})
    if 0.0 in demand and 0.0 not in points:
        points[0.0] = 0.0  # no calls, no containers (min_containers 0): nothing billed
        table.append({"rate": 0.0, "cost_per_hour": 0.0, "simulated": "no demand: nothing runs"})
    xs = sorted(points)
    per_hour = np.interp(demand, xs, [points[x] for x in xs])
    serving = float(np.mean(per_hour)) * HOURS_PER_MONTH
    onsets = rises["rises"] * HOURS_PER_MONTH / rises["period_h"] if rises else 0.0
    scheduled = prewarm["cost_per_onset"] * onsets if prewarm else 0.0
    out = {
        "levels": sorted(table, key=lambda t: t["rate"]),
        "serving_per_month": serving,
        "prewarm_per_month": scheduled,
        "onsets_per_month": onsets,
        "cost_per_month": serving + scheduled,
        "peak_24x7_per_month": peak_cost * HOURS_PER_MONTH,
    }
    if prewarm:  # the same minimum held all month instead of scheduled: what the pool would not have kept anyway
        unit = peak_cost / max(answer["figures"].get("containers_mean", {}).get("mean") or 1.0, 1e-9)  # $/container-h
        floor = prewarm["min_containers"] * prewarm["copies"]
        extra = np.maximum(0.0, floor - per_hour / unit)  # containers the minimum keeps that the demand would not
        out["standing_min_per_month"] = float(np.mean(extra)) * unit * HOURS_PER_MONTH
    return out
