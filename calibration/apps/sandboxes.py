"""A sandbox-creation probe (docs/sources.md §2): a burst of ``modal.Sandbox.create`` calls, timed per sandbox.

Per sandbox, on the caller's clock: ``requested`` (just before ``Sandbox.create``), ``placed`` (the create call
returned: "when a create request returns, the scheduler has already placed the sandbox on a worker and it has begun
starting", docs/sources.md §2) and ``running`` (the first ``Sandbox.exec("true")`` finished: user code ran,
docs/sources.md §2's "time to interactive"). NaN where a step did not happen (a failed create, a failed exec); the
failure's kind is kept in ``error``. Every sandbox created is terminated at the end, failures and cancellation included
(modal/sandbox: ``Sandbox.terminate``); the caller also stops the sandboxes' app, which "terminates all of its
running containers and sandboxes" (modal/app.py ``App.stop``).

Signatures from modal 1.6.4: ``Sandbox.create(*args, app=, image=, timeout=, cpu=, memory=, ...)`` (``memory`` in
MiB), ``Sandbox.exec(*args, ...) -> ContainerProcess``, ``ContainerProcess.wait() -> int``,
``Sandbox.terminate(*, wait=False)``; sandboxes need an app, here ``App.lookup(name, create_if_missing=True)``
(its docstring's own example). The ``.aio`` forms are the async ones (synchronicity).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

import modal

COMMAND = ("sleep", "infinity")  # the sandbox's main process: it only has to stay up until terminated
CPU = 0.125  # the smallest billed CPU request (docs/sources.md §6: 0.125-core minimum)
MEMORY_MIB = 256  # assumption: a small sandbox
TIMEOUT_S = 300  # Sandbox.create's default timeout (docs/sources.md §2): an upper bound on a sandbox's life


def lookup_app(name: str) -> modal.App:
    """The sandboxes' app: created on first use (modal/app.py ``App.lookup(..., create_if_missing=True)``)."""
    return modal.App.lookup(name, create_if_missing=True)


async def probe(
    app: Any,
    count: int,
    concurrency: int,
    *,
    t0: float,
    cpu: float = CPU,
    memory_mib: int = MEMORY_MIB,
    timeout_s: int = TIMEOUT_S,
    image: Any = None,
    sandbox: Any = modal.Sandbox,
    clock: Callable[[], float] = time.time,
) -> list[dict[str, Any]]:
    """Create ``count`` sandboxes, at most ``concurrency`` creates outstanding at once, then terminate them all.

    ``sandbox`` is ``modal.Sandbox`` or any object with the same interface (``create.aio``, and on what it returns
    ``exec.aio``, ``terminate.aio``; ``exec`` returns an object with ``wait.aio``): tests pass an in-process
    stand-in. Times are seconds since ``t0`` on ``clock``."""
    gate = asyncio.Semaphore(concurrency)
    rows: list[dict[str, Any]] = [
        {"requested": math.nan, "placed": math.nan, "running": math.nan, "error": ""} for _ in range(count)
    ]
    created: list[Any] = []

    async def one(i: int) -> None:
        row = rows[i]
        async with gate:
            row["requested"] = clock() - t0
            try:
                sb = await sandbox.create.aio(
                    *COMMAND, app=app, image=image, cpu=cpu, memory=memory_mib, timeout=timeout_s
                )
            except Exception as e:  # a failed create is a row with only `requested`
                row["error"] = type(e).__name__
                return
            created.append(sb)
            row["placed"] = clock() - t0
        try:
            proc = await sb.exec.aio("true")
            await proc.wait.aio()
            row["running"] = clock() - t0
        except Exception as e:
            row["error"] = type(e).__name__

    try:
        await asyncio.gather(*(one(i) for i in range(count)))
    finally:
        await terminate_all(created)
    return rows


async def terminate_all(created: list[Any]) -> int:
    """Terminate every sandbox in ``created`` (errors ignored: the app's stop is the backstop); returns how many
    terminate calls failed. The probe calls it in a ``finally``: after a cancellation too."""

    async def stop(sb: Any) -> bool:
        try:
            await sb.terminate.aio()
            return True
        except Exception:
            return False

    results = await asyncio.gather(*(stop(sb) for sb in created))
    return sum(not ok for ok in results)
