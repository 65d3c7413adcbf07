"""The autoscaler against Modal's own serverless queuing model (docs/sources.md §4), with tolerances from CIs
over replications.

The reference (github modal-labs/serverless-queuing-theory-model, ``model.py``) is a continuous-time Markov chain of
a Function's workers and queue: a state is (b, i, s, q), busy, idle and starting workers and inputs queued, with
b + i + s ≤ N workers and never idle workers beside a queue (i > 0 ⇒ q = 0). Arrivals are Poisson (λ), service and
start exponential (μ, σ). Its transitions, rewritten here (not copied) as a generator:

- an arrival: to an idle worker if there is one (b + 1, i − 1), else into the queue (q + 1);
- a busy worker finishes (rate b·μ): it takes the next queued input (q − 1), or with none it turns idle
  (b − 1, i + 1);
- a starting worker is ready (rate s·σ): it takes the next queued input (b + 1, s − 1, q − 1), or turns idle;
- the policy: start a worker (s + 1) or shut down an idle one (i − 1), at a per-state rate that the repository
  optimises; its score is the latency E[q] / λ (Little's law: the mean wait in the queue, service excluded) and the
  utilization E[b] / E[b + i + s].

The fixed policy tested here is the simulator's autoscaler with one input per container and
``size_to = "in_system"``: a worker is started at once whenever the queue outgrows the starting workers (q > s,
and b + i + s < N: the simulator's ``max_containers``; the repository's cap, b + i + s + q < N, would count queued
inputs as workers), and each idle worker is shut down at rate θ. Starting workers are never cancelled, in the chain
as in the simulator. The queue is truncated at ``max_queue`` inputs (arrivals beyond it are dropped, as in the
repository); the test asserts that the equilibrium mass at the cap is below 1e-12, so the truncation changes no
figure. The equilibrium solves πQ = 0, Σπ = 1 (scipy.sparse), on the states reachable from the empty one.

Mapping to the simulator (``tests/conftest.py`` ``scenario``: every mechanism off): ``load = "arrivals"`` (λ),
``work = "exponential(1/μ)"``, ``autoscaler.cold_start = "exponential(1/σ)"``, no input limits, no per-call
overhead, ``function.max_inputs = 1``, ``autoscaler.max_containers = N``, ``min_containers = buffer_containers =
0``, ``scaleup_step = 1``. Latency: ``wait_mean_s`` (start − issue, of the inputs issued in the window). Utilization:
the monitor's running inputs over its containers (starting or ready), time-averaged over the window.

What the simulator cannot match, and why N = 1 in all three settings. (1) Its idle timeout is deterministic (a
container idle for ``scaledown_window_s`` = W is removed at the next decision), the chain's exponential. (2) It
adds containers at its decisions, every ``interval_s`` = τ, except from an empty pool (scale-from-zero decides at
once). With one container both vanish exactly: every scale-up is from zero, so it is instant; and an idle period
starts with nothing queued and ends at the next arrival (Poisson, so independent of the timeout T) or at T, after
which the system is in the same state (busy with nothing queued, or empty) whatever T's law. By renewal-reward,
the time averages depend on T's law only through p = P(an arrival comes first) = 1 − E[e^{−λT}], since the mean
idle time is E[min(A, T)] = p / λ for any T; an exponential timeout with θ = λ(1 − p) / p gives the same p and the
same mean idle time, hence the same latency and utilization. In the simulator T = W + R, R the wait for the next
decision, in [0, τ): with R uniform, E[e^{−λT}] = e^{−λW}(1 − e^{−λτ}) / (λτ), which sets θ. R is not exactly
uniform: an idle period begins at a service end, an independent exponential after the service's start, so its phase
against the decisions has a density within a factor e^{±τμ} of uniform, and the figures move by at most τμ/2 = 5% of
the gap between those at T = W and at T = W + τ (both bound the truth: the figures are monotone in p). That gap is
1.3%, 1.9% and 1.4% of the latency and 1.6%, 0.6% and 0.3% of the utilization in the three settings: the
residual error, ≤ 0.1%, is negligible beside the CIs (about 3-5% and 1-1.4%). With N > 1 neither holds: an idle
container's timeout races arrivals that go to the most recently freed container first, so the deterministic and
exponential timeouts give different equilibria, and scale-ups from a non-empty pool wait up to τ; so the multi-worker
chain is checked only in its θ = 0 limit, against Erlang C.

The three settings (μ = 1/s, N = 1, W = 2 s: Modal's shortest scaledown window; τ = 0.1 s): low load λ = 0.2/s with
1 s cold starts (the container is gone before the next call in 2/3 of its idle periods), medium λ = 0.5/s and high
λ = 0.7/s, both with 2 s cold starts (the high load scales to zero after a quarter of its idle periods, and its
latency is 1.4 × M/M/1's). Each is 10 replications of 20,000 s (500 s warm-up), the monitor sampling every 2 s; the
CTMC's figure must lie within the 95% t-interval of the simulator's mean. About 8 s per setting on one core.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from models.inputs import loadtest, parts
from tests.support import ci95, erlang_c_wait, scenario

State = tuple[int, int, int, int]  # (busy, idle, starting, queued)


@dataclass(frozen=True)
class Chain:
    """Modal's chain under the autoscaler's policy: start a worker whenever q > s (below ``workers``); shut each
    idle worker down at ``retire_rate``."""

    arrival_rate: float  # λ
    service_rate: float  # μ
    start_rate: float  # σ = 1 / mean cold start
    retire_rate: float  # θ, per idle worker
    workers: int  # N
    max_queue: int = 400  # truncation: arrivals to a full queue are dropped

    def moves(self, x: State) -> list[tuple[State, float]]:
        """The transitions out of ``x`` and their rates."""
        b, i, s, q = x
        out = []
        if i:
            out.append(((b + 1, i - 1, s, q), self.arrival_rate))
        elif q < self.max_queue:
            start = q + 1 > s and b + s < self.workers  # the policy: the queue outgrows the starting workers
            out.append(((b, i, s + start, q + 1), self.arrival_rate))
        if b:
            out.append(((b, i, s, q - 1) if q else (b - 1, i + 1, s, q), b * self.service_rate))
        if s:
            out.append(((b + 1, i, s - 1, q - 1) if q else (b, i + 1, s - 1, q), s * self.start_rate))
        if i:
            out.append(((b, i - 1, s, q), i * self.retire_rate))
        return [(y, r) for y, r in out if r > 0]

    def equilibrium(self) -> dict[str, float]:
        """Solve πQ = 0, Σπ = 1 over the states reachable from the empty one; the repository's scores."""
        index: dict[State, int] = {(0, 0, 0, 0): 0}
        todo, rows, cols, rates = [(0, 0, 0, 0)], [], [], []
        while todo:
            x = todo.pop()
            for y, r in self.moves(x):
                if y not in index:
                    index[y] = len(index)
                    todo.append(y)
                rows.append(index[x])
                cols.append(index[y])
                rates.append(r)
        n = len(index)
        gen = sp.csr_matrix((rates, (rows, cols)), shape=(n, n))
        gen = gen - sp.diags(np.asarray(gen.sum(axis=1)).ravel())
        a = gen.T.tolil()
        a[0, :] = 1.0  # one balance equation is redundant: replace it by the normalisation
        rhs = np.zeros(n)
        rhs[0] = 1.0
        pi = spla.spsolve(a.tocsc(), rhs)
        assert np.abs(pi @ gen).max() < 1e-10 and pi.min() > -1e-12
        b, i, s, q = np.array(list(index), dtype=float).T
        return {
            "latency": float(pi @ q) / self.arrival_rate,
            "utilization": float(pi @ b) / float(pi @ (b + i + s)),
            "busy": float(pi @ b),
            "truncated": float(pi[q == self.max_queue].sum()),
        }


