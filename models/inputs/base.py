"""What the input plane's parts read of a load test's scenario: the ``Scenario`` protocol.

The callers (models/inputs/callers/clients.py, closedloop.py, arrivals.py), the FIFO queue (fifo.py), the approaches
(approaches/) and the run's parts (parts.py) take a scenario of this shape and import this module, never the schema:
the schema (models/inputs/loadtest.py's ``Scenario``, the one scenario class that satisfies the protocol) is built
from the approaches, their names and their sections, so it sits above them all. An approach also reads its own sections
(``Approach.sections``), which the schema gains from ``APPROACHES``.
"""

from __future__ import annotations

from typing import Protocol

from models.inputs.callers import clients
from models.inputs.callers.demand import ArrivalParams, TraceParams
from models.inputs.platform.autoscaler import AutoscalerParams
from models.inputs.platform.function import FunctionParams, LimitParams
from models.inputs.platform.workspace import WorkspaceParams


class Scenario(clients.Scenario, Protocol):
    """A load test as its parts read it: the callers' share (``clients.Scenario``: work, duration_s, clients,
    overhead) and the rest of the schema's keys and sections."""

    @property
    def approach(self) -> str: ...
    @property
    def load(self) -> str: ...
    @property
    def warmup_s(self) -> float: ...
    @property
    def drain_s(self) -> float: ...
    @property
    def function(self) -> FunctionParams: ...
    @property
    def limits(self) -> LimitParams: ...
    @property
    def autoscaler(self) -> AutoscalerParams: ...
    @property
    def workspace(self) -> WorkspaceParams: ...
    @property
    def arrivals(self) -> ArrivalParams: ...
    @property
    def trace(self) -> TraceParams: ...
