"""Members own their facts: no module outside a family's own package names its members in a conditional or a list.

A comparison (==, !=, in, not in) against a string constant that is a member's name, or a literal tuple, list, set
or dict (its keys) holding two or more members' names, outside the family's own package, is a fact about members
kept away from them: a new member silently falls into the others' branches. Code outside a family asks its registry
(``APPROACHES[name].fact``). And the approaches' facts that experiments/plan.py and plots.py are to read."""

from __future__ import annotations

import ast
import dataclasses
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from calibration.ways import WAYS
from experiments.whatif import QUESTIONS
from models.inputs.approaches import ALIASES, APPROACHES, PLAN_WAYS
from models.inputs.approaches.base import Approach
from models.inputs.checks import invariants
from models.inputs.loadtest import SHORTCUTS as INPUTS_SHORTCUTS
from models.inputs.loadtest import Scenario
from models.registry import MODELS
from models.sandboxes.creation import SHORTCUTS as SANDBOX_SHORTCUTS
from models.sandboxes.planes import PLANES
from tests.support import ROOT

PACKAGES = ("sim", "models", "calibration", "experiments")
COMPARES = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
LITERALS = (ast.Tuple, ast.List, ast.Set, ast.Dict)

# family: (its members' names, its own package or modules, as paths from the root)
FAMILIES: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "approaches": (frozenset(APPROACHES) | frozenset(ALIASES), ("models/inputs/approaches/",)),
    "planes": (frozenset(PLANES), ("models/sandboxes/planes/",)),
    # "coldstart", "sandboxes": models' names too (sources.py, fit.py, the registry)
    "ways": (frozenset(WAYS) - frozenset(MODELS), ("calibration/ways/",)),
    "shortcuts": (
        frozenset(INPUTS_SHORTCUTS.names) | frozenset(SANDBOX_SHORTCUTS.names),
        (
            "sim/shortcuts.py",
            "models/inputs/shortcuts.py",
            "models/inputs/shortcut_names.py",
            "models/sandboxes/shortcuts.py",
        ),
    ),
    "questions": (frozenset(QUESTIONS), ("experiments/whatif/",)),
}

# Sites where the name is an ordinary word, not the member: (file, family) -> (sites, what the word means there).
WORDS: dict[tuple[str, str], tuple[int, str]] = {
    ("calibration/apps/loadtest.py", "approaches"): (1, "`make_app(ways=...)`: the app's parts, its web server one"),
    ("calibration/run.py", "questions"): (2, '`args.what == "plan"`: calibration.run\'s designed plan, no question'),
}


def sites(root: Path, families: dict[str, tuple[frozenset[str], tuple[str, ...]]]) -> list[tuple[str, str, str]]:
    """(file:line, family, the names) of every conditional or literal list on a family's members' names outside
    its own package, in the modules of ``PACKAGES`` under ``root``, in line order. A name of two families (the
    calibration ways are the approaches' names) is at home in either's package, and a site is reported once, under
    the first family that names it."""
    found: dict[tuple[str, int], tuple[str, list[str]]] = {}
    for path in sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        home = {n for names, own in families.values() if rel.startswith(own) for n in names}
        for node in ast.walk(ast.parse(path.read_text())):
            for family, (names, _) in families.items():
                hit = [n for n in _named(node, names) if n not in home]
                if hit:
                    _, seen = found.setdefault((rel, node.lineno), (family, []))
                    seen += [n for n in hit if n not in seen]
    return [(f"{rel}:{line}", family, ",".join(n)) for (rel, line), (family, n) in sorted(found.items())]


def _named(node: ast.AST, names: frozenset[str]) -> list[str]:
    """The members' names ``node`` compares against, or lists two or more of."""

    def consts(items: list[ast.expr | None]) -> list[str]:
        return [n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names]

    if isinstance(node, ast.Compare) and any(isinstance(op, COMPARES) for op in node.ops):
        operands = [node.left, *node.comparators]
        inside = [e for o in operands if isinstance(o, ast.Tuple | ast.List | ast.Set) for e in o.elts]
        return consts([*operands, *inside])
    if isinstance(node, LITERALS):
        hit = consts(node.keys if isinstance(node, ast.Dict) else node.elts)
        return hit if len(hit) > 1 else []
    return []


def test_no_module_names_a_familys_members_outside_it():
    counts: dict[tuple[str, str], list[str]] = {}
    for where, family, names in sites(ROOT, FAMILIES):
        counts.setdefault((where.partition(":")[0], family), []).append(f"{where} {names}")
    allowed = WORDS
    unexpected = {k: v for k, v in counts.items() if len(v) != allowed.get(k, (0, ""))[0]}
    gone = {k for k in allowed if k not in counts}
    assert not unexpected and not gone, f"new or changed sites: {unexpected}; words left without a site: {gone}"


