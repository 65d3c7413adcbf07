"""A capacity plan for a Function: which way past its limits, how much of it, what it costs per hour
(``python -m experiments.whatif plan``; experiments/whatif.py runs the simulations, experiments/plan_page.py draws it).

The user describes the Function once (a scenario and ``--set``s: max_inputs, target_inputs, max_containers, the work,
the container's size in ``billing``) and the demand (``--rate`` calls/s, optionally × a ``--shape``), and sets the
constraints (``--p99``, ``--p50``: added latency; errors: none; calls/s: at least 97% of the rate). For each way of
docs/sources.md §1 the plan finds the cheapest configuration that meets them **with headroom** against every limit:

- ``remote``: the Function as it is (one deployment, ``.remote``);
- ``spawn``: the same Function called with ``.spawn`` (its own accept limit, the same start limit);
- ``copies``: N deployed copies, the arrivals round robin; N from the fewest the accept and start limits allow with
  headroom, up by one while a copy fails, and one more for comparison (the cheaper wins);
- ``batching``: the caller gathers arrivals into chunks of ``--chunk`` items (size or ``batching.wait_s``), N copies
  as for copies; a container runs ``max_inputs`` items at once, so max_inputs ÷ chunk chunks;
- ``server``: the Function as a web server (its containers take ``function.max_inputs`` requests at most, aim at
  ``target_inputs``; no input limits). Requests over max_inputs are answered 429 and are no demand to the autoscaler,
  so a server needs target_inputs below max_inputs to grow.

Headroom: at the target rate no limit may be used beyond 1 − ``--headroom`` of what it admits (default 20%): per
Function the accept rate (200/s sync, 1,500/s async; a chunk is one input), the start rate (its ceiling), the
in-system cap (Little's law: calls in flight), ``max_containers`` (the window's mean containers) and the workspace
cap. A way whose limits cannot be met at any scale says which limit, and by how much. A shaped demand is sized on its
busiest window of the run's length (``Shape.peak_window``), a trace (``--trace``) on its busiest minutes, and the
plan says so. Each figure is the mean over
``--seeds`` with its range (least .. greatest over seeds, or with ``--uncertainty`` over the calibration's plausible
models × seeds: experiments/uncertainty.py); cost per hour is the steady window's (``cost_per_hour``), per month ×
730 h, the warm-up's apart (``cost_usd_warmup``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from models.inputs.billing import HOURS_PER_MONTH
from models.inputs.demand import parse_shape
from sim.scenario import ScenarioError

WAYS = ("remote", "spawn", "copies", "batching", "server")
MAX_COPIES = 512  # the copies searched at most per way
TRIES = 6  # configurations simulated at most per way
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


def way_settings(way: str, copies: int, chunk: int, sc: Any) -> dict[str, Any]:
    """The scenario keys of a way at ``copies`` copies (on top of the user's)."""
    if way == "server":
        f = sc.function
        return {"approach": "server", "server.max_concurrency": f.max_inputs, "server.target_concurrency": f.target}
    if way == "batching":  # a container runs max_inputs items at once: max_inputs ÷ chunk chunks
        f = sc.function
        per, target = max(1, f.max_inputs // chunk), max(1, f.target // chunk)
        return {
            "approach": "batching",
            "function.copies": copies,
            "batching.chunk_items": chunk,
            "function.max_inputs": per,
            "function.target_inputs": min(per, target),
        }
    return {"approach": "spawn" if way == "spawn" else "remote", "function.copies": copies}


def limits_used(way: str, copies: int, chunk: int, rate: float, sc: Any, m: dict) -> dict[str, float]:
    """Each limit's share used at the target ``rate`` by a way at ``copies`` (0: not in the way's path)."""
    lim, use = sc.limits, {}
    inputs = rate / chunk if way == "batching" else rate  # a chunk is one input
    per = inputs / copies
    if way != "server" and lim.enabled:
        accept = lim.async_accept_rate if way == "spawn" else lim.sync_accept_rate
        start = max(lim.start_rate, lim.start_rate_max if lim.start_ramp_per_s else 0.0)
        use["accept_rate"] = per / accept
        use["start_rate"] = per / start
        if way != "spawn" and lim.sync_in_system_cap:
            in_flight = m.get("inputs_in_flight_mean") or 0.0
            use["in_system_cap"] = in_flight / copies / lim.sync_in_system_cap
    cap = sc.autoscaler.max_containers
    if cap and way != "server":
        use["max_containers"] = (m.get("containers_mean") or 0.0) / (cap * copies)
    elif cap:
        use["max_containers"] = (m.get("containers_mean") or 0.0) / cap
    if sc.workspace.max_containers:
        use["workspace_cap"] = (m.get("containers_mean") or 0.0) / sc.workspace.max_containers
    return use


def fewest_copies(way: str, chunk: int, rate: float, sc: Any, headroom: float) -> int | None:
    """The fewest copies whose accept and start limits admit ``rate`` with ``headroom`` (None: more than
    MAX_COPIES)."""
    lim = sc.limits
    if not lim.enabled or way == "server":
        return 1
    inputs = rate / chunk if way == "batching" else rate
    accept = lim.async_accept_rate if way == "spawn" else lim.sync_accept_rate
    start = max(lim.start_rate, lim.start_rate_max if lim.start_ramp_per_s else 0.0)
    n = math.ceil(inputs / ((1.0 - headroom) * min(accept, start)) - 1e-9)
    return max(1, n) if n <= MAX_COPIES else None


def verdict(o: Option, rate: float, p99: float, p50: float | None, headroom: float) -> None:
    """Whether an option meets the constraints with headroom, and if not, why (the worst miss first)."""
    misses = []
    over = {k: v for k, v in o.use.items() if v > 1.0 - headroom}
    for k, v in sorted(over.items(), key=lambda kv: -kv[1]):
        misses.append(f"{k} {v:,.0%} used (at most {1 - headroom:.0%})")
    errors = o.mean("errors_total")
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


def demand_label(rate: float, shape: str, window: dict | None, trace: str | None = None) -> str:
    if trace is not None:
        return f"the trace {trace}, sized on {window['said']}"
    if parse_shape(shape).kind == "steady":
        return f"{rate:,.0f} calls/s"
    return f"{rate:,.0f} calls/s × {shape}, sized on {window['said']}" if window else f"{rate:,.0f} calls/s × {shape}"


def option_of(way: str, e: Any, copies: int, chunk: int, rate: float, sc: Any) -> Option:
    """An Option from a what-if Evaluation (experiments/whatif.py) of a way at ``copies``."""
    o = Option(way, dict(e.config), binding=e.binding, agreement=e.agreement, extrapolated=e.extrapolated)
    for k, (mean, _ci) in e.metrics.items():
        if mean is not None:
            low, high = e.spread.get(k, (mean, mean))
            o.figures[k] = (mean, low, high)
    means = {k: v[0] for k, v in o.figures.items()}
    o.use = limits_used(way, copies, chunk, rate, sc, means)
    return o


def plan(
    evaluate: Any,
    sc: Any,
    rate: float,
    p99: float,
    p50: float | None,
    headroom: float,
    chunk: int,
    ways: list[str],
    fixed: dict[str, Any],
    builds: Callable[[dict[str, Any]], Any],
) -> tuple[dict, list[Option]]:
    """For each way its cheapest configuration that meets the constraints with headroom (or its best try and why
    not); ``evaluate(config)`` simulates one configuration over the seeds; ``sc`` is the user's scenario. A way whose
    scenario does not build with this load (``builds(config)`` raises: batching a trace) is skipped, and said why;
    if none builds, the first way's reason is the error."""
    every: list[Option] = []
    chosen: dict[str, Option] = {}
    skipped: dict[str, str] = {}  # the ways that cannot take this load (batching a trace), and why
    for way in ways:
        try:
            builds({**fixed, **way_settings(way, 1, chunk, sc)})
        except ScenarioError as e:
            skipped[way] = str(e)
            continue
        tried: list[Option] = []

        def ev(n: int, way: str = way, tried: list[Option] = tried) -> Option:
            config = {**fixed, **way_settings(way, n, chunk, sc)}
            o = option_of(way, evaluate(config), n, chunk, rate, sc)
            verdict(o, rate, p99, p50, headroom)
            tried.append(o)
            return o

        if way in ("copies", "batching"):
            n = fewest_copies(way, chunk, rate, sc, headroom)
            if n is None:
                o = ev(MAX_COPIES)
                o.why = f"more than {MAX_COPIES} copies needed for the accept and start limits; " + o.why
            else:
                o = ev(n)
                while not o.meets and n < MAX_COPIES and len(tried) < TRIES and _more_copies_help(o):
                    n = min(MAX_COPIES, max(n + 1, math.ceil(n * 1.25)))
                    o = ev(n)
                if o.meets and n < MAX_COPIES:
                    ev(n + 1)  # one more copy may cost less (each copy's pool is sized on its own)
        else:
            ev(1)
        every += tried
        passing = [o for o in tried if o.meets]
        chosen[way] = min(passing, key=lambda o: o.mean("cost_per_hour")) if passing else tried[-1]
    if not chosen:
        raise ScenarioError(next(iter(skipped.values())))
    ways = [w for w in ways if w in chosen]
    ranked = sorted(chosen.values(), key=lambda o: (not o.meets, o.mean("cost_per_hour")))
    best = ranked[0] if ranked and ranked[0].meets else None
    rows = {w: chosen[w].row() for w in ways}
    out = {
        "answer": rows[best.way] if best else None,  # the same row as the table's
        "ways": [rows[w] for w in ways],
        "headroom": headroom,
        "rate": rate,
        "p99_limit": p99,
        "p50_limit": p50,
        "chunk_items": chunk,
        "skipped": skipped,
    }
    return out, every


def _more_copies_help(o: Option) -> bool:
    """Whether more copies could make a failing option meet: not when the workspace's cap is what it misses (every
    copy shares it)."""
    return o.use.get("workspace_cap", 0.0) <= 1.0


def _range(f: dict | None, fmt: str = "{:,.3g}") -> str:
    if not f or f.get("mean") is None or not math.isfinite(f["mean"]):
        return "—"
    mid = fmt.format(f["mean"])
    if f["low"] == f["high"]:
        return mid
    return f"{mid} ({fmt.format(f['low'])} .. {fmt.format(f['high'])})"


def _config(row: dict) -> str:
    c = row["config"]
    if row["way"] in ("copies", "batching"):
        extra = f", chunks of {c['batching.chunk_items']}" if row["way"] == "batching" else ""
        n = c["function.copies"]
        return f"{n} cop{'y' if n == 1 else 'ies'}{extra}"
    return {"remote": ".remote", "spawn": ".spawn", "server": "web server"}[row["way"]]


def headroom_text(row: dict) -> str:
    """The least headroom and its limit: 21% (max_containers); none, the worst over: accept_rate at 1,500%."""
    use = row["limits_used"]
    if not use:
        return "no limit in the way"
    k = max(use, key=lambda x: use[x])
    if use[k] > 1:
        return f"none: {k} at {use[k]:,.0%}"
    return f"{1 - use[k]:.0%} ({k})"


def words(out: dict) -> list[str]:
    """The plan in plain words and a table of the ways."""
    p50 = f", p50 ≤ {out['p50_limit']:g} s" if out["p50_limit"] else ""
    lines = [
        f"Plan for {out['demand']}, added-latency p99 ≤ {out['p99_limit']:g} s{p50}, no errors, "
        f"{out['headroom']:.0%} headroom on every limit; containers of {out['billing']}.",
    ]
    a = out["answer"]
    if a is None:
        lines.append("Answer: no way meets it; the table says what each misses.")
    else:
        f = a["figures"]
        lines.append(
            f"Answer: {a['way']} ({_config(a)}): ${a['cost_per_hour']:,.2f}/h, ${a['cost_per_month']:,.0f}/month at "
            f"steady state, warm-up ${f.get('cost_usd_warmup', {}).get('mean', 0):,.3g}; p99 "
            f"{_range(f.get('added_latency_p99_s'))} s; binds: {a['binding_limit']}; headroom {headroom_text(a)}."
        )
    lines += [
        "",
        "| way | configuration | meets | calls/s | p99 added (s) | containers | $/h | $/month | binds | headroom |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in out["ways"]:
        f = r["figures"]
        meets = "yes" if r["meets"] else f"no: {r['why']}"
        agree = "" if r["binding_agreement"] == 1 else f" ({r['binding_agreement']:.0%} of seeds)"
        lines.append(
            f"| {r['way']} | {_config(r)} | {meets} | {_range(f.get('calls_per_s'), '{:,.0f}')} | "
            f"{_range(f.get('added_latency_p99_s'))} | {_range(f.get('containers_mean'), '{:,.1f}')} | "
            f"{_range(f.get('cost_per_hour'), '${:,.2f}')} | ${r['cost_per_month']:,.0f} | "
            f"{r['binding_limit']}{agree} | {headroom_text(r)} |"
        )
    ranges = (
        "seeds (the answer's: plausible models × seeds)"
        if out["answer"] and "uncertainty" in out["answer"]
        else "seeds"
    )
    for way, why in out.get("skipped", {}).items():
        lines.append(f"| {way} | — | skipped: {why} | | | | | | | |")
    lines.append(
        f"\n{out['simulations']} simulations, {out['seeds']} seeds each; ranges (low .. high) over {ranges}; "
        "$/h: the window's mean containers × the price; headroom: 1 − the most used limit's share."
    )
    return lines
