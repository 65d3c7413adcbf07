"""A capacity plan for a Function: which way past its limits, how much of it, what it costs per hour and per month
(``python -m experiments.whatif plan``; experiments/whatif/search.py runs the simulations, experiments/whatif/peak.py
the demand's onset and month, experiments/whatif/plan_page.py words and draws it).

The user describes the Function once (a scenario, e.g. from ``python -m experiments.scenario from-app app.py``, and
``--set``s: max_inputs, target_inputs, max_containers, the work, the container's size in ``billing``) and the demand
(``--rate`` calls/s, optionally × a ``--shape``, or a ``--trace``), and sets the constraints (``--p99``, ``--p50``:
added latency; errors: none; calls/s: at least 97% of the rate). For each call style of docs/sources.md §1, each over
app copies (way 2) where it calls the Function, the plan finds the cheapest configuration that meets them **with
headroom** against every limit:

- ``remote``: ``.remote`` (the synchronous accept limit, 200/s per Function);
- ``spawn``: ``.spawn`` (its own accept limit, 1,500/s, the same start limit);
- ``map``: ``.map`` over the caller's inputs; it needs them at hand (closed-loop callers), so an open-loop demand or
  a trace skips it, saying why;
- ``batching``: the caller gathers arrivals into chunks of ``--chunk`` items (size or ``batching.wait_s``); a
  container runs ``max_inputs`` items at once, so max_inputs ÷ chunk chunks;
- ``server``: the Function as a web server (its containers take ``function.max_inputs`` requests at most, aim at
  ``target_inputs``; no input limits). Requests over max_inputs are answered 429 and are no demand to the autoscaler,
  so a server needs target_inputs below max_inputs to grow.

Copies start from the fewest the accept and start limits allow with headroom, go up while a copy fails, and one more
is tried once one meets (the cheaper wins); the ways are searched side by side. The table gives each way's choice, and
every combination simulated says why it is not the answer.

Headroom: at the target rate no limit may be used beyond 1 − ``--headroom`` of what it admits (default 20%): per
Function the accept rate (a chunk is one input), the start rate (its ceiling), the in-system cap (Little's law: calls
in flight), ``max_containers`` (the window's mean containers) and the workspace cap. A way that fails shows no
headroom, only why. A shaped demand is sized at its busiest window of the run's length (``Shape.peak_window``: the
window's mean rate), a trace at its busiest minutes; for either the answer is then run through the demand's steepest
rise, pre-warmed where it misses (``--lead``), and priced per month over the demand (experiments/whatif/peak.py).
Each figure is the mean over ``--seeds`` with its range (least .. greatest over seeds, or with ``--uncertainty`` over
the calibration's plausible models × seeds: experiments/uncertainty.py); cost per hour is the steady part's, after
the warm-up MSER-5 detects (``cost_per_hour``), per month × 730 h at one rate (24×7), the warm-up's apart
(``cost_usd_warmup``).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from experiments.whatif.base import P99, RATE, SHAPE, Flag, Search, positive, print_answer
from experiments.whatif.peak import LEAD_S, PREWARM_TRIES, month, onset, onset_point, rates
from experiments.whatif.plan_page import demand_label, described, page, words
from experiments.whatif.search import (
    CLEAR,
    Simulator,
    busiest_minutes,
    clear_within,
    latency_ok,
    peak_window,
    robustness,
    size_search,
)
from models.inputs.approaches import ALIASES, PLAN_WAYS
from models.inputs.callers.demand import parse_shape
from models.inputs.platform.billing import HOURS_PER_MONTH
from models.runs import warn_extrapolated
from sim.guard import OverBudget
from sim.scenario import ScenarioError

WAYS = tuple(PLAN_WAYS)  # the ways a plan weighs, in its table's order (models/inputs/approaches)
MAX_COPIES = 512  # the copies searched at most per way
TRIES = 6  # configurations simulated at most per way
GROWTH = 1.5  # a failing way's copies, times this at the next try (NEAR_GROWTH after a near miss)
NEAR_GROWTH = 1.15
HEADROOM = 0.2


@dataclass
class Option:
    """One configuration of a way, simulated: its figures (mean, low, high), limits' use, and the verdict."""

    way: str
    config: dict[str, Any]
    figures: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    use: dict[str, float] = field(default_factory=dict)  # each limit's share used at the target rate (0 .. ∞)
    binding: str = ""
    agreement: float = 1.0  # the share of seeds naming the binding limit
    meets: bool = False
    why: str = ""
    extrapolated: list[str] = field(default_factory=list)
    loses: str = ""  # why it is not the answer (``plan``)

    def mean(self, key: str) -> float:
        return self.figures.get(key, (math.inf,) * 3)[0]

    def row(self) -> dict:
        cost = self.mean("cost_per_hour")
        return {
            "way": self.way,
            "config": self.config,
            "meets": self.meets,
            "why": self.why,
            "binding_limit": self.binding,
            "binding_agreement": self.agreement,
            "figures": {k: {"mean": m, "low": lo, "high": hi} for k, (m, lo, hi) in self.figures.items()},
            "limits_used": self.use,
            "headroom": 1.0 - max(self.use.values(), default=0.0),  # negative: a limit is over
            "cost_per_hour": cost,
            "cost_per_month": cost * HOURS_PER_MONTH,
            "extrapolated": self.extrapolated,
        }


