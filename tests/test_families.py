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
from models.inputs import invariants
from models.inputs.approaches import ALIASES, APPROACHES, PLAN_WAYS
from models.inputs.approaches.base import Approach
from models.inputs.loadtest import SHORTCUTS as INPUTS_SHORTCUTS
from models.inputs.loadtest import Scenario
from models.registry import MODELS
from models.sandboxes.creation import SHORTCUTS as SANDBOX_SHORTCUTS
from models.sandboxes.planes import PLANES

ROOT = Path(__file__).resolve().parent.parent
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
        ("sim/shortcuts.py", "models/inputs/shortcuts.py", "models/sandboxes/shortcuts.py"),
    ),
    # until the questions are a package (experiments/whatif/): the what-if command and its helpers
    "questions": (
        frozenset({"capacity", "autoscaler", "drain", "plan", "recovery"}),
        (
            "experiments/whatif.py",
            "experiments/whatif_report.py",
            "experiments/plan.py",
            "experiments/plan_page.py",
            "experiments/recovery.py",
        ),
    ),
}

# Sites where the name is an ordinary word, not the member: (file, family) -> (sites, what the word means there).
WORDS: dict[tuple[str, str], tuple[int, str]] = {
    ("calibration/apps/loadtest.py", "approaches"): (1, "`make_app(ways=...)`: the app's parts, its web server one"),
    ("calibration/run.py", "questions"): (2, '`args.what == "plan"`: calibration.run\'s designed plan, no question'),
}

