"""What a sandbox-creation run will cost, estimated from its scenario before it starts (``Estimate``: sim/model.py),
for the run budgets (models/runs.py; docs/explanation/robustness.md).

The size is the sandboxes; the events, ``EVENTS_PER_SANDBOX`` per sandbox; and what the control plane does each
simulated second whatever the load (its ``events_per_s``: Kubernetes' node lease renewals, Modal V2's published worker
state). A fault (models/sandboxes/faults.py) adds the retries it causes where they can be bounded ahead (the plane's
``fault_events``: a v2 scheduler outage's); the others (the retries of a stream stall) are not, and the budget checked
as the run goes (sim/guard.py ``Budget``) ends such a run with one line naming them (``GROWS``: the planes' ``grows``
and the client's ticks).
"""

from __future__ import annotations

from typing import Any

from models.sandboxes.client import Creation
from models.sandboxes.planes import PLANES
from sim.model import Estimate

EVENTS_PER_SANDBOX = 16.0  # measured: up to about 6.5 on the presets (kubernetes), leases included


def estimate(sc: Any) -> Estimate:
    """The run's size, and its events (module docstring)."""
    count = float(sc.sandboxes.count)
    plane = PLANES[sc.control_plane]
    events = {"sandboxes": (EVENTS_PER_SANDBOX * count, "fewer sandboxes.count"), **plane.fault_events(sc)}
    return Estimate(
        {"sandboxes": (count, "fewer sandboxes.count")},
        events,
        per_second=plane.events_per_s(sc),
    )


# What a run over its budget spends its events on (sim/guard.py ``Budget.grows``), by callback.
GROWS = {
    fn.__qualname__: kind
    for fn, kind in (
        *(grown for plane in PLANES.values() for grown in plane.grows().items()),
        (Creation._tick, ("client ticks", "lengthen client.tick_s")),
    )
}
