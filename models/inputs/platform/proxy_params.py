"""The web server's parameters (the ``server`` section; models/inputs/platform/proxy.py says what each does). Apart
from proxy.py, which ``python -m sim.build`` compiles: mypyc rewrites a compiled dataclass's annotations, which the
scenario schema reads (sim/scenario.py)."""

from __future__ import annotations

from dataclasses import dataclass

from sim.scenario import param


@dataclass(frozen=True)
class ServerParams:
    target_concurrency: int = param(
        1000, ge=1, source="@app.server(target_concurrency=1000) in the reference load test (docs/sources.md §1)"
    )
    max_concurrency: int = param(0, ge=0, source="docs/sources.md §1; 0 = no cap (not set in the reference test)")
    scaleup_window_s: float = param(
        10.0, gt=0, source="assumption: the proxy's scale-up window is not given (docs/sources.md §1)"
    )
    proxy_latency_s: float = param(
        0.005,
        ge=0,
        source="assumption: one in-region proxy hop (the reference ran in us-east)",
        doc="the median of one hop through the proxy (ingress, auth, the tunnel to the worker), each way",
    )
    proxy_sigma: float = param(
        0.3,
        ge=0,
        le=3,
        source="assumption: a network hop varies from request to request (as the Function path's legs)",
        doc="each hop is lognormal(proxy_latency_s, proxy_sigma), drawn per request from its client's stream; "
        "0 = a constant hop",
    )
    container_cpu: float = param(
        0.0,
        ge=0,
        source="@app.server(cpu=1) in the reference load test (docs/sources.md §1); 0 (CPU not modelled) in the "
        "candidate kept by calibration.fit (calibration/params/reference-loadtest.toml)",
        doc="cores per container serving the requests' CPU work (with cpu_per_request_s > 0)",
    )
    cpu_per_request_s: float = param(
        0.0,
        ge=0,
        source="not published; 0 in the candidate kept by calibration.fit "
        "(calibration/params/reference-loadtest.toml); fitted by its server-cpu, fifo-start, gather and ramp-start "
        "candidates",
        doc="core-seconds of CPU per request besides its sleep, served FCFS per container; 0 = none",
    )

    def __post_init__(self) -> None:
        if self.cpu_per_request_s > 0 and self.container_cpu <= 0:
            raise ValueError("server.container_cpu: must be > 0 when cpu_per_request_s > 0")
