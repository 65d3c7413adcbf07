"""Run one scenario: ``python -m experiments.run SCENARIO [--set KEY=VALUE]... [--seed N] [--jobs N] [--json]
[--metrics]``.

SCENARIO is a preset name (experiments/scenarios/NAME.toml) or a path to a TOML file. ``--params FILE`` overlays
a parameter file (e.g. one written by ``calibration.fit``) before the ``--set`` overrides. ``--jobs N`` runs a load
test's independent parts (app copies under closed-loop clients: models/inputs/parts.py) on N processes; the numbers
are the same whatever N. ``--metrics`` prints, instead of running, the metrics the scenario's run reports as its
model declares them (sim/metrics.py): a markdown table of metric, unit, how parts combine and what it is.
``--list`` prints the presets and the sweep specs (experiments/sweeps/NAME.toml), one line each.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tomllib
from pathlib import Path

from models.presets import PRESETS
from sim.cli import ArgParser, RunProgress, add_set_option, cap_jobs, human, main_guard
from sim.scenario import to_dict

SWEEPS = Path(__file__).resolve().parent / "sweeps"


def catalogue() -> str:
    """The presets and the sweep specs, one line each: name and description (from each file's ``description``)."""

    def lines(folder: Path) -> list[str]:
        out = []
        for path in sorted(folder.glob("*.toml"), key=lambda p: p.stem):
            with path.open("rb") as f:
                description = tomllib.load(f).get("description", "")
            out.append(f"  {path.stem:22s} {description}")
        return out

    return "\n".join(
        [
            "presets (python -m experiments.run NAME):",
            *lines(PRESETS),
            "sweep specs (python -m experiments.sweep NAME):",
            *lines(SWEEPS),
        ]
    )


def _finite(value: object) -> object:
    """JSON has no NaN or infinity: an undefined figure is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def parser() -> ArgParser:
    p = ArgParser(
        prog="python -m experiments.run",
        description=__doc__.splitlines()[0],
        epilog=catalogue(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("scenario", nargs="?", help="preset name (listed below) or path to a scenario TOML file")
    p.add_argument("--list", action="store_true", help="print the presets and sweep specs, one line each, and exit")
    add_set_option(p, "override a scenario key (repeatable), e.g. --set clients.count=64")
    p.add_argument(
        "--params",
        action="append",
        default=[],
        metavar="FILE",
        help="a parameter TOML file overlaid on the scenario (repeatable)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="processes for a run's independent parts (default 1; same numbers), and for --uncertainty's runs "
        "(default: every core)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object of metrics on stdout")
    p.add_argument("--metrics", action="store_true", help="print the declared metrics of the scenario's run (no run)")
    p.add_argument(
        "--uncertainty",
        action="store_true",
        help="also run the plausible models of the calibration (experiments/uncertainty.py): each figure with a range",
    )
    p.add_argument(
        "--uncertainty-seeds",
        type=int,
        default=2,
        metavar="N",
        help="seeds of every plausible model, from --seed (default 2; common random numbers)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.list:
        print(catalogue())
        return 0
    if args.scenario is None:
        parser().error("SCENARIO: a preset name or a scenario TOML file is required (--list shows the presets)")
    if args.seed < 0:
        parser().error(f"--seed: must be >= 0, got {args.seed}")
    if args.jobs is not None and args.jobs < 1:
        parser().error(f"--jobs: must be >= 1, got {args.jobs}")
    jobs = args.jobs or 1
    if not 1 <= args.uncertainty_seeds <= 100:
        parser().error(f"--uncertainty-seeds: must be 1 .. 100, got {args.uncertainty_seeds}")

    def go() -> int:
        from experiments import uncertainty  # the models, here: --help and --list load none of them
        from models.registry import MODELS
        from models.runs import load_scenario, run_scenario, warn_extrapolated

        sc = load_scenario(args.scenario, args.sets, args.params)
        if args.metrics:
            print(MODELS[sc.model].metrics(sc).table())
            return 0
        ranges = None
        if args.uncertainty:  # the run itself is one of the uncertainty's runs, on its processes
            metrics, ranges = uncertainty.ranges(
                args.scenario,
                args.sets,
                args.params,
                args.uncertainty_seeds,
                args.jobs or os.cpu_count() or 1,
                seed=args.seed,
            )
        else:
            progress = RunProgress()  # a bar on a terminal once the run takes over 5 s
            try:
                metrics = run_scenario(
                    sc, seed=args.seed, jobs=cap_jobs("experiments.run", jobs, jobs), progress=progress
                )
            finally:
                progress.close()
        model = MODELS[sc.model]
        caveats = model.caveats(sc, metrics)
        out = {**metrics, "seed": args.seed, "scenario": to_dict(sc), **({"caveats": caveats} if caveats else {})}
        warn_extrapolated(metrics["extrapolated"])
        if ranges is not None:
            out["uncertainty"] = ranges
        if args.json:
            print(json.dumps(_finite(out), allow_nan=False))
        else:
            declared = model.metrics(sc)
            print(f"{sc.name or args.scenario} ({model.label(sc)}, seed {args.seed})")
            for k in [*model.headline, "wall_s"]:
                unit = declared[k].unit if k in declared else ""
                v = metrics.get(k)
                print(f"  {k:22s} {'none' if v is None else human(v, unit)}")  # JSON's null
            print(f"  {'shortcuts_used':22s} {', '.join(metrics['shortcuts_used']) or 'none'}")
            for line in caveats:
                print(f"note: {line}")
            if args.uncertainty:
                u = out["uncertainty"]
                print(
                    f"ranges over {u['models']} plausible models (of {u['of']}) × {u['seeds']} seeds "
                    f"(central: the kept model's mean):"
                )
                for k in model.headline:
                    r = u["ranges"].get(k)
                    if r:
                        unit = declared[k].unit if k in declared else ""
                        low, high = human(r["low"], unit), human(r["high"], unit)
                        print(f"  {k:22s} {human(r['central'], unit)}  ({low} .. {high})")
                if u.get("sources"):  # the models of the keys' declared ranges: where each comes from
                    print("the kept model with one key at each plausible value:")
                    keys: dict[str, list[str]] = {}
                    for setting in u["sources"]:
                        keys.setdefault(setting.partition("=")[0], []).append(setting.partition("=")[2])
                    for k, values in keys.items():
                        print(f"  {k} = {', '.join(values)}: {u['sources'][f'{k}={values[0]}']}")
        return 0

    return main_guard("experiments.run", go)


if __name__ == "__main__":
    sys.exit(main())
