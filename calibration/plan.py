"""A calibration run's plan (calibration/run.py): the apps it deploys, the containers it may use, what it costs at
most (domain.md §6's prices, experiments/prices.py), and the same in a few lines for ``--dry-run``."""

from __future__ import annotations

import argparse
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.prices import CPU_PRICE, MEMORY_PRICE, Prices

PROG = "calibration.run"
WHATS = ("remote", "spawn", "copies", "batching", "server", "coldstart", "sandboxes")
DATA = Path(__file__).resolve().parent / "data"
HEADROOM = 2  # max_containers = HEADROOM × the containers the calls in flight need (autoscaler overshoot)


# --- the plan -----------------------------------------------------------------------------------------------------


@dataclass
class AppPlan:
    name: str
    functions: list[str]
    build: Callable[[], Any] = field(repr=False)  # -> modal.App (None: a sandbox run's looked-up app)


@dataclass
class Plan:
    what: str
    run_id: str
    apps: list[AppPlan]
    cpu: float
    memory_mib: int
    containers: int  # at most at once, over all apps
    lifetime_s: float  # the longest a container (or sandbox) may live
    container_seconds: float  # the bound: what the cost is computed from
    calls: str  # what the caller does, in words
    duration_s: float
    wall_s: float  # the run's own bound on its wall-clock time (before MARGIN_S)
    out: Path

    def prices(self, cpu_price: float = CPU_PRICE, memory_price: float = MEMORY_PRICE) -> Prices:
        return Prices(self.cpu, self.memory_mib / 1024, cpu_price, memory_price)

    def cost(self, cpu_price: float = CPU_PRICE, memory_price: float = MEMORY_PRICE) -> float:
        """Upper-bound cost in $: container-seconds at domain.md §6's prices (experiments/prices.py)."""
        return self.prices(cpu_price, memory_price).money(self.container_seconds)


