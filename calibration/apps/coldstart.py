"""A container-start probe (docs/sources.md §3): a program that imports a module at start (by default ``import torch``,
the ``coldstart-torch`` preset's program; any other module with ``make_app(imports=...)``), started by lazy loading
or restored from a memory snapshot. The module's name reaches the container in the image's environment
(``Image.env``: ``SCALESIM_PROBE_IMPORTS``), as a deployed app's configuration does.

Two classes, both ``single_use_containers=True`` so that every call starts a new container (modal/app.py
``App.cls``: "containers will shut down after handling a single input"):

- ``LazyProbe``: ``@modal.enter()`` imports the module after every start (a standard start: the lazy-loading file
  system serves the imports' thousands of file operations).
- ``SnapshotProbe``: ``enable_memory_snapshot=True``; ``@modal.enter(snap=True)`` imports it before the snapshot
  is taken, ``@modal.enter(snap=False)`` runs after each restore (docs/sources.md §3; modal/_partial_function.py
  ``enter``). The first start makes the snapshot; later starts restore it.

``probe()`` returns the container's start timeline on its own clock (``time.time()``): this module's import
(``module_at``), the probed module's import (``import_start``/``import_end``: in a restored container these are the
snapshotting container's, carried in memory, so ``ready - import_end`` is large after a restore), ``ready`` (the last
``@modal.enter`` returned), the container id (``MODAL_TASK_ID``) and the call's arrival (``called``).
"""

from __future__ import annotations

import importlib
import os
import time
from typing import Any

import modal

from calibration.apps import image

MODULE_AT = time.time()  # when the container imported this module (in a restored container: the snapshot's)
IMPORTS_ENV = "SCALESIM_PROBE_IMPORTS"  # the module the probe imports at start (the image's environment)
TORCH = ("torch>=2.2",)
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"  # the CPU wheels: a smaller image, no CUDA libraries
CPU = 1.0  # assumption: cores per probe container
MEMORY_MIB = 2048  # assumption: torch's import needs about 0.5 GiB (the coldstart-torch preset's pages_mib 500)
STARTUP_TIMEOUT_S = 120  # App.cls(startup_timeout=...): the longest a probe container may take to be ready
PROBE_TIMEOUT_S = 10  # App.cls(timeout=...): probe() itself returns at once


def _import_program() -> dict[str, float]:
    start = time.time()
    importlib.import_module(os.environ.get(IMPORTS_ENV) or "torch")  # the import whose start the probe measures
    return {"import_start": start, "import_end": time.time()}


def _timeline(state: dict[str, Any]) -> dict[str, Any]:
    return {
        **state,
        "module_at": MODULE_AT,
        "container": os.environ.get("MODAL_TASK_ID", ""),
        "pid": os.getpid(),
        "called": time.time(),
    }


class LazyProbe:
    """A standard start: the module is imported after the container starts."""

    @modal.enter()
    def load(self) -> None:
        self.state = _import_program()
        self.state["ready"] = time.time()

    @modal.method()
    def probe(self) -> dict[str, Any]:
        return _timeline(self.state)


class SnapshotProbe:
    """A memory-snapshot start: the module is imported before the snapshot; after a restore only ``ready`` runs."""

    @modal.enter(snap=True)
    def load(self) -> None:
        self.state = _import_program()

    @modal.enter(snap=False)
    def ready(self) -> None:
        self.state["ready"] = time.time()

    @modal.method()
    def probe(self) -> dict[str, Any]:
        return _timeline(self.state)


def make_app(
    name: str,
    *,
    modes: tuple[str, ...] = ("lazy", "snapshot"),
    cpu: float = CPU,
    memory_mib: int = MEMORY_MIB,
    startup_timeout_s: int = STARTUP_TIMEOUT_S,
    region: str | None = None,
    imports: str = "torch",
    packages: tuple[str, ...] | None = None,
) -> modal.App:
    """The probe's app named ``name`` with a class per start mode (``lazy``: ``LazyProbe``; ``snapshot``:
    ``SnapshotProbe`` with ``enable_memory_snapshot=True``); options as in modal/app.py ``App.cls``. ``imports``:
    the module imported at start; ``packages``: what the image pip-installs for it (default: torch's CPU wheels for
    ``torch``, else the module's own name)."""
    if packages is None:
        packages = TORCH if imports == "torch" else (imports,)
    index = TORCH_INDEX if imports == "torch" and packages == TORCH else None
    img = image(*packages, index_url=index, env={IMPORTS_ENV: imports})
    app = modal.App(name, image=img, include_source=False)
    opts: dict[str, Any] = {
        "cpu": cpu,
        "memory": memory_mib,
        "single_use_containers": True,
        "startup_timeout": startup_timeout_s,  # bounds a container's life, so the run's cost (calibration/run.py)
        "timeout": PROBE_TIMEOUT_S,
        "region": region,
    }
    if "lazy" in modes:
        app.cls(**opts)(LazyProbe)
    if "snapshot" in modes:
        app.cls(**opts, enable_memory_snapshot=True)(SnapshotProbe)
    return app