def test_the_walker_finds_a_planted_conditional_and_list(tmp_path):
    own = tmp_path / "models" / "fam"
    own.mkdir(parents=True)
    (own / "a.py").write_text('X = ("alpha", "beta")\nif x == "alpha":\n    pass\n')  # its own: allowed
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "b.py").write_text(
        'if way != "alpha":\n    pass\n'
        'y = x in ("beta",)\n'
        'z = "alpha" in ways\n'
        'D = {"alpha": 1, "beta": 2}\n'
        'L = ["alpha", "gamma"]\n'  # one member: a value, not a list of members
        'S = f(x) == "other"\n'
    )
    families = {"fam": (frozenset({"alpha", "beta"}), ("models/fam/",))}
    assert [(w, n) for w, _, n in sites(tmp_path, families)] == [
        ("experiments/b.py:1", "alpha"),
        ("experiments/b.py:3", "beta"),
        ("experiments/b.py:4", "alpha"),
        ("experiments/b.py:5", "alpha,beta"),
    ]


# --- the facts a plan (experiments/whatif/plan.py) and the plots read (PLAN_WAYS) ----------------------------------


TODAY = ["remote", "spawn", "map", "batching", "server"]  # a plan's ways today, in its table's order


def pinned(fact: Callable[[Approach], object], expected: dict[str, object]) -> bool:
    """Whether ``fact`` of the plan's ways named in ``expected`` is as expected (a new way is free)."""
    return {n: fact(PLAN_WAYS[n]) for n in expected} == expected


def test_the_plan_ways_are_the_call_styles_in_the_tables_order():
    assert [n for n in PLAN_WAYS if n in TODAY] == TODAY
    assert set(PLAN_WAYS) - {"map"} <= set(APPROACHES)  # .map: the remote approach's clients mapping
    colours = ["#4c72b0", "#dd8452", "#55a868", "#8172b3", "#c44e52"]
    assert pinned(lambda w: w.colour, dict(zip(TODAY, colours, strict=True)))


def test_a_plan_ways_settings_limits_and_words():
    sc = Scenario()
    f, lim = sc.function, sc.limits
    per = max(1, f.max_inputs // 8)
    assert pinned(
        lambda w: w.plan_settings(3, 8, sc),
        {
            "remote": {"approach": "remote", "function.copies": 3},
            "spawn": {"approach": "spawn", "function.copies": 3},
            "map": {"approach": "remote", "function.copies": 3, "clients.api": "map"},
            "batching": {
                "approach": "batching",
                "function.copies": 3,
                "batching.chunk_items": 8,
                "function.max_inputs": per,
                "function.target_inputs": min(per, max(1, f.target // 8)),
            },
            "server": {
                "approach": "server",
                "server.max_concurrency": f.max_inputs,
                "server.target_concurrency": f.target,
            },
        },
    )
    assert pinned(
        lambda w: w.inputs_per_s(800.0, 8), dict(zip(TODAY, [800.0, 800.0, 800.0, 100.0, 800.0], strict=True))
    )
    assert pinned(lambda w: w.calls_function, dict(zip(TODAY, [True, True, True, True, False], strict=True)))
    sync, spawn = lim.sync_accept_rate, lim.async_accept_rate
    assert pinned(lambda w: w.accept_rate(lim), {"remote": sync, "spawn": spawn, "map": sync, "batching": sync})
    cap = lim.sync_in_system_cap
    assert pinned(lambda w: w.in_system_cap(lim), {"remote": cap, "spawn": 0, "map": cap, "batching": cap})
    config = {"function.copies": 1, "batching.chunk_items": 8}
    words = [".remote, 1 copy", ".spawn, 1 copy", ".map, 1 copy", "1 copy, chunks of 8", "web server"]
    assert pinned(lambda w: w.describe(config), dict(zip(TODAY, words, strict=True)))
    assert PLAN_WAYS["spawn"].describe({"function.copies": 3}) == ".spawn, 3 copies"


@pytest.mark.parametrize("name", list(APPROACHES))
def test_an_approachs_facts_for_the_checks(name: str):
    a = APPROACHES[name]
    sc = Scenario(approach=name)
    assert a.call_is_input == {"remote": True, "spawn": True}.get(name, False)  # a new one: off until it says so
    one_per_client = dataclasses.replace(sc, function=dataclasses.replace(sc.function, copies=0))
    assert a.pools(one_per_client) == (sc.clients.count if a.calls_function else 1) and a.pools(sc) == 1
    floor = a.least_added(sc)
    assert floor >= 0 and math.isfinite(floor)
    assert 0.0 <= invariants.p_call_within(sc, 100.0) <= 1.0
