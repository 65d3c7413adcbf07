"""What every command shares: loading a scenario from the command line, and exit codes (interfaces.md).

Exit codes: 0 success; 2 bad input, one line on stderr naming the key or file; 1 anything else.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

from models import coldstart, loadtest, sandboxes
from models.coldstart import ColdStartScenario
from models.loadtest import Scenario
from models.sandboxes import SandboxScenario
from sim.scenario import ScenarioError, build, resolve

# A scenario's top-level `model` key picks its schema and its run function.
MODELS = {
    "function": (Scenario, loadtest.run),
    "sandboxes": (SandboxScenario, sandboxes.run),
    "coldstart": (ColdStartScenario, coldstart.run),
}

BAD_INPUT = 2

# The headline metrics of each model: what `experiments.run` prints and the report tabulates.
KEY_METRICS = {
    "function": [
        "calls_per_s",
        "ideal_calls_per_s",
        "first_n_back_s",
        "added_latency_p50_s",
        "added_latency_p99_s",
        "containers_peak",
        "errors",
        "errors_by_kind",
        "retries",
        "binding_limit",
        "binding_share",
    ],
    "sandboxes": [
        "sandboxes_created",
        "creation_makespan_s",
        "creation_rate_per_s",
        "schedule_latency_p99_s",
        "tti_p50_s",
        "tti_p99_s",
        "rejections",
        "retries",
        "utilization",
        "bottleneck",
    ],
    "coldstart": [
        "cold_start_p0_s",
        "cold_start_p50_s",
        "cold_start_mean_s",
        "cold_start_p99_s",
        "snapshot_creations",
        "restore_fallbacks",
        "bytes_fetched",
    ],
}


class ArgParser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2 like every other bad input."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(BAD_INPUT)


def add_set_option(p: argparse.ArgumentParser, help: str = "override a scenario key (repeatable)") -> None:
    """``--set KEY=VALUE``, repeatable, into ``args.sets``: the same on every command."""
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help=help)


def schema_of(tree: dict) -> type:
    model = tree.get("model", "function")
    if model not in MODELS:
        raise ScenarioError(f"model: must be one of {', '.join(MODELS)}; got {model!r}")
    return MODELS[model][0]


def build_scenario(tree: dict, base_dir=None) -> Scenario | SandboxScenario | ColdStartScenario:
    return build(schema_of(tree), tree, base_dir=base_dir)


def load_scenario(name: str, sets: list[str], params: list[str]) -> Scenario | SandboxScenario | ColdStartScenario:
    tree, base = resolve(name, sets, params)
    return build_scenario(tree, base)


def run_scenario(sc: Scenario | SandboxScenario | ColdStartScenario, seed: int = 0, series: dict | None = None) -> dict:
    return MODELS[sc.model][1](sc, seed=seed, series=series)


def main_guard(prog: str, fn: Callable[[], int]) -> int:
    """Run ``fn``; turn bad input into one line and exit 2."""
    try:
        return fn()
    except ScenarioError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return BAD_INPUT
