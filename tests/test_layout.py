"""The house: no import cycle between the project's modules, its packages in one order, and families whose members
are found by name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from models.inputs.approaches import APPROACHES
from models.inputs.loadtest import Scenario
from models.registry import MODELS
from models.sandboxes.planes import PLANES
from models.sandboxes.scenario import SandboxScenario
from sim.scenario import schema_keys

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("sim", "models", "calibration", "experiments")  # in their order: each imports only itself and those before
DYNAMIC = ("import_module", "__import__")  # importlib.import_module("x"), __import__("x"): imports by name
# modules whose import by name is of user code, not a project edge: the Modal stand-in's container imports whatever
# module a deployed app names (as modal's container runtime does); the cold-start probe imports the program it times
USER_CODE_IMPORTERS = {"calibration.standin.container", "calibration.apps.coldstart"}


def module_names(root: Path) -> dict[str, Path]:
    """Every module of the project's packages under ``root``, by its dotted name."""
    return {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for pkg in PACKAGES
        for p in (root / pkg).rglob("*.py")
    }


def imports(name: str, path: Path, modules: dict[str, Path]) -> tuple[set[str], list[str]]:
    """The modules that ``name`` (at ``path``) imports: every import statement, wherever it is (at the top, under
    ``if TYPE_CHECKING:``, in a function), and every import by a literal name (``importlib.import_module``,
    ``__import__``); and the lines of imports by a name that is not a literal absolute one (which no walk can
    follow)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found, unknown = set(), []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, up level - 1
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}".rstrip(".")
            for alias in node.names:  # `from pkg import module` imports that module; else the module itself
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Call) and ast.unparse(node.func).rpartition(".")[2] in DYNAMIC and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and not arg.value.startswith("."):
                found.add(arg.value)
            elif name not in USER_CODE_IMPORTERS:
                unknown.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    return found, unknown


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module → the project modules it imports (``imports``: typing-only, local and by-name imports count too: each
    is an edge, and a cycle through one is a cycle). Fails on an import by a name that is not a literal."""
    modules = module_names(root)
    graph, unknown = {}, []
    for name, path in modules.items():
        found, dynamic = imports(name, path, modules)
        unknown += dynamic
        graph[name] = {d for d in found if d in modules and d != name}
    assert not unknown, f"imports by a computed name, which no walk can follow: {unknown}"
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


def upward(graph: dict[str, set[str]]) -> list[str]:
    """The imports that run against the packages' order (``PACKAGES``): a module importing one of a later package."""
    rank = {pkg: i for i, pkg in enumerate(PACKAGES)}
    return sorted(
        f"{name} imports {dep}"
        for name, deps in graph.items()
        for dep in deps
        if rank[dep.partition(".")[0]] > rank[name.partition(".")[0]]
    )


def test_packages_stand_in_one_order():
    assert upward(import_graph()) == []


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_walk_sees_typing_only_local_and_by_name_imports(tmp_path):
    write(
        tmp_path,
        {
            "sim/__init__.py": "",
            "sim/a.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from sim.b import B\n",
            "sim/b.py": 'import importlib\n\nC = importlib.import_module("sim.c")\n',
            "sim/c.py": "def f():\n    from sim import a\n\n    return a\n",
            "models/__init__.py": "",
            "models/d.py": 'from importlib import import_module\n\nimport_module("sim.a")\n__import__("models.e")\n',
            "models/e.py": "from . import d\n",
        },
    )
    graph = import_graph(tmp_path)
    assert graph["sim.a"] == {"sim.b"} and graph["sim.b"] == {"sim.c"} and graph["sim.c"] == {"sim.a"}
    assert graph["models.d"] == {"sim.a", "models.e"} and graph["models.e"] == {"models.d"}
    assert cycles(graph) == [["models.d", "models.e", "models.d"], ["sim.a", "sim.b", "sim.c", "sim.a"]]


def test_the_walk_refuses_an_import_by_a_computed_name(tmp_path):
    write(tmp_path, {"sim/__init__.py": "", "sim/a.py": 'import importlib\n\nimportlib.import_module("sim." + "b")\n'})
    with pytest.raises(AssertionError, match=r"sim\.a:3"):
        import_graph(tmp_path)
    write(tmp_path, {"sim/a.py": 'import importlib\n\nimportlib.import_module(".b", "sim")\n'})  # relative
    with pytest.raises(AssertionError, match=r"sim\.a:3"):
        import_graph(tmp_path)


def test_the_order_check_finds_an_upward_import(tmp_path):
    write(
        tmp_path,
        {
            "sim/__init__.py": "",
            "sim/a.py": "def f():\n    from models import b\n\n    return b\n",
            "models/__init__.py": "",
            "models/b.py": "from sim import a\n",
            "calibration/__init__.py": "",
            "calibration/c.py": 'import importlib\n\nimportlib.import_module("experiments.d")\n',
            "experiments/__init__.py": "",
            "experiments/d.py": "import calibration.c\nimport models.b\n",
        },
    )
    assert upward(import_graph(tmp_path)) == ["calibration.c imports experiments.d", "sim.a imports models.b"]


def reach(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module that importing ``start`` imports, directly or not."""
    seen, todo = set(), [start]
    while todo:
        for dep in graph[todo.pop()] - seen:
            seen.add(dep)
            todo.append(dep)
    return seen


# what sits above each family: the modules that build a run from its members, and the commands
ABOVE = {
    "models.sandboxes.planes.base": (
        "models.sandboxes.scenario",
        "models.sandboxes.client",
        "models.sandboxes.summary",
        "models.sandboxes.budget",
        "models.sandboxes.creation",
        "models.registry",
        "experiments.",
        "calibration.",
    ),
    "models.inputs.approaches.base": (
        "models.inputs.loadtest",
        "models.inputs.parts",
        "models.registry",
        "experiments.",
        "calibration.",
    ),
}


def test_family_members_import_their_base_and_nothing_above_it():
    graph = import_graph()
    members = {
        "models.sandboxes.planes.base": {plane.__module__ for plane in PLANES.values()},
        "models.inputs.approaches.base": {type(approach).__module__ for approach in APPROACHES.values()},
    }
    assert set(members) == set(ABOVE)
    for base, modules in members.items():
        assert len(modules) >= 3
        for module in modules:
            reached = reach(graph, module)
            assert base in reached, f"{module} does not import its family's base {base}"
            above = sorted(m for m in reached if m.startswith(ABOVE[base]))
            assert not above, f"{module} imports {above}, above its family's base {base}"


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


def test_no_test_imports_another_test_module():
    # what tests share is tests/support.py (helpers) and tests/conftest.py (fixtures, lanes); a test module imported
    # by another is collected twice and couples the two
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno} {n}"
                for n in names
                if n.startswith("tests.test") or ".test_" in n
            ]
    assert found == []
