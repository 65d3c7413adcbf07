"""The reference load test's ways (docs/sources.md §1): closed-loop clients calling deployed Functions, a ``calls``
trace. ``LoadTest`` is what they share (the container size, the load, the common ``--set`` keys, where the clients run:
``--driver``, ``--client-procs``, ``--client-lead``, calibration/clients.py; the trace); ``Remote`` and ``Spawn`` call
one Function with ``.remote`` or ``.spawn``."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

from calibration.plan import AppPlan, Plan
from calibration.ways.base import Option, RunFailed, Way, capped, parameters, size

MAX_INPUTS = Option("--max-inputs", int, 500, "@modal.concurrent(max_inputs=N) (default 500)", (1, 1000))
# where the clients run (calibration/clients.py)
CLIENTS = (
    Option("--driver", str, "local", "where the clients run: local processes, or modal: one container each in "
           "--region, as the reference test's (default local)", choices=("local", "modal")),
    Option("--client-procs", int, None, "local client processes (default: one per client up to the cores; 0: all "
           "in this process)", (0, 1000)),
    Option("--client-lead", float, 60.0, "--driver modal: seconds from spawning the client containers to the "
           "common start (default 60)", (1, 3600)),
)  # fmt: skip
DRIVER_MARGIN_S = 120.0  # a client container's time limit beyond lead + duration + drain (its start, its rows)
# A run whose calls did not come back is not a measurement: none back, or more than this share with a drain at least
# the longest work (the drain should have brought every call back), fails (exit 1); its trace is kept as WHAT.failed.
UNFINISHED_SHARE = 0.01


def unmeasured(table: Any, drained: bool) -> str | None:
    """Why a calls table is not a measurement (None if it is): no call came back, or none succeeded (a platform or
    stand-in fault: its containers never started), or, when the drain should have brought every call back
    (``drained``), more than ``UNFINISHED_SHARE`` of them did not."""
    from calibration.trace import UNFINISHED

    n, lost = len(table), int((table["kind"] == UNFINISHED).sum())
    if n == 0:
        return "no call was issued"
    if lost == n:
        return f"none of the {n} calls came back (see the platform's log: did its containers start?)"
    if not (table["kind"] == "").any():
        kinds = ", ".join(f"{k} {c}" for k, c in table["kind"].value_counts().items())
        return f"none of the {n} calls succeeded ({kinds}; see the platform's log: did its containers start?)"
    if drained and lost > UNFINISHED_SHARE * n:
        return f"{lost} of {n} calls never came back within the drain (more than {UNFINISHED_SHARE:.0%})"
    return None


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


def driver_timeout_s(args: argparse.Namespace) -> int:
    """A client container's time limit (``--driver modal``): the lead, the load, the drain and a margin."""
    return math.ceil(args.client_lead + args.duration + args.drain + DRIVER_MARGIN_S)


