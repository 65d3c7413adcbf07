"""The run guard: what watches one run as it goes (its budget of events and memory, stalls, a progress hook), handed
to the clock that runs it (``Sim(guard=...)``: sim/engine.py).

A run may be given a *budget* (``Guard.budget``, a ``Budget``; the commands size it from the run's estimate:
models/runs.py ``check_size``): ``Sim.run`` checks it where it already looks up from its loop, every 2^16 entries, so
it costs nothing per event: the entries processed so far by every clock the run's guard was handed to (their sum over
the run's parts and ``run`` calls) and the process's resident memory. Past either, the run ends with ``OverBudget``
(bad input, exit 2), saying how many events in how much simulated time, and what grew: the callbacks of the next
``SAMPLE`` entries, counted by name and told in the model's words (``Budget.grows``). Without a budget (None) nothing
is checked. A budget never changes a number: a run within it is the run without it.

At the same look up the guard tells its ``progress`` hook (a command's bar: sim/cli.py ``RunProgress``) and, every
2^25 entries, checks that the clock has moved (else ``Stalled``). Every budget is scaled by ``SCALESIM_BUDGET``
(``budget_factor``).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from sim.errors import ScenarioError

BUDGET_ENV = "SCALESIM_BUDGET"  # a factor on every budget (a run's size, events, memory; a sweep's)
MEMORY_BUDGET = 2 * 2**30  # bytes a run may hold (its estimate before, its process's resident memory as it runs)
EVENT_FLOOR = 2**19  # events any run may process, however small its estimate (about 3 s of wall time)
# An estimate counts the events a run is expected to process, not a bound on them (a plan's overloaded candidate
# processed 2% more than its estimate): a run is stopped as it runs only past this many times its estimate (with its
# worst-case allowance), where it grows in a way the estimate did not foresee (a retry storm).
RUN_MARGIN = 2.0
# A run whose clock does not move over this many events (2^25, about a minute of wall time) has stopped making
# progress: a time step below the clock's resolution, or a loop of zero delays. More than any legitimate burst at one
# instant: the run-size budgets (models/runs.py) allow at most 10 million calls or 20 million sandboxes a run.
STALL_EVENTS_MASK = 2**25 - 1
CHECK_EVENTS_MASK = 2**16 - 1  # how often Sim.run looks up from its loop (progress, then stalls, then the budget)
SAMPLE = 4096  # entries run and counted by name when a run is past its budget: what grew
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def budget_factor() -> float:
    """SCALESIM_BUDGET, the factor on every budget (default 1); bad input unless a positive number."""
    text = os.environ.get(BUDGET_ENV, "1")
    try:
        factor = float(text)
    except ValueError:
        factor = math.nan
    if not (math.isfinite(factor) and factor > 0):
        raise ScenarioError(f"{BUDGET_ENV}: expected a positive number, got {text!r}")
    return factor


@dataclass(frozen=True)
class Guard:
    """One run's guard: its ``budget`` (None: nothing checked) and a ``progress`` hook called every 2^16 events
    with (now, until) (None: nothing shown)."""

    budget: Budget | None = None
    progress: Callable[[float, float], None] | None = None

    def quiet(self) -> Guard:
        """The same budget, no progress (a run's parts, whose progress their run tells)."""
        return replace(self, progress=None)

    def look_up(self, now: float, until: float, processed: int, checkpoint: float) -> float:
        """``Sim.run``'s look up from its loop, every 2^16 entries: tell the progress hook; every 2^25, check that
        the clock has moved since the last check (else Stalled). Returns the clock at the last stall check."""
        if self.progress is not None:
            self.progress(now, until)
        if not processed & STALL_EVENTS_MASK:
            if now == checkpoint:
                raise Stalled(now, STALL_EVENTS_MASK + 1)
            return now
        return checkpoint


UNGUARDED = Guard()  # a clock's guard unless it is handed one: nothing checked, nothing shown


class Budget:
    """What one run may spend, checked as it goes (``Sim.run``, every 2^16 entries): ``events`` entries processed
    by the run's clocks together (``used``: by the ``run`` calls done) and ``memory`` bytes resident. ``grows``
    tells, for a callback's qualified name, what it is and how to make fewer ("retries", "lengthen
    clients.backoff_base_s"); ``size`` says what the run was estimated at, ``raise_how`` how to raise the budget."""

    def __init__(
        self,
        events: float,
        memory: float = math.inf,
        grows: Mapping[str, tuple[str, str]] | None = None,
        size: str = "",
        raise_how: str = "",
    ) -> None:
        self.events, self.memory = events, memory
        self.grows = grows or {}
        self.size, self.raise_how = size, raise_how
        self.used = 0
        self._why = ""

    def over(self, processed: int) -> bool:
        """Whether the run is past its budget, ``processed`` entries into the current ``run`` call."""
        if self.used + processed > self.events:
            self._why = "events"
            return True
        if self.memory < math.inf and _resident_bytes() > self.memory:
            self._why = "memory"
            return True
        return False

    def exceeded(self, processed: int, now: float, sample: dict[str, int]) -> OverBudget:
        """The error that ends a run past its budget: what was spent, in how much simulated time, what grew."""
        events = self.used + processed
        total = sum(sample.values())
        kinds: dict[tuple[str, str], int] = {}  # by what they are in the model's words (or by name)
        for name, k in sample.items():
            kind = self.grows.get(name, (name, ""))
            kinds[kind] = kinds.get(kind, 0) + k
        grew, advice = [], []
        for (what, how), k in sorted(kinds.items(), key=lambda kv: -kv[1])[:2]:
            if k < 0.2 * total:
                break
            grew.append(f"{what} {k / total:.0%}")
            if how and how not in advice:
                advice.append(how)
        mostly = f" ({', '.join(grew)} of them)" if grew else ""
        if self._why == "memory":
            spent = f"{_resident_bytes() / 2**30:.3g} GiB of memory after {_count(events)} events{mostly}"
            limit = f"the budget of {self.memory / 2**30:.3g} GiB"
        else:
            spent = f"{_count(events)} events{mostly}"
            limit = f"this run's budget of {_count(self.events)} events"
        size = f" ({self.size})" if self.size else ""
        fix = " or ".join([*advice, self.raise_how] if self.raise_how else advice)
        return OverBudget(
            f"run budget: {spent} in {now:.4g} s of simulated time, more than {limit}{size}"
            + (f": {fix}" if fix else ""),
            measured=self._why == "memory",
        )


def _count(n: float) -> str:
    """12,345 as 12.3k; 12,345,678 as 12.3M."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:.0f}"


def _resident_bytes() -> int:
    """This process's resident memory now (Linux: /proc/self/statm; elsewhere the peak, from getrusage)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE_BYTES
    except (OSError, ValueError, IndexError):
        import resource  # (not on Windows: then no memory check)

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


class Stalled(ScenarioError):
    """The simulated clock stopped advancing: bad input (exit 2), not a crash."""

    def __init__(self, now: float, events: int) -> None:
        super().__init__(
            f"the simulation stopped making progress: {events:,} events at t = {now:.9g} s without the clock moving "
            "(a time step too small for the clock, or a loop of zero delays)"
        )


class OverBudget(ScenarioError):
    """A run went past its budget of events or memory as it ran: bad input (exit 2), not a crash. ``measured``: it
    was stopped by what this machine measured (its resident memory), not by what the run is (its events, its
    estimate): another machine may finish it."""

    def __init__(self, message: str, measured: bool = False) -> None:
        super().__init__(message)
        self.measured = measured
