"""Container starts (docs/sources.md §3): Poisson-spaced single-use containers per start mode, lazy and/or snapshot,
each timed by a probe; a ``starts`` trace per mode (``coldstart-<mode>``)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from calibration.plan import AppPlan, Plan
from calibration.ways.base import Option, Way, parameters, size

CLASSES = {"lazy": "LazyProbe", "snapshot": "SnapshotProbe"}  # the app's probe class of each start mode


def modes(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(CLASSES) if args.mode == "both" else (args.mode,)


def packages(args: argparse.Namespace) -> tuple[str, ...] | None:
    """``--pip`` as the app's ``packages`` (None: the app's default for ``--imports``)."""
    if args.pip is None:
        return None
    return tuple(p.strip() for p in args.pip.split(",") if p.strip())


class ColdStart(Way):
    name = "coldstart"
    preset = "coldstart-torch"
    options = (
        Option("--mode", str, "both", "coldstart: start modes", choices=(*CLASSES, "both")),
        Option("--starts", int, 20, "coldstart: container starts per mode (default 20)", (1, 10_000)),
        Option("--start-interval", float, 5.0, "coldstart: mean s between starts (default 5)", (0.001, 3600)),
        Option("--startup-timeout", int, 120, "coldstart: a start's limit, s (default 120)", (1, 3600)),
        Option("--imports", str, "torch", "coldstart: the module the probe imports at start (default torch)"),
        Option("--pip", str, None, "coldstart: the image's pip packages, comma-separated ('' none; default: torch's "
               "CPU wheels for torch, else the module's name)"),
    )  # fmt: skip

    def plan(self, args: argparse.Namespace, name: str, out: Path) -> Plan:
        from calibration.apps import coldstart

        cpu, mem = size(args, coldstart.CPU, coldstart.MEMORY_MIB)
        ms = modes(args)
        opts = {"modes": ms, "cpu": cpu, "memory_mib": mem, "startup_timeout_s": args.startup_timeout}
        opts |= {"imports": args.imports, "packages": packages(args)}
        apps = [AppPlan(name, [CLASSES[m] for m in ms], lambda: coldstart.make_app(name, **opts, region=args.region))]
        life = args.startup_timeout + coldstart.PROBE_TIMEOUT_S
        starts = args.starts * len(ms)
        span = len(ms) * (args.starts * args.start_interval * 3 + life)  # Poisson: 3× the mean span per mode
        calls = (
            f"{args.starts} container starts per mode ({', '.join(ms)}), Poisson, mean {args.start_interval:g} s "
            f"apart; each a single-use container (startup timeout {args.startup_timeout} s)"
        )
        plan = Plan(self.name, args.run_id, apps, cpu, mem, starts, life, starts * life, calls, span, span, out)
        plan.traces = "coldstart-MODE"
        return plan

    def sets(self, args: argparse.Namespace, plan: Plan) -> dict[str, Any]:
        return {"coldstart.starts": args.starts, "coldstart.start_interval_s": args.start_interval}

    async def drive(self, args: argparse.Namespace, plan: Plan, handles: list[Any]) -> list[Path]:
        import modal

        from calibration import callers, trace

        sets = self.sets(args, plan)
        names = [a.name for a in plan.apps]
        written = []
        for mode in modes(args):
            (cls,) = await callers.hydrated([modal.Cls.from_name(names[0], CLASSES[mode])])
            table, t0 = await callers.coldstart_loop(
                cls().probe, args.starts, args.start_interval, seed=args.seed, timeout_s=plan.lifetime_s
            )
            end = max(float(table["t"].max()), 0.0) + args.startup_timeout if len(table) else 1.0
            mf = callers.manifest(
                "starts",
                "coldstart",
                self.preset,
                {**sets, "coldstart.mode": mode},
                (0.0, max(end, 1.0)),
                t0=t0,
                t1=time.time(),
                apps=names,
                parameters=parameters(args),
                region=args.region,
            )
            written.append(trace.write(plan.out / f"coldstart-{mode}", mf, table))
        return written
