"""What every command shares: loading a scenario from the command line, running it, and exit codes (interfaces.md).

Exit codes: 0 success; 2 bad input, one line on stderr naming the key or file; 1 anything else.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from models.registry import MODELS, model_of
from sim.scenario import ScenarioError, build, resolve

BAD_INPUT = 2


class ArgParser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2 like every other bad input."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(BAD_INPUT)


def add_set_option(p: argparse.ArgumentParser, help: str = "override a scenario key (repeatable)") -> None:
    """``--set KEY=VALUE``, repeatable, into ``args.sets``: the same on every command."""
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help=help)


def build_scenario(tree: dict, base_dir: Path | None = None) -> Any:
    """A raw scenario tree validated into its model's schema."""
    return build(model_of(tree).schema, tree, base_dir=base_dir)


def load_scenario(name: str, sets: list[str] = (), params: list[str] = ()) -> Any:
    """A preset name or scenario file, then parameter files, then ``--set`` overrides, validated."""
    tree, base = resolve(name, sets, params)
    return build_scenario(tree, base)


def run_scenario(sc: Any, seed: int = 0, series: dict | None = None, records: bool = False) -> dict:
    """One run of a validated scenario by its model's run function."""
    return MODELS[sc.model].run(sc, seed=seed, series=series, records=records)


def main_guard(prog: str, fn: Callable[[], int]) -> int:
    """Run ``fn``; turn bad input into one line and exit 2."""
    try:
        return fn()
    except ScenarioError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return BAD_INPUT
