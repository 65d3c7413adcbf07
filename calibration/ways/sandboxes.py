"""Sandbox creation (docs/sources.md §2): ``--sandboxes`` sandboxes, ``--concurrency`` creates at once, each timed until
an ``exec('true')`` returns, then terminated; a ``sandboxes`` trace. Its app is looked up (created if missing), not
deployed."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

from calibration.plan import AppPlan, Plan
from calibration.ways.base import Option, Way, parameters, size


class Sandboxes(Way):
    name = "sandboxes"
    preset = "sandboxes-v2"
    options = (
        Option("--sandboxes", int, 100, "sandboxes: how many (default 100)", (1, 100_000)),
        Option("--concurrency", int, 100, "sandboxes: creates at once (default 100)", (1, 100_000)),
        # Sandbox.create: up to 24 h (docs/sources.md §2)
        Option("--sandbox-timeout", int, 120, "sandboxes: a sandbox's life limit, s", (1, 86_400)),
    )

    def plan(self, args: argparse.Namespace, name: str, out: Path) -> Plan:
        from calibration.apps import sandboxes as sbx

        cpu, mem = size(args, sbx.CPU, sbx.MEMORY_MIB)
        apps = [AppPlan(name, ["Sandbox.create"], lambda: None)]
        calls = (
            f"{args.sandboxes} sandboxes, {args.concurrency} creates at once, each exec('true') then terminated "
            f"(timeout {args.sandbox_timeout} s)"
        )
        life = float(args.sandbox_timeout)
        wall = math.ceil(args.sandboxes / args.concurrency) * life  # each wave's creates and execs, within a life
        n = args.sandboxes
        return Plan(self.name, args.run_id, apps, cpu, mem, n, life, n * life, calls, wall, wall, out)

    def sets(self, args: argparse.Namespace, plan: Plan) -> dict[str, Any]:
        return {
            "sandboxes.count": args.sandboxes,
            "client.concurrency": args.concurrency,
            "sandboxes.cpu": plan.cpu,
            "sandboxes.memory_gib": plan.memory_mib / 1024,
        }

    async def drive(self, args: argparse.Namespace, plan: Plan, handles: list[Any]) -> list[Path]:
        import pandas as pd

        from calibration import callers, trace
        from calibration.apps import sandboxes as sbx

        sets = self.sets(args, plan)
        t0 = time.time()
        rows = await sbx.probe(
            handles[0],
            args.sandboxes,
            args.concurrency,
            t0=t0,
            cpu=plan.cpu,
            memory_mib=plan.memory_mib,
            timeout_s=args.sandbox_timeout,
        )
        t1 = time.time()
        mf = callers.manifest(
            "sandboxes",
            "sandboxes",
            self.preset,
            sets,
            (0.0, max(t1 - t0, 0.001)),
            t0=t0,
            t1=t1,
            apps=[a.name for a in plan.apps],
            parameters=parameters(args),
            region=args.region,
        )
        return [trace.write(plan.out / "sandboxes", mf, pd.DataFrame(rows))]
