"""What a load-test approach is: one way of calling a Function (docs/sources.md §1, "Four ways past the limits").

An approach says how its calls are made (call style, HTTP or not), which callers make them (a ``Load`` of
models/inputs/callers/clients.py, or its own), what they call (one Function per app copy, or something else: the
server's proxy), which scenario sections it adds, and the ideal rate with no overhead; and what the rest of the code
asks of it: whether it calls the Function and whether each call is one input (the checks, shortcuts and size estimate
read these), the least a call's legs add, its pools, and its settings, limits, label and colour as an option of a plan
(experiments/plan.py). Code outside this package asks these of ``APPROACHES[name]``, never a name. It reads the scenario
as models/inputs/base.py's ``Scenario`` protocol (and its own sections), never the schema, which is built from the
approaches. Adding one is a module in this package and its line in ``APPROACHES``
(models/inputs/approaches/__init__.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from models.inputs.base import Scenario
from models.inputs.callers.arrivals import OpenLoop, TraceReplay
from models.inputs.callers.clients import Load, Target
from models.inputs.callers.closedloop import ClosedLoop
from models.inputs.platform import fifo
from models.inputs.platform.function import SYNC, Function, LimitParams
from models.inputs.platform.overhead import sampler
from models.inputs.records import CallLog
from models.inputs.shortcut_names import FIFO
from sim.engine import Sim
from sim.rng import Streams

# the callers a scenario's ``load`` key names: closed-loop clients, open-loop arrivals, a replayed trace
LOADS: dict[str, type[Load]] = {"clients": ClosedLoop, "arrivals": OpenLoop, "trace": TraceReplay}
PART_CALLS = 1000  # the fewest calls in flight a part of app copies holds, when its copies have fewer (parts.py)


class Approach:
    name: ClassVar[str]
    style: ClassVar[int] = SYNC  # how calls are made: .remote (SYNC) or .spawn (ASYNC)
    http: ClassVar[bool] = False  # calls are HTTP requests through the client's connection pool
    maps: ClassVar[bool] = True  # its clients may map over their calls (clients.api = "map": .map, .spawn_map)
    sections: ClassVar[dict[str, type]] = {}  # scenario sections this approach adds: {key: parameter class}
    # its callers call the Function: one per app copy (``function.copies``), each a pool of its own behind the input
    # plane (its limits, the ``overhead`` legs, ``function.containers``); else a pool of its own (the server's proxy)
    calls_function: ClassVar[bool] = True
    chunks: ClassVar[bool] = False  # a call is a chunk of items, one input carrying many calls at once
    # each call is one input of the Function, made by its callers directly (.remote, .spawn: the Function path): what
    # is modelled there only (client timeouts, faults) and the shortcuts' shapes proven there take it; declared, so
    # that a new approach is in none of them until it says so
    call_is_input: ClassVar[bool] = False
    label: ClassVar[str]  # its name in a plan's table
    colour: ClassVar[str]  # its colour in every plot and page, the same everywhere

    def check(self, sc: Scenario) -> None:
        """Cross-field checks; raise ValueError naming the key."""

    def parts(self, sc: Scenario) -> int:
        """How many independent parts the run falls into: app copies under closed-loop clients (client i calls copy
        i mod copies, nothing else is shared) are parts of ``PART_CALLS`` calls in flight or more (one copy each if
        it has that many), the copies no client calls one more part (unless they keep containers with no load:
        ``min_containers``, whose billing past the run's end the shortcut does not reproduce); anything else, 1."""
        copies, busy, per_part = self._layout(sc)
        if sc.load != "clients" or copies == 1:
            return 1
        if copies > busy and sc.autoscaler.min_containers:  # an idle copy that keeps containers: its part's tail
            return 1  # does not run as the whole run's does (tests/models/inputs/test_shortcuts.py found it)
        return -(-busy // per_part) + (copies > busy)

    @staticmethod
    def _layout(sc: Scenario) -> tuple[int, int, int]:
        """(copies, copies with clients, copies per part)."""
        copies = sc.function.copies or sc.clients.count
        busy = min(copies, sc.clients.count)
        return copies, busy, max(1, PART_CALLS * busy // (sc.clients.count * sc.clients.in_flight))

    def copies_of(self, sc: Scenario, part: int, parts: int) -> range:
        """The app copies of part ``part`` of ``parts`` (all of them in a run of one part)."""
        copies, busy, per_part = self._layout(sc)
        if parts == 1:
            return range(copies)
        return (
            range(part * per_part, min(busy, (part + 1) * per_part)) if part * per_part < busy else range(busy, copies)
        )

    def load(
        self,
        sim: Sim,
        sc: Scenario,
        log: CallLog,
        streams: Streams,
        targets: list[Target],
        part: int = 0,
        parts: int = 1,
    ) -> Load:
        """The callers of part ``part`` of ``parts``: the scenario's ``load`` (closed-loop clients or open-loop
        arrivals; with the Function they call, a FIFO queue served by recursion where the ``fifo`` shortcut runs:
        models/inputs/platform/fifo.py)."""
        if FIFO in sim.shortcuts:
            return fifo.FifoQueue(sim, sc, log, streams, targets, self.style, self.http)
        clients = None
        if parts > 1:  # the clients that call the part's copies
            copies, own = sc.function.copies or sc.clients.count, self.copies_of(sc, part, parts)
            n = sc.clients.count
            clients = [b + c for b in range(0, n, copies) for c in own if b + c < n]
        return LOADS[sc.load](sim, sc, log, streams, targets, self.style, self.http, clients)

    def targets(
        self, sim: Sim, sc: Scenario, streams: Streams, log: CallLog, load: Load, part: int = 0, parts: int = 1
    ) -> list[Target]:
        """What the callers of part ``part`` of ``parts`` (``load``) call: ``function.copies`` deployed copies of the
        Function (0: one per client), or the part's own copies; told when a call's work ends, they tell
        ``load.work_ended``."""
        if isinstance(load, fifo.FifoQueue):
            return [load]  # the queue is its own Function
        done = load.work_ended
        copies = sc.function.copies or sc.clients.count
        names = ["function" if copies == 1 else f"function-copy-{i}" for i in self.copies_of(sc, part, parts)]
        return [
            Function(
                sim,
                name,
                sc.function,
                sc.limits,
                sc.autoscaler,
                streams,
                log,
                done,
                sampler(sc.overhead, "dispatch", streams, name),  # each copy's own (None: the leg is 0)
            )
            for name in names
        ]

    def ideal_calls_per_s(self, sc: Scenario) -> float:
        """Calls per second with no overhead at all: calls in flight ÷ mean call duration; open loop: the mean rate
        over the measured window [warmup_s, duration_s)."""
        if sc.load == "arrivals":
            return sc.arrivals.mean_rate(sc.duration_s, sc.warmup_s)
        if sc.load == "trace":
            return sc.trace.mean_rate(sc.duration_s, sc.warmup_s)
        return sc.clients.count * sc.clients.in_flight / sc.work.mean

    def pools(self, sc: Scenario) -> int:
        """The container pools it runs: one per app copy (``function.copies``; 0: one per client), or its own one."""
        return (sc.function.copies or sc.clients.count) if self.calls_function else 1

    def least_added(self, sc: Scenario) -> float:
        """The least added latency a call can have: its legs' least values (``overhead.submit``, ``dispatch``,
        ``result``)."""
        o = sc.overhead
        return o.submit.low + o.dispatch.low + o.result.low

    def plus_legs(self, sc: Scenario, works: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Calls' lengths with no wait at all: ``works`` plus each call's legs, drawn from ``rng`` (submit, dispatch,
        result, in that order)."""
        n = len(works)
        for d in (sc.overhead.submit, sc.overhead.dispatch, sc.overhead.result):
            works = works + d.draw(rng, n)
        return works

    def slots_back(self, sc: Scenario, t: float, p_call: Callable[[float], float]) -> tuple[int, float]:
        """A reissuing closed loop's slots and the chance that a slot's first call is back within ``t``: clients ×
        in_flight slots, each ``p_call(t)`` (P(a call <= t))."""
        return sc.clients.count * sc.clients.in_flight, p_call(t)

    def inputs_per_s(self, rate: float, chunk: int) -> float:
        """The Function's inputs per second at ``rate`` calls per second, in chunks of ``chunk`` items where it
        sends chunks (one input a chunk; else one a call)."""
        return rate / chunk if self.chunks else rate

    def accept_rate(self, lim: LimitParams) -> float:
        """The accept limit its inputs meet: its call style's."""
        return lim.sync_accept_rate if self.style == SYNC else lim.async_accept_rate

    def in_system_cap(self, lim: LimitParams) -> int:
        """The cap on inputs in the system its inputs meet (synchronous calls only; 0: none)."""
        return lim.sync_in_system_cap if self.style == SYNC else 0

    def plan_settings(self, copies: int, chunk: int, sc: Scenario) -> dict[str, Any]:
        """The scenario keys of it as a plan's option at ``copies`` app copies and chunks of ``chunk`` items (on top
        of the user's scenario ``sc``)."""
        return {"approach": self.name, "function.copies": copies}

    def describe(self, config: dict[str, Any]) -> str:
        """A plan option's configuration ``config`` (its scenario keys) in words."""
        return f"{self.label}, {copies_text(config['function.copies'])}" if self.calls_function else self.label


def copies_text(n: int) -> str:
    """``n`` app copies, in words."""
    return f"{n} cop{'y' if n == 1 else 'ies'}"
