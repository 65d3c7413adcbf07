"""What every sandbox-creation run's numbers must satisfy, checked at the end of every run (``check``): a violation is
a bug in the model, not a result, and ends the run with ``InvariantViolated`` (exit 1, one line naming each broken
rule; models/inputs/checks/invariants.py is the load tests' counterpart).

- Counts: created ≤ issued ≤ requested, and with sandboxes that never leave (``sandboxes.lifetime_s`` 0) created ≤
  the fleet's slots; retries and rejections are not negative. Under a fault (models/sandboxes/faults.py): created +
  lost ≤ issued, 0 ≤ delayed ≤ created, restarted ≥ 0.
- The span covers every created sandbox's request and start, so the creation rate is at most created ÷ makespan.
- Shares are shares: each resource's utilization in [0, 1] (busy time in the span over the most it can be busy;
  never -0.0, a negative residue rounded), ``worker_slots_filled`` in [0, 1], and no worker above its slots.
"""

from __future__ import annotations

import math
from typing import Any

from sim.model import InvariantViolated

REL = 1e-9  # float rounding


def violations(sc: Any, metrics: dict, slots: int) -> list[str]:
    """Every rule of this module that the run's metrics break (``slots``: a worker's sandbox slots)."""
    m, found = metrics, []
    created, issued, requested = m["sandboxes_created"], m["sandboxes_issued"], m["sandboxes_requested"]
    if not 0 <= created <= issued <= requested:
        found.append(f"sandboxes created {created:,}, issued {issued:,}, requested {requested:,}: not in that order")
    lost = m.get("sandboxes_lost", 0)
    if lost < 0 or created + lost > issued:
        found.append(f"sandboxes created {created:,} + lost {lost:,} > issued {issued:,}")
    delayed = m.get("sandboxes_delayed", 0)
    if not 0 <= delayed <= created:
        found.append(f"sandboxes delayed {delayed:,} not within [0, created {created:,}]")
    if m.get("sandboxes_restarted", 0) < 0:
        found.append(f"sandboxes restarted {m['sandboxes_restarted']:,} below 0")
    total = slots * sc.fleet.workers
    if sc.sandboxes.lifetime_s == 0 and created > total:
        found.append(f"sandboxes created {created:,} > the fleet's {total:,} slots, with none leaving")
    if m["retries"] < 0 or m["rejections"] < 0:
        found.append(f"retries {m['retries']:,} or rejections {m['rejections']:,} below 0")
    makespan, rate = m["creation_makespan_s"], m["creation_rate_per_s"]
    if not (math.isfinite(rate) and rate >= 0):
        found.append(f"creation rate {rate!r} is not a finite rate >= 0")
    elif makespan and rate > created / makespan * (1 + REL):
        found.append(
            f"creation rate {rate:.6g}/s > created ÷ makespan ({created:,} ÷ {makespan:.6g} s): the span is shorter "
            "than the sandboxes it counts"
        )
    for k, v in m["utilization"].items():
        if not (0.0 <= v <= 1.0 + REL) or math.copysign(1.0, v) < 0:
            found.append(f"utilization of {k} {v!r} outside [0, 1]")
    if not 0.0 <= m["worker_slots_filled"] <= 1.0 + REL:
        found.append(f"worker_slots_filled {m['worker_slots_filled']!r} outside [0, 1]")
    if m["worker_slots_in_use_max"] > slots:
        found.append(f"a worker held {m['worker_slots_in_use_max']:,} sandboxes, more than its {slots:,} slots")
    return found


def check(sc: Any, metrics: dict, slots: int) -> None:
    """Raise ``InvariantViolated`` naming every rule the run broke."""
    found = violations(sc, metrics, slots)
    if found:
        raise InvariantViolated("invariant violated (a bug in the model): " + "; ".join(found))
