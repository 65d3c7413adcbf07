"""The sandbox-creation scenario (docs/sources.md §2): its schema, ``SandboxScenario``, and the envelope its fitted
parameter was fitted on (``extrapolated``).

A burst of ``sandboxes.count`` creations (models/sandboxes/fleet.py: workload, fleet, start path) goes through one
control plane, chosen by ``control_plane`` (``PLANES``, models/sandboxes/planes/: Modal's v2 and v1, and Kubernetes as
the foil); the schema gains each plane's section (``scheduler``, ``postgres``, ...) from ``PLANES``, and a fault's keys
are checked against the planes it applies to (their ``FAULTS``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from models.sandboxes import faults
from models.sandboxes.fleet import BenchmarkClientParams, FleetParams, SandboxParams, capacity_error
from models.sandboxes.planes import DEFAULT, PLANES
from sim.scenario import Described, param, section, with_sections

PlaneName = Literal[tuple(PLANES)]
# the planes each fault applies to, in the order of ``PLANES``
FAULT_PLANES = {fault: tuple(n for n, p in PLANES.items() if fault in p.FAULTS) for fault in faults.FAULTS}

FIT = "calibration.fit sandboxes: the fit's runs (calibration/params/sandboxes.toml, [envelope])"


@dataclass(frozen=True)
class EnvelopeParams:
    """What the fitted parameter (the v2 create path's ``scheduler.request_s``) was fitted on: its envelope."""

    runs: str = param("sandboxes-v2's fit", source=FIT, doc='what the parameters were calibrated on ("": no check)')
    count: int = param(100_000, ge=0, source=FIT, doc="the most sandboxes of a calibration run")
    workers: int = param(2_000, ge=0, source=FIT, doc="the most workers of a calibration run")


@dataclass(frozen=True)
class _SandboxScenario(Described):
    """A burst of sandbox creations; each control plane adds its own section (``scheduler``, ``postgres``, ...)."""

    model: Literal["sandboxes"] = param("sandboxes")
    control_plane: PlaneName = param(DEFAULT)
    horizon_s: float = param(3600.0, gt=0, doc="simulated time after which the run stops, created or not")
    sandboxes: SandboxParams = section(SandboxParams)
    client: BenchmarkClientParams = section(BenchmarkClientParams)
    fleet: FleetParams = section(FleetParams)
    envelope: EnvelopeParams = section(EnvelopeParams)
    faults: faults.FaultParams = section(faults.FaultParams)

    def __post_init__(self) -> None:
        why = capacity_error(self.fleet, self.sandboxes) or faults.error(
            self.faults, self.control_plane, FAULT_PLANES, self.fleet.workers, self.horizon_s
        )
        if why:
            raise ValueError(why)


SandboxScenario = with_sections(_SandboxScenario, {p.section: p.Params for p in PLANES.values()}, "SandboxScenario")


def unread(sc: SandboxScenario) -> Callable[[str], bool]:
    """Whether a setting (``key=value``) is of another control plane's section, which ``sc`` does not read (its
    plausible models leave it out: sim/model.py ``Plausibles``)."""
    others = {p.section for p in PLANES.values()} - {PLANES[sc.control_plane].section}
    return lambda setting: setting.partition("=")[0].partition(".")[0] in others


def extrapolated(sc: SandboxScenario) -> list[str]:
    """Where a run leaves the envelope its fitted parameter was fitted on (``sc.envelope``): only a plane with fitted
    parameters reads it (``FITTED``: v2's ``scheduler.request_s``); one text per excess, naming the key, its value and
    the bound."""
    e = sc.envelope
    if not e.runs or not PLANES[sc.control_plane].FITTED:
        return []
    keys = (("sandboxes.count", sc.sandboxes.count, e.count), ("fleet.workers", sc.fleet.workers, e.workers))
    return [f"{k} {v:,} > {bound:,}" for k, v, bound in keys if v > bound]
