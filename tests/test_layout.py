"""The house: no import cycle between the project's modules, and families whose members are found by name."""

from __future__ import annotations

import ast
from pathlib import Path

from models.inputs.approaches import APPROACHES
from models.inputs.loadtest import Scenario
from models.registry import MODELS
from models.sandboxes.creation import SandboxScenario
from models.sandboxes.planes import PLANES
from sim.scenario import schema_keys

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("sim", "models", "calibration", "experiments")


def import_graph() -> dict[str, set[str]]:
    """Module → the project modules it imports at run time (imports under ``if TYPE_CHECKING:`` are not run)."""
    modules = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        typing_only = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
        deps = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:  # `from pkg import module` imports a module; else the module itself
                    sub = f"{node.module}.{alias.name}"
                    deps.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                found.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_no_import_cycle_between_modules():
    graph = import_graph()
    assert "experiments.sweep" in graph and "models.sandboxes.planes.kubernetes" in graph  # the walk sees the tree
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_models_are_found_by_their_key_and_bring_their_schema():
    assert set(MODELS) == {"function", "sandboxes", "coldstart"}
    for name, model in MODELS.items():
        assert model.schema().model == name
        assert model.metrics(model.schema()).names()  # every model declares its metrics


def test_each_family_member_brings_its_own_scenario_section():
    keys = schema_keys(SandboxScenario)
    for name, plane in PLANES.items():
        assert plane.name == name
        assert any(k.startswith(plane.section + ".") for k in keys)
    approach_keys = schema_keys(Scenario)
    for name, approach in APPROACHES.items():
        assert approach.name == name
        for section in approach.sections:
            assert any(k.startswith(section + ".") for k in approach_keys)