def limits_used(way: str, copies: int, chunk: int, rate: float, sc: Any, m: dict) -> dict[str, float]:
    """Each limit's share used at the target ``rate`` by a way at ``copies`` (0: not in the way's path)."""
    w, lim, use = PLAN_WAYS[way], sc.limits, {}
    per = w.inputs_per_s(rate, chunk) / copies
    if w.calls_function and lim.enabled:
        start = max(lim.start_rate, lim.start_rate_max if lim.start_ramp_per_s else 0.0)
        use["accept_rate"] = per / w.accept_rate(lim)
        use["start_rate"] = per / start
        if w.in_system_cap(lim):
            use["in_system_cap"] = (m.get("inputs_in_flight_mean") or 0.0) / copies / w.in_system_cap(lim)
    cap = sc.autoscaler.max_containers
    if cap:  # each app copy's own cap; the server's one pool
        use["max_containers"] = (m.get("containers_mean") or 0.0) / (cap * copies if w.calls_function else cap)
    if sc.workspace.max_containers:
        use["workspace_cap"] = (m.get("containers_mean") or 0.0) / sc.workspace.max_containers
    return use


def fewest_copies(way: str, chunk: int, rate: float, sc: Any, headroom: float) -> int | None:
    """The fewest copies whose accept and start limits admit ``rate`` with ``headroom`` (None: more than
    MAX_COPIES)."""
    w, lim = PLAN_WAYS[way], sc.limits
    if not lim.enabled or not w.calls_function:
        return 1
    start = max(lim.start_rate, lim.start_rate_max if lim.start_ramp_per_s else 0.0)
    n = math.ceil(w.inputs_per_s(rate, chunk) / ((1.0 - headroom) * min(w.accept_rate(lim), start)) - 1e-9)
    return max(1, n) if n <= MAX_COPIES else None


def verdict(o: Option, rate: float, p99: float, p50: float | None, headroom: float) -> None:
    """Whether an option meets the constraints with headroom, and if not, why (the worst miss first)."""
    misses = []
    over = {k: v for k, v in o.use.items() if v > 1.0 - headroom}
    for k, v in sorted(over.items(), key=lambda kv: -kv[1]):
        misses.append(f"{k} {v:,.0%} used (at most {1 - headroom:.0%})")
    errors = o.mean("errors")  # of the steady window: the start at full load from no container is the onset's
    if errors > 0:
        misses.append(f"{errors:,.0f} errors ({o.binding})")
    got = o.mean("calls_served_per_s")  # the demand served, whenever back (an open loop's headline lags it)
    if got < 0.97 * rate:
        misses.append(f"{got:,.0f} calls/s of {rate:,.0f} ({o.binding})")
    if o.mean("added_latency_p99_s") > p99:
        misses.append(f"p99 {_s(o.mean('added_latency_p99_s'), p99)} > {p99:g} s")
    if p50 is not None and o.mean("added_latency_p50_s") > p50:
        misses.append(f"p50 {_s(o.mean('added_latency_p50_s'), p50)} > {p50:g} s")
    o.meets, o.why = not misses, "; ".join(misses) or "meets"


