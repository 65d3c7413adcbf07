"""Callers that retry rejected calls against the exact chain of a retrial queue, with tolerances from CIs over seeds.

The chain (Falin and Templeton, *Retrial Queues*, 1997: the M/M/c/K queue with an orbit; written here, small): c
servers of rate μ, room for K > c inputs in the system (c running, K − c pending), Poisson arrivals λ; a state is
(n, m), n inputs in the system and m calls in the orbit (rejected, waiting to try again). Transitions:

- an arrival: n + 1 if n < K, else it joins the orbit (m + 1);
- a retry, rate m·θ: n + 1, m − 1 if n < K, else it stays in the orbit (a new exponential time);
- a service completion, rate min(n, c)·μ: n − 1.

No call is lost, so every call is eventually served and Little's law gives the mean time from a call's first attempt
until it is back: W = (E[n] + E[m]) / λ; the retries per call are θ·E[m] / λ (each retry attempt comes from the orbit).
The orbit is truncated at ``max_orbit`` (an arrival to a full orbit is dropped); the test asserts the mass there is
below 1e-12, so the truncation changes no figure.

Mapping to the simulator: open-loop arrivals (λ), ``work = exponential(1/μ)``, ``function.containers = c`` (warm,
one input each), the accept limits on with ``limits.sync_pending_cap = K − c`` (a call finding K in the system is
rejected ``queue_full``; the accept and start buckets too fast to bind; a pending cap of 0 accepts nothing, as every
input is queued before it starts, hence K > c), and ``clients.retry = "random"`` with
``clients.retry_delay_s = 1/θ`` (each rejected call waits an exponential time of that mean, independently: the orbit).
W is ``calls_time_in_system_mean_s`` (back − first attempt), the retries per call ``retries`` ÷ ``calls_issued``.
With ``clients.retry = "none"`` the same runs lose the rejected calls: W falls well below the chain's, which the test
also asserts (the check can fail).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from models.inputs import loadtest
from tests.support import ci95, scenario


@dataclass(frozen=True)
class RetrialChain:
    arrival_rate: float  # λ
    service_rate: float  # μ
    retry_rate: float  # θ, per call in the orbit
    servers: int  # c
    room: int  # K >= c: inputs in the system
    max_orbit: int = 300

    def equilibrium(self) -> dict[str, float]:
        K, M = self.room, self.max_orbit
        index = {(n, m): n * (M + 1) + m for n in range(K + 1) for m in range(M + 1)}
        rows, cols, rates = [], [], []

        def move(x: tuple[int, int], y: tuple[int, int], r: float) -> None:
            if r > 0:
                rows.append(index[x])
                cols.append(index[y])
                rates.append(r)

        for n, m in index:
            if n < K:
                move((n, m), (n + 1, m), self.arrival_rate)
                if m:
                    move((n, m), (n + 1, m - 1), m * self.retry_rate)
            elif m < M:
                move((n, m), (n, m + 1), self.arrival_rate)
            if n:
                move((n, m), (n - 1, m), min(n, self.servers) * self.service_rate)
        size = len(index)
        gen = sp.csr_matrix((rates, (rows, cols)), shape=(size, size))
        gen = gen - sp.diags(np.asarray(gen.sum(axis=1)).ravel())
        a = gen.T.tolil()
        a[0, :] = 1.0  # one balance equation is redundant: replace it by the normalisation
        rhs = np.zeros(size)
        rhs[0] = 1.0
        pi = spla.spsolve(a.tocsc(), rhs)
        assert np.abs(pi @ gen).max() < 1e-10 and pi.min() > -1e-12
        n, m = np.array(list(index), dtype=float).T
        return {
            "time_in_system": float(pi @ (n + m)) / self.arrival_rate,
            "retries_per_call": self.retry_rate * float(pi @ m) / self.arrival_rate,
            "busy": float(pi @ np.minimum(n, self.servers)),
            "truncated": float(pi[m == M].sum()),
        }


@dataclass(frozen=True)
class Setting:
    name: str
    lam: float
    servers: int
    room: int
    retry_delay_s: float  # 1 / θ
    duration_s: float = 20_000.0
    warmup_s: float = 500.0
    seeds: int = 10

    def chain(self) -> RetrialChain:
        return RetrialChain(self.lam, 1.0, 1.0 / self.retry_delay_s, self.servers, self.room)

    def run(self, seed: int, retry: str = "random") -> tuple[float, float]:
        """(mean time in system of the calls issued in the window, retries per call) of one replication."""
        sc = scenario(
            {
                "approach": "remote",
                "load": "arrivals",
                "arrivals": {"rate": self.lam},
                "work": "exponential(1)",
                "duration_s": self.duration_s,
                "warmup_s": self.warmup_s,
                "drain_s": 100_000.0,
                "function": {"containers": self.servers, "max_inputs": 1},
                "limits": {
                    "enabled": True,
                    "sync_pending_cap": self.room - self.servers,
                    "sync_accept_rate": 1e6,
                    "sync_accept_burst": 1e6,
                    "start_rate": 1e6,
                    "start_burst": 1e6,
                },
                "clients": {"retry": retry, "retry_delay_s": self.retry_delay_s},
            }
        )
        m = loadtest.run(sc, seed=seed)
        return m["calls_time_in_system_mean_s"], m["retries"] / m["calls_issued"]


SETTINGS = [
    Setting("one-server-one-waiting", lam=0.7, servers=1, room=2, retry_delay_s=2.0),
    Setting("one-server-two-waiting-slow-retries", lam=0.8, servers=1, room=3, retry_delay_s=5.0),
    Setting("two-servers-one-waiting", lam=1.5, servers=2, room=3, retry_delay_s=1.0),
]


def test_without_an_orbit_the_chain_is_erlangs_loss_system():
    # θ → ∞ is not a chain; m stays 0 when no call is ever rejected: K large against λ/μ gives M/M/c's time in system
    eq = RetrialChain(0.5, 1.0, 1.0, servers=1, room=60).equilibrium()
    assert eq["time_in_system"] == pytest.approx(1.0 / (1.0 - 0.5), rel=1e-9)  # M/M/1: W = 1/(μ − λ)
    assert eq["busy"] == pytest.approx(0.5, rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("setting", SETTINGS, ids=[s.name for s in SETTINGS])
def test_retrying_callers_match_the_retrial_queues_chain(setting: Setting):
    eq = setting.chain().equilibrium()
    assert eq["truncated"] < 1e-12  # the orbit's cap changes nothing
    assert eq["busy"] == pytest.approx(setting.lam, rel=1e-9)  # flow balance: every call is served once
    runs = [setting.run(seed) for seed in range(setting.seeds)]
    figures = (("time in system", eq["time_in_system"]), ("retries/call", eq["retries_per_call"]))
    for i, (what, ctmc) in enumerate(figures):
        mean, half = ci95([r[i] for r in runs])
        assert abs(mean - ctmc) <= half, f"{setting.name} {what}: simulated {mean:.4f} ± {half:.4f}, CTMC {ctmc:.4f}"
    # and the check can fail: callers that drop rejected calls are far outside the chain's interval
    dropped, _ = ci95([setting.run(seed, retry="none")[0] for seed in range(3)])
    assert dropped < eq["time_in_system"] - 4 * half
