"""The reference load test's app (docs/sources.md §1): one Function called four ways, each input sleeping its work.

- ``work``: the baseline Function, ``@modal.concurrent(max_inputs=500)``; called with ``.remote`` (baseline),
  ``.spawn`` + ``FunctionCall.get`` (way 1), and, deployed under N app names, by app copies (way 2).
- ``work_chunk``: way 3 as docs/sources.md §1 words it, "the Function takes a list and runs its items concurrently; the
  caller sends chunks" (one input carries a chunk: "a batched call that carries a list is one input"), 50 chunks per
  container (``@modal.concurrent(max_inputs=50)``).
- ``work_batched``: way 3 with modal's own batching, ``@modal.batched(max_batch_size=32, wait_ms=...)``
  (modal/_partial_function.py ``batched``): the caller sends single items and Modal groups them into lists.
- ``WorkServer``: way 4, FastAPI + uvicorn behind ``@app.server(port=8000, cpu=1, target_concurrency=1000)``
  (modal/app.py ``App.server``). The proxy asks for a workspace proxy token (``Modal-Key``/``Modal-Secret``
  headers) because ``App.server``'s ``unauthenticated`` defaults to False; modal 1.6.4's ``App.server`` has no
  ``requires_proxy_auth`` argument (that name belongs to ``@modal.fastapi_endpoint`` and friends).
- ``drive_clients`` (``add_driver``, only with ``--driver modal``): one client of the load test in its own container,
  as the reference test's clients ran (calibration/clients.py).

Every input returns, per item, the container that ran it (``MODAL_TASK_ID``) and when its work started and ended
(``time.time()``, the container's clock); the caller draws the work (uniform(1, 10) s in the reference test).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any

import modal

from calibration.apps import image

MAX_INPUTS = 500  # @modal.concurrent(max_inputs=500): docs/sources.md §1, the reference load test
CHUNK_MAX_INPUTS = 50  # 50 chunks of 32 per container: docs/sources.md §1, the four ways' table
BATCH_SIZE = 32  # chunks of 32: docs/sources.md §1
BATCH_WAIT_MS = 1000  # assumption: how long Modal waits to fill a batch (modal.batched's wait_ms, < 10 min)
SERVER_PORT = 8000  # @app.server(port=8000, ...): docs/sources.md §1
TARGET_CONCURRENCY = 1000  # @app.server(target_concurrency=1000): docs/sources.md §1
CPU = 1.0  # cores per container: @app.server(cpu=1) in docs/sources.md §1; the same for the Functions (an assumption)
MEMORY_MIB = 1024  # assumption: memory request per container, MiB
SERVER_PACKAGES = ("fastapi>=0.110", "uvicorn>=0.29")


async def _sleep(seconds: float) -> dict[str, Any]:
    started = time.time()
    await asyncio.sleep(max(0.0, float(seconds)))
    return {"container": os.environ.get("MODAL_TASK_ID", ""), "started": started, "ended": time.time()}


async def work(seconds: float) -> dict[str, Any]:
    """One input: sleep ``seconds``; return the container id and the work's start and end (container clock)."""
    return await _sleep(seconds)


async def work_chunk(seconds: list[float]) -> list[dict[str, Any]]:
    """One input carrying a chunk: its items sleep concurrently; the input ends with its slowest item."""
    return list(await asyncio.gather(*(_sleep(s) for s in seconds)))


async def work_batched(seconds: list[float]) -> list[dict[str, Any]]:
    """A batch Modal assembled from single-item calls (``@modal.batched``): one result per item, in order."""
    return list(await asyncio.gather(*(_sleep(s) for s in seconds)))


def create_api() -> Any:
    """The server's FastAPI app: ``GET /work?seconds=S`` sleeps S and returns what ``work`` returns (a factory, so
    that FastAPI is imported only where the server runs: ``uvicorn --factory``)."""
    from fastapi import FastAPI

    api = FastAPI()

    @api.get("/work")
    async def http_work(seconds: float) -> dict[str, Any]:
        return await _sleep(seconds)

    @api.get("/health")
    async def health() -> dict[str, str]:
        return {"ok": "yes"}

    return api


