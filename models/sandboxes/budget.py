"""What a sandbox-creation run will cost, estimated from its scenario before it starts (``Estimate``: sim/model.py),
for the run budgets (experiments/cli.py; README, "Bad input").

The size is the sandboxes; the events, ``EVENTS_PER_SANDBOX`` per sandbox; and what the control plane does each
simulated second whatever the load: Kubernetes' node lease renewals (nodes ÷ ``kubernetes.lease_interval_s``, each an
eighth of an event: ``Sim.charge``) and Modal V2's published worker state (workers ÷ ``scheduler.publish_interval_s``
copied, each an eighth).
"""

from __future__ import annotations

from typing import Any

from sim.model import Estimate

EVENTS_PER_SANDBOX = 16.0  # measured: up to about 6.5 on the presets (kubernetes), leases included
LEASE_EVENTS = 1 / 8  # a lease renewal booked, as events (models/sandboxes/planes/kubernetes.py)
PUBLISH_EVENTS = 1 / 8  # a worker's state copied into a published snapshot (models/sandboxes/planes/modal_v2.py)


def estimate(sc: Any) -> Estimate:
    """The run's size, and its events (module docstring)."""
    count = float(sc.sandboxes.count)
    per_second = {}
    if sc.control_plane == "kubernetes":
        per_s = sc.fleet.workers / sc.kubernetes.lease_interval_s * LEASE_EVENTS
        per_second["node lease renewals"] = (per_s, "lengthen kubernetes.lease_interval_s (or fewer fleet.workers)")
    elif sc.control_plane == "modal-v2":
        per_s = sc.fleet.workers / sc.scheduler.publish_interval_s * PUBLISH_EVENTS
        per_second["published worker state"] = (per_s, "lengthen scheduler.publish_interval_s (or fewer fleet.workers)")
    return Estimate(
        {"sandboxes": (count, "fewer sandboxes.count")},
        {"sandboxes": (EVENTS_PER_SANDBOX * count, "fewer sandboxes.count")},
        per_second=per_second,
    )


# What a run over its budget spends its events on (sim/engine.py ``Budget.grows``), by callback.
GROWS = {
    "Kubernetes._leases": ("node lease renewals", "lengthen kubernetes.lease_interval_s (or fewer fleet.workers)"),
    "ModalV2._publish": ("published worker state", "lengthen scheduler.publish_interval_s (or fewer fleet.workers)"),
    "Creation._tick": ("client ticks", "lengthen client.tick_s"),
}
