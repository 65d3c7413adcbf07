"""What every command shares: loading a scenario from the command line, and exit codes (interfaces.md).

Exit codes: 0 success; 2 bad input, one line on stderr naming the key or file; 1 anything else.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

from models.loadtest import Scenario
from sim.scenario import ScenarioError, build, resolve

BAD_INPUT = 2


class ArgParser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2 like every other bad input."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(BAD_INPUT)


def load_scenario(name: str, sets: list[str], params: list[str]) -> Scenario:
    tree, base = resolve(name, sets, params)
    return build(Scenario, tree, base_dir=base)


def main_guard(prog: str, fn: Callable[[], int]) -> int:
    """Run ``fn``; turn bad input into one line and exit 2."""
    try:
        return fn()
    except ScenarioError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return BAD_INPUT
