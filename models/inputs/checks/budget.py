"""What a load test's run will cost, estimated from its scenario before it starts (``Estimate``: sim/model.py), for the
run budgets (models/runs.py; docs/explanation/robustness.md).

The size, in calls, is what the run simulates: its calls (ideal calls/s × duration, or a trace's minutes as they are
drawn: every minute that starts within the run, whole; plus the calls in flight at the start), and what costs as much as
calls without being calls: the extra candidates a varying arrival rate draws and thins (a quarter of a call each), the
app copies to build (``COPY_CALLS`` each) and the containers its pools hold (``CONTAINER_CALLS`` each: every decision
looks at them). The events it is expected to process: ``EVENTS_PER_CALL`` per call of that size, plus every scaling
decision an autoscaled pool could make (one per ``autoscaler.interval_s``); and its worst case's allowance beyond them
(sim/model.py ``Estimate.allowance``): each call in flight's retries (``RETRY_EVENTS``, with a ``clients.retry`` policy
or ``.map``; and a spike's extra arrivals, each trying again at its policy's slowest for the rest of the run), and
tries that time out. The memory: what the calls in flight at once, the app copies and the containers hold."""

from __future__ import annotations

import math

from models.inputs.approaches import APPROACHES
from models.inputs.base import Scenario
from sim.model import Estimate, Parts

CANDIDATE_CALLS = 0.25  # a thinning candidate's cost, in calls (a draw and a test, no event)
COPY_CALLS = 200.0  # an app copy's cost to build, in calls (its Function, limits and random streams: ~0.3 ms)
CONTAINER_CALLS = 20.0  # a container's, in calls (its start and removal, and the decisions that look at it)
EVENTS_PER_CALL = 4.0  # a call's events (up to about 2 on the presets, 5 with default retries under load)
RETRY_EVENTS = 64.0  # a call in flight's allowance for retries: about 32 tries (a 100,000-call drain uses 27)
CALL_BYTES = 330.0  # memory per call in flight (measured: 1,000,000 at once in about 330 MB)
COPY_BYTES = 8192.0  # per app copy
CONTAINER_BYTES = 200.0  # per container


def estimate(sc: Scenario) -> Estimate:
    """The run's size, events and memory (module docstring)."""
    closed = sc.load == "clients"
    at_start = sc.clients.count * sc.clients.in_flight  # (counted whatever the load, as the size always has)
    if sc.load == "trace":
        c = sc.trace.counts()
        drawn = float(c[: math.ceil(sc.duration_s / 60.0)].sum())  # every minute begun is drawn whole
    else:
        drawn = sc.ideal_calls_per_s() * sc.duration_s if not closed or sc.clients.reissue else 0.0
    size = {"calls": (drawn + at_start, "shorten duration_s, or lower the load (clients, arrivals.rate, trace.scale)")}
    if sc.load == "arrivals":
        shape = sc.arrivals.profile
        if shape.kind != "steady":  # candidates at the peak rate, thinned to the shape: those beyond the calls
            extra = max(0.0, sc.arrivals.rate * shape.peak() * sc.duration_s - drawn) * CANDIDATE_CALLS
            size["thinning candidates"] = (extra, "lower the shape's peak (arrivals.shape) or arrivals.rate")
    approach = APPROACHES[sc.approach]
    pools = approach.pools(sc)
    if approach.calls_function:
        size["app copies"] = (pools * COPY_CALLS, "lower function.copies (0: one per client, clients.count)")
    containers = pools * _containers(sc)
    size["containers"] = (
        containers * CONTAINER_CALLS,
        "lower autoscaler.buffer_containers, autoscaler.min_containers or function.containers",
    )
    horizon = sc.duration_s + sc.drain_s
    events = {"calls": (EVENTS_PER_CALL * Estimate.total(size), "make the run smaller")}
    allowance: Parts = {}  # the worst case's retries: within the running budget, not refused up front
    if sc.clients.retry != "none" or (closed and sc.clients.api == "map"):
        in_flight = at_start if closed else sc.arrivals.rate * sc.work.mean if sc.load == "arrivals" else 0.0
        allowance["retries"] = (RETRY_EVENTS * in_flight, "fewer calls in flight")
        spike = sc.arrivals.profile.trigger() if sc.load == "arrivals" else None
        if spike:  # a spike's extra arrivals may all wait to retry (the callers' orbit) for the rest of the run
            extra = sc.arrivals.rate * max(0.0, sc.arrivals.profile.peak() - 1.0) * (spike[1] - spike[0])
            tries = horizon / _slowest_retry(sc) if sc.clients.retry != "none" else 0.0
            allowance["a spike's retries"] = (extra * min(tries, 1e12), "a smaller spike, or a slower retry policy")
    if sc.clients.timeout_s and sc.clients.retry != "none":
        # every call out may time out and try again all run long, each try a new input (its own events) whose
        # abandoned predecessor still runs
        in_flight = at_start if closed else sc.arrivals.rate * sc.work.mean if sc.load == "arrivals" else 0.0
        tries = horizon / sc.clients.timeout_s  # a try that times out lasts timeout_s
        allowance["timed-out tries"] = (
            EVENTS_PER_CALL * in_flight * min(tries, 1e12),
            "lengthen clients.timeout_s, or give up sooner (clients.max_attempts)",
        )
    if not (approach.calls_function and sc.function.containers):  # autoscaled: a decision per interval at most
        events["scaling decisions"] = (pools * horizon / sc.autoscaler.interval_s, "lengthen autoscaler.interval_s")
    memory = {
        "calls in flight at once": (at_start * CALL_BYTES, "fewer calls in flight (clients.count × in_flight)"),
        "app copies": (pools * COPY_BYTES if approach.calls_function else 0.0, "lower function.copies"),
        "containers": (containers * CONTAINER_BYTES, "fewer containers"),
    }
    return Estimate(size, events, memory, allowance=allowance)


