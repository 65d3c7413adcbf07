"""What containers cost (docs/sources.md §6): a container's size and the prices, the ``billing`` section of a load test.

Modal bills per second of container runtime, idle or busy, from the container's start (its cold start included) to
its removal: CPU per core-second with a 0.125-core minimum, memory per GiB-second, GPUs per second by class. An idle
container kept warm (min_containers, buffer_containers, the scaledown window) is billed like a busy one, so a
configuration's cost is its container-seconds × the container's price per second, not its calls. Prices are
modal.com/pricing as transcribed in July 2026 (docs/sources.md §6): parameters, since prices change and plans differ;
check the page before quoting money. Plans' monthly fees and credits are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.scenario import param

CPU_PRICE = 0.0000131  # $ per core-second (docs/sources.md §6)
MEMORY_PRICE = 0.00000222  # $ per GiB-second (docs/sources.md §6)
MIN_CORES = 0.125  # billed cores at least (docs/sources.md §6)
HOURS_PER_MONTH = 730.0  # 365 × 24 ÷ 12: a month of a steady cost per hour


@dataclass(frozen=True)
class BillingParams:
    cpu: float = param(
        1.0,
        gt=0,
        le=1024,
        source="@app.function(cpu=...); assumption: 1 core (set your Function's); billed at least 0.125 "
        "(docs/sources.md §6)",
        doc="cores per container",
    )
    memory_gib: float = param(
        1.0, gt=0, le=1e6, source="@app.function(memory=...); assumption: 1 GiB (set your Function's)"
    )
    gpu_per_s: float = param(
        0.0,
        ge=0,
        le=1e3,
        source="docs/sources.md §6: GPUs are billed per second by class (T4 … B200); 0 = no GPU; take yours from the "
        "page",
        doc="$ per second for the container's GPUs",
    )
    cpu_price: float = param(CPU_PRICE, ge=0, le=1e3, source="docs/sources.md §6", doc="$ per core-second")
    memory_price: float = param(MEMORY_PRICE, ge=0, le=1e3, source="docs/sources.md §6", doc="$ per GiB-second")

    @property
    def billed_cores(self) -> float:
        return max(self.cpu, MIN_CORES)

    def per_second(self) -> float:
        """$ per container-second at this size."""
        return self.billed_cores * self.cpu_price + self.memory_gib * self.memory_price + self.gpu_per_s

    def money(self, container_seconds: float) -> float:
        """What ``container_seconds`` cost (idle containers are billed like busy ones)."""
        return container_seconds * self.per_second()

    def describe(self) -> str:
        gpu = f" + ${self.gpu_per_s:g}/s GPU" if self.gpu_per_s else ""
        return f"{self.cpu:g} core(s), {self.memory_gib:g} GiB{gpu}: ${self.per_second() * 3600:.4g} per container-hour"
