"""The autoscaler's parameters (the ``autoscaler`` section; models/inputs/platform/autoscaler.py says what each does).
Apart from autoscaler.py, which ``python -m sim.build`` compiles: mypyc rewrites a compiled dataclass's annotations,
which the scenario schema reads (sim/scenario.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sim.dists import Dist, LogNormal
from sim.scenario import param


@dataclass(frozen=True)
class AutoscalerParams:
    interval_s: float = param(
        5.75,
        ge=0.001,
        source="undocumented; fitted to docs/sources.md §1 (calibration/params/reference-loadtest.toml)",
        doc="time between scaling decisions",
    )
    scaleup_step: int = param(
        1,
        ge=0,
        source="undocumented; 1 in the candidate kept by calibration.fit (calibration/params/reference-loadtest.toml)",
        doc="most containers added per decision per Function; 0 = no cap (all that are wanted at once)",
    )
    burst_aware: bool = param(
        False,
        source="assumption: scale-from-zero sees the whole same-instant backlog; off in the candidate kept by "
        "calibration.fit (calibration/params/reference-loadtest.toml)",
        doc="true: work reaching an empty pool is sized at the end of the instant, to the whole burst",
    )
    gather_s: float = param(
        0.0,
        ge=0,
        le=60,
        source="assumption, a calibration target: docs/sources.md §1 says only that the first input reaching a "
        "Function with no container triggers a cold start, not what that decision sees",
        doc="with burst_aware: the scale-from-zero decision is taken this long after work first reaches an empty "
        "pool, and sizes it to all that arrived by then (0: at the end of that instant)",
    )
    size_to: Literal["in_system", "startable"] = param(
        "in_system",
        source="in_system (in use): docs/sources.md §1 ('Modal adds containers as calls pile up'), in the candidate "
        "kept by calibration.fit; startable: assumption, in the fifo-start candidate",
        doc="a Function's wanted load: inputs in the system, or running + the pending its start limit can start "
        "within interval_s",
    )
    cold_start: Dist = param(
        LogNormal(1.48, 0.3),
        source="median fitted to docs/sources.md §1 (calibration/params/reference-loadtest.toml), sigma an assumption; "
        "docs/sources.md §1 says containers 'boot in about one second': docs/explanation/calibration.md",
        doc="container start to ready, for a program that imports nothing heavy",
    )
    program: str = param(
        "", doc="a coldstart scenario (preset or file): cold starts come from its model, not cold_start"
    )
    program_mode: Literal["", "lazy", "snapshot"] = param("", doc="the program's start mode ('' = the scenario's)")
    min_containers: int = param(0, ge=0, le=1_000_000, source="docs/sources.md §1 (Modal default 0)")
    max_containers: int = param(0, ge=0, source="docs/sources.md §1 (Modal default unlimited; 0 = no cap)")
    buffer_containers: int = param(0, ge=0, le=1_000_000, source="docs/sources.md §1 (Modal default 0)")
    scaledown_window_s: float = param(60.0, ge=2, le=1200, source="docs/sources.md §1 (default 60 s, 2 s .. 20 min)")
    launch_rate_per_s: float = param(
        100.0,
        ge=0,
        source="assumption: containers are placed on workers by a scheduler, not at once; of the order of a cluster "
        "scheduler's throughput (docs/sources.md §2: Kubernetes ~100-300 pods/s); not fitted (the reference test "
        "starts at most 19 containers per Function at once)",
        doc="containers a Function's autoscaler can launch per second, after launch_burst at once; 0 = no limit",
    )
    launch_burst: float = param(
        100.0,
        ge=1,
        source="assumption (with launch_rate_per_s)",
        doc="containers a Function's autoscaler can launch at once",
    )

    def __post_init__(self) -> None:
        if self.max_containers and self.min_containers > self.max_containers:
            raise ValueError("min_containers: must be <= max_containers")
