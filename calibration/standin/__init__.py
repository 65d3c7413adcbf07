"""A local stand-in for Modal: a server on 127.0.0.1 that speaks Modal's own gRPC protocol (``modal_proto``), so the
real modal client runs ``calibration.run`` and ``sweep --executor modal`` end to end with nothing patched.

    python -m calibration.standin [--params FILE] [--port N]      # prints MODAL_SERVER_URL=..., runs until stopped

The client reaches it through its own configuration: ``MODAL_SERVER_URL`` and the stand-in's test token
(``MODAL_TOKEN_ID=ak-standin``, ``MODAL_TOKEN_SECRET=as-standin``; ``env()`` gives all three). Apps deploy, their
code runs in local worker processes (calibration/standin/container.py) and the platform is emulated in wall time
with known parameters (calibration/standin/platform.py, ``params.toml``): accept and start limits, pending caps,
``max_inputs`` per container, an autoscaler with a cold start, proxy latency, 503s with no ready container.

- api.py: the gRPC service (apps, images, mounts, Functions, classes, calls, outputs).
- platform.py: each Function's input plane, containers and autoscaler.
- proxy.py: the HTTP proxy in front of ``@app.server`` Functions.
- sandboxes.py: sandbox create, exec, wait, terminate.
- server.py: starting and stopping it all (``StandIn``; ``python -m calibration.standin``).
"""
