"""The reference load test's ways (domain.md §1): closed-loop clients calling deployed Functions, a ``calls`` trace.
``LoadTest`` is what they share (the container size, the load, the common ``--set`` keys, the trace); ``Remote`` and
``Spawn`` call one Function with ``.remote`` or ``.spawn``."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any, ClassVar

from calibration.plan import AppPlan, Plan
from calibration.ways.base import Option, Way, capped, parameters, size

MAX_INPUTS = Option("--max-inputs", int, 500, "@modal.concurrent(max_inputs=N) (default 500)", (1, 1000))


def load(args: argparse.Namespace) -> Any:
    """The callers' load (calibration/callers.py ``Load``) of the command's options."""
    from calibration.callers import Load

    return Load(
        clients=args.clients,
        in_flight=args.calls,
        duration_s=args.duration,
        warmup_s=args.warmup,
        drain_s=args.drain,
        work_min=args.work_min,
        work_max=args.work_max,
        seed=args.seed,
    )


def closed_loop(args: argparse.Namespace) -> str:
    """What closed-loop clients do, in words."""
    mean_work = (args.work_min + args.work_max) / 2
    return (
        f"{args.clients} clients × {args.calls} calls in flight (closed loop) for {args.duration:g} s, up to "
        f"{args.drain:g} s drain; work uniform({args.work_min:g}, {args.work_max:g}) s; ideal "
        f"{args.clients * args.calls / mean_work:,.0f} calls/s"
    )


class LoadTest(Way):
    """A load-test way: its apps (``deploy``), the calls it makes (``call``), its own ``--set`` keys (``own_sets``)."""

    def deploy(self, args: argparse.Namespace, name: str, common: dict[str, Any]) -> tuple[list[AppPlan], int, str]:
        """(apps, the most containers at once over all of them, the calls in words); ``common``: every app's
        cpu, memory_mib and region."""
        raise NotImplementedError

    def own_sets(self, args: argparse.Namespace) -> dict[str, Any]:
        raise NotImplementedError

    def functions(self, args: argparse.Namespace) -> int:
        """How many Functions share the plan's containers (each capped at its share)."""
        return 1

    async def call(self, args: argparse.Namespace, names: list[str], load: Any) -> tuple[Any, float]:
        """Drive the deployed apps ``names``: (the calls' table, the run's start time)."""
        raise NotImplementedError

    def plan(self, args: argparse.Namespace, name: str, out: Path) -> Plan:
        from calibration.apps import loadtest

        cpu, mem = size(args, loadtest.CPU, loadtest.MEMORY_MIB)
        load_s = args.duration + args.drain
        apps, n, calls = self.deploy(args, name, {"cpu": cpu, "memory_mib": mem, "region": args.region})
        return Plan(self.name, args.run_id, apps, cpu, mem, n, load_s, n * load_s, calls, args.duration, load_s, out)

    def sets(self, args: argparse.Namespace, plan: Plan) -> dict[str, Any]:
        sets: dict[str, Any] = {
            "clients.count": args.clients,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "drain_s": args.drain,
            "work": load(args).work(),
        }
        sets |= self.own_sets(args)
        sets["autoscaler.max_containers"] = plan.containers // self.functions(args)
        return sets

    async def drive(self, args: argparse.Namespace, plan: Plan, handles: list[Any]) -> list[Path]:
        from calibration import callers, trace

        sets = self.sets(args, plan)
        names = [a.name for a in plan.apps]
        table, t0 = await self.call(args, names, load(args))
        mf = callers.manifest(
            "calls",
            plan.what,
            self.preset,
            sets,
            (args.warmup, args.duration),
            t0=t0,
            t1=time.time(),
            apps=names,
            parameters=parameters(args),
            region=args.region,
        )
        return [trace.write(plan.out / plan.what, mf, table)]


class Remote(LoadTest):
    """The baseline: every client calls one Function with ``.remote``."""

    name = "remote"
    preset = "loadtest-remote"
    options = (MAX_INPUTS,)
    spawn: ClassVar[bool] = False  # calls are ``.spawn`` then ``.get`` (way 1)

    def deploy(self, args: argparse.Namespace, name: str, common: dict[str, Any]) -> tuple[list[AppPlan], int, str]:
        from calibration.apps import loadtest

        n = capped(args, math.ceil(args.clients * args.calls / args.max_inputs))
        opts = {**common, "ways": ("work",), "max_inputs": args.max_inputs, "max_containers": n}
        return [AppPlan(name, ["work"], lambda: loadtest.make_app(name, **opts))], n, closed_loop(args)

    def own_sets(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"clients.in_flight": args.calls, "function.max_inputs": args.max_inputs}

    async def call(self, args: argparse.Namespace, names: list[str], load: Any) -> tuple[Any, float]:
        import modal

        from calibration import callers

        fns = await callers.hydrated([modal.Function.from_name(n, "work") for n in names])
        return await callers.closed_loop((callers.spawn_call if self.spawn else callers.remote_call)(fns), load)


class Spawn(Remote):
    """Way 1: ``fc = f.spawn(x); fc.get()``."""

    name = "spawn"
    preset = "loadtest-spawn"
    reference = True
    slowness = 2
    spawn = True
