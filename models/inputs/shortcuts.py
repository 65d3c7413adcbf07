"""The load test's shortcuts and the scenarios each is exact for (sim/shortcuts.py says what a shape is).

Each shape names, key by key, what the shortcut was proven for by the differential tests
(tests/models/inputs/test_shortcuts.py); a key not named must be at its default. ``KEYS`` is the list of the schema's
keys when these shapes were written: a key added to the schema later is in no shape until someone adds it here, so a new
mechanism turns these shortcuts off wherever it is used.
"""

from __future__ import annotations

from typing import Any

from models.inputs import shortcut_names as names
from models.inputs.approaches import APPROACHES
from models.inputs.callers.demand import parse_shape
from sim.dists import Exponential, LogNormal, Uniform
from sim.shortcuts import Shortcut, any_of, constant, one_of, zero

# Every key of the load test's schema at the time these shapes were proven (not read from the schema: see above).
KEYS = """
approach load work duration_s warmup_s drain_s
arrivals.rate arrivals.shape arrivals.start_s
autoscaler.buffer_containers autoscaler.burst_aware autoscaler.cold_start autoscaler.gather_s autoscaler.interval_s
autoscaler.launch_burst autoscaler.launch_rate_per_s autoscaler.max_containers autoscaler.min_containers
autoscaler.program autoscaler.program_mode
autoscaler.scaledown_window_s autoscaler.scaleup_step autoscaler.size_to
batching.chunk_items batching.item_failure_prob batching.round_items batching.wait_s
clients.api clients.backoff_base_s clients.backoff_max_s clients.connection_limit clients.count clients.in_flight
clients.reissue clients.retry clients.streams clients.on_rate_limit clients.retry_after_s clients.max_throttle_wait_s
function.containers function.copies function.max_inputs function.target_inputs
limits.async_accept_burst limits.async_accept_rate limits.async_pending_cap limits.enabled limits.start_burst
limits.start_ramp_per_s limits.start_rate limits.start_rate_max limits.start_relax_per_s limits.sync_accept_burst
limits.sync_accept_rate limits.sync_in_system_cap limits.sync_pending_cap
overhead.dispatch overhead.result overhead.submit
server.container_cpu server.cpu_per_request_s server.max_concurrency server.proxy_latency_s server.proxy_sigma
server.scaleup_window_s server.target_concurrency
trace.function trace.path trace.scale trace.spread trace.start_minute
workspace.launch_burst workspace.launch_rate_per_s workspace.max_containers
"""
EVERY = any_of(KEYS)
MAX_SLOTS = 1_000_000  # fifo: beyond, the events (the heap of slots would be the memory)


def function_callers(approach: str) -> bool:
    """Approaches whose callers reach the Function's inputs directly (.remote, .spawn)."""
    return APPROACHES[approach].call_is_input


def _steady(text: str) -> bool:
    return parse_shape(text).kind == "steady"


def _fifo_slots(sc: Any) -> bool:
    f = sc.function
    return 0 < f.containers * f.max_inputs <= MAX_SLOTS and f.target == f.max_inputs


FIFO = Shortcut(
    names.FIFO,
    "a fixed pool of G/G/c slots (function.containers > 0, every slot alike: target_inputs = max_inputs) of one "
    "Function (one copy) called with .remote or .spawn, fed by steady Poisson arrivals through constant submit and "
    "result legs, no dispatch overhead, no input limits",
    {
        # (a steady shape has no time of its own: arrivals.start_s changes nothing)
        **any_of(
            "work duration_s warmup_s drain_s arrivals.rate arrivals.start_s function.max_inputs function.target_inputs"
        ),
        # a fixed pool takes no decision and launches nothing: the autoscaler's keys change nothing
        **any_of(
            "autoscaler.buffer_containers autoscaler.burst_aware autoscaler.cold_start autoscaler.gather_s "
            "autoscaler.interval_s "
            "autoscaler.launch_burst autoscaler.launch_rate_per_s autoscaler.max_containers autoscaler.min_containers "
            "autoscaler.scaledown_window_s "
            "autoscaler.scaleup_step autoscaler.size_to "
            # at least the fixed pools' containers (the schema's check): it never binds, and they launch nothing
            "workspace.launch_burst workspace.launch_rate_per_s workspace.max_containers"
        ),
        # no limits: nothing is rejected, so no client retries; an open loop has no clients of its own
        **any_of(
            "limits.async_accept_burst limits.async_accept_rate limits.async_pending_cap limits.start_burst "
            "limits.start_ramp_per_s limits.start_rate limits.start_rate_max limits.start_relax_per_s "
            "limits.sync_accept_burst "
            "limits.sync_accept_rate limits.sync_in_system_cap limits.sync_pending_cap"
        ),
        **any_of(
            "clients.backoff_base_s clients.backoff_max_s clients.connection_limit clients.count clients.in_flight "
            "clients.reissue clients.retry clients.on_rate_limit clients.retry_after_s clients.max_throttle_wait_s"
        ),  # (clients.api and clients.streams at their defaults: one request per call, no stream cap)
        "approach": function_callers,
        "load": one_of("arrivals"),
        "arrivals.shape": _steady,
        "function.containers": lambda n: n > 0,
        "limits.enabled": one_of(False),
        "overhead.dispatch": zero,
        "overhead.submit": constant,
        "overhead.result": constant,
    },
    when=_fifo_slots,
    claim="rounding",  # every record to the bit; the summaries' sums are folded in blocks, not call by call
    rel_tol=1e-12,
    doc="the Kiefer-Wolfowitz workload recursion in blocks of arrivals instead of two events an input "
    "(models/inputs/platform/fifo.py)",
)