# Sites in other helpers' areas, to be driven to zero after the merge: (file, family) -> (sites, what replaces them).
EXCEPTIONS: dict[tuple[str, str], tuple[int, str]] = {
    # approaches, in modules another helper is moving (experiments/whatif/): the facts are ready on the approaches
    ("experiments/plan.py", "approaches"): (
        16,
        "WAYS -> PLAN_WAYS; way_settings -> PLAN_WAYS[way].plan_settings; limits_used, fewest_copies -> "
        ".inputs_per_s, .calls_function, .accept_rate, .in_system_cap; `in (copies, batching)` -> "
        ".searches_copies; _config -> .describe",
    ),
    ("experiments/plots.py", "approaches"): (1, "WAY_COLOURS -> {w.name: w.colour for w in PLAN_WAYS.values()}"),
    ("experiments/whatif.py", "approaches"): (
        4,
        "latency_floor's `== server` -> not APPROACHES[sc.approach].calls_function (FLOOR sets the Function "
        "path's keys); drain's way, spawn or map: the question's own choice, its approach by name from APPROACHES",
    ),
    # control planes (the planes' helper: their facts on ControlPlane)
    ("experiments/faults.py", "planes"): (2, "the faults each plane models: a ControlPlane fact"),
    ("models/sandboxes/budget.py", "planes"): (3, "the size estimate's per-plane events: a ControlPlane method"),
    ("models/sandboxes/creation.py", "planes"): (1, "a modal-v2 branch: a ControlPlane fact"),
    ("models/sandboxes/faults.py", "planes"): (1, "the faults each plane models: a ControlPlane fact"),
    # shortcuts checked by their string names (issue 44: shortcuts referred to by constants)
    ("sim/engine.py", "shortcuts"): (1, "`calendar`, `delay_lines` in shortcuts"),
    ("models/inputs/approaches/base.py", "shortcuts"): (1, "`fifo` in sim.shortcuts"),
    ("models/inputs/autoscaler.py", "shortcuts"): (1, "`idle_decisions` in shortcuts"),
    ("models/inputs/clients.py", "shortcuts"): (1, "`round_trips` in shortcuts"),
    ("models/inputs/parts.py", "shortcuts"): (1, "`parts` in shortcuts"),
    ("models/sandboxes/planes/modal_v2.py", "shortcuts"): (2, "`accept_at_placement`, `same_instant_placements`"),
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
    allowed = {**WORDS, **EXCEPTIONS}
    unexpected = {k: v for k, v in counts.items() if len(v) != allowed.get(k, (0, ""))[0]}
    gone = {k for k in allowed if k not in counts}
    assert not unexpected and not gone, f"new or changed sites: {unexpected}; exceptions left without a site: {gone}"


def test_the_approaches_exceptions_are_only_in_modules_being_moved():
    # every other site on approach names is gone; these three modules wait for the what-if package's move
    moving = {"experiments/plan.py", "experiments/plots.py", "experiments/whatif.py"}
    assert {f for f, family in EXCEPTIONS if family == "approaches"} == moving
    assert not set(WORDS) & set(EXCEPTIONS)


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


# --- the facts experiments/plan.py and plots.py are to read (PLAN_WAYS) --------------------------------------------


TODAY = ["remote", "spawn", "copies", "batching", "server"]  # a plan's ways today, in its table's order


def pinned(fact: Callable[[Approach], object], expected: dict[str, object]) -> bool:
    """Whether ``fact`` of the plan's ways named in ``expected`` is as expected (a new way is free)."""
    return {n: fact(PLAN_WAYS[n]) for n in expected} == expected


def test_the_plan_ways_are_the_approaches_and_app_copies_in_the_tables_order():
    assert [n for n in PLAN_WAYS if n in TODAY] == TODAY
    assert set(PLAN_WAYS) <= set(APPROACHES) | set(ALIASES)
    colours = ["#4c72b0", "#dd8452", "#55a868", "#8172b3", "#c44e52"]
    assert pinned(lambda w: w.colour, dict(zip(TODAY, colours, strict=True)))
    assert pinned(lambda w: w.searches_copies, dict(zip(TODAY, [False, False, True, True, False], strict=True)))


def test_a_plan_ways_settings_limits_and_words():
    sc = Scenario()
    f, lim = sc.function, sc.limits
    per = max(1, f.max_inputs // 8)
    assert pinned(
        lambda w: w.plan_settings(3, 8, sc),
        {
            "remote": {"approach": "remote", "function.copies": 3},
            "spawn": {"approach": "spawn", "function.copies": 3},
            "copies": {"approach": "remote", "function.copies": 3},
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
    assert pinned(lambda w: w.accept_rate(lim), {"remote": sync, "spawn": spawn, "copies": sync, "batching": sync})
    cap = lim.sync_in_system_cap
    assert pinned(lambda w: w.in_system_cap(lim), {"remote": cap, "spawn": 0, "copies": cap, "batching": cap})
    config = {"function.copies": 1, "batching.chunk_items": 8}
    words = [".remote", ".spawn", "1 copy", "1 copy, chunks of 8", "web server"]
    assert pinned(lambda w: w.describe(config), dict(zip(TODAY, words, strict=True)))
    assert PLAN_WAYS["copies"].describe({"function.copies": 3}) == "3 copies"


def test_the_facts_are_what_plan_and_plots_hold_today():
    # until experiments/plan.py and plots.py read these facts (issue 44): the same values, way by way
    from experiments import plan, plots

    assert list(PLAN_WAYS) == list(plan.WAYS)
    assert {w.name: w.colour for w in PLAN_WAYS.values()} == plots.WAY_COLOURS
    m = {"inputs_in_flight_mean": 30.0, "containers_mean": 7.0}
    default = Scenario()
    capped = dataclasses.replace(
        default,
        autoscaler=dataclasses.replace(default.autoscaler, max_containers=10),
        workspace=dataclasses.replace(default.workspace, max_containers=40),
    )
    for sc in (default, capped):
        for name, w in PLAN_WAYS.items():
            for copies, chunk in ((1, 1), (3, 8)):
                config = w.plan_settings(copies, chunk, sc)
                assert config == plan.way_settings(name, copies, chunk, sc)
                assert w.describe(config) == plan._config({"way": name, "config": config})
                assert plan.fewest_copies(name, chunk, 900.0, sc, 0.2) == _fewest(w, chunk, 900.0, sc, 0.2)
                assert plan.limits_used(name, copies, chunk, 900.0, sc, m) == _used(w, copies, chunk, 900.0, sc, m)


def _fewest(w: Approach, chunk: int, rate: float, sc: Scenario, headroom: float) -> int | None:
    """plan.fewest_copies, from the facts."""
    from experiments.plan import MAX_COPIES

    lim = sc.limits
    if not lim.enabled or not w.calls_function:
        return 1
    start = max(lim.start_rate, lim.start_rate_max if lim.start_ramp_per_s else 0.0)
    n = math.ceil(w.inputs_per_s(rate, chunk) / ((1.0 - headroom) * min(w.accept_rate(lim), start)) - 1e-9)
    return max(1, n) if n <= MAX_COPIES else None


def _used(w: Approach, copies: int, chunk: int, rate: float, sc: Scenario, m: dict) -> dict[str, float]:
    """plan.limits_used, from the facts."""
    lim, use = sc.limits, {}
    per = w.inputs_per_s(rate, chunk) / copies
    if w.calls_function and lim.enabled:
        start = max(lim.start_rate, lim.start_rate_max if lim.start_ramp_per_s else 0.0)
        use["accept_rate"] = per / w.accept_rate(lim)
        use["start_rate"] = per / start
        if w.in_system_cap(lim):
            use["in_system_cap"] = (m.get("inputs_in_flight_mean") or 0.0) / copies / w.in_system_cap(lim)
    cap = sc.autoscaler.max_containers
    if cap:
        use["max_containers"] = (m.get("containers_mean") or 0.0) / (cap * copies if w.calls_function else cap)
    if sc.workspace.max_containers:
        use["workspace_cap"] = (m.get("containers_mean") or 0.0) / sc.workspace.max_containers
    return use


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
