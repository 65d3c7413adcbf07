"""What a what-if question is, and the command that asks one: ``python -m experiments.whatif QUESTION ...``.

A question has a name, the flags it reads (shared ones, such as ``--rate``, are one flag), and how it is answered:
it reads its flags, runs its simulations, prints its answer in words or ``--json`` and writes its page with
``--out``. Most questions are a ``Search`` over simulations of one scenario (the search harness of
experiments/whatif/search.py): such a question has a default scenario, scenario keys set before the user's ``--set``
and a default demand shape, searches, and says its answer. Adding one is a module in this package (a subclass of
``Question`` or ``Search``) and its line in ``QUESTIONS`` (experiments/whatif/__init__.py).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from experiments.whatif.pages import search_page, words, write_page
from experiments.whatif.search import Evaluation, Simulator
from models.inputs.callers.demand import parse_shape
from models.runs import warn_extrapolated
from sim.cli import ArgParser, add_set_option, cap_jobs, main_guard, out_path
from sim.files import check_out
from sim.scenario import ScenarioError

PROG = "python -m experiments.whatif"


@dataclass(frozen=True)
class Flag:
    """A question's option: ``--flag`` with its help, its default (text, checked where the question reads it) and
    its choices. Questions that read the same flag share one."""

    flag: str
    help: str
    default: str | None = None
    choices: tuple[str, ...] | None = None

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(self.flag, default=self.default, choices=self.choices, help=self.help)


RATE = Flag("--rate", "capacity: calls/s to sustain; autoscaler: the demand's mean rate (default 1)")
P99 = Flag("--p99", "the added-latency p99 limit, s (default 2)", "2")
SHAPE = Flag("--shape", "the demand's shape (arrivals.shape; plan: default steady; autoscaler: daily(0.3, 0.2))")


class Question:
    """A what-if question (its docstring says what it asks and how it is answered)."""

    name: ClassVar[str]
    flags: ClassVar[tuple[Flag, ...]] = ()  # the flags it reads, in the order its help lists them
    scenario: ClassVar[str] = "loadtest-remote"  # the default --scenario
    defaults: ClassVar[tuple[str, ...]] = ()  # scenario keys set before --set (which overrides them)

    def ask(self, args: argparse.Namespace) -> int:
        """Answer ``args`` (``seeds``, ``jobs`` and ``p99`` already numbers, ``out`` checked): print the answer,
        write its page under ``--out``; the exit code."""
        raise NotImplementedError


class Search(Question):
    """A question answered by search over simulations of one scenario (experiments/whatif/search.py)."""

    side_by_side: ClassVar[int] = 1  # configurations its search simulates at once (the runs a round can keep busy)

    shape: ClassVar[str] = "steady"  # the default --shape

    def ask(self, args: argparse.Namespace) -> int:
        shape = args.shape or self.shape
        try:
            parse_shape(shape)
        except ValueError as e:
            raise ScenarioError(f"--shape: {e}") from None
        sets = [*self.defaults, *args.sets]
        jobs = cap_jobs(PROG, args.jobs, args.seeds * self.side_by_side)
        sim = Simulator(args.scenario or self.scenario, sets, args.params, args.seeds, jobs)
        sim.user_sets = list(args.sets)
        try:
            out, every = self.search(args, sim, shape)
        finally:
            sim.close()
        self.say(args, sim, out, every)
        return 0

    def search(self, args: argparse.Namespace, sim: Simulator, shape: str) -> tuple[dict, list[Any]]:
        """The answer (with ``--uncertainty``, under every plausible model too) and every option simulated."""
        raise NotImplementedError

    def say(self, args: argparse.Namespace, sim: Simulator, out: dict, every: list[Any]) -> None:
        """The answer with its cost basis and the simulations run, in words or ``--json``; its page with ``--out``."""
        out.update(billing=sim.sc.billing.describe(), simulations=sim.runs, seeds=sim.seeds)
        if out["chosen"]:
            warn_extrapolated(out["chosen"]["extrapolated"], " (the chosen configuration)")
        print_answer(args, out, words)
        if args.out:
            print(f"report: {self.page(out, every, args.out)}", file=sys.stderr)

    def page(self, out: dict, every: list[Evaluation], folder: Path) -> Path:
        """Its HTML page in ``folder``: whatif.html (experiments/whatif/pages.py ``search_page``)."""
        return write_page(folder, "whatif.html", search_page(out, f"What-if: {self.name}"))


def print_answer(args: argparse.Namespace, out: dict, said: Callable[[dict], list[str]]) -> None:
    """An answer on stdout: one JSON object with ``--json``, else ``said`` (its words)."""
    print(json.dumps(out, default=_json) if args.json else "\n".join(said(out)))


def positive(name: str, cast: type = float, high: float = 1e12) -> Callable[[str], Any]:
    """A reader of ``name``'s text: a number (``cast``) > 0 and ≤ ``high``, else a ScenarioError naming it."""

    def parse(text: str) -> Any:
        try:
            if not str(text).isascii():  # float() reads full-width digits; the scenario's parser does not
                raise ValueError(text)
            v = cast(text)
        except ValueError:
            raise ScenarioError(f"{name}: expected a number, got {text!r}") from None
        if not (0 < v <= high) or (isinstance(v, float) and not math.isfinite(v)):
            raise ScenarioError(f"{name}: must be > 0 and <= {high:g}, got {text}")
        return v

    return parse


def in_help_order(questions: list[Question]) -> list[Flag]:
    """Every question's flags once: a flag new to the list goes right after its question's flag before it (a
    question's first flag, at the end)."""
    order: list[Flag] = []
    for q in questions:
        at = len(order)
        for f in q.flags:
            if f not in order:
                order.insert(at, f)
            at = order.index(f) + 1
    return order


def command(questions: dict[str, Question], description: str, argv: list[str] | None = None) -> int:
    """The what-if command over ``questions``: its flags, the checks every question shares, then the question."""
    p = ArgParser(prog=PROG, description=description)
    p.add_argument("question", choices=list(questions))
    p.add_argument("--scenario", help="the base scenario (default: loadtest-copies, loadtest-remote, loadtest-spawn)")
    add_set_option(p)
    p.add_argument("--params", action="append", default=[], metavar="FILE", help="a parameter file (repeatable)")
    p.add_argument("--seeds", default="3", help="replications per configuration (default 3)")
    p.add_argument("--jobs", default="2", help="worker processes (default 2)")
    for flag in in_help_order(list(questions.values())):
        flag.add_to(p)
    p.add_argument(
        "--uncertainty",
        action="store_true",
        help="also run the answer under every plausible model of the calibration (experiments/uncertainty.py): "
        "its figures with ranges, and whether it still meets the constraint at their worst",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--out",
        type=out_path,
        help="a folder for the answer's HTML page (plan.html, recovery.html; the others whatif.html) and figures",
    )
    args = p.parse_args(argv)

    def go() -> int:
        args.seeds = positive("--seeds", int, 1000)(args.seeds)
        args.jobs = positive("--jobs", int, 1024)(args.jobs)
        args.p99 = positive("--p99")(args.p99)
        if args.out:
            check_out(args.out, folder=True, inside=("*.html", "*.png"))
        return questions[args.question].ask(args)

    return main_guard("experiments.whatif", go)


def _json(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return str(x)
