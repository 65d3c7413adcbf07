"""A calibration run's plan (calibration/run.py; each way's, calibration/ways): the apps it deploys, the containers it
may use, what it costs at most (docs/sources.md §6's prices, models/inputs/platform/billing.py), and the same in a few
lines for ``--dry-run``."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.inputs.platform.billing import CPU_PRICE, MEMORY_PRICE, BillingParams

PROG = "calibration.run"
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
    traces: str = ""  # the trace folder(s) under ``out`` as the dry run tells them (default: ``what``)

    def prices(self, cpu_price: float = CPU_PRICE, memory_price: float = MEMORY_PRICE) -> BillingParams:
        return BillingParams(self.cpu, self.memory_mib / 1024, 0.0, cpu_price, memory_price)

    def cost(self, cpu_price: float = CPU_PRICE, memory_price: float = MEMORY_PRICE) -> float:
        """Upper-bound cost in $: container-seconds at docs/sources.md §6's prices
        (models/inputs/platform/billing.py)."""
        return self.prices(cpu_price, memory_price).money(self.container_seconds)


def default_run_id() -> str:
    """UTC time to the second and 4 random hex digits: ``20260101-120000-ab12``."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def app_name(what: str, run_id: str, suffix: str = "") -> str:
    return f"scalesim-cal-{what}-{run_id}{suffix}"


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
        f"  trace: {plan.out / (plan.traces or plan.what)}",
    ]
    return "\n".join(lines)
