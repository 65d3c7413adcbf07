"""What limits a load test: a monitor sampling the Functions' state, and the binding-limit diagnosis.

Every ``dt`` seconds of simulated time (a slow SimPy process, not the per-call path) the monitor reads each
Function's pending queue, running inputs and containers, and why inputs wait: a container has room but the start
limiter has no token (``start_rate``), every container is full and more are on the way or not yet asked for
(``autoscaler``: decision interval, scale-up step, cold starts), or the pool is at ``max_containers``, or all the
run's pools together are at ``workspace.max_containers`` (``workspace_cap``).

``binding_limit`` names the limit that costs the most, each cost counted in the same unit: input-seconds lost
(a batched chunk is one input; otherwise an input is a call), as a share of the input-seconds the load would hold in
flight over the measurement window. Pending inputs lose their time in the queue (sampled: pending inputs × dt, by
reason); a rejected input that is retried loses its backoff; one that is not loses the rest of its slot in a closed
loop (the caller's task ended) or its own work in an open one. Rejections map to limits by kind:
``accept_rate`` (rate_limited), ``pending_cap`` (queue_full), ``http_503`` (no ready container), ``http_429``
(max_concurrency). Below 5% for all, nothing binds but the load itself: ``none``.

The monitor also times each Function's backlog: the longest run of consecutive samples at which it had inputs
pending, over the whole run, as samples × ``dt`` (``backlog_longest_s``: what models/inputs/envelope.py compares with
the longest backlog the calibration's runs had).
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
WAIT_LIMITS = ("start_rate", "autoscaler", "max_containers", "workspace_cap")
LIMITS = (*WAIT_LIMITS, *REJECTION_LIMITS.values())

# what ``diagnosis`` reports: from the parts' input-seconds added up, not from their shares
LIMIT_METRICS = Metrics(
    Metric(
        "binding_limit",
        "name",
        "derived",
        f"the limit that costs the most input-seconds ({', '.join(LIMITS)}), or none below {THRESHOLD:.0%}",
        kind="text",
    ),
    Metric("binding_share", "share", "derived", "the binding limit's share of the input-seconds the load would hold"),
    *(
        Metric(f"limit_share_{k}", "share", "derived", f"{k}'s share of the input-seconds the load would hold")
        for k in sorted(LIMITS)
    ),
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
        self.waited = dict.fromkeys(WAIT_LIMITS, 0.0)  # input-seconds spent pending in the window, by reason
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
            if in_window and why is not None:
                self.waited[why] += p * self.dt
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


def diagnosis(waited: dict[str, float], lost: dict[str, float], capacity: float) -> dict:
    """The binding limit and the shares it was chosen from: ``waited`` is the monitors' input-seconds pending by
    reason, ``lost`` the callers' input-seconds lost to rejections by kind, ``capacity`` the input-seconds the load
    would hold in flight over the window."""
    shares = {w: waited[w] / capacity if capacity else 0.0 for w in WAIT_LIMITS}
    for kind, limit in REJECTION_LIMITS.items():
        shares[limit] = lost.get(kind, 0.0) / capacity if capacity else 0.0
    limit, share = max(shares.items(), key=lambda kv: kv[1])
    return {
        "binding_limit": limit if share >= THRESHOLD else "none",
        "binding_share": share,
        **{f"limit_share_{k}": v for k, v in sorted(shares.items())},
    }
