"""The sandbox model's shortcuts and the scenarios each is exact for (sim/shortcuts.py says what a shape is).

Each shape names, key by key, what the shortcut was proven for by the differential tests
(tests/test_sandbox_shortcuts.py); a key not named must be at its default. ``KEYS`` is the list of the schema's keys
when these shapes were written: a key added to the schema later is in no shape until someone adds it here, so a new
mechanism turns these shortcuts off wherever it is used.

What is not a shortcut (the model itself, with no other path to compare against): the client issuing in ticks
(``client.tick_s``), workers as arrays, publishes in ``scheduler.publish_phases`` groups, a queue's service booked
when its request is sent (models/sandboxes/fleet.py, ``Servers``), the start path computed when the worker accepts
and its lock taken in the order the worker accepted (``Fleet.start``), Kubernetes' lease renewals booked once a
second, and every container start of the coldstart model (a loop, no events).
"""

from __future__ import annotations

from typing import Any

from sim.shortcuts import Shortcut, any_of, one_of

# Every key of the sandbox schema at the time these shapes were proven (not read from the schema: see above).
KEYS = """
control_plane horizon_s
client.concurrency client.rate client.rtt_s client.tick_s
fleet.allow_overload fleet.container_create fleet.contention_s fleet.rpc_s fleet.rtnl_hold_s fleet.start
fleet.worker_cpu fleet.worker_memory_gib fleet.workers
sandboxes.count sandboxes.cpu sandboxes.lifetime_s sandboxes.memory_gib
scheduler.count scheduler.cpu_s scheduler.d scheduler.metadata_writes_per_s scheduler.placement
scheduler.publish_interval_s scheduler.publish_phases scheduler.request_s scheduler.stream_lag_s
scheduler.stream_msgs_per_s scheduler.streams scheduler.threads
postgres.connections postgres.hot_rows postgres.latency_s postgres.schedulers postgres.tps postgres.workflow_writes
postgres.writes_per_sandbox
kubernetes.apiserver_mutating_inflight kubernetes.cycle_s kubernetes.etcd_clients kubernetes.etcd_latency_s
kubernetes.etcd_writes_per_s kubernetes.kubelet_pickup_s kubernetes.lease_interval_s kubernetes.node_score_s
kubernetes.sampled_nodes kubernetes.scheduler_burst kubernetes.scheduler_qps kubernetes.writes_per_pod
"""
EVERY = any_of(KEYS)
V2 = one_of("modal-v2")
# below this the worker's answer and the accept are at one instant, where ties between events decide the order
MIN_ANSWER_S = 1e-6


def _answer_after_accept(sc: Any) -> bool:
    """The create call returns strictly after the worker accepts: 2 hops + the RPC of at least ``MIN_ANSWER_S``."""
    return sc.client.rtt_s + sc.fleet.rpc_s >= MIN_ANSWER_S


SAME_INSTANT = Shortcut(
    "same_instant_placements",
    "any modal-v2 burst: consecutive create requests that reach the schedulers' placement step at the same instant",
    {**EVERY, "control_plane": V2},
    doc="they share one event instead of one each: they would have been consecutive entries of the event queue, "
    "and a run that stops (the fleet full) stops between two of them as it would between two events "
    "(models/sandboxes/planes/modal_v2.py)",
)

ACCEPT_AT_PLACEMENT = Shortcut(
    "accept_at_placement",
    "a modal-v2 burst of sandboxes that run until the end (sandboxes.lifetime_s = 0: no slot is freed while a "
    "placement is on its way to the worker) on a fleet that holds it (fleet.allow_overload at its default), whose "
    "create call returns at least a microsecond after the worker accepts (client.rtt_s + fleet.rpc_s)",
    {**EVERY, "control_plane": V2, "sandboxes.lifetime_s": lambda v: v == 0, "fleet.allow_overload": one_of(False)},
    when=_answer_after_accept,
    doc="the worker's accept (its check of its own slots, the metadata write, the start path) is computed when the "
    "scheduler places the sandbox, a hop before the RPC reaches the worker: one event per placement instead of two; "
    "the accepts still on their way are kept aside so that a publish sees the worker's slots as they are, and each "
    "accept is booked at the time it happens (models/sandboxes/planes/modal_v2.py)",
)

SHAPES = (SAME_INSTANT, ACCEPT_AT_PLACEMENT)