def retire_rate(lam: float, window: float, interval: float) -> float:
    """θ of the exponential idle timeout equivalent, with one container, to the simulator's: removal at the first
    decision (every ``interval``, at a uniform phase) after ``window`` s idle (module docstring)."""
    survive = math.exp(-lam * window) * -math.expm1(-lam * interval) / (lam * interval)  # E[e^{−λT}]
    return lam * survive / (1.0 - survive)


@dataclass(frozen=True)
class Setting:
    name: str
    lam: float  # arrivals/s
    cold_s: float  # mean cold start
    window_s: float  # scaledown window
    work_s: float = 1.0  # mean work
    interval_s: float = 0.1  # the autoscaler's decision interval
    duration_s: float = 20_000.0
    warmup_s: float = 500.0
    seeds: int = 10

    def chain(self) -> Chain:
        theta = retire_rate(self.lam, self.window_s, self.interval_s)
        return Chain(self.lam, 1.0 / self.work_s, 1.0 / self.cold_s, theta, workers=1)

    def run(self, seed: int) -> tuple[float, float]:
        """(mean wait, utilization) of one replication."""
        sc = scenario(
            {
                "approach": "remote",
                "load": "arrivals",
                "arrivals": {"rate": self.lam},
                "work": f"exponential({self.work_s})",
                "duration_s": self.duration_s,
                "warmup_s": self.warmup_s,
                "function": {"max_inputs": 1},
                "limits": {"enabled": False},
                "autoscaler": {
                    "cold_start": f"exponential({self.cold_s})",
                    "interval_s": self.interval_s,
                    "scaledown_window_s": self.window_s,
                    "max_containers": 1,
                    "min_containers": 0,
                    "buffer_containers": 0,
                },
            }
        )
        series: dict = {}
        m = loadtest.run(sc, seed=seed, series=series)
        t = np.asarray(series["t"])
        inside = (t >= self.warmup_s) & (t < self.duration_s)
        running = np.asarray(series["running"])[inside]
        containers = np.asarray(series["containers"])[inside]
        return m["wait_mean_s"], running.mean() / containers.mean()


