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
  more than the workspace's placement bucket admits (``Workspace.violations``, models/inputs/workspace.py).
- What the callers can issue: a closed-loop slot makes at most one call per shortest call (its work's least value
  plus the legs' least values), so the calls back in a window of T seconds are at most slots × (T / shortest + 1);
  an open loop's calls back are at most the calls it issued.
- The diagnosis's shares (models/inputs/monitor.py) are shares: each in [0, 1], summing to 1 with ``none`` (or all
  0 when the window held nothing); a run with calls lost to a limit names a limit, never ``none``.
- Latency floor: no call's added latency (response − own work) is below the least the legs can add (on the Function
  path ``overhead.submit`` + ``overhead.dispatch`` + ``overhead.result``, at their distributions' least values; on
  the HTTP path the proxy's hop each way, when constant).

The ideal (``ideal_calls_per_s``) is an expectation, not a bound: a run's calls/s may pass it by chance (an open
loop's arrivals are Poisson), and the reference rule counts the calls in flight at the start, so a window shorter
than a call reads high (README, "Counting rules"); the bound that always holds is the callers' above.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from models.inputs.base import Scenario
from models.inputs.monitor import REJECTION_LIMITS
from sim.model import InvariantViolated

if TYPE_CHECKING:
    from models.inputs.parts import Outcome

REL = 1e-9  # float rounding of sums folded in other orders


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
    if not math.isclose(lhs, rhs, rel_tol=REL, abs_tol=1e-6 * span):
        found.append(f"Little's law: L·T = {lhs:.9g} call-s, but the window's terms add up to {rhs:.9g}")
    most = _most_back(sc, metrics, span)
    if m["calls_back"] > most:
        found.append(f"calls back in the window {m['calls_back']:,} > the most the callers can make ({most:,.0f})")
    floor = _least_added(sc)
    if out.summary.added_min < floor - 1e-9 * max(1.0, floor):
        found.append(f"an added latency of {out.summary.added_min:.9g} s, below the legs' least {floor:.9g} s")
    shares = [v for k, v in m.items() if k.startswith("limit_share_")]
    total = sum(shares)
    if any(not 0.0 <= v <= 1.0 for v in shares) or (total and not math.isclose(total, 1.0, rel_tol=1e-9)):
        found.append(f"limit shares outside [0, 1] or not summing to 1 (sum {total:.9g})")
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
    shortest = sc.work.low + (_least_added(sc) if sc.approach != "batching" else 0.0)
    if sc.approach == "batching" or not shortest > 0:
        return math.inf  # a chunk carries many calls at once; a call of no length has no bound
    return sc.clients.count * sc.clients.in_flight * (span / shortest + 1.0)


def _least_added(sc: Scenario) -> float:
    """The least added latency a call can have: its legs' least values."""
    if sc.approach == "server":
        return 0.0 if sc.server.proxy_sigma > 0 else 2.0 * sc.server.proxy_latency_s
    o = sc.overhead
    return o.submit.low + o.dispatch.low + o.result.low
