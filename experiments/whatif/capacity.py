"""The capacity question: the fewest of a resource (``--knob``: app copies, max_containers or fixed containers) that
sustains ``--rate`` calls/s of Poisson demand with added-latency p99 ≤ ``--p99`` and no errors.

Search: a probe of the latency floor (the least p99 any value of the knob can have: a target below it is out of
reach), then doubling until the constraint holds, then bisection between the last failing and the first passing
value; it assumes that more of the resource never hurts (monotone), and the answer's next-cheaper value is always
among those simulated and shown to fail.
"""

from __future__ import annotations

import argparse
import math

from experiments.whatif.base import P99, RATE, Flag, Search, positive
from experiments.whatif.search import (
    MAX_KNOB,
    Evaluation,
    Simulator,
    latency_ok,
    robustness,
    row,
    size_search,
    smallest,
)
from models.inputs.approaches import APPROACHES
from sim.scenario import ScenarioError

KNOBS = {
    "copies": "function.copies",
    "max_containers": "autoscaler.max_containers",
    "containers": "function.containers",
}
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


class Capacity(Search):
    """The fewest of a resource that sustains a rate within a p99 (this module's docstring)."""

    name = "capacity"
    flags = (RATE, P99, Flag("--knob", "capacity: the resource (default copies)", "copies", tuple(sorted(KNOBS))))
    scenario = "loadtest-copies"
    defaults = ("duration_s=210", "warmup_s=90")  # the plan's: long enough for the steady cost's MSER-5 (loadtest.py)

    def search(self, args: argparse.Namespace, sim: Simulator, shape: str) -> tuple[dict, list[Evaluation]]:
        if args.rate is None:
            raise ScenarioError("--rate: capacity needs the calls/s to sustain")
        rate = positive("--rate")(args.rate)
        out = capacity(sim, rate, args.p99, args.knob)
        out["search"] = (
            "the latency floor at unlimited capacity (one probe): out of reach"
            if "unreachable" in out
            else "a probe of the latency floor, then doubling and bisection on the knob (monotone)"
        )
        if args.uncertainty and out["chosen"]:
            out["uncertainty"] = robustness(sim, out, latency_ok(args.p99, rate), args.jobs)
        return out, []


def capacity(sim: Simulator, rate: float, p99: float, knob: str) -> dict:
    key = KNOBS[knob]
    fixed = {"load": "arrivals", "arrivals.rate": rate, **_window(sim, rate)}
    check = latency_ok(p99, rate)
    question = f"the fewest {knob} for {rate:g} calls/s with added-latency p99 <= {p99:g} s and no errors"
    size_search(sim, "capacity", 2 * math.log2(MAX_KNOB) + 2, [{**fixed, key: 2**k} for k in range(13)])
    floor = latency_floor(sim, fixed)
    if floor is not None and floor.mean("added_latency_p99_s") > FLOOR_MARGIN * p99:
        out = answer(question, None, {}, key)
        out["floor"] = row(floor)
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
        out["floor"] = row(floor)
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
        out["cheapest"] = {key: cheapest, **row(seen[cheapest])}
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
    apply (an approach that does not call the Function: the server's proxy) or cannot run."""
    if not APPROACHES[sim.sc.approach].calls_function:
        return None
    try:
        return sim.evaluate({**fixed, **FLOOR})
    except ScenarioError:  # (the search's own runs will say why, if it is theirs too)
        return None


def answer(question: str, best: int | None, seen: dict[int, Evaluation], key: str) -> dict:
    """The smallest passing value of ``key``, the value below it (fails) and the next two above (costlier)."""
    chosen = seen.get(best) if best is not None else None
    below = seen.get(best - 1) if best is not None else None
    above = [seen[v] for v in sorted(seen) if best is not None and v > best][:2]
    return {
        "question": question,
        "answer": {key: best} if best is not None else None,
        "chosen": row(chosen) if chosen else None,
        "runners_up": [row(e) for e in above],
        "next_cheaper_fails": [row(below)] if below else [],
    }
