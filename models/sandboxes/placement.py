"""Placement: which worker a scheduler sends a sandbox to (docs/sources.md §2, "Research schedulers").

``random`` picks one worker uniformly; ``power_of_d`` samples d workers and takes the least loaded of them
(Mitzenmacher 2001: with d = 2 the tail of the load falls doubly exponentially); ``least_loaded`` scans every
worker (exact, O(workers) a placement: for small fleets). ``supermarket`` isolates the step: Poisson arrivals at
rate λ·n into n FIFO servers of rate 1, each arrival placed by the rule on the servers' true queue lengths; its
mean time in system converges to Σ_{i≥1} λ^((d^i − d)/(d − 1)) (10.0 / 2.61 / 2.03 at λ = 0.9 for d = 1 / 2 / 3).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import numpy as np

from sim.dists import Exponential
from sim.engine import Sim

BATCH = 4096  # indices drawn at a time (a speed constant: any size gives the same indices)


def worker_draws(rng: np.random.Generator, n: int) -> Iterator[int]:
    """Endless uniform worker indices, drawn in batches of ``BATCH`` (numpy draws each index of a batch on its own,
    so the sequence does not depend on the batch: tests/models/sandboxes/test_sandbox_shortcuts.py)."""

    def batches() -> Iterator[list[int]]:
        while True:
            yield rng.integers(0, n, BATCH).tolist()

    return itertools.chain.from_iterable(batches())


def least_of(draw: Iterator[int], d: int, load: Callable[[int], float]) -> int:
    """Power of d choices: the least loaded of d sampled workers (the first on ties)."""
    best = next(draw)
    best_load = load(best)
    for _ in range(d - 1):
        w = next(draw)
        lw = load(w)
        if lw < best_load:
            best, best_load = w, lw
    return best


def theory_time_in_system(lam: float, d: int, terms: int = 200) -> float:
    """Mean time in system of the supermarket model as n → ∞ (rate-1 servers)."""
    if d == 1:
        return 1.0 / (1.0 - lam)
    return sum(lam ** ((d**i - d) / (d - 1)) for i in range(1, terms) if (d**i - d) / (d - 1) < 5000)


def supermarket(n: int, lam: float, d: int, horizon: float, seed: int, warmup: float = 0.0) -> float:
    """Simulate the supermarket model; return the mean time in system of arrivals after ``warmup``."""
    rng = np.random.default_rng(seed)
    sim = Sim()
    queue = [0] * n  # jobs at each server (in service + waiting)
    gap = Exponential(1.0 / (lam * n)).sampler(rng)
    service = Exponential(1.0).sampler(rng)
    draw = worker_draws(rng, n)
    free_at = [0.0] * n  # FIFO single server: when the server finishes its current backlog
    total, count = 0.0, 0
    load = queue.__getitem__

    def depart(server: int) -> None:
        queue[server] -= 1

    def arrive(_arg: None) -> None:
        nonlocal total, count
        now = sim.env._now
        s = least_of(draw, d, load)
        queue[s] += 1
        done = max(now, free_at[s]) + service()
        free_at[s] = done
        sim.call_in(done - now, depart, s)
        if now >= warmup:
            total += done - now
            count += 1
        nxt = gap()
        if now + nxt < horizon:
            sim.call_in(nxt, arrive)

    sim.call_in(gap(), arrive)
    sim.run(until=horizon * 10)
    return total / count
