"""What a calibration way is: one experiment ``python -m calibration.run WHAT`` runs on Modal (docs/sources.md §1-3).

A way says which options it takes (each with its default and bounds), what it deploys and what it costs at most
(its ``Plan``), which simulator preset and ``--set`` keys reproduce it, how it drives the deployed apps into a trace,
and what the fit needs of it: whether the reference load test measured it (calibration/reference/loadtest.toml has
its row) and how slow its reference run is (the fit's pool takes the slowest first). Adding one is a module in this
package (a subclass of ``Way``) and its line in ``WAYS`` (calibration/ways/__init__.py).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from calibration.plan import HEADROOM, Plan


class RunFailed(Exception):
    """A real run that failed after it started (exit 1, one line)."""


@dataclass(frozen=True)
class Option:
    """A command-line option of a way: ``--flag`` with its type, default, help and bounds (every number is checked
    before anything runs; the bounds keep a run's size sane). Options of the same flag are one option."""

    flag: str
    type: type
    default: Any
    help: str
    bounds: tuple[float, float] | None = None
    choices: tuple[str, ...] | None = None

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if self.type is bool:
            parser.add_argument(self.flag, action="store_true", help=self.help)
        else:
            parser.add_argument(self.flag, type=self.type, default=self.default, choices=self.choices, help=self.help)


class Way:
    name: ClassVar[str]
    preset: ClassVar[str]  # the simulator's preset that reproduces it (experiments/scenarios)
    options: ClassVar[tuple[Option, ...]] = ()
    reference: ClassVar[bool] = False  # measured by the reference test: its row of calibration/reference/loadtest.toml
    slowness: ClassVar[int] = 0  # its reference run's rank in wall time (higher: slower, sent to the fit's pool first)
    designed: ClassVar[bool] = False  # the designed plan's runs (calibration/design.py) are runs of it: one way's are

    def plan(self, args: argparse.Namespace, name: str, out: Path) -> Plan:
        """The apps, their containers and the cost bound of validated ``args``; ``name`` is the run's app name,
        ``scalesim-cal-<what>-<run id>`` (app copies: each that and ``-copy-<i>``)."""
        raise NotImplementedError

    def sets(self, args: argparse.Namespace, plan: Plan) -> dict[str, Any]:
        """The ``--set`` keys of ``preset`` that reproduce this experiment."""
        raise NotImplementedError

    def check(self, args: argparse.Namespace) -> None:
        """What a real run of ``args`` needs beyond Modal's credentials (ScenarioError naming it); checked before it
        asks and before anything is deployed."""

    async def drive(self, args: argparse.Namespace, plan: Plan, handles: list[Any]) -> list[Path]:
        """Run the callers against the deployed apps (``handles``, in ``plan.apps``' order); write the traces."""
        raise NotImplementedError


def size(args: argparse.Namespace, cpu: float, memory_mib: int) -> tuple[float, int]:
    """The container's cores and MiB: ``--cpu``/``--memory-mib``, else the app's own."""
    return (args.cpu if args.cpu is not None else cpu), (args.memory_mib if args.memory_mib is not None else memory_mib)


def capped(args: argparse.Namespace, needed: int) -> int:
    """A Function's ``max_containers``: ``--max-containers``, else HEADROOM × the containers the load needs."""
    return args.max_containers or max(1, HEADROOM * needed)


def parameters(args: argparse.Namespace) -> dict[str, Any]:
    """The command's own options, for the manifest (no credentials: none are options)."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("yes", "dry_run")}
