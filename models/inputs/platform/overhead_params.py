"""The per-call overhead's parameters (the ``overhead`` section; models/inputs/platform/overhead.py says what each leg
is). Apart from overhead.py, which ``python -m sim.build`` compiles: mypyc rewrites a compiled dataclass's
annotations, which the scenario schema reads (sim/scenario.py)."""

from __future__ import annotations

from dataclasses import dataclass

from sim.dists import Constant, Dist, LogNormal
from sim.scenario import param

_ASSUMPTION = "assumption: not published (docs/sources.md §1 gives only end-to-end latencies)"
_FITTED = (
    "not published; submit and result one equal leg, its median fitted to docs/sources.md §1 "
    "(calibration/params/reference-loadtest.toml), its spread (lognormal σ 0.3) an assumption"
)


@dataclass(frozen=True)
class OverheadParams:
    submit: Dist = param(
        LogNormal(0.0976, 0.3), source=_FITTED, doc="client → the Function's accept (the call in transit)"
    )
    dispatch: Dist = param(
        Constant(0.0), source=_ASSUMPTION, doc="started → work begins on the container (holds its container slot)"
    )
    result: Dist = param(
        LogNormal(0.0976, 0.3), source=_FITTED, doc="work done on the container → result at the caller"
    )
