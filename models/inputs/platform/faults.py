"""Faults of a Function's input plane: timed events that take containers away or slow the Function's work, the
trigger a recovery measurement starts from (models/inputs/checks/recovery.py).

Each fault is a timed event of the ``faults`` section, off by default (a scenario without faults runs exactly as
before), and each is an assumption to be set by the user (docs/sources.md §1 gives no failure figures):

- ``crash`` (``crash_at_s``, ``crash_containers``): at ``crash_at_s`` each Function (each app copy) loses
  ``crash_containers`` of its ready containers (the first ones; all of them if it has fewer), as when a worker is lost
  or preempted. The inputs running on them fail: the Function retries each as its ``function.retries`` policy says
  (modal.Retries: models/inputs/platform/function.py), or it fails for good (error kind ``container_crash``). A fixed
  pool (``function.containers``) starts as many again, each after a cold start; an autoscaler replaces them when it next
  decides.
- ``slow`` (``slow_at_s``, ``slow_s``, ``slow_factor``): a dependency of the Function gets slow. Inputs started in
  [slow_at_s, slow_at_s + slow_s) take ``slow_factor`` times their work (an input's work is set when it starts).

A traffic spike is a demand shape (``arrivals.shape = spike(...)``, models/inputs/callers/demand.py); callers' timeouts
and retry policies are the callers' (models/inputs/callers/retries.py). Faults are modelled for the Function path
(approach remote or spawn); a fault key set on another approach is an error naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sim.engine import Sim
from sim.scenario import param


@dataclass(frozen=True)
class FaultParams:
    crash_at_s: float = param(0.0, ge=0, doc="when the containers crash (simulated seconds)")
    crash_containers: int = param(
        0,
        ge=0,
        le=1_000_000,
        source="assumption: a lost worker or a preemption takes containers with the inputs on them",
        doc="ready containers each Function loses at crash_at_s; 0 = no crash",
    )
    slow_at_s: float = param(0.0, ge=0, doc="when the Function's dependency gets slow (simulated seconds)")
    slow_s: float = param(
        0.0, ge=0, source="assumption: a dependency of the Function gets slow", doc="how long; 0 = no slow-down"
    )
    slow_factor: float = param(
        1.0, ge=1, le=1000, doc="inputs started while it is slow take this many times their work"
    )

    def __post_init__(self) -> None:
        if self.crash_at_s and not self.crash_containers:
            raise ValueError("crash_at_s: set, but crash_containers is 0 (no crash)")
        if (self.slow_at_s or self.slow_factor != 1) and not self.slow_s:
            key = "slow_at_s" if self.slow_at_s else "slow_factor"
            raise ValueError(f"{key}: set, but slow_s is 0 (no slow-down)")

    @property
    def on(self) -> bool:
        return self.crash_containers > 0 or self.slow_s > 0

    def trigger(self) -> tuple[float, float] | None:
        """The slow-down's [start, end): the trigger a recovery is measured from (None: no slow-down)."""
        return (self.slow_at_s, self.slow_at_s + self.slow_s) if self.slow_s > 0 else None


class _Slowed:
    """A Function's work while its dependency is slow: each input's work × the factor."""

    __slots__ = ("factor", "work")

    def __init__(self, work: Sequence[float], factor: float) -> None:
        self.work, self.factor = work, factor

    def __getitem__(self, call: int) -> float:
        return self.work[call] * self.factor


def install(sim: Sim, fp: FaultParams, functions: list) -> None:
    """Schedule the faults on a part's Functions (models/inputs/parts.py; none if no fault is on)."""
    if fp.crash_containers:
        for f in functions:
            f.on = {}  # the Function keeps each running input's container from the start (its crash needs them)

        def crash(_arg: None) -> None:
            for f in functions:
                f.crash(fp.crash_containers)

        sim.call_at(fp.crash_at_s, crash)
    if fp.slow_s > 0:

        def slow(factor: float) -> None:
            for f in functions:
                f._work = _Slowed(f.log.work, factor) if factor != 1 else f.log.work

        sim.call_at(fp.slow_at_s, slow, fp.slow_factor)
        sim.call_at(fp.slow_at_s + fp.slow_s, slow, 1.0)
