"""The envelope a load test's parameters were calibrated on, and where a run leaves it.

The fitted parameters (calibration/params/reference-loadtest.toml) are supported only as far as the runs they were
fitted to went: the reference load test's 8 clients × 1,000 calls in flight for 60 s, 8 app copies at most, and the
backlogs and containers those runs had at the fitted values. ``calibration.fit`` writes that envelope beside the
parameters, as the file's ``[envelope]`` table (calibration/envelope.py measures it); the code's defaults are the
shipped file's, like every fitted parameter, and ``--params FILE`` brings a file's own envelope with its parameters.

A run reports where it leaves the envelope (``extrapolated``: one short text per excess, naming what, its value and
the bound; ``envelope.runs`` says what the bounds are of). The scenario's own figures (clients, calls in flight,
duration, copies, the ideal calls/s) are compared exactly, the duration as the run had it (a load that makes its
calls once ends when they are back); the figures a run measures (its longest backlog, its most containers) vary from
seed to seed, so they count only beyond ``MARGIN`` over the most the fit saw (over 8 seeds the reference spawn run's
longest backlog is 64–64.5 s, where the fit's seeds saw 64 s). ``envelope.runs = ""`` says a scenario uses no
calibrated parameter (e.g. ``mmc``: warm containers, no limits, no legs): nothing is checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from models.inputs import base
from models.inputs.approaches import APPROACHES
from sim.scenario import param

MARGIN = 0.25  # a measured figure is outside the envelope beyond (1 + MARGIN) × the most the fit's runs had
FIT = "calibration.fit: the fit's runs at its parameters (calibration/params/reference-loadtest.toml, [envelope])"


@dataclass(frozen=True)
class EnvelopeParams:
    runs: str = param(
        "the reference load test", source=FIT, doc='what the parameters were calibrated on ("": none, no check)'
    )
    clients: int = param(8, ge=0, source=FIT, doc="the most closed-loop clients of a calibration run")
    in_flight: int = param(1000, ge=0, source=FIT, doc="the most calls in flight per client of a calibration run")
    duration_s: float = param(60.0, ge=0, source=FIT, doc="the longest duration of a calibration run")
    copies: int = param(8, ge=0, source=FIT, doc="the most app copies of a calibration run")
    calls_per_s: float = param(1454.5454545454545, ge=0, source=FIT, doc="the most ideal calls/s of a calibration run")
    backlog_s: float = param(65.5, ge=0, source=FIT, doc="the longest backlog (backlog_longest_s) the fit's runs had")
    containers: int = param(16, ge=0, source=FIT, doc="the most containers (containers_peak) the fit's runs had")


class Scenario(base.Scenario, Protocol):
    """What the check reads of a load test: the protocol's keys, the envelope and the ideal calls/s."""

    @property
    def envelope(self) -> EnvelopeParams: ...
    def ideal_calls_per_s(self) -> float: ...


def copies(sc: base.Scenario) -> int:
    """The Functions a load test deploys: its app copies (0: one per client); the web server's one pool."""
    return APPROACHES[sc.approach].pools(sc)


def _num(x: float) -> str:
    return f"{x:,.0f}" if x == int(x) or abs(x) >= 1000 else f"{x:.4g}"


def extrapolated(sc: Scenario, metrics: dict) -> list[str]:
    """Where a run (its scenario ``sc`` and its ``metrics``) leaves the envelope of ``sc.envelope``: one text each."""
    e = sc.envelope
    if not e.runs:
        return []
    out = []

    def over(key: str, value: float, bound: float) -> None:
        if value > bound:
            out.append(f"{key} {_num(value)} > {_num(bound)}")

    if sc.load == "clients":
        over("clients.count", sc.clients.count, e.clients)
        over("clients.in_flight", sc.clients.in_flight, e.in_flight)
    # a load that stops early (calls made once, all back) ran only as long as its clock did
    over("duration_s", min(sc.duration_s, metrics["sim_time_s"]), e.duration_s)
    over("function.copies", copies(sc), e.copies)
    over("ideal_calls_per_s", sc.ideal_calls_per_s(), e.calls_per_s)
    backlog, containers = metrics["backlog_longest_s"], metrics["containers_peak"]
    if backlog > (1 + MARGIN) * e.backlog_s:
        out.append(f"a backlog of {_num(backlog)} s > the longest the fit saw, {_num(e.backlog_s)} s")
    if containers > (1 + MARGIN) * e.containers:
        out.append(f"containers_peak {_num(containers)} > the most the fit saw, {_num(e.containers)}")
    return out
