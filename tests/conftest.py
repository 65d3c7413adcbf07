"""The tests' fixtures and lanes. ``pytest --fast`` is the fast lane: it leaves out the tests marked ``slow`` (each
over a second and a half on 2 cores: subprocesses end to end, the browser, replications against theory) and runs
each property with a tenth of its examples (tests/support.py ``examples``); ``pytest`` runs every lane. Shared
helpers are in tests/support.py."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from sim.guard import BUDGET_ENV
from sim.runcache import CACHE_ENV
from tests.support import FUZZ_BUDGET, LANE


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fast", action="store_true", help="the fast lane: no slow tests, fewer Hypothesis examples")


def pytest_configure(config: pytest.Config) -> None:
    # no run is read back from an earlier one (sim/runcache.py): every test runs what it checks, in its own
    # processes too; the tests of the cache point it at a folder of their own
    os.environ[CACHE_ENV] = "off"
    if config.getoption("--fast"):
        os.environ[LANE] = "fast"  # before the test modules are imported: their example counts read it


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--fast"):
        slow = [item for item in items if item.get_closest_marker("slow")]
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


@pytest.fixture
def tiny() -> dict:
    """One client, a fixed warm pool, constant work, no limits: every time in the trace is exact."""
    return {
        "approach": "remote",
        "work": "constant(2)",
        "duration_s": 5.0,
        "drain_s": 100.0,
        "function": {"containers": 1, "max_inputs": 2},
        "limits": {"enabled": False},
        "clients": {"count": 1, "in_flight": 3},
    }


@pytest.fixture(scope="module")
def env_budget() -> Iterator[None]:
    """The fuzz suites' run-size budget (``SCALESIM_BUDGET`` = FUZZ_BUDGET) for a module's tests."""
    old = os.environ.get(BUDGET_ENV)
    os.environ[BUDGET_ENV] = FUZZ_BUDGET
    yield
    if old is None:
        del os.environ[BUDGET_ENV]
    else:
        os.environ[BUDGET_ENV] = old
