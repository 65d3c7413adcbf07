"""The keys the sandbox model's shortcuts were proven for (sim/shortcuts.py says what a shape is).

The shortcuts are the control planes' own (``ControlPlane.SHORTCUTS``, e.g. models/sandboxes/planes/modal_v2.py); each
shape names, key by key, what the shortcut was proven for by the differential tests
(tests/models/sandboxes/test_sandbox_shortcuts.py), starting from ``EVERY``; a key not named must be at its default.
``KEYS`` is the list of the schema's keys when these shapes were written: a key added to the schema later is in no shape
until someone adds it here, so a new mechanism turns these shortcuts off wherever it is used (which is why it is written
out, not read from the schema, and why it sits below the planes, which the schema is built from).

What is not a shortcut (the model itself, with no other path to compare against): the client issuing in ticks
(``client.tick_s``), workers as arrays, publishes in ``scheduler.publish_phases`` groups, a queue's service booked
when its request is sent (models/sandboxes/fleet.py, ``Servers``), the start path computed when the worker accepts
and its lock taken in the order the worker accepted (``Fleet.start``), Kubernetes' lease renewals booked once a
second, and every container start of the coldstart model (a loop, no events).
"""

from __future__ import annotations

from sim.shortcuts import any_of

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
