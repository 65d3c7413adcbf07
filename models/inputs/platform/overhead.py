"""Per-call overhead on a Function's path: the round trips that a call makes besides its own work.

A call to a Function crosses the network and Modal's control plane three times (docs/sources.md §1: "client → accept →
start → result back"); each leg is a distribution of its own, drawn from its own named random stream:

- ``overhead.submit``: from the client's call to the Function's accept (stream ``overhead/submit``). The call is in
  transit: the accept limits, the pending queue and the autoscaler see it only when it arrives. A rejection is
  known to the client at that moment (the rejection's own trip back is not modelled).
- ``overhead.dispatch``: from the start (the start limit let the input through and it took a container slot: the
  records' ``started``) to its work beginning on the container (stream ``overhead/dispatch``). The input holds its
  slot during it, so a container's slot is busy for dispatch + work.
- ``overhead.result``: from the end of the work on the container (the slot is freed at once) to the result back at
  the caller (stream ``overhead/result``).

A leg of 0 makes no draw and schedules no event. ``added_latency`` (response − own work) includes whatever they add.
None is documented: each is an assumption and a calibration target (app copies' measured p50 added latency is
0.20 s, docs/sources.md §1). Submit and result are one fitted leg each way, lognormal around the fitted median with a
spread of σ = 0.3 (an assumption: a network leg varies from call to call; no constant stands in for a network);
dispatch is 0. The server approach has none of them: its requests go through the HTTP proxy
(``server.proxy_latency_s``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from heapq import heappush
from typing import Any

from models.inputs.platform.overhead_params import OverheadParams
from sim.dists import Constant, Dist
from sim.engine import NORMAL, Sim
from sim.rng import PerClient, Streams


def is_zero(d: Dist) -> bool:
    """True for the distribution that is always 0: the mechanism is off and nothing is drawn or scheduled."""
    return isinstance(d, Constant) and d.x == 0.0


def sampler(op: OverheadParams, leg: str, streams: Streams, owner: str) -> Callable[[], float] | None:
    """A sampler of one leg's delay from the stream ``overhead/LEG/OWNER`` (the Function copy that draws it), or
    None when that leg is always 0."""
    d = getattr(op, leg)
    return None if is_zero(d) else d.sampler(streams.get(f"overhead/{leg}/{owner}"))


def leg(
    sim: Sim, op: OverheadParams, name: str, streams: Streams, fn: Callable[[int], Any], client_of: Sequence[int]
) -> Callable[[int], None] | None:
    """What sends a call down one leg: ``fn(call)`` after the leg's delay (a constant delay rides the engine's delay
    line, any other is drawn per call from its client's stream ``overhead/LEG/client-i``, ``client_of[call]``);
    None when the leg is always 0."""
    d = getattr(op, name)
    if is_zero(d):
        return None
    if isinstance(d, Constant):
        return partial(sim.line(d.x).push, fn)
    draws = PerClient(streams, f"overhead/{name}", d)
    env, heap, ids, below, call_at = sim.env, sim.heap, sim.ids, sim.direct, sim.call_at

    def send(call: int) -> None:
        """``sim.call_in(draw, fn, call)``, inlined (Sim.heap): every call takes each leg."""
        delay = draws[client_of[call]]()
        if delay < 0:
            raise ValueError(f"negative delay {delay}")
        t = env._now + delay
        if len(heap) < below:
            heappush(heap, (t, NORMAL, next(ids), fn, call))
        else:
            call_at(t, fn, call)

    return send
