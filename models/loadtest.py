"""A load test against Functions: the scenario schema and one run (domain.md §1, "The reference load test").

The approaches, each one change to the baseline (domain.md §1, "Four ways past the limits"):
- ``remote``: every client calls one Function with ``.remote`` (synchronous limits);
- ``spawn``: ``.spawn`` then ``.get`` (asynchronous limits; then the start limit binds);
- ``copies``: ``function.copies`` deployed copies, client i calling copy i mod copies (limits are per Function);
- ``batching``: the Function takes a list; clients send rounds of items in chunks;
- ``server``: an HTTP web server behind Modal's proxy, no input queue (models/server.py).
Load is closed-loop clients (``load = "clients"``) or open-loop Poisson arrivals (``load = "arrivals"``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import numpy as np

from models.autoscaler import AutoscalerParams
from models.clients import ArrivalParams, BatchedRounds, BatchingParams, ClientParams, ClosedLoop, Load, OpenLoop
from models.function import ASYNC, SYNC, Function, FunctionParams, LimitParams
from models.monitor import Monitor
from models.server import Proxy, ServerParams
from sim.dists import Dist, Uniform
from sim.engine import Sim
from sim.records import CallLog, Window, summarize
from sim.rng import Streams
from sim.scenario import param, section


@dataclass(frozen=True)
class Scenario:
    model: Literal["function"] = param("function", doc="which model: function (this) or sandboxes")
    name: str = param("", doc="the preset's name")
    description: str = param("")
    source: str = param("", doc="where the scenario's figures come from")
    approach: Literal["remote", "spawn", "copies", "batching", "server"] = param("remote")
    load: Literal["clients", "arrivals"] = param("clients")
    work: Dist = param(Uniform(1.0, 10.0), source="reference load test: sleep uniform(1, 10) s (domain.md §1)")
    duration_s: float = param(60.0, gt=0, source="reference load test: 60 s")
    warmup_s: float = param(0.0, ge=0, source="reference load test: warm-up 0")
    drain_s: float = param(300.0, ge=0, doc="after the duration, how long the test waits for calls in flight")
    function: FunctionParams = section(FunctionParams)
    limits: LimitParams = section(LimitParams)
    autoscaler: AutoscalerParams = section(AutoscalerParams)
    server: ServerParams = section(ServerParams)
    clients: ClientParams = section(ClientParams)
    arrivals: ArrivalParams = section(ArrivalParams)
    batching: BatchingParams = section(BatchingParams)

    def __post_init__(self) -> None:
        if self.warmup_s >= self.duration_s:
            raise ValueError("warmup_s: must be < duration_s")
        if self.approach == "batching" and self.load != "clients":
            raise ValueError('load: batching runs closed-loop rounds; use load = "clients"')

    def ideal_calls_per_s(self) -> float:
        """Calls per second with no overhead at all: calls in flight ÷ mean call duration; for batching a round
        lasts as long as its slowest item (order statistics, domain.md §4); open loop: the arrival rate."""
        if self.load == "arrivals":
            return self.arrivals.rate
        c = self.clients
        if self.approach == "batching":
            n = self.batching.round_items
            return c.count * n / self.work.expected_max(n)
        return c.count * c.in_flight / self.work.mean


MONITOR_DT = 0.5  # seconds between the monitor's samples (models/monitor.py) ...
MONITOR_SAMPLES = 1000  # ... or longer, so that a long run takes at most this many


def run(sc: Scenario, seed: int = 0, series: dict | None = None) -> dict:
    """Simulate one scenario; return its metrics (interfaces.md, "Function load tests").

    Pass a dict as ``series`` to receive time series sampled every monitor interval: t, running, pending, containers,
    started (cumulative) and accepted (cumulative: started + pending)."""
    wall0 = time.perf_counter()
    sim = Sim()
    streams = Streams(seed)
    log = CallLog()
    load: Load
    common = dict(
        sim=sim,
        log=log,
        streams=streams,
        work=sc.work,
        cp=sc.clients,
        targets=[],
        style=ASYNC if sc.approach == "spawn" else SYNC,
        duration_s=sc.duration_s,
        http=sc.approach == "server",
    )
    if sc.load == "arrivals":
        load = OpenLoop(**common, rate=sc.arrivals.rate)
    elif sc.approach == "batching":
        load = BatchedRounds(**common, bp=sc.batching)
    else:
        load = ClosedLoop(**common)

    if sc.approach == "server":
        load.targets.append(Proxy(sim, "server", sc.server, sc.autoscaler, streams, log, load.done))
    else:
        copies = sc.function.copies or sc.clients.count
        for i in range(copies):
            name = "function" if copies == 1 else f"function-copy-{i}"
            load.targets.append(Function(sim, name, sc.function, sc.limits, sc.autoscaler, streams, log, load.done))

    dt = max(MONITOR_DT, sc.duration_s / MONITOR_SAMPLES)
    monitor = Monitor(sim, load.targets, dt, (sc.warmup_s, sc.duration_s), keep_series=series is not None)
    load.begin()
    sim.run(until=sc.duration_s + sc.drain_s)  # or until the last call in flight is back after the duration
    end = sim.now

    metrics = summarize(log, Window(sc.warmup_s, sc.duration_s))
    metrics["rejections_by_kind"] = dict(sorted(load.rejections.items()))
    metrics.update(monitor.diagnosis(load.lost, load.capacity(sc.duration_s - sc.warmup_s)))
    if series is not None:
        series.update(monitor.series)
        started = np.sort(np.asarray(log.started, dtype=float))
        series["started"] = np.searchsorted(started, series["t"], side="right").tolist()
        series["accepted"] = [s + p for s, p in zip(series["started"], series["pending"], strict=True)]
    pools = [t.pool for t in load.targets]
    metrics.update(
        ideal_calls_per_s=sc.ideal_calls_per_s(),
        containers_peak=sum(p.peak for p in pools),
        cold_starts=sum(p.cold_starts for p in pools),
        sim_time_s=end,
        events=sim.events,
    )
    metrics["wall_s"] = time.perf_counter() - wall0
    return metrics