def size(sc: Scenario) -> float:
    """The run's size in calls (the model's ``size``: what sweeps start the big ones first by)."""
    return Estimate.total(estimate(sc).size)


def _slowest_retry(sc: Scenario) -> float:
    """The longest a retrying call waits between tries once its policy's delays stop growing (backoff: at its cap,
    jittered down to half of it), so a call waiting all run long tries at most the horizon ÷ this."""
    cp = sc.clients
    if cp.retry in ("backoff", "exponential"):
        return cp.backoff_max_s * (0.5 if cp.retry == "backoff" else 1.0)
    if cp.retry in ("fixed", "random"):
        return cp.retry_delay_s
    return max(1e-9, math.ulp(sc.duration_s + sc.drain_s) * 4)  # immediate: the clock's tick


def _containers(sc: Scenario) -> float:
    """The containers one pool may hold: its fixed pool, or at least its floor and buffer, as far as its cap and its
    launch rate let it reach them within the run."""
    if APPROACHES[sc.approach].calls_function and sc.function.containers:
        return float(sc.function.containers)
    ap = sc.autoscaler
    want = float(ap.min_containers + ap.buffer_containers)
    if ap.max_containers:
        want = min(want, ap.max_containers)
    if ap.launch_rate_per_s > 0:
        want = min(want, ap.launch_burst + ap.launch_rate_per_s * (sc.duration_s + sc.drain_s))
    return want


# What a run over its budget spends its events on (sim/guard.py ``Budget.grows``), by callback.
RETRIES = ("retries", "lengthen clients.backoff_base_s and clients.backoff_max_s")
GROWS = {
    "Load._send": RETRIES,  # a retry's new try (and a pooled call's)
    "ClosedLoop._resend": RETRIES,  # the proxy's callers' retry
    "Load._reach": ("tries reaching the Function", ""),
    "Timeouts._expire": ("timed-out tries", "lengthen clients.timeout_s, or give up sooner (clients.max_attempts)"),
    "ContainerPool._tick": ("scaling decisions", "lengthen autoscaler.interval_s"),
    "ContainerPool._decide_from_zero": ("scaling decisions", "lengthen autoscaler.interval_s"),
    "Monitor._sample": ("monitor samples", ""),
}