def _s(value: float, limit: float) -> str:
    """A value beside its limit with the digits that tell them apart (1.004 > 1, not 1 > 1)."""
    for digits in range(3, 8):
        text = f"{value:.{digits}g}"
        if float(text) != limit:
            return text + " s"
    return f"{value!r} s"


def option_of(way: str, e: Any, copies: int, chunk: int, rate: float, sc: Any) -> Option:
    """An Option from a what-if Evaluation (experiments/whatif/search.py) of a way at ``copies``."""
    o = Option(way, dict(e.config), binding=e.binding, agreement=e.agreement, extrapolated=e.extrapolated)
    for k, (mean, _ci) in e.metrics.items():
        if mean is not None:
            low, high = e.spread.get(k, (mean, mean))
            o.figures[k] = (mean, low, high)
    means = {k: v[0] for k, v in o.figures.items()}
    o.use = limits_used(way, copies, chunk, rate, sc, means)
    return o


def plan(
    evaluate_all: Callable[[list[dict[str, Any]]], list[Any]],
    sc: Any,
    rate: float,
    p99: float,
    p50: float | None,
    headroom: float,
    chunk: int,
    ways: list[str],
    fixed: dict[str, Any],
    builds: Callable[[dict[str, Any]], Any],
    seeds: int = 1,
) -> tuple[dict, list[Option]]:
    """For each way its cheapest configuration that meets the constraints with headroom (or its best try and why
    not); ``evaluate_all(configs)`` simulates configurations over the seeds; ``sc`` is the user's scenario. A way
    whose scenario does not build with this load (``builds(config)`` raises: batching a trace, ``.map`` of open-loop
    arrivals) is skipped, and said why; if none builds, the first way's reason is the error. The ways are searched
    side by side, each round's configurations simulated together: a way that calls the Function from the fewest app
    copies its accept and start limits admit with headroom, × GROWTH while it fails (× NEAR_GROWTH after a near
    miss), then the fewest that meet by bisection, and one more copy unless a larger count met already (the cheaper
    wins). A failing way stops once its try costs more per hour than one
    that meets, or once its next try would at its cost per copy so far (a failing way's pools grow with its copies),
    and says so. A configuration that on its first seed misses by far (p99 over CLEAR × the limit, or under 1/CLEAR of
    the rate served) or costs CLEAR × one that meets is not run at its other ``seeds`` (a sequential test), and says
    so."""
    tried: dict[str, list[Option]] = {}
    skipped: dict[str, str] = {}  # the ways that cannot take this load, and why
    pending: dict[str, int] = {}  # each way's next app copies to simulate
    first: dict[str, int] = {}  # each way's first: the fewest copies its limits admit
    for way in ways:
        try:
            builds({**fixed, **PLAN_WAYS[way].plan_settings(1, chunk, sc)})
        except ScenarioError as e:
            skipped[way] = str(e)
            continue
        tried[way] = []
        n = fewest_copies(way, chunk, rate, sc, headroom)
        pending[way] = first[way] = MAX_COPIES if n is None else n
    cheapest = math.inf  # the least cost per hour of an option that meets, so far

    def clear_miss(e: Any) -> bool:  # on one seed: far past a limit, or far dearer than one that meets
        p99_far = (e.mean("added_latency_p99_s") or 0.0) > CLEAR * p99
        return p99_far or e.mean("calls_served_per_s") < rate / CLEAR or e.mean("cost_per_hour") > CLEAR * cheapest

    while pending:
        configs = [{**fixed, **PLAN_WAYS[w].plan_settings(n, chunk, sc)} for w, n in pending.items()]
        for (way, n), e in zip(pending.items(), evaluate_all(configs, clear_miss), strict=True):
            o = option_of(way, e, n, chunk, rate, sc)
            verdict(o, rate, p99, p50, headroom)
            if n == MAX_COPIES and fewest_copies(way, chunk, rate, sc, headroom) is None:
                o.why = f"more than {MAX_COPIES} copies needed for the accept and start limits; " + o.why
            if e.seeds < seeds:
                o.why += f" (on {e.seeds} seed: clear at its first)"
            tried[way].append(o)
        cheapest = min((o.mean("cost_per_hour") for t in tried.values() for o in t if o.meets), default=math.inf)
        after: dict[str, int] = {}
        for way, n in pending.items():
            o, options = tried[way][-1], tried[way]
            if not PLAN_WAYS[way].calls_function or n >= MAX_COPIES:
                continue
            copies = {t.config["function.copies"]: t.meets for t in options}
            least = min((c for c, meets in copies.items() if meets), default=None)
            if least is not None:  # the fewest that meet, by bisection, then one more (it may cost less)
                below = max((c for c, meets in copies.items() if not meets and c < least), default=first[way] - 1)
                more = max(copies) > least  # a larger count met already: it said whether more copies cost less
                step = (below + least) // 2 if least - below > 1 else None if more else least + 1
                if step is not None and step not in copies and step <= MAX_COPIES:
                    after[way] = step
            elif o.mean("cost_per_hour") > cheapest:  # more copies of it would cost more still
                o.why += f"; stopped: it already costs more than ${cheapest:,.2f}/h, a way that meets"
            elif len(options) < TRIES and _more_copies_help(o):
                near = not clear_miss(o)  # a near miss: a small step
                bigger = min(MAX_COPIES, max(n + 1, math.ceil(n * (NEAR_GROWTH if near else GROWTH))))
                guess = o.mean("cost_per_hour") / n * bigger  # a failing way's pools grow with its copies
                if guess > cheapest:
                    o.why += (
                        f"; stopped: {bigger} copies at its ${o.mean('cost_per_hour') / n:,.2f}/h per copy would cost "
                        f"about ${guess:,.2f}/h, more than ${cheapest:,.2f}/h, a way that meets"
                    )
                else:
                    after[way] = bigger
        pending = after
    if not tried:
        raise ScenarioError(next(iter(skipped.values())))
    chosen = {}
    for way, options in tried.items():
        passing = [o for o in options if o.meets]
        chosen[way] = min(passing, key=lambda o: o.mean("cost_per_hour")) if passing else options[-1]
    ranked = sorted(chosen.values(), key=lambda o: (not o.meets, o.mean("cost_per_hour")))
    best = ranked[0] if ranked and ranked[0].meets else None
    every = [o for options in tried.values() for o in options]
    rows = {w: chosen[w].row() for w in tried}
    for o in every:  # why each combination is not the answer
        o.loses = _loses(o, best)
    for w, r in rows.items():
        r["loses"] = chosen[w].loses
    out = {
        "answer": rows[best.way] if best else None,  # the same row as the table's
        "ways": list(rows.values()),
        "combinations": [{**o.row(), "loses": o.loses} for o in every],
        "headroom": headroom,
        "rate": rate,
        "p99_limit": p99,
        "p50_limit": p50,
        "chunk_items": chunk,
        "skipped": skipped,
    }
    return out, every


