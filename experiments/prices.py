"""What containers cost: domain.md §6's prices, one place for every command that quotes money (whatif, and the
calibration runs' upper bound).

Modal bills per second of container runtime, idle or busy: CPU per core-second with a 0.125-core minimum, memory per
GiB-second (modal.com/pricing as transcribed in July 2026; a parameter, since prices change and plans differ).
"""

from __future__ import annotations

from dataclasses import dataclass

CPU_PRICE = 0.0000131  # $ per core-second
MEMORY_PRICE = 0.00000222  # $ per GiB-second
MIN_CORES = 0.125  # billed cores at least


@dataclass(frozen=True)
class Prices:
    """A container's size and the prices: ``money(container_seconds)``."""

    cores: float = 1.0
    memory_gib: float = 1.0
    cpu_price: float = CPU_PRICE
    memory_price: float = MEMORY_PRICE

    @property
    def billed_cores(self) -> float:
        return max(self.cores, MIN_CORES)

    def per_second(self) -> float:
        """$ per container-second at this size."""
        return self.billed_cores * self.cpu_price + self.memory_gib * self.memory_price

    def money(self, container_seconds: float) -> float:
        """What ``container_seconds`` cost (idle containers are billed like busy ones)."""
        return container_seconds * self.per_second()
