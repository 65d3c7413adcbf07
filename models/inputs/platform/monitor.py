"""What limits a load test: a monitor sampling the Functions' state, and the binding-limit diagnosis.

Every ``dt`` seconds of simulated time (a slow SimPy process, not the per-call path) the monitor reads each
Function's pending queue, running inputs and containers, and why inputs wait: a container has room but the start
limiter has no token (``start_rate``), every container is full and more are on the way or not yet asked for
(``autoscaler``: decision interval, scale-up step, cold starts), or the pool is at ``max_containers``, or all the
run's pools together are at ``workspace.max_containers`` (``workspace_cap``).

The diagnosis divides the input-seconds of the measurement window (a batched chunk is one input; otherwise an input
is a call) by what they went to: running (sampled: running inputs × dt), waiting by reason (pending inputs × dt), and
lost to rejections by limit: a rejected input that is retried loses its backoff; one that is not loses the rest of
its slot in a closed loop (the caller's task ended) or its own work in an open one, each counted where it lies inside
the window (a backoff past its end, or a failure before it, counts only its part in it). Rejections map to limits by
kind: ``accept_rate`` (rate_limited), ``pending_cap`` (queue_full), ``http_503`` (no ready container), ``http_429``
(max_concurrency). Each ``limit_share_*`` is a share of that whole, and ``limit_share_none`` (the running) makes them
sum to 1. ``binding_limit`` is the limit that drops calls, if any does (an unretried rejection is an error: the one of
most share), else the costliest wait or retry if its share is at least 5%, else ``none``: nothing binds but the load.
A limit that drops calls binds before one that delays them, and a run with errors of a limit never says ``none``.
Waits are named by their cause: a container has room but the start limiter has no token (``start_rate``); every
container is full and the pool is fixed (``containers``: function.containers), at ``max_containers``, at the
workspace's cap (``workspace_cap``), or the autoscaler has more on the way or not yet asked for (``autoscaler``).

The monitor also times each Function's backlog: the longest run of consecutive samples at which it had inputs pending,
over the whole run, as samples × ``dt`` (``backlog_longest_s``: what models/inputs/checks/envelope.py compares with the
longest backlog the calibration's runs had).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sim.engine import Sim
from sim.metrics import Metric, Metrics

THRESHOLD = 0.05
REJECTION_LIMITS = {
    "rate_limited": "accept_rate",
    "queue_full": "pending_cap",
    "http_503": "http_503",
    "http_429": "http_429",
}
WAIT_LIMITS = ("start_rate", "autoscaler", "containers", "max_containers", "workspace_cap")
LIMITS = (*WAIT_LIMITS, *REJECTION_LIMITS.values())

# what ``diagnosis`` reports: from the parts' input-seconds added up, not from their shares
LIMIT_METRICS = Metrics(
    Metric(
        "binding_limit",
        "name",
        "derived",
        f"the limit that drops calls, else the costliest wait ({', '.join(LIMITS)}) from {THRESHOLD:.0%} of the "
        "window's input-seconds, else none",
        kind="text",
    ),
    Metric("binding_share", "share", "derived", "the binding limit's share of the window's input-seconds (0 .. 1)"),
    *(
        Metric(f"limit_share_{k}", "share", "derived", f"{k}'s share of the window's input-seconds (0 .. 1)")
        for k in sorted(LIMITS)
    ),
    Metric("limit_share_none", "share", "derived", "the share of the window's input-seconds spent running"),
)

BACKLOG = Metric(
    "backlog_longest_s",
    "s",
    "max",
    "the longest a Function had inputs pending without a break, over the whole run (monitor samples × interval)",
)


class Observed(Protocol):
    started: int  # inputs started so far

    def state(self) -> tuple[int, int, int, str | None]:
        """(running, pending, containers, why pending inputs wait or None)."""
        ...


class Monitor:
    def __init__(
        self, sim: Sim, targets: Sequence[Observed], dt: float, window: tuple[float, float], keep_series: bool = False
    ) -> None:
        self.sim = sim
        self.targets = targets
        self.dt = dt
        self.window = window
        # input-seconds of the window by what they went to: "running", or pending by the reason they wait
        self.held = dict.fromkeys(("running", *WAIT_LIMITS), 0.0)
        self._backlog = [0] * len(targets)  # each target's samples with inputs pending, in a row up to now
        self._longest = 0  # the most such samples in a row of any target
        self.series: dict[str, list[float]] | None = (
            {"t": [], "running": [], "pending": [], "containers": [], "started": []} if keep_series else None
        )
        sim.env.process(self._loop())

    def _loop(self):
        env = self.sim.env
        while True:
            self._sample(env.now)
            yield env.timeout(self.dt)

    def _sample(self, now: float) -> None:
        running = pending = containers = started = 0
        in_window = self.window[0] <= now < self.window[1]
        for i, t in enumerate(self.targets):
            r, p, c, why = t.state()
            self._backlog[i] = self._backlog[i] + 1 if p else 0
            running += r
            pending += p
            containers += c
            started += t.started
            if in_window:
                self.held["running"] += r * self.dt
                if why is not None:
                    self.held[why] += p * self.dt
        self._longest = max(self._longest, max(self._backlog, default=0))
        if self.series is not None:
            for k, v in (
                ("t", now),
                ("running", running),
                ("pending", pending),
                ("containers", containers),
                ("started", started),
            ):
                self.series[k].append(v)

    @property
    def backlog_longest_s(self) -> float:
        """The longest backlog of any target so far, in seconds (samples × dt)."""
        return self._longest * self.dt


def diagnosis(held: dict[str, float], lost: dict[str, float], errors: dict[str, int]) -> dict:
    """The binding limit and the shares it was chosen from: ``held`` is the monitors' input-seconds running and
    pending by reason, ``lost`` the callers' input-seconds lost to rejections by kind, ``errors`` the failed calls by
    kind."""
    costs = {w: held.get(w, 0.0) for w in WAIT_LIMITS}
    for kind, limit in REJECTION_LIMITS.items():
        costs[limit] = lost.get(kind, 0.0)
    total = held.get("running", 0.0) + sum(costs.values())
    shares = {k: v / total if total else 0.0 for k, v in costs.items()}
    dropping = [REJECTION_LIMITS[k] for k in REJECTION_LIMITS if errors.get(k)]
    if dropping:  # calls were lost to a limit: it binds, however small its share
        limit = max(dropping, key=lambda k: shares[k])
    else:
        limit = max(shares, key=lambda k: shares[k])
        limit = limit if shares[limit] >= THRESHOLD else "none"
    return {
        "binding_limit": limit,
        "binding_share": shares.get(limit, 0.0),
        **{f"limit_share_{k}": v for k, v in sorted(shares.items())},
        "limit_share_none": held.get("running", 0.0) / total if total else 0.0,
    }