def _loses(o: Option, best: Option | None) -> str:
    """Why a combination is not the answer: it is; it fails (why); or it meets and costs more (by how much)."""
    if o is best:
        return "the answer: the cheapest that meets"
    if not o.meets:
        return o.why
    extra = o.mean("cost_per_hour") - best.mean("cost_per_hour")
    return f"meets, ${extra:,.2f}/h more than the answer ({extra / best.mean('cost_per_hour'):+.0%})"


def _more_copies_help(o: Option) -> bool:
    """Whether more copies could make a failing option meet: not when the workspace's cap is what it misses (every
    copy shares it)."""
    return o.use.get("workspace_cap", 0.0) <= 1.0


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


class Plan(Search):
    """Every way past the limits compared, and the cheapest that meets the constraints (this module's docstring)."""

    name = "plan"
    side_by_side = len(WAYS)  # its ways' configurations, each round
    flags = (
        RATE,
        P99,
        SHAPE,
        Flag("--p50", "plan: an added-latency p50 limit too, s"),
        Flag("--trace", "plan: the demand as an Azure per-minute trace (its busiest stretch), not --rate"),
        Flag("--headroom", "plan: the share of every limit kept free", str(HEADROOM)),
        Flag("--chunk", "plan: batching's items per chunk (default 32)", "32"),
        Flag("--ways", "plan: the ways to compare (default all five)", ",".join(WAYS)),
        Flag("--lead", "plan: a shaped or traced demand's pre-warm lead: seconds before the peak's rise", str(LEAD_S)),
    )
    # for a plan's steady cost, a warm-up past the start-up's extra containers (launched while the first cold starts
    # run, kept idle for the 60 s scaledown window)
    defaults = ("duration_s=210", "warmup_s=90")

    def search(self, args: argparse.Namespace, sim: Simulator, shape: str) -> tuple[dict, list[Option]]:
        if args.rate is None and args.trace is None:
            raise ScenarioError("--rate: plan needs the calls/s to serve (or --trace, a per-minute invocation trace)")
        p50 = positive("--p50")(args.p50) if args.p50 is not None else None
        headroom = float(args.headroom) if _is_number(args.headroom) else math.nan
        if not 0 <= headroom < 1:
            raise ScenarioError(f"--headroom: a share of every limit, within [0, 1), got {args.headroom!r}")
        chunk = positive("--chunk", int, 100_000)(args.chunk)
        ways = list(dict.fromkeys(ALIASES.get(w.strip(), w.strip()) for w in args.ways.split(",") if w.strip()))
        if not ways or set(ways) - set(WAYS):
            raise ScenarioError(f"--ways: a list of {', '.join(WAYS)}, got {args.ways!r}")
        window, counts = None, None
        if args.trace is not None:  # the trace's busiest stretch of the run's length, replayed
            fixed, window = busiest_minutes(sim, args.trace)
            rate = sized = window["rate"]
            counts = dataclasses.replace(sim.sc.trace, path=args.trace, start_minute=0).counts()
        else:
            rate = sized = positive("--rate")(args.rate)
            fixed = {"load": "arrivals", "arrivals.rate": rate, "arrivals.shape": shape}
        if args.trace is None and parse_shape(shape).kind != "steady":
            window = peak_window(sim, shape)
            fixed["arrivals.start_s"] = window["start_s"]
            sized = rate * window["mean_factor"]  # what the window brings: the limits' use and the calls/s to serve
        lead = positive("--lead", float, 86_400)(args.lead)
        point = onset_point(None if counts is not None else shape, counts)
        evaluations = 3 + 2 * 3 * len(ways) // 5 + (2 + PREWARM_TRIES if point else 0)
        size_search(sim, "plan", evaluations, [fixed])
        sim.expect(sim.seeds * evaluations)
        out, every = plan(
            sim.evaluate_all, sim.sc, sized, args.p99, p50, headroom, chunk, ways, fixed, sim.builds, sim.seeds
        )
        best = out["answer"]
        if best and point:  # the demand, not one rate: its onset, and money over it
            window_s = sim.sc.duration_s - sim.sc.warmup_s
            out["onset"] = onset(sim, best, point, args.p99, lead, window_s)
            demand = rates(rate, shape, counts)
            out["month"] = month(sim, best, sized, demand, out["onset"]["prewarm"], point)
        if args.uncertainty and best:  # the answer under every plausible model: its ranges
            try:
                check, clear = latency_ok(args.p99, sized), clear_within(args.p99 / CLEAR)  # at the ranges' worst end
                u = robustness(sim, {"chosen": {"config": best["config"]}}, check, args.jobs, clear)
            except OverBudget as e:  # the plan stands; its ranges are missing, and it says why
                best["uncertainty_missing"] = f"--uncertainty: a plausible model's run went past its budget ({e})"
                print(f"warning: {best['uncertainty_missing']}: the plan has no ranges", file=sys.stderr)
            else:
                for k, r in u["ranges"].items():  # (the answer's row of the table too)
                    best["figures"][k] = {"mean": r["central"], "low": r["low"], "high": r["high"]}
                best["uncertainty"] = u
        out.update(demand=demand_label(rate, shape, window, args.trace), window=window, sized_rate=sized)
        return out, every

    def say(self, args: argparse.Namespace, sim: Simulator, out: dict, every: list[Option]) -> None:
        """The plan in words or ``--json``, what it was computed from, and its page with ``--out``."""
        out.update(
            billing=sim.sc.billing.describe(),
            simulations=sim.runs,
            seeds=sim.seeds,
            scenario=sim.scenario,
            sets=sim.sets,
            described=described(sim.sc),
        )
        if out["answer"]:
            warn_extrapolated(out["answer"]["extrapolated"], " (the plan's answer)")
        print_answer(args, out, words)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            print(f"report: {page(out, every, args.out)}", file=sys.stderr)
