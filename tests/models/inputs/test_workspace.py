"""The workspace (models/inputs/platform/autoscaler.py, ``Workspace``): all the autoscaled pools of a run, every app
copy or the web server, hold at most ``workspace.max_containers`` containers together and launch them at most at
``workspace.launch_rate_per_s``; copies run in parts only where neither can bind (models/inputs/shortcuts.py)."""

from __future__ import annotations

import pytest

from models.inputs import loadtest
from models.inputs.platform.workspace import Workspace, WorkspaceParams
from sim.limiter import TokenBucket
from sim.scenario import ScenarioError
from tests.support import preset

PARTS = loadtest.SHORTCUTS["parts"]


def run(name: str, *sets: str, seed: int = 0) -> tuple[dict, dict]:
    series: dict = {}
    return loadtest.run(preset(name, *sets), seed=seed, series=series), series


@pytest.mark.slow
@pytest.mark.parametrize("shortcuts", ["all", "none"])
def test_the_cap_binds_and_holds_across_app_copies(shortcuts):
    free, free_series = run("loadtest-copies", f"shortcuts={shortcuts}")
    capped, capped_series = run("loadtest-copies", "workspace.max_containers=10", f"shortcuts={shortcuts}")
    # 8 copies take 2 containers each without a cap; with it, 10 in all, never more at any sample
    assert free["containers_peak"] == 16 and max(free_series["containers"]) == 16
    assert capped["containers_peak"] <= 10 and max(capped_series["containers"]) == 10
    assert capped["calls_per_s"] < 0.8 * free["calls_per_s"]
    assert capped["binding_limit"] == "workspace_cap" and free["limit_share_workspace_cap"] == 0.0
    assert "parts" not in capped["shortcuts_used"]  # the cap couples the copies: one clock


def test_the_general_path_and_the_shortcuts_agree_under_a_binding_cap():
    on, _ = run("loadtest-copies", "workspace.max_containers=10")
    off, _ = run("loadtest-copies", "workspace.max_containers=10", "shortcuts=none")
    for k in ("calls_per_s", "calls_issued", "containers_peak", "cold_starts", "container_seconds", "binding_share"):
        assert on[k] == off[k], k


def test_the_cap_binds_the_web_servers_pool():
    cpu = "server.container_cpu=1", "server.cpu_per_request_s=0.004"  # the server-cpu candidate: CPU a request
    free, _ = run("loadtest-server", "duration_s=60", *cpu)
    capped, series = run("loadtest-server", "duration_s=60", *cpu, "workspace.max_containers=5")
    assert free["containers_peak"] > 5
    assert capped["containers_peak"] == 5 and max(series["containers"]) == 5
    assert capped["calls_per_s"] < free["calls_per_s"]


def test_a_cap_that_cannot_bind_changes_nothing_and_keeps_the_parts():
    sets = ("autoscaler.max_containers=2",)  # 8 copies × 2 = 16 at most
    free, _ = run("loadtest-copies", *sets)
    roomy, _ = run("loadtest-copies", *sets, "workspace.max_containers=16")
    assert "parts" in roomy["shortcuts_used"]
    for k in free:
        if k not in ("wall_s", "shortcuts_used"):
            assert roomy[k] == free[k], k


@pytest.mark.parametrize(
    "sets, exact",
    [
        ((), True),  # no cap
        (("workspace.max_containers=100",), False),  # a pool's own max is unlimited: it could bind
        (("workspace.max_containers=16", "autoscaler.max_containers=2"), True),  # 8 × 2 fit
        (("workspace.max_containers=15", "autoscaler.max_containers=2"), False),
        (("workspace.max_containers=8", "function.containers=1"), True),  # fixed pools launch nothing
        (("workspace.max_containers=4", "function.copies=0", "autoscaler.max_containers=1"), False),  # 8 clients
        (("workspace.max_containers=8", "function.copies=0", "autoscaler.max_containers=1"), True),
        (("workspace.launch_rate_per_s=1000",), False),  # a shared placement rate couples the copies
        (("workspace.launch_rate_per_s=1", "function.containers=1"), True),
    ],
)
def test_the_parts_shortcut_is_declared_exact_only_where_the_cap_cannot_bind(sets, exact):
    assert PARTS.matches(preset("loadtest-copies", *sets)) is exact


def test_a_cap_below_the_always_warm_containers_is_bad_input():
    with pytest.raises(ScenarioError, match=r"^workspace\.max_containers: 7 is below the 8 × 1"):
        preset("loadtest-copies", "workspace.max_containers=7", "function.containers=1")


def test_the_workspace_placement_rate_paces_every_copys_launches_together():
    sets = ("workspace.launch_rate_per_s=1", "workspace.launch_burst=4", "duration_s=20")
    free, free_series = run("loadtest-copies", "duration_s=20")
    paced, series = run("loadtest-copies", *sets)
    assert "parts" in free["shortcuts_used"] and "parts" not in paced["shortcuts_used"]
    # 8 containers at 0.5 s without it (one per copy); with it, at most 4 + 1/s, all copies together, at every sample
    assert free_series["containers"][1] == 8
    assert all(c <= 4 + t for t, c in zip(series["t"], series["containers"], strict=True))
    assert paced["containers_peak"] == 16 and paced["calls_per_s"] < free["calls_per_s"]
    off, _ = run("loadtest-copies", *sets, "shortcuts=none")
    assert off["calls_per_s"] == paced["calls_per_s"] and off["container_seconds"] == paced["container_seconds"]


def workspace(**params) -> Workspace:
    return Workspace(WorkspaceParams(**params), [])


def test_the_invariant_names_a_workspace_above_its_cap():
    ws = workspace(max_containers=3)
    ws.resize(3)
    assert ws.full and ws.admit(0.0, 5, None) == 0 and ws.violations(0.0) == []
    ws.resize(1)
    assert ws.violations(0.0) == ["4 containers at once, above workspace.max_containers 3"]
    ws.resize(-2)
    assert not ws.full and ws.admit(0.0, 5, None) == 1 and ws.violations(0.0) != []  # the peak stays


def test_a_launch_takes_from_the_pools_bucket_and_the_workspaces_and_wastes_neither():
    ws, own = workspace(launch_rate_per_s=1.0, launch_burst=3.0), TokenBucket(10.0, 2.0)
    assert ws.admit(0.0, 5, own) == 2  # the pool's own bucket holds 2
    assert ws.admit(0.0, 5, None) == 1  # the workspace's has 1 left, not 1 - 2 wasted
    ws.resize(3)
    assert ws.violations(0.0) == []
    ws.resize(1)
    assert any("more than the workspace admits" in v for v in ws.violations(0.0))
    assert ws.violations(1.0) == []  # one more token by then
