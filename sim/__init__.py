"""Engine layer over SimPy: the clock, random streams, distributions, limiters, scenarios, statistics, and the
Model descriptor every simulated system declares.

The compiled core (docs/explanation/speed.md): ``python -m sim.build`` compiles the modules in ``COMPILED`` with
mypyc, each to an extension module beside its ``.py``, which Python then imports instead. The source stays the one
to read and runs unchanged without them. ``SCALESIM_PURE=1`` in the environment makes a process that has them import
the ``.py`` files all the same (an import hook installed here, before any of them is imported: ``models`` imports
``sim`` first); ``compiled()`` says which are compiled in this process."""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

# the modules python -m sim.build compiles: the engine's loop and the per-call hot path of the inputs model
COMPILED = (
    "sim.engine",
    "models.inputs.records",
    "models.inputs.platform.function",
    "models.inputs.callers.clients",
    "models.inputs.callers.arrivals",
)
PURE_ENV = "SCALESIM_PURE"  # set (to anything but "" or "0"): the .py files, even where compiled ones are built
_ROOT = Path(__file__).resolve().parent.parent


def pure() -> bool:
    """Whether this process runs the pure-Python source whatever is built (``SCALESIM_PURE``)."""
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def compiled() -> list[str]:
    """The modules of ``COMPILED`` that run compiled in this process: built (an extension module beside the
    ``.py``, which Python's import prefers) and not turned off by ``SCALESIM_PURE``. Nothing is imported to tell."""
    if pure():
        return []
    return [
        name
        for name in COMPILED
        if any(
            (_ROOT / f"{name.replace('.', '/')}{suffix}").exists() for suffix in importlib.machinery.EXTENSION_SUFFIXES
        )
    ]


class _SourceOnly:
    """An import hook (a meta path finder) that finds the modules of ``COMPILED`` as their ``.py`` source only."""

    @staticmethod
    def find_spec(
        name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name not in COMPILED or not path:
            return None
        for entry in path:
            finder = importlib.machinery.FileFinder(
                entry, (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES)
            )
            spec = finder.find_spec(name)
            if spec is not None:
                return spec
        return None


if pure():
    sys.meta_path.insert(0, _SourceOnly())
