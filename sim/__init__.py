"""Engine layer over SimPy: the clock, random streams, distributions, limiters, scenarios, statistics, and the
Model descriptor every simulated system declares.

The compiled core (docs/explanation/speed.md): ``python -m sim.build`` compiles the modules in ``COMPILED`` with
mypyc, each to an extension module beside its ``.py``, which Python then imports instead. The source stays the one
to read and runs unchanged without them. ``SCALESIM_PURE=1`` in the environment makes a process that has them import
the ``.py`` files all the same (an import hook installed here, before any of them is imported: ``models`` imports
``sim`` first), as does one whose compiled modules are older than their source (``stale()``: a warning says so);
``compiled()`` says which run compiled in this process."""

from __future__ import annotations

import importlib.machinery
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

# the modules python -m sim.build compiles: the per-call path of the inputs model (not the engine: compiled, its loop
# calls uncompiled callbacks more slowly than Python does, and compiled ones no faster; docs/explanation/speed.md)
COMPILED = (
    "models.inputs.records",
    "models.inputs.platform.autoscaler",
    "models.inputs.platform.function",
    "models.inputs.callers.clients",
    "models.inputs.callers.arrivals",
    "models.inputs.platform.proxy",
    "models.inputs.callers.closedloop",
    "models.inputs.platform.overhead",
    "models.inputs.platform.startlimit",
    "sim.limiter",
    "sim.calendar",
)
PURE_ENV = "SCALESIM_PURE"  # set (to anything but "" or "0"): the .py files, even where compiled ones are built
_ROOT = Path(__file__).resolve().parent.parent


def pure() -> bool:
    """Whether this process runs the pure-Python source whatever is built (``SCALESIM_PURE``)."""
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def _built() -> dict[str, tuple[Path, Path]]:
    """The modules of ``COMPILED`` that are built: name → (their source, their extension module)."""
    out = {}
    for name in COMPILED:
        stem = _ROOT / name.replace(".", "/")
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            if (stem.parent / f"{stem.name}{suffix}").exists():
                out[name] = (stem.with_suffix(".py"), stem.parent / f"{stem.name}{suffix}")
                break
    return out


def stale() -> list[str]:
    """The built modules whose source changed after they were built: then the process runs the source of all of
    them (a compiled module calls the others' compiled code: all or none) until ``python -m sim.build`` runs again."""
    return [name for name, (py, ext) in _built().items() if py.stat().st_mtime > ext.stat().st_mtime]


def compiled() -> list[str]:
    """The modules of ``COMPILED`` that run compiled in this process: built (an extension module beside the ``.py``,
    which Python's import prefers), not older than their source and not turned off by ``SCALESIM_PURE``. Nothing is
    imported to tell."""
    if pure() or _STALE:
        return []
    return list(_built())


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


_STALE = stale()
if _STALE and not pure():
    warnings.warn(
        f"the compiled core is older than its source ({', '.join(_STALE)}): running the source; "
        "python -m sim.build compiles it again",
        stacklevel=2,
    )
if pure() or _STALE:
    sys.meta_path.insert(0, _SourceOnly())
