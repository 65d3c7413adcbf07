"""The sandbox control planes own their facts (models/sandboxes/planes/base.py): code outside the planes package asks
``PLANES[sc.control_plane]`` and never names a plane, and each plane's facts hold together."""

from __future__ import annotations

import ast
from pathlib import Path

from models.presets import PRESETS
from models.sandboxes import budget, faults
from models.sandboxes.creation import SHORTCUTS
from models.sandboxes.planes import DEFAULT, PLANES
from models.sandboxes.scenario import SandboxScenario
from sim.scenario import read_toml
from tests.support import ROOT

PLANES_DIR = ROOT / "models" / "sandboxes" / "planes"


def constants(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module, with its line (docstrings included)."""
    tree = ast.parse(path.read_text(), str(path))
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_no_plane_is_named_outside_the_planes_package():
    found = []
    for package in ("sim", "models", "calibration", "experiments"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if PLANES_DIR in path.parents:
                continue
            found += [f"{path.relative_to(ROOT)}:{line} {text!r}" for line, text in constants(path) if text in PLANES]
    assert not found


def test_a_sandbox_shortcut_is_named_once_where_it_is_declared():
    names = {s.name for plane in PLANES.values() for s in plane.SHORTCUTS}
    assert names and names <= set(SHORTCUTS.names)
    seen = {name: [] for name in names}
    for path in sorted((ROOT / "models" / "sandboxes").rglob("*.py")):
        for line, text in constants(path):
            if text in seen:
                seen[text].append(f"{path.relative_to(ROOT)}:{line}")
    assert all(len(where) == 1 for where in seen.values()), seen


def test_each_plane_declares_its_faults_preset_and_order():
    assert {f for plane in PLANES.values() for f in plane.FAULTS} == set(faults.FAULTS)  # each fault applies somewhere
    assert len({plane.ORDER for plane in PLANES.values()}) == len(PLANES)
    assert DEFAULT in PLANES and SandboxScenario().control_plane == DEFAULT
    for name, plane in PLANES.items():
        assert len(set(plane.FAULTS)) == len(plane.FAULTS) and set(plane.FAULTS) <= set(faults.FAULTS)
        assert set(plane.FAULT_VARIANTS) <= set(plane.FAULTS)
        assert read_toml(PRESETS / f"{plane.PRESET}.toml")["control_plane"] == name


def test_what_grows_is_keyed_by_the_planes_methods():
    for plane in PLANES.values():
        for fn, kind in plane.grows().items():
            assert getattr(plane, fn.__name__) is fn and fn.__qualname__.startswith(plane.__name__ + ".")
            assert budget.GROWS[fn.__qualname__] == kind
