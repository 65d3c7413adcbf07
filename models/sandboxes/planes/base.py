"""What a sandbox control plane is, and what the three share (docs/sources.md §2).

A control plane takes create requests from the benchmark client (``submit``), places each sandbox on a worker of the
fleet and tells the client when the create call returns (``Client.placed_at`` or ``Client.placed_on``); it
names its own resources (``resources``: each a ``Meter`` whose busy time the run reads at the start and the end of
its span, models/sandboxes/summary.py; their names declared in ``RESOURCES``) and any figures of its own
(``extra_metrics``, declared in ``METRICS``: sim/metrics.py).
A plane also declares what the code around the run asks of it, which is asked of ``PLANES[sc.control_plane]`` and
never by the plane's name: the faults that apply to it (``FAULTS``), its preset and its runs in the fault table
(``PRESET``, ``FAULT_VARIANTS``, ``ORDER``: experiments/faults.py), whether a run is checked against the envelope of
a fit (``FITTED``), its shortcuts (``SHORTCUTS``: models/sandboxes/shortcuts.py), and its part of the run's size
estimate and budget (``events_per_s``, ``fault_events``, ``grows``: models/sandboxes/budget.py).
A plane knows the run above it only through the two protocols here: ``Scenario`` (what it reads of the scenario) and
``Client`` (the two calls it makes back to the benchmark client); models/sandboxes/scenario.py's ``SandboxScenario``
and models/sandboxes/client.py's ``Creation`` are one of each, and no plane imports those modules.
Adding one: a module in this package (a subclass of ``ControlPlane`` with its ``name``, its scenario ``section``, that
section's ``Params``, and the facts above), its line in ``PLANES`` (models/sandboxes/planes/__init__.py) and its
preset (experiments/scenarios/).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

from models.sandboxes.faults import FaultParams
from models.sandboxes.fleet import BenchmarkClientParams, Fleet, FleetParams, Meter, SandboxParams
from sim.engine import Sim
from sim.metrics import Metrics
from sim.rng import Streams
from sim.shortcuts import Shortcut

Cost = dict[str, tuple[float, str]]  # events by what they are, each with how to make fewer (sim/model.py ``Estimate``)


class Scenario(Protocol):
    """What a control plane reads of a sandbox scenario: the client's round trip, the fleet, and its own section
    (``getattr(sc, section)``, which the scenario gains from ``PLANES``)."""

    @property
    def horizon_s(self) -> float: ...
    @property
    def sandboxes(self) -> SandboxParams: ...
    @property
    def client(self) -> BenchmarkClientParams: ...
    @property
    def fleet(self) -> FleetParams: ...
    @property
    def faults(self) -> FaultParams: ...


class Client(Protocol):
    """What a control plane tells the benchmark client: a sandbox placed on a worker."""

    def placed_at(self, sandbox: int, worker: int, returns: float, starts: float) -> None:
        """Placed now: its create call returns to the client at ``returns``, the worker begins its start path at
        ``starts`` (both >= now)."""

    def placed_on(self, sandbox: int, worker: int) -> None:
        """Placed now: the create call returns now, the worker begins its start path once told by RPC."""


class ControlPlane:
    name: ClassVar[str]  # the scenario's ``control_plane`` value
    section: ClassVar[str]  # the scenario section holding its parameters
    Params: ClassVar[type]  # that section's frozen dataclass
    RESOURCES: ClassVar[tuple[str, ...]]  # the names of ``resources()``
    METRICS: ClassVar[Metrics] = Metrics()  # what ``extra_metrics()`` reports
    FAULTS: ClassVar[tuple[str, ...]]  # the faults that apply to it (models/sandboxes/faults.py), in the table's order
    PRESET: ClassVar[str]  # its preset scenario (experiments/scenarios/), the one the fault table runs
    ORDER: ClassVar[int]  # its place among the planes in the fault table: Modal's planes oldest first, then the foil
    # faults the fault table runs once more with these keys set too (``--set`` lines), after their plain run
    FAULT_VARIANTS: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    FITTED: ClassVar[bool] = False  # its section holds fitted parameters: a run is checked against the fit's envelope
    SHORTCUTS: ClassVar[tuple[Shortcut, ...]] = ()  # the shortcuts it takes (models/sandboxes/shortcuts.py)

    def __init__(self, sim: Sim, sc: Scenario, streams: Streams, fleet: Fleet, creation: Client) -> None:
        self.sim = sim
        self.p: Any = getattr(sc, self.section)
        self.fleet = fleet
        self.creation = creation
        self.hop = sc.client.rtt_s / 2  # one network hop: half the client's round trip
        self.rejections = 0  # placements refused (by a worker, or a conflicting commit)
        self.retries = 0  # create attempts made again (each plane says which rejections, and what else, cause one)

    def submit(self, sandbox: int) -> None:
        """A create request leaves the client now."""
        raise NotImplementedError

    def submit_many(self, sandboxes: range) -> None:
        """Create requests leaving the client now, in order (a plane may take them in one loop)."""
        for sandbox in sandboxes:
            self.submit(sandbox)

    def finished(self, sandbox: int) -> None:
        """A sandbox ended (``sandboxes.lifetime_s`` > 0); its worker slot is already free."""

    def resources(self) -> dict[str, Meter]:
        """The plane's resources by name (``RESOURCES``); the run reports each one's busy fraction over its span."""
        raise NotImplementedError

    def extra_metrics(self) -> dict:
        """Figures of this control plane's own (``METRICS``), merged into the run's metrics."""
        return {}

    @classmethod
    def events_per_s(cls, sc: Scenario) -> Cost:
        """The events it makes each simulated second whatever the load (models/sandboxes/budget.py)."""
        return {}

    @classmethod
    def fault_events(cls, sc: Scenario) -> Cost:
        """The events its faults add that can be bounded before the run (models/sandboxes/budget.py)."""
        return {}

    @classmethod
    def grows(cls) -> dict[Callable, tuple[str, str]]:
        """What a run over its budget may spend its events on, by callback: what it is and how to make fewer
        (sim/engine.py ``Budget.grows``)."""
        return {}