IDLE_DECISIONS = Shortcut(
    names.IDLE_DECISIONS,
    "any load test: an autoscaled pool whose wanted containers move only with its owner's load sleeps through the "
    "grid points where no decision could act",
    EVERY,
    # what it engages on: the autoscaled pools of Functions (a fixed pool takes no decision; the web server's
    # pool is decided at every grid point)
    when=lambda sc: sc.function.containers == 0 and APPROACHES[sc.approach].calls_function,
    doc="decisions that cannot change anything are not simulated (models/inputs/platform/autoscaler.py)",
)


def _nonzero(d: Any) -> bool:
    return not zero(d)


ROUND_TRIPS = Shortcut(
    names.ROUND_TRIPS,
    "closed-loop clients that reissue (load = clients, clients.reissue) calling a Function with .remote or .spawn "
    "through submit and result legs that are not 0 (any distribution: the next call's work and way out are drawn "
    "when the work ends, with the shortcut or without), one request per call, no stream cap",
    {
        **EVERY,
        "approach": function_callers,
        "load": one_of("clients"),
        "clients.reissue": one_of(True),
        "clients.api": one_of("single"),  # a map call's inputs travel in requests, not each on its own
        "clients.streams": one_of(0),  # a trip would hold its stream unseen
        "overhead.submit": _nonzero,
        "overhead.result": _nonzero,
    },
    claim="rounding",  # every record to the bit; a back is folded in later, so sums are added in another order
    rel_tol=1e-12,
    doc="a call's way back and the next call's way out are one event, not two (models/inputs/callers/closedloop.py)",
)


def _continuous(d: Any) -> bool:
    """A distribution with a density (no value drawn twice but by chance): uniform, exponential or lognormal with a
    spread; a constant, an empirical distribution or a spread of 0 repeat values, so their backs could tie."""
    return isinstance(d, (Uniform, Exponential, LogNormal)) and d.var > 0


BACKS = Shortcut(
    names.BACKS,
    "open-loop callers (load = arrivals or trace) calling a Function with .remote or .spawn, one request per call, "
    "through a result leg with a density (uniform, exponential or lognormal with a spread: each back then falls at a "
    "time of its own, tied with no other event)",
    {
        **EVERY,
        "approach": function_callers,
        "load": one_of("arrivals", "trace"),
        "clients.api": one_of("single"),  # a map call's inputs come back through the map call
        "overhead.result": _continuous,
    },
    claim="rounding",  # every record to the bit; a call is folded in when its work ends, so sums add in another order
    rel_tol=1e-12,
    doc="an open loop's call is done when its work ends, with its back drawn then, instead of one event later at "
    "its back (models/inputs/callers/clients.py)",
)


def _workspace_cannot_bind(sc: Any) -> bool:
    """Whether the workspace leaves the copies' pools independent: fixed pools (which launch nothing, and fit under
    the cap: the schema's check), or no workspace-wide placement rate and a cap of none or at least what every
    copy's pool could ever hold together."""
    ws, per = sc.workspace, sc.autoscaler.max_containers
    copies = sc.function.copies or sc.clients.count
    if sc.function.containers > 0:
        return True
    return ws.launch_rate_per_s == 0 and (not ws.max_containers or 0 < copies * per <= ws.max_containers)


PARTS = Shortcut(
    names.PARTS,
    "any load test of app copies under closed-loop clients: client i calls copy i mod copies and nothing else is "
    "shared (no workspace-wide placement rate, and no workspace cap that could bind: workspace.max_containers 0 or "
    "at least copies × autoscaler.max_containers), so each copy with its clients runs on a clock of its own; the "
    "same numbers up to the order in which the parts' sums are added",
    EVERY,
    when=_workspace_cannot_bind,
    claim="rounding",
    rel_tol=1e-9,
    doc="the copies simulated one after the other, or on --jobs processes (models/inputs/parts.py)",
)

SHAPES = (FIFO, IDLE_DECISIONS, ROUND_TRIPS, BACKS, PARTS)