def serve(host: str, port: int, timeout_s: float = 30.0) -> tuple[Any, threading.Thread]:
    """Run ``create_api()`` under uvicorn in a daemon thread (uvicorn installs no signal handlers off the main
    thread) and return once it accepts connections: ``(server, thread)``; ``server.should_exit = True`` stops it.
    The Modal server and the offline tests run the app this same way."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(create_api(), host=host, port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn did not start on {host}:{port}")
        time.sleep(0.01)
    return server, thread


class WorkServer:
    """The server of way 4: ``@modal.enter`` starts uvicorn on ``SERVER_PORT`` (modal/_server.py: "Servers run HTTP
    servers that are started in a ``@modal.enter()`` method"; no ``__init__``, no ``@modal.method``)."""

    @modal.enter()
    def start(self) -> None:
        self.server, self.thread = serve("0.0.0.0", SERVER_PORT)

    @modal.exit()
    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


async def drive_clients(job: dict[str, Any], t0: float) -> dict[str, Any]:
    """``--driver modal``: one client of the load test in this container, from the common start ``t0`` (Unix time);
    its rows of the calls table and its container (calibration/clients.py ``in_container``). The container's modal
    client reaches the other Functions by name as any client does (modal/client.py: inside a container it
    authenticates as the container, no token)."""
    from calibration import clients

    return await clients.in_container(job, t0)


def add_driver(
    app: modal.App, *, cpu: float, memory_mib: int, region: str | None, timeout_s: int, clients: int
) -> None:
    """Add ``drive_clients`` to ``app`` (its image; ``region``, where the reference test's clients ran: us-east):
    one input per container (no ``@modal.concurrent``), at most ``clients`` containers, each call at most
    ``timeout_s`` (modal/app.py ``App.function``'s ``timeout``)."""
    app.function(cpu=cpu, memory=memory_mib, max_containers=clients, region=region, timeout=timeout_s)(drive_clients)


def make_app(
    name: str,
    *,
    ways: tuple[str, ...] = ("work", "chunk", "batched", "server"),
    cpu: float = CPU,
    memory_mib: int = MEMORY_MIB,
    max_inputs: int = MAX_INPUTS,
    chunk_max_inputs: int = CHUNK_MAX_INPUTS,
    batch_size: int = BATCH_SIZE,
    batch_wait_ms: int = BATCH_WAIT_MS,
    target_concurrency: int = TARGET_CONCURRENCY,
    max_containers: int | None = None,
    region: str | None = None,
) -> modal.App:
    """The load test's app named ``name`` with the functions of ``ways`` (``work``, ``chunk``, ``batched``,
    ``server``); options as in modal/app.py ``App.function``/``App.server``."""
    app = modal.App(name, image=image(*SERVER_PACKAGES), include_source=False)
    size = {"cpu": cpu, "memory": memory_mib, "max_containers": max_containers}
    if "work" in ways:
        app.function(**size, region=region)(modal.concurrent(max_inputs=max_inputs)(work))
    if "chunk" in ways:
        app.function(**size, region=region)(modal.concurrent(max_inputs=chunk_max_inputs)(work_chunk))
    if "batched" in ways:
        batched = modal.batched(max_batch_size=batch_size, wait_ms=batch_wait_ms)
        app.function(**size, region=region)(batched(work_batched))
    if "server" in ways:
        # unauthenticated=False (the default) = proxy auth required: Modal-Key/Modal-Secret headers (modal/app.py)
        app.server(
            port=SERVER_PORT,
            **size,
            target_concurrency=target_concurrency,
            unauthenticated=False,
            compute_region=region,
        )(WorkServer)
    return app
