"""What a sandbox-creation run will cost, estimated from its scenario before it starts (``Estimate``: sim/model.py),
for the run budgets (models/runs.py; docs/explanation/robustness.md).

The size is the sandboxes; the events, ``EVENTS_PER_SANDBOX`` per sandbox; and what the control plane does each
simulated second whatever the load: Kubernetes' node lease renewals (nodes ÷ ``kubernetes.lease_interval_s``, each an
eighth of an event: ``Sim.charge``) and Modal V2's published worker state (workers ÷ ``scheduler.publish_interval_s``
copied, each an eighth). A fault (models/sandboxes/faults.py) adds the retries it causes where they can be bounded
ahead: a scheduler outage's creates time out and are sent again every ``faults.scheduler_down_detect_s`` while it
lasts (at most the client's concurrency at once, the share routed to the dead scheduler); the retries a stream stall
causes (placements on stale state) are not bounded ahead, and the budget checked as the run goes (sim/guard.py
``Budget``) ends such a run with one line naming them (``GROWS``).
"""

from __future__ import annotations

from typing import Any

from sim.model import Estimate

EVENTS_PER_SANDBOX = 16.0  # measured: up to about 6.5 on the presets (kubernetes), leases included
LEASE_EVENTS = 1 / 8  # a lease renewal booked, as events (models/sandboxes/planes/kubernetes.py)
RETRY_EVENTS = 2.0  # a create sent again: its retry and its arrival (models/sandboxes/planes/modal_v2.py)
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
    events = {"sandboxes": (EVENTS_PER_SANDBOX * count, "fewer sandboxes.count")}
    fp = getattr(sc, "faults", None)
    if fp is not None and sc.control_plane == "modal-v2" and fp.scheduler_down_s > 0:
        rounds = min(fp.scheduler_down_s, sc.horizon_s) / fp.scheduler_down_detect_s + 1
        retries = min(count, sc.client.concurrency) * rounds / sc.scheduler.count * RETRY_EVENTS
        events["create retries in the scheduler outage"] = (
            retries,
            "shorten faults.scheduler_down_s or lengthen faults.scheduler_down_detect_s",
        )
    return Estimate(
        {"sandboxes": (count, "fewer sandboxes.count")},
        events,
        per_second=per_second,
    )


# What a run over its budget spends its events on (sim/guard.py ``Budget.grows``), by callback.
GROWS = {
    "Kubernetes._leases": ("node lease renewals", "lengthen kubernetes.lease_interval_s (or fewer fleet.workers)"),
    "ModalV2._publish": ("published worker state", "lengthen scheduler.publish_interval_s (or fewer fleet.workers)"),
    "Creation._tick": ("client ticks", "lengthen client.tick_s"),
    "ModalV2._retry": ("create retries", "shorten faults.stream_stall_s or faults.scheduler_down_s (or fewer retries)"),
    "ModalV2._accept_event": ("placements", "shorten faults.stream_stall_s (placements on stale worker state)"),
}