def where(args: argparse.Namespace) -> str:
    """Where the clients run, in words."""
    from calibration.clients import default_procs

    if args.driver == "modal":
        region = f"region {args.region}" if args.region else "Modal's region"
        return (f"clients in {args.clients} Modal containers (drive_clients, {region}), common start "
                f"{args.client_lead:g} s after their spawn")  # fmt: skip
    if args.client_procs == 0:
        return "clients in this process"
    procs = default_procs(args.clients) if args.client_procs is None else min(args.client_procs, args.clients)
    return f"clients in {procs} local process{'es' if procs > 1 else ''}"


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

    async def job(self, args: argparse.Namespace, names: list[str], load: Any) -> Any:
        """What the clients run against the deployed apps ``names`` (a calibration/clients.py ``Job`` of every
        client; the way's look-ups that are not per client, such as a server's URL, done here)."""
        raise NotImplementedError

    def plan(self, args: argparse.Namespace, name: str, out: Path) -> Plan:
        from calibration.apps import loadtest

        cpu, mem = size(args, loadtest.CPU, loadtest.MEMORY_MIB)
        load_s = args.duration + args.drain
        apps, n, calls = self.deploy(args, name, {"cpu": cpu, "memory_mib": mem, "region": args.region})
        container_s, wall_s = n * load_s, load_s
        if args.driver == "modal":  # the client containers: as big as the app's, each at most its time limit
            timeout_s, first = driver_timeout_s(args), apps[0]
            build = first.build
            opts = {"cpu": cpu, "memory_mib": mem, "region": args.region, "clients": args.clients}

            def with_driver() -> Any:
                app = build()
                loadtest.add_driver(app, **opts, timeout_s=timeout_s)
                return app

            first.build, first.functions = with_driver, [*first.functions, "drive_clients"]
            container_s += args.clients * timeout_s
            wall_s += args.client_lead
        calls = f"{calls}; {where(args)}"
        return Plan(self.name, args.run_id, apps, cpu, mem, n, load_s, container_s, calls, args.duration, wall_s, out)

    def check(self, args: argparse.Namespace) -> None:
        """Local client processes' file descriptors within this system's hard limit (calibration/clients.py
        ``check_descriptors``; a Modal container checks its own)."""
        from calibration import clients

        if args.driver == "local":
            opts = {"loop": "closed", **self.descriptor_opts(args)}
            whole = clients.Job(load=load(args), clients=tuple(range(args.clients)), **opts)
            clients.check_descriptors(clients.layout(whole, args.client_procs), "--connections")

    def descriptor_opts(self, args: argparse.Namespace) -> dict[str, Any]:
        """The ``Job`` fields that decide a client's descriptors (the server way's connections)."""
        return {}

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
        from calibration import callers, clients, trace

        sets = self.sets(args, plan)
        names = [a.name for a in plan.apps]
        job = await self.job(args, names, load(args))
        got = await clients.run(job, procs=args.client_procs, driver=args.driver, app=names[0], lead_s=args.client_lead)
        table, t0 = got.table, got.t0
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
        mf["clients"] = got.where
        why = unmeasured(table, args.drain >= args.work_max)
        if why:
            path = trace.write(plan.out / f"{plan.what}.failed", mf, table)
            raise RunFailed(f"{why}; the trace is kept in {path} (not a measurement: calibration.fit refuses it)")
        if lost := int((table["kind"] == trace.UNFINISHED).sum()):
            print(f"{plan.what}: {lost} calls were still out when the {args.drain:g} s drain ended (kind unfinished)",
                  file=sys.stderr)  # fmt: skip
        return [trace.write(plan.out / plan.what, mf, table)]


class Remote(LoadTest):
    """The baseline: every client calls one Function with ``.remote``."""

    name = "remote"
    preset = "loadtest-remote"
    options = (MAX_INPUTS, *CLIENTS)
    spawn: ClassVar[bool] = False  # calls are ``.spawn`` then ``.get`` (way 1)

    def deploy(self, args: argparse.Namespace, name: str, common: dict[str, Any]) -> tuple[list[AppPlan], int, str]:
        from calibration.apps import loadtest

        n = capped(args, math.ceil(args.clients * args.calls / args.max_inputs))
        opts = {**common, "ways": ("work",), "max_inputs": args.max_inputs, "max_containers": n}
        return [AppPlan(name, ["work"], lambda: loadtest.make_app(name, **opts))], n, closed_loop(args)

    def own_sets(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"clients.in_flight": args.calls, "function.max_inputs": args.max_inputs}

    async def job(self, args: argparse.Namespace, names: list[str], load: Any) -> Any:
        from calibration.clients import Job

        targets = tuple((n, "work") for n in names)  # client i calls copy i mod copies
        return Job("closed", load, tuple(range(load.clients)), targets, spawn=self.spawn)


class Spawn(Remote):
    """Way 1: ``fc = f.spawn(x); fc.get()``."""

    name = "spawn"
    preset = "loadtest-spawn"
    reference = True
    slowness = 2
    spawn = True
    designed = True  # the reference test's way (docs/sources.md §1): every designed run calls one Function with .spawn
