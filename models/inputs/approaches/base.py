"""What a load-test approach is: one way of calling a Function (domain.md §1, "Four ways past the limits").

An approach says how its calls are made (call style, HTTP or not), which callers make them (a ``Load`` of
models/inputs/clients.py, or its own), what they call (one Function per app copy, or something else: the server's
proxy), which scenario sections it adds, and the ideal rate with no overhead. Adding one is a module in this package
and its line in ``APPROACHES`` (models/inputs/approaches/__init__.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from models.inputs.clients import LOADS, Load, Target
from models.inputs.function import SYNC, Function
from models.inputs.overhead import sampler
from models.inputs.records import CallLog
from sim.engine import Sim
from sim.rng import Streams

if TYPE_CHECKING:
    from models.inputs.loadtest import Scenario


class Approach:
    name: ClassVar[str]
    style: ClassVar[int] = SYNC  # how calls are made: .remote (SYNC) or .spawn (ASYNC)
    http: ClassVar[bool] = False  # calls are HTTP requests through the client's connection pool
    sections: ClassVar[dict[str, type]] = {}  # scenario sections this approach adds: {key: parameter class}

    def check(self, sc: Scenario) -> None:
        """Cross-field checks; raise ValueError naming the key."""

    def load(self, sim: Sim, sc: Scenario, log: CallLog, streams: Streams, targets: list[Target]) -> Load:
        """The callers: the scenario's ``load`` (closed-loop clients or open-loop arrivals)."""
        return LOADS[sc.load](sim, sc, log, streams, targets, self.style, self.http)

    def targets(
        self, sim: Sim, sc: Scenario, streams: Streams, log: CallLog, done: Callable[[int], None]
    ) -> list[Target]:
        """What the callers call: ``function.copies`` deployed copies of the Function (0: one per client). ``done``
        is told when a call's work ends (the callers' ``Load.work_ended``)."""
        copies = sc.function.copies or sc.clients.count
        dispatch = sampler(sc.overhead, "dispatch", streams)  # shared by the copies (None: the leg is 0)
        return [
            Function(
                sim,
                "function" if copies == 1 else f"function-copy-{i}",
                sc.function,
                sc.limits,
                sc.autoscaler,
                streams,
                log,
                done,
                dispatch,
            )
            for i in range(copies)
        ]

    def ideal_calls_per_s(self, sc: Scenario) -> float:
        """Calls per second with no overhead at all: calls in flight ÷ mean call duration; open loop: the rate."""
        if sc.load == "arrivals":
            return sc.arrivals.mean_rate(sc.duration_s)
        if sc.load == "trace":
            return sc.trace.mean_rate(sc.duration_s)
        return sc.clients.count * sc.clients.in_flight / sc.work.mean
