"""A Function's parameters (models/inputs/platform/function.py): its limits (``limits``) and its own settings
(``function``). Apart from function.py, which ``python -m sim.build`` compiles: mypyc rewrites a compiled dataclass's
annotations, which the scenario schema reads (sim/scenario.py)."""

from __future__ import annotations

from dataclasses import dataclass

from sim.scenario import param


@dataclass(frozen=True)
class LimitParams:
    enabled: bool = param(True, doc="false: no accept or start limits (the mmc preset)")
    sync_accept_rate: float = param(200.0, gt=0, source="docs/sources.md §1 limits table (.remote, .map: 200 inputs/s)")
    sync_accept_burst: float = param(
        1000.0,
        ge=1,
        source="assumption: at least the 1,000 calls one copy accepted at once without error in "
        "the reference load test (docs/sources.md §1)",
    )
    sync_pending_cap: int = param(2000, ge=0, source="docs/sources.md §1 limits table (2,000 queued)")
    sync_in_system_cap: int = param(25000, ge=0, source="docs/sources.md §1 limits table (25,000 queued + running)")
    async_accept_rate: float = param(1500.0, gt=0, source="docs/sources.md §1 limits table (.spawn: 1,500 inputs/s)")
    async_accept_burst: float = param(
        8000.0,
        ge=1,
        source="assumption: at least the 8,000 spawns accepted at once without error in the "
        "reference load test (docs/sources.md §1)",
    )
    async_pending_cap: int = param(1_000_000, ge=0, source="docs/sources.md §1 limits table (1,000,000 queued)")
    start_rate: float = param(
        710.0,
        gt=0,
        source="undocumented (docs/sources.md §1: 'above about 200/s per Function, extra inputs wait'); "
        "fitted to docs/sources.md §1 (calibration/params/reference-loadtest.toml)",
        doc="inputs started per second per Function",
    )
    start_burst: float = param(
        17.6,
        ge=1,
        source="undocumented; fitted by the fifo-start candidate of calibration.fit (docs/explanation/calibration.md), "
        "not pinned down; the candidate kept (overhead) does not fit it and runs with this value",
    )
    start_ramp_per_s: float = param(
        0.0,
        ge=0,
        source="assumption: a start limit that ramps up while a backlog persists; 0 in the candidate kept by "
        "calibration.fit (calibration/params/reference-loadtest.toml: a plain bucket fits better once the legs vary "
        "and the pool is sized over its cold start)",
        doc="while inputs are pending the start rate grows by this many inputs/s per second; 0 = no ramp",
    )
    start_rate_max: float = param(
        833.0,
        ge=0,
        source="assumption: a ramp's ceiling, the fastest start rate a ramp fit reached in the reference test "
        "(832.7/s, spawn's 64 s backlog; models/inputs/platform/startlimit.py); no ramp in the kept candidate",
        doc="the most the start rate ramps up to (at or below start_rate: no ramp); 0 = no cap (used only with "
        "start_ramp_per_s > 0)",
    )
    start_relax_per_s: float = param(
        0.0,
        ge=0,
        source="assumption: the ramp-start candidate falls back as fast as it ramps up (calibration/candidates.py)",
        doc="once the backlog clears the start rate falls back to start_rate by this many inputs/s per second; "
        "0 = at once",
    )


@dataclass(frozen=True)
class FunctionParams:
    max_inputs: int = param(1, ge=1, source="@modal.concurrent(max_inputs=N) (docs/sources.md §1; Modal default 1)")
    target_inputs: int = param(0, ge=0, source="@modal.concurrent(target_inputs=T); 0 = max_inputs (Modal default)")
    containers: int = param(
        0, ge=0, le=1_000_000, doc="> 0: a fixed pool of always-warm containers, no autoscaling (mmc)"
    )
    copies: int = param(
        1,
        ge=0,
        le=100_000,
        doc="deployed app copies of the Function; caller i uses copy i mod copies; 0 = one per client",
    )
    retries: int = param(
        0,
        ge=0,
        le=100,
        source="@app.function(retries=modal.Retries(max_retries=N)) (modal 1.6.4 retries.py: N >= 0; at most 100 "
        "here, a bound of the model)",
        doc="times the Function retries an input that failed (a crashed container: models/inputs/platform/faults.py)",
    )
    retry_initial_delay_s: float = param(
        1.0, ge=0, le=60, source="modal.Retries(initial_delay=...) (modal 1.6.4 retries.py: 0 .. 60 s, default 1)"
    )
    retry_backoff: float = param(
        2.0,
        ge=1,
        le=10,
        source="modal.Retries(backoff_coefficient=...) (modal 1.6.4 retries.py: 1 .. 10, default 2; retries=N as "
        "an int is 1.0)",
    )
    retry_max_delay_s: float = param(
        60.0, ge=1, le=60, source="modal.Retries(max_delay=...) (modal 1.6.4 retries.py: 1 .. 60 s, default 60)"
    )

    def __post_init__(self) -> None:
        if self.target_inputs > self.max_inputs:
            raise ValueError("target_inputs: must be <= max_inputs")

    @property
    def target(self) -> int:
        return self.target_inputs or self.max_inputs

    def retry_delay(self, retry: int) -> float:
        """Seconds before the Function's ``retry``-th retry of a failed input (1, 2, ...): modal.Retries' rule."""
        return min(self.retry_initial_delay_s * self.retry_backoff ** (retry - 1), self.retry_max_delay_s)