def default_run_id() -> str:
    """UTC time to the second and 4 random hex digits: ``20260101-120000-ab12``."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def app_name(what: str, run_id: str, suffix: str = "") -> str:
    return f"scalesim-cal-{what}-{run_id}{suffix}"


def make_plan(args: argparse.Namespace) -> Plan:
    """The apps, functions, container size and the cost bound of ``args`` (already validated)."""
    from calibration.apps import coldstart, loadtest
    from calibration.apps import sandboxes as sbx

    what, rid = args.what, args.run_id
    out = args.out if args.out is not None else DATA / rid
    name = app_name(what, rid)
    load_s = args.duration + args.drain
    mean_work = (args.work_min + args.work_max) / 2

    def capped(needed: int) -> int:
        return args.max_containers or max(1, HEADROOM * needed)

    if what in ("remote", "spawn", "copies", "batching", "server"):
        cpu = args.cpu if args.cpu is not None else loadtest.CPU
        mem = args.memory_mib if args.memory_mib is not None else loadtest.MEMORY_MIB
        in_flight = args.clients * args.calls
        calls = (
            f"{args.clients} clients × {args.calls} calls in flight (closed loop) for {args.duration:g} s, up to "
            f"{args.drain:g} s drain; work uniform({args.work_min:g}, {args.work_max:g}) s; ideal "
            f"{in_flight / mean_work:,.0f} calls/s"
        )
        common = {"cpu": cpu, "memory_mib": mem, "region": args.region}
        if what in ("remote", "spawn"):
            n = capped(math.ceil(in_flight / args.max_inputs))
            opts = {**common, "ways": ("work",), "max_inputs": args.max_inputs, "max_containers": n}
            apps = [AppPlan(name, ["work"], lambda o=opts: loadtest.make_app(name, **o))]
        elif what == "copies":
            per_copy = math.ceil(args.clients / args.copies) * args.calls
            n = capped(math.ceil(per_copy / args.max_inputs))
            opts = {**common, "ways": ("work",), "max_inputs": args.max_inputs, "max_containers": n}
            apps = []
            for i in range(args.copies):
                nm = app_name(what, rid, f"-copy-{i}")
                apps.append(AppPlan(nm, ["work"], lambda nm=nm, o=opts: loadtest.make_app(nm, **o)))
            n *= args.copies
        elif what == "batching":
            if args.batched:
                # one batch per container at a time: items in flight ÷ batch size containers
                n = capped(math.ceil(args.clients * args.round / args.chunk))
                opts = {**common, "ways": ("batched",), "batch_size": args.chunk, "batch_wait_ms": args.batch_wait_ms}
                fn = "work_batched"
            else:
                chunks = args.clients * math.ceil(args.round / args.chunk)
                n = capped(math.ceil(chunks / args.chunk_max_inputs))
                opts = {**common, "ways": ("chunk",), "chunk_max_inputs": args.chunk_max_inputs}
                fn = "work_chunk"
            opts["max_containers"] = n
            apps = [AppPlan(name, [fn], lambda o=opts: loadtest.make_app(name, **o))]
            how = "single-item calls batched by Modal" if args.batched else "chunks"
            calls = (
                f"{args.clients} clients × rounds of {args.round} items in {how} of {args.chunk} for "
                f"{args.duration:g} s, up to {args.drain:g} s drain; work uniform({args.work_min:g}, "
                f"{args.work_max:g}) s"
            )
        else:  # server
            n = capped(math.ceil(in_flight / args.target_concurrency))
            opts = {**common, "ways": ("server",), "target_concurrency": args.target_concurrency, "max_containers": n}
            apps = [AppPlan(name, ["WorkServer"], lambda o=opts: loadtest.make_app(name, **o))]
            calls += f"; HTTP (aiohttp), {args.connections} connections per client"
        return Plan(what, rid, apps, cpu, mem, n, load_s, n * load_s, calls, args.duration, load_s, out)
    if what == "coldstart":
        cpu = args.cpu if args.cpu is not None else coldstart.CPU
        mem = args.memory_mib if args.memory_mib is not None else coldstart.MEMORY_MIB
        modes = ("lazy", "snapshot") if args.mode == "both" else (args.mode,)
        opts = {"modes": modes, "cpu": cpu, "memory_mib": mem, "startup_timeout_s": args.startup_timeout}
        classes = [{"lazy": "LazyProbe", "snapshot": "SnapshotProbe"}[m] for m in modes]
        apps = [AppPlan(name, classes, lambda o=opts: coldstart.make_app(name, **o, region=args.region))]
        life = args.startup_timeout + coldstart.PROBE_TIMEOUT_S
        starts = args.starts * len(modes)
        span = len(modes) * (args.starts * args.start_interval * 3 + life)  # Poisson: 3× the mean span per mode
        calls = (
            f"{args.starts} container starts per mode ({', '.join(modes)}), Poisson, mean {args.start_interval:g} s "
            f"apart; each a single-use container (startup timeout {args.startup_timeout} s)"
        )
        return Plan(what, rid, apps, cpu, mem, starts, life, starts * life, calls, span, span, out)
    # sandboxes
    cpu = args.cpu if args.cpu is not None else sbx.CPU
    mem = args.memory_mib if args.memory_mib is not None else sbx.MEMORY_MIB
    apps = [AppPlan(name, ["Sandbox.create"], lambda: None)]
    calls = (
        f"{args.sandboxes} sandboxes, {args.concurrency} creates at once, each exec('true') then terminated "
        f"(timeout {args.sandbox_timeout} s)"
    )
    life = float(args.sandbox_timeout)
    wall = math.ceil(args.sandboxes / args.concurrency) * life  # each wave's creates and execs, within a life
    return Plan(what, rid, apps, cpu, mem, args.sandboxes, life, args.sandboxes * life, calls, wall, wall, out)


def describe(plan: Plan, cpu_price: float, memory_price: float) -> str:
    """The plan in a few lines (the dry run's output; a real run prints it before asking)."""
    lines = [
        f"{PROG} {plan.what}: run {plan.run_id}",
        *(f"  app {a.name}: {', '.join(a.functions)}" for a in plan.apps),
        f"  container: {plan.cpu:g} CPU, {plan.memory_mib} MiB; at most {plan.containers:,} at once, each at most "
        f"{plan.lifetime_s:g} s",
        f"  calls: {plan.calls}",
        f"  upper-bound cost: {plan.container_seconds:,.0f} container-s × ({plan.prices().billed_cores:g} core × "
        f"${cpu_price:g} + {plan.memory_mib / 1024:g} GiB × ${memory_price:g}) per s = "
        f"${plan.cost(cpu_price, memory_price):.4f}",
        f"  trace: {plan.out / (plan.what + ('-MODE' if plan.what == 'coldstart' else ''))}",
    ]
    return "\n".join(lines)
