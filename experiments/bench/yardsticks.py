"""The bench's yardsticks (experiments/bench/sections.py): the workloads it times written outside the model, so
that a speed is a ratio to something. The M/M/c FIFO queue three ways (a plain heapq event loop, callbacks on SimPy's
own loop, two bare callbacks on this project's engine writing each customer's records) and SimFaaS itself running
its README example (Mahmoudi & Khazaei's serverless simulator, https://github.com/pacslab/simfaas; the ``bench``
extra installs it). Each queue returns (customers served, mean wait); tests/models/inputs/test_theory.py checks that
each is an M/M/c queue (Erlang C), so a ratio against them means something."""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from heapq import heappush

import numpy as np
import simpy


def _exponentials(rng: np.random.Generator, mean: float) -> Callable[[], float]:
    """Exponential draws of ``mean``, 4,096 at a time, popped one per call (the reference queues' samplers)."""
    batch: list[float] = []

    def draw() -> float:
        if not batch:
            batch.extend(rng.exponential(mean, 4096).tolist())
        return batch.pop()

    return draw


def heapq_mmc(rate: float, servers: int, mean_service: float, horizon: float, seed: int) -> tuple[int, float]:
    """A bare M/M/c FIFO simulation; returns (customers served, mean wait)."""
    rng = np.random.default_rng(seed)
    gap, service = _exponentials(rng, 1.0 / rate), _exponentials(rng, mean_service)
    heap: list[tuple[float, int, int]] = []  # (time, seq, kind) kind 0 arrival, 1 departure
    queue: deque[float] = deque()
    free = servers
    seq = 0
    t = 0.0
    waits = 0.0
    served = 0

    heapq.heappush(heap, (gap(), 0, 0))
    while heap:
        t, _, kind = heapq.heappop(heap)
        seq += 1
        if kind == 0:
            nxt = t + gap()
            if nxt < horizon:
                heapq.heappush(heap, (nxt, seq, 0))
            if free:
                free -= 1
                served += 1
                heapq.heappush(heap, (t + service(), seq, 1))
            else:
                queue.append(t)
        elif queue:
            arrived = queue.popleft()
            waits += t - arrived
            served += 1
            heapq.heappush(heap, (t + service(), seq, 1))
        else:
            free += 1
    return served, waits / served


def simpy_mmc(rate: float, servers: int, mean_service: float, horizon: float, seed: int) -> tuple[int, float]:
    """The same M/M/c FIFO queue on SimPy's own loop, written as callbacks on timeouts (no processes: SimPy's fastest
    way); returns (customers served, mean wait)."""
    rng = np.random.default_rng(seed)
    gap, service = _exponentials(rng, 1.0 / rate), _exponentials(rng, mean_service)
    env = simpy.Environment()
    timeout = env.timeout
    queue: deque[float] = deque()
    free, served, waits = servers, 0, 0.0

    def arrive(_event: simpy.Event) -> None:
        nonlocal free, served
        nxt = gap()
        if env.now + nxt < horizon:
            timeout(nxt).callbacks.append(arrive)
        if free:
            free -= 1
            served += 1
            timeout(service()).callbacks.append(depart)
        else:
            queue.append(env.now)

    def depart(_event: simpy.Event) -> None:
        nonlocal free, served, waits
        if queue:
            waits += env.now - queue.popleft()
            served += 1
            timeout(service()).callbacks.append(depart)
        else:
            free += 1

    timeout(gap()).callbacks.append(arrive)
    env.run()
    return served, waits / served


def engine_mmc(rate: float, servers: int, mean_service: float, horizon: float, seed: int) -> tuple[int, float]:
    """The same M/M/c FIFO queue as two callbacks on this project's engine (sim/engine.py, no shortcut), writing
    each customer's issue, work, start and finish times to columns and closing its row as the model's call log does
    (models/inputs/records.py), and nothing else: no limits, autoscaler, containers or callers. What any model on
    the engine that keeps per-call records costs at least; returns (customers served, mean wait)."""
    from array import array

    from sim.dists import Exponential
    from sim.engine import NORMAL, Sim

    rng = np.random.default_rng(seed)
    gap, service = Exponential(1.0 / rate).sampler(rng), Exponential(mean_service).sampler(rng)
    sim = Sim(calendar=False, delay_lines=False)
    env, heap, ids = sim.env, sim.heap, sim.ids
    issued, work, started, finished = array("d"), array("d"), array("d"), array("d")
    closed: list[int] = []
    queue: deque[int] = deque()
    free = [servers]

    def arrive(_arg: None) -> None:
        now = env._now
        call = len(issued)
        w = service()
        issued.append(now)
        work.append(w)
        started.append(math.nan)
        finished.append(math.nan)
        nxt = now + gap()
        if nxt < horizon:
            heappush(heap, (nxt, NORMAL, next(ids), arrive, None))
        if free[0]:
            free[0] -= 1
            started[call] = now
            heappush(heap, (now + w, NORMAL, next(ids), depart, call))
        else:
            queue.append(call)

    def depart(call: int) -> None:
        now = env._now
        finished[call] = now
        closed.append(call)
        if queue:
            nxt = queue.popleft()
            started[nxt] = now
            heappush(heap, (now + work[nxt], NORMAL, next(ids), depart, nxt))
        else:
            free[0] += 1

    sim.call_at(gap(), arrive)
    sim.run(math.inf)
    waits = np.frombuffer(started, dtype=float) - np.frombuffer(issued, dtype=float)
    return len(closed), float(waits.mean())


# SimFaaS's README example: Poisson arrivals at 0.9/s, warm service exponential(1.991 s), cold exponential(2.244 s),
# instances expire after 600 s idle; run for SIMFAAS_HORIZON_S simulated seconds (its README runs 10^6)
SIMFAAS_HORIZON_S = 200_000.0


def simfaas_example(horizon: float = SIMFAAS_HORIZON_S, seed: int = 0) -> dict | None:
    """SimFaaS itself on its README example (None where it is not installed: ``pip install -e '.[bench]'``): its
    cold-start probability and mean running instances, for comparison with this project's run of the same example."""
    try:
        from simfaas.ServerlessSimulator import ServerlessSimulator
    except ImportError:
        return None
    np.random.seed(seed)  # SimFaaS draws from numpy's global generator
    sim = ServerlessSimulator(
        arrival_rate=0.9,
        warm_service_rate=1 / 1.991,
        cold_service_rate=1 / 2.244,
        expiration_threshold=600,
        max_time=horizon,
    )
    sim.generate_trace(debug_print=False, progress=False)
    return {
        "calls": int(sim.total_req_count),
        "cold_start_probability": round(sim.get_cold_start_prob(), 5),
        "inputs_running_mean": round(sim.get_average_server_running_count(), 3),
    }
