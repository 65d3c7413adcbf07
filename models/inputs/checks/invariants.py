"""What every load test's numbers must satisfy, checked at the end of every run (``check``): a violation is a bug in
the model, not a result, and ends the run with ``InvariantViolated`` (exit 1, one line naming each broken rule).

- Accounting: every call issued is back successfully, back failed, or never back; the calls counted in a window
  were issued in it (``calls``) or came back in it (``calls_back``).
- Little's law over the window, L·T = Σ (time in the window of each call), as the summary's separately folded
  terms: the time in the system of the calls issued in the window and back, less what of it is past the window's
  end, plus the time to the end of those never back, plus the time in the window of those issued before it.
- The limits' bounds, per Function (``Function.violations``): a token bucket of rate r and burst b admits at most
  b + r·t inputs in t seconds (accept, per call style; start, at its highest rate), and the start rate never passes
  its ceiling; the run's pools together never hold more containers than ``workspace.max_containers``, nor launch
  more than the workspace's placement bucket admits (``Workspace.violations``, models/inputs/platform/workspace.py).
- What the callers can issue: a closed-loop slot makes at most one call per shortest call (its work's least value
  plus the legs' least values), so the calls back in a window of T seconds, and the calls issued in it (``calls``,
  the counting rule of ``calls_per_s``), are each at most slots × (T / shortest + 1); an open loop's are at most the
  calls it issued. What the containers can run, where they are capped (``function.containers`` or
  ``autoscaler.max_containers`` per copy, ``workspace.max_containers`` in all): at most cap × max_inputs at once,
  each at least work's least value, so at most cap × max_inputs × (duration / least + 1) calls back by the window's
  end (remote and spawn). The rates are finite and not negative.
- The diagnosis's shares (models/inputs/platform/monitor.py) are shares: each in [0, 1], summing to 1 with ``none`` (or
all
  0 when the window held nothing); ``binding_share`` is the binding limit's share; a run with calls lost to a limit
  names a limit, never ``none``.
- Latency floor: no call's added latency (response − own work) is below the least the legs can add (on the Function
  path ``overhead.submit`` + ``overhead.dispatch`` + ``overhead.result``, at their distributions' least values; on
  the HTTP path the proxy's hop each way, when constant).

Tolerances: sums folded in different orders agree to ``REL``; a duration read from the clock (a response, a time in
the system) is exact to ``CLOCK_ULPS`` ulps of the largest time the run reaches (``clock_tolerance``: for a run of
2e7 s, 6e-8 s; of 1e9 s, 1.9e-6 s), so Little's law allows that per call and the latency floor that once.

The ideal (``ideal_calls_per_s``, calls in flight ÷ mean call: docs/sources.md §1) is a steady rate, not a bound: a
run's calls/s may pass it by chance (an open loop's arrivals are Poisson), and the counting rule counts the calls in
flight at the start, N of them at t = 0, so calls/s is about ideal + N ÷ T: with no overhead and no limit at all the
reference test reads 1,540 against 1,455, and a window of 2 s 4,000 (docs/explanation/input-plane.md, "Reading
calls/s"). The bounds that always hold are the callers' and the containers' above, and a window too short to measure
anything (``window_error``: no slot expected to make a second call, an open loop expecting no arrival) is refused by the
commands before the run (the run function itself still simulates it: a test of one mechanism may issue a burst at t = 0
and nothing after).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from models.inputs.approaches import APPROACHES
from models.inputs.base import Scenario
from models.inputs.platform.monitor import REJECTION_LIMITS
from sim.model import InvariantViolated

if TYPE_CHECKING:
    from models.inputs.parts import Outcome

REL = 1e-9  # float rounding of sums folded in other orders
# The clock's resolution: a time t is held to math.ulp(t) (2.2e-16·t), so a duration read from the clock at time T
# (a response: back − issued, less the work) carries a few ulps of T; the checks on single durations allow CLOCK_ULPS
# ulps of the largest time a run reaches (``horizon``), on top of REL.
CLOCK_ULPS = 8


def horizon(sc: Scenario) -> float:
    """The largest clock reading a run's calls can carry: past the duration, a drain of calls in flight, bounded by
    twice the duration for what tolerances need (a call's times are within it, or the run is past its budget)."""
    return 2.0 * sc.duration_s


def clock_tolerance(sc: Scenario) -> float:
    """What rounding of the clock can make a single duration differ from its exact value (``CLOCK_ULPS``)."""
    return CLOCK_ULPS * math.ulp(horizon(sc))


def violations(sc: Scenario, out: Outcome, metrics: dict) -> list[str]:
    """Every rule of this module that the run's outcome and metrics break (empty: none)."""
    n, found = out.summary.n, list(out.violations)
    m = metrics
    if m["calls_issued"] != m["calls_completed"] + m["errors_total"] + m["calls_in_flight"]:
        found.append(
            f"calls issued {m['calls_issued']:,} != back ok {m['calls_completed']:,} + failed {m['errors_total']:,} "
            f"+ never back {m['calls_in_flight']:,}"
        )
    if n["calls"] > n["issued_calls"]:
        found.append(f"calls counted {n['calls']:,} > calls issued in the window {n['issued_calls']:,}")
    if m["calls_back"] > m["calls_completed"]:
        found.append(f"calls back in the window {m['calls_back']:,} > calls back ok {m['calls_completed']:,}")
    span = sc.duration_s - sc.warmup_s
    lhs = n["overlap_calls"]
    rhs = n["in_system_calls_sum"] - n["past_end_calls"] + n["open_calls"] + n["before_calls"]
    # each call's term is a duration read from the clock: its rounding, summed over the calls, besides REL
    per_call = clock_tolerance(sc) * (m["calls_issued"] + 1)
    if not math.isclose(lhs, rhs, rel_tol=REL, abs_tol=max(1e-6 * span, per_call)):
        found.append(f"Little's law: L·T = {lhs:.9g} call-s, but the window's terms add up to {rhs:.9g}")
    most = _most_back(sc, metrics, span)
    for key, what in (("calls_back", "calls back in the window"), ("calls", "calls issued in the window and back")):
        if m[key] > most:
            found.append(f"{what} {m[key]:,} > the most the callers can make ({most:,.0f})")
    compute = _most_computed(sc)
    if m["calls_back"] > compute:
        found.append(f"calls back in the window {m['calls_back']:,} > the most the containers can run ({compute:,.0f})")
    for key in ("calls_per_s", "calls_back_per_s", "ideal_calls_per_s"):
        if not (math.isfinite(m[key]) and m[key] >= 0):
            found.append(f"{key} {m[key]!r} is not a finite rate >= 0")
    floor = APPROACHES[sc.approach].least_added(sc)
    if out.summary.added_min < floor - REL * max(1.0, floor) - clock_tolerance(sc):
        found.append(f"an added latency of {out.summary.added_min:.9g} s, below the legs' least {floor:.9g} s")
    shares = [v for k, v in m.items() if k.startswith("limit_share_")]
    total = sum(shares)
    if any(not 0.0 <= v <= 1.0 for v in shares) or (total and not math.isclose(total, 1.0, rel_tol=1e-9)):
        found.append(f"limit shares outside [0, 1] or not summing to 1 (sum {total:.9g})")
    binding = m["binding_limit"]
    share = 0.0 if binding == "none" else m.get(f"limit_share_{binding}", 0.0)  # none: no limit's share
    if m["binding_share"] != share or not 0.0 <= m["binding_share"] <= 1.0:
        found.append(f"binding_share {m['binding_share']!r} is not {binding}'s share in [0, 1]")
    if m["binding_limit"] == "none" and set(m["errors_by_kind"]) & set(REJECTION_LIMITS):
        found.append(f"binding limit none with calls lost to limits ({m['errors_by_kind']})")
    return found


def check(sc: Scenario, out: Outcome, metrics: dict) -> None:
    """Raise ``InvariantViolated`` naming every rule the run broke."""
    found = violations(sc, out, metrics)
    if found:
        raise InvariantViolated("invariant violated (a bug in the model): " + "; ".join(found))


def _most_back(sc: Scenario, metrics: dict, span: float) -> float:
    """The most calls the callers can have back in the window."""
    if sc.load != "clients":
        return metrics["calls_issued"]
    approach = APPROACHES[sc.approach]
    if approach.chunks:
        return math.inf  # a chunk carries many calls at once
    shortest = sc.work.low + approach.least_added(sc)
    if not shortest > 0:
        return math.inf  # a call of no length has no bound
    return sc.clients.count * sc.clients.in_flight * (span / shortest + 1.0)


def _most_computed(sc: Scenario) -> float:
    """The most calls the containers can finish by the window's end, where the containers are capped: at most
    cap × max_inputs run at once (per copy ``function.containers`` or ``autoscaler.max_containers``, all of them
    within ``workspace.max_containers``), each one a work of at least work's least value (docs/sources.md §1: throughput
    is capped by compute). The remote and spawn paths only (a chunk or a web request is not one call's work)."""
    if not APPROACHES[sc.approach].call_is_input or not sc.work.low > 0:
        return math.inf
    per_copy = sc.function.containers or sc.autoscaler.max_containers
    copies = sc.function.copies or (sc.clients.count if sc.load == "clients" else 0)
    caps = [c for c in (per_copy * copies if per_copy and copies else 0, sc.workspace.max_containers) if c]
    if not caps:
        return math.inf
    return min(caps) * sc.function.max_inputs * (sc.duration_s / sc.work.low + 1.0)


# a window expecting fewer calls to measure (an open loop's arrivals, a closed loop's calls after those in flight at
# the start) sees none of them in 99% of its runs (Poisson: e^-0.01)
FEWEST = 0.01


# --- windows that cannot measure anything: the commands refuse them (the model's ``unmeasurable``, loadtest.py)
def window_error(sc: Scenario) -> str | None:
    """Why the scenario's run could measure nothing, naming the key to change (None: it can). The rules:

    - a call must be able to come back within the run: the shortest call (work's least value plus the legs' least)
      no longer than ``duration_s + drain_s``;
    - a closed loop that reissues counts its calls in flight at the start (issued at 0) and the calls its slots make
      after them; the window must let the slots expect some: slots × P(a call ≤ duration_s) ≥ ``FEWEST``
      (``p_call_within``; a batched round: its slowest item's work past the legs' least), else calls/s is the calls
      in flight ÷ the window whatever the system does (8,000 calls ÷ 1e-12 s);
    - an open loop's window must expect ``FEWEST`` arrivals or more (its mean rate × the window's length:
      fewer, and 99% of its runs see none);
    - a retried call must be retried within the run: the least first delay (``backoff``: backoff_base_s × 0.5, the
      jitter's least; ``exponential``: backoff_base_s; ``fixed``: retry_delay_s) shorter than ``duration_s +
      drain_s``;
    - without retries, a caller's timeout no shorter than the shortest call (else every call times out and
      fails: with retries, a storm of abandoned inputs is a study of its own), and a fault
      (``faults.crash_at_s``, ``faults.slow_at_s``) before the run ends (else nothing is faulted)."""
    run = sc.duration_s + sc.drain_s
    approach = APPROACHES[sc.approach]
    legs = approach.least_added(sc)
    shortest = sc.work.low + legs
    if shortest > run:
        return (
            f"work: the shortest call ({shortest:.4g} s: work's least plus the legs') is longer than the run "
            f"(duration_s + drain_s = {run:.4g} s): no call can come back"
        )
    if sc.load == "clients" and sc.clients.reissue:
        d = sc.duration_s
        slots, p = approach.slots_back(sc, d, lambda t: p_call_within(sc, t))
        if not slots * p >= FEWEST:
            return (
                f"duration_s: in {d:.4g} s the {slots:,} calls in flight at the start expect {slots * p:.3g} calls "
                f"after them (P(a call <= {d:.4g} s) = {p:.3g}): calls/s would count only the calls in flight at "
                f"the start; lengthen duration_s (a call's work is {sc.work.mean:.4g} s on average)"
            )
    elif sc.load != "clients":
        w, d = sc.warmup_s, sc.duration_s
        src = sc.arrivals if sc.load == "arrivals" else sc.trace
        expected = d * src.mean_rate(d) - (w * src.mean_rate(w) if w > 0 else 0.0)
        if not expected >= FEWEST:
            return (
                f"duration_s: the window [{w:.4g}, {d:.4g}) s expects {expected:.3g} arrivals: "
                f"{math.exp(-max(expected, 0.0)):.0%} of runs would see none, and calls/s and the latency "
                "percentiles measure nothing; lengthen the window or raise the rate"
            )
    c = sc.clients
    if c.timeout_s and c.timeout_s < shortest and c.retry == "none":
        return (
            f"clients.timeout_s: {c.timeout_s:.4g} s is shorter than the shortest call ({shortest:.4g} s: work's "
            "least plus the legs'): every call would time out, and with clients.retry none fail"
        )
    f = sc.faults
    for key, at, on in (("crash_at_s", f.crash_at_s, f.crash_containers), ("slow_at_s", f.slow_at_s, f.slow_s)):
        if on and at >= run:
            return f"faults.{key}: {at:.4g} s is after the run ends (duration_s + drain_s = {run:.4g} s): no fault"
    first = {"backoff": ("backoff_base_s", 0.5 * c.backoff_base_s), "exponential": ("backoff_base_s", c.backoff_base_s)}
    first["fixed"] = ("retry_delay_s", c.retry_delay_s)
    if c.retry in first and c.api == "single" and first[c.retry][1] >= run:
        key, delay = first[c.retry]
        return (
            f"clients.{key}: a first retry {delay:.4g} s or more after a rejection is past "
            f"the run (duration_s + drain_s = {run:.4g} s): no rejected call would be retried"
        )
    return None


CALL_DRAWS = 1 << 16  # draws of a call's length that estimate P(a call <= t) (fixed seed: the same every time)


def p_call_within(sc: Scenario, t: float) -> float:
    """P(a call's length ≤ t) with no wait at all: its work plus its legs (on the Function path submit, dispatch and
    result, drawn; on the HTTP path the proxy's least), estimated from ``CALL_DRAWS`` draws of a fixed seed."""
    approach = APPROACHES[sc.approach]
    if sc.work.low + approach.least_added(sc) > t:
        return 0.0
    rng = np.random.default_rng(0)
    x = approach.plus_legs(sc, sc.work.draw(rng, CALL_DRAWS), rng)
    return float(np.count_nonzero(x <= t)) / CALL_DRAWS
