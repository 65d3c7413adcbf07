"""The workspace: every autoscaled pool of one run together (the app copies' Functions, or the web server's pool;
models/inputs/platform/autoscaler.py has the pools).

With ``workspace.max_containers`` > 0 they hold at most that many containers (starting or ready) together
(always-warm pools, ``function.containers``, must fit under it: the schema's check), and a decision
launches no more than the room left (``Workspace``; the rest at later decisions, once another pool's containers
retire). docs/sources.md §1 says max_containers is "unlimited by default (workspace caps apply)" and gives no figure, so
the default is no cap (an assumption, a calibration target). With ``workspace.launch_rate_per_s`` > 0 the pools also
share one launch bucket (``launch_burst`` at once, then that rate), on top of each one's own: a placement rate of the
whole workspace (an assumption, off by default). Both couple the pools, so app copies run in parts
(models/inputs/parts.py) only where neither can bind (models/inputs/shortcuts.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sim.limiter import TokenBucket
from sim.scenario import param


class Pool(Protocol):
    """What the workspace reads and sets of a pool (models/inputs/platform/autoscaler.py ``ContainerPool``)."""

    size: int  # containers starting or ready
    workspace: Any  # the pool's workspace (set here)


@dataclass(frozen=True)
class WorkspaceParams:
    max_containers: int = param(
        0,
        ge=0,
        source="assumption: docs/sources.md §1 ('max_containers unlimited by default (workspace caps apply)') gives no "
        "figure; a calibration target",
        doc="the most containers (starting or ready) all the run's Functions (every app copy, or the web server) "
        "hold at once; 0 = no cap",
    )
    launch_rate_per_s: float = param(
        0.0,
        ge=0,
        source="assumption: a workspace's containers are placed by one scheduler (docs/sources.md §2: Kubernetes "
        "~100-300 pods/s); no figure for Modal, not fitted; a calibration target",
        doc="containers all the run's autoscalers together can launch per second, after launch_burst at once, on "
        "top of each one's autoscaler.launch_rate_per_s; 0 = no workspace-wide limit",
    )
    launch_burst: float = param(
        100.0,
        ge=1,
        source="assumption (with launch_rate_per_s)",
        doc="containers all the run's autoscalers together can launch at once (used only with launch_rate_per_s > 0)",
    )


class Workspace:
    """Every autoscaled pool of one run, under one cap (``workspace.max_containers``) and one placement rate
    (``workspace.launch_rate_per_s``)."""

    def __init__(self, params: WorkspaceParams, pools: Sequence[Pool]) -> None:
        self.cap = params.max_containers
        rate = params.launch_rate_per_s
        self._launches = TokenBucket(rate, params.launch_burst) if rate > 0 else None
        self.size = sum(p.size for p in pools)  # containers starting or ready, all pools together
        self.peak = self.size
        self.launched = 0  # containers the pools have launched so far
        for p in pools:
            p.workspace = self

    @property
    def full(self) -> bool:
        """Whether the pools hold as many containers as the cap allows."""
        return 0 < self.cap <= self.size

    def admit(self, now: float, n: int, own: TokenBucket | None) -> int:
        """How many of ``n`` containers a pool may launch now, within the cap, its own launch bucket ``own`` and the
        workspace's, taken from both."""
        if self.cap:
            n = min(n, max(0, self.cap - self.size))
        if own is not None:
            n = min(n, own.whole(now))
        if self._launches is not None:
            n = self._launches.take_up_to(now, n)
        if own is not None:
            own.take_up_to(now, n)
        return n

    def resize(self, n: int) -> None:
        """``n`` containers launched (or, negative, removed)."""
        self.size += n
        self.peak = max(self.peak, self.size)
        self.launched += max(n, 0)

    def violations(self, now: float) -> list[str]:
        """What the pools broke of the cap and of the placement rate by time ``now``
        (models/inputs/checks/invariants.py)."""
        out = []
        if self.cap and self.peak > self.cap:
            out.append(f"{self.peak:,} containers at once, above workspace.max_containers {self.cap:,}")
        bucket = self._launches
        if bucket is not None and self.launched > (bucket.burst + bucket.rate * now) * (1 + 1e-9) + 1e-6:
            most = bucket.burst + bucket.rate * now
            out.append(
                f"launched {self.launched:,} containers by t = {now:g} s, more than the workspace admits ({most:,.1f})"
            )
        return out