SETTINGS = [
    Setting("low", lam=0.2, cold_s=1.0, window_s=2.0),
    Setting("medium", lam=0.5, cold_s=2.0, window_s=2.0),
    Setting("high", lam=0.7, cold_s=2.0, window_s=2.0),
]


@pytest.mark.parametrize("lam, c", [(0.7, 1), (2.4, 3)])
def test_chain_without_scaledown_is_erlang_c(lam, c):
    # θ = 0: the pool grows to N workers and stays, so the chain's equilibrium is M/M/N's (docs/sources.md §4)
    eq = Chain(lam, 1.0, 0.5, 0.0, workers=c).equilibrium()
    assert eq["truncated"] < 1e-12
    assert eq["latency"] == pytest.approx(erlang_c_wait(lam, 1.0, c), rel=1e-9)
    assert eq["utilization"] == pytest.approx(lam / c, rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("setting", SETTINGS, ids=[s.name for s in SETTINGS])
def test_autoscaler_matches_modals_chain(setting: Setting, monkeypatch: pytest.MonkeyPatch):
    # a sample of the monitor every 2 s rather than its default 1,000 per run: a tighter time average of containers
    monkeypatch.setattr(parts, "MONITOR_SAMPLES", int(setting.duration_s / 2.0))
    eq = setting.chain().equilibrium()
    assert eq["truncated"] < 1e-12  # the queue's cap changes nothing
    assert eq["busy"] == pytest.approx(setting.lam * setting.work_s, rel=1e-9)  # flow balance: E[b] = λ/μ
    waits, utils = zip(*(setting.run(seed) for seed in range(setting.seeds)), strict=True)
    for what, sim, ctmc in (("latency", waits, eq["latency"]), ("utilization", utils, eq["utilization"])):
        mean, half = ci95(list(sim))
        assert abs(mean - ctmc) <= half, f"{setting.name} {what}: simulated {mean:.4f} ± {half:.4f}, CTMC {ctmc:.4f}"
