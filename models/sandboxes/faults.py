"""Control-plane faults of a sandbox-creation run: timed events that take one part of a control plane away for a
while, and the recovery figures measured around them (docs/sources.md §2: v2 claims "no central bottleneck or
coordination cost, no single point of failure"; v1's unsharded Postgres on the critical path; Kubernetes' etcd).

Each fault is a timed event of the ``faults`` section: ``<fault>_at_s`` (when it begins, in simulated seconds) and
``<fault>_s`` (how long it lasts); a fault is on when its length (for ``worker_death``, its ``worker_death_workers``)
is above zero, and every default is off, so a scenario without faults runs exactly as it does with no ``faults``
section. A fault applies to the planes where it means something (each plane's ``FAULTS``:
models/sandboxes/planes/); a key of a fault set on another plane is an error naming the key.

- ``scheduler_down`` (modal-v2): scheduler server 0 dies and restarts after the length (its cache of its own
  placements lost). The load balancer keeps routing to it (no health check is modelled: an assumption); a create
  that reaches it while it is down, or is in it when it dies (queued, or in its CPU step or request time, however
  long its queue), is lost, and the client sends it again through the load balancer once its deadline,
  ``scheduler_down_detect_s`` after it sent it, has passed (not before the death). With one scheduler every create
  waits for the restart.
- ``stream_stall`` (modal-v2): the Redis stream delivers no worker state for the length; what was published then is
  delivered, in order, when it ends. Schedulers place on the stale state plus their own placements; a worker that is
  in fact full rejects and the create is retried (``rejections``, ``retries``).
- ``postgres_failover`` (modal-v1): the central Postgres starts no transaction for the length; one that would be
  in service when the failover begins is served again after it (aborted, then retried); creates queue behind it.
- ``etcd_election`` (kubernetes): etcd commits no write for the length (leader election), so API-server writes, and
  the node lease renewals, wait for its end.
- ``worker_death`` (every plane): ``worker_death_workers`` workers (the first ones: placement is random, so which
  ones does not matter) die at ``worker_death_at_s``; their slots leave the fleet for good, and a placement sent to
  one is refused at once (an assumption: a connection refused, not an RPC that times out). The sandboxes on them
  (running or starting) are lost (``lost``: ``sandboxes_lost``) or, ``restart``, created again through the control
  plane ``worker_death_detect_s`` later (``sandboxes_restarted``; each also a retry), their time to interactive still
  counted from the first create attempt.

Recovery figures (declared in ``METRICS``, reported only when a fault is on; see each one's line). The fault window
is from the earliest fault's start to the latest one's end (a worker death's end: its start plus
``worker_death_detect_s``). Rates are sandboxes becoming running per second. The sandboxes *in flight* during the
fault are those requested before the window's end and running at or after its start: their time to interactive
(``tti_fault_*``) is what the fault did to the creates it caught.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np

from sim.metrics import Metric, Metrics
from sim.scenario import param
from sim.stats import NAN

# every fault, by the prefix of its keys (which planes each applies to: their ``FAULTS``)
FAULTS = ("scheduler_down", "stream_stall", "postgres_failover", "etcd_election", "worker_death")


def _at(fault: str) -> Any:
    return param(0.0, ge=0, doc=f"when the {fault} begins (simulated seconds)")


def _len(fault: str, source: str) -> Any:
    return param(0.0, ge=0, source=source, doc=f"how long the {fault} lasts; 0 = no {fault}")


@dataclass(frozen=True)
class FaultParams:
    scheduler_down_at_s: float = _at("scheduler outage")
    scheduler_down_s: float = _len("scheduler outage", "assumption: a scheduler server's crash and restart")
    scheduler_down_detect_s: float = param(
        1.0,
        gt=0,
        source="assumption: the client's create-call deadline before it retries on another scheduler "
        "(docs/sources.md §2 gives none; scheduling takes tens of milliseconds, so a second is a generous deadline)",
    )
    stream_stall_at_s: float = _at("stream stall")
    stream_stall_s: float = _len("stream stall", "assumption: a Redis stream failover or a stuck consumer group")
    postgres_failover_at_s: float = _at("Postgres failover")
    postgres_failover_s: float = _len(
        "Postgres failover", "assumption: a primary failover to a replica; docs/sources.md §2 gives no figure"
    )
    etcd_election_at_s: float = _at("etcd leader election")
    etcd_election_s: float = _len(
        "etcd leader election",
        "assumption: election timeout plus a new leader's first commit; docs/sources.md §2 gives no figure",
    )
    worker_death_at_s: float = _at("worker death")
    worker_death_workers: int = param(0, ge=0, le=10_000_000, doc="workers that die at worker_death_at_s; 0 = none")
    worker_death_policy: Literal["lost", "restart"] = param(
        "lost", doc="lost: their sandboxes are gone; restart: the control plane creates them again elsewhere"
    )
    worker_death_detect_s: float = param(
        10.0,
        ge=0,
        source="assumption: until the control plane declares the workers dead and re-creates their sandboxes "
        "(Kubernetes' node lease is 40 s, docs/sources.md §2; a worker that stops publishing is seen sooner)",
    )
    rate_bin_s: float = param(
        1.0, gt=0, le=3600, source="assumption: the bins the creation rate is measured in around a fault"
    )
    recovery_band: float = param(
        0.1,
        gt=0,
        le=1,
        source="assumption: recovered once a bin's creation rate is within this fraction of the pre-fault rate",
    )


DEFAULTS = FaultParams()


def keys_of(fault: str) -> list[str]:
    """The fields of one fault (its ``<fault>_`` keys)."""
    return [f.name for f in fields(FaultParams) if f.name.startswith(fault + "_")]


def on(fp: FaultParams, fault: str) -> bool:
    """Whether ``fault`` happens in the run (its length, or its workers, above zero)."""
    return fp.worker_death_workers > 0 if fault == "worker_death" else getattr(fp, fault + "_s") > 0


def any_on(fp: FaultParams) -> bool:
    return any(on(fp, f) for f in FAULTS)


def error(
    fp: FaultParams, plane: str, applies: Mapping[str, tuple[str, ...]], workers: int, horizon: float = math.inf
) -> str | None:
    """Why the faults do not fit the scenario (one line naming the key), or None: a fault's key set on a plane the
    fault does not apply to (``applies``: each fault's planes), a fault's start set while it is off or at or after
    the run's ``horizon`` (nothing would be faulted), more workers dying than the fleet has."""
    for fault in FAULTS:
        if on(fp, fault) and getattr(fp, fault + "_at_s") >= horizon:
            at = getattr(fp, fault + "_at_s")
            return f"faults.{fault}_at_s: {at:g} s is at or after the run's end (horizon_s {horizon:g} s): no fault"
    for fault in FAULTS:
        planes = applies[fault]
        changed = [k for k in keys_of(fault) if getattr(fp, k) != getattr(DEFAULTS, k)]
        if changed and plane not in planes:
            return (
                f"faults.{changed[0]}: the {fault} fault applies to {', '.join(planes)}, not to control plane {plane}"
            )
        if changed and not on(fp, fault):
            size = "worker_death_workers" if fault == "worker_death" else fault + "_s"
            return f"faults.{changed[0]}: set, but faults.{size} is 0, so the {fault} fault is off; set faults.{size}"
    if fp.worker_death_workers > workers:
        return f"faults.worker_death_workers: {fp.worker_death_workers:,} is more than fleet.workers ({workers:,})"
    return None


def window(fp: FaultParams) -> tuple[float, float]:
    """The fault window: the earliest fault's start to the latest one's end (module docstring)."""
    spans = []
    for fault in FAULTS:
        if on(fp, fault):
            at = getattr(fp, fault + "_at_s")
            length = fp.worker_death_detect_s if fault == "worker_death" else getattr(fp, fault + "_s")
            spans.append((at, at + length))
    return min(a for a, _ in spans), max(b for _, b in spans)


def down(fp: FaultParams, fault: str) -> tuple[float, float] | None:
    """(start, end) of one timed fault, or None when it is off."""
    if not on(fp, fault):
        return None
    at = getattr(fp, fault + "_at_s")
    return at, at + getattr(fp, fault + "_s")


METRICS = Metrics(
    Metric("sandboxes_lost", "sandboxes", "sum", "sandboxes on dead workers, gone (faults.worker_death_policy lost)"),
    Metric(
        "sandboxes_restarted",
        "sandboxes",
        "sum",
        "sandboxes on dead workers created again elsewhere (faults.worker_death_policy restart)",
    ),
    Metric(
        "sandboxes_delayed",
        "sandboxes",
        "derived",
        "sandboxes running after the fault began whose time to interactive exceeds the p99 of those running before "
        "it (all of them if none ran before)",
    ),
    Metric(
        "creation_rate_before_fault_per_s",
        "sandboxes/s",
        "derived",
        "sandboxes becoming running per second from the first running to the fault's start (null: none before)",
    ),
    Metric(
        "creation_rate_during_fault_per_s",
        "sandboxes/s",
        "derived",
        "sandboxes becoming running per second within the fault window, over the part of it the burst still ran "
        "(up to its last sandbox running; null: none ran after the fault began)",
    ),
    Metric(
        "tti_fault_p50_s",
        "s",
        "derived",
        "median time to interactive of the sandboxes in flight during the fault (requested before the window's end, "
        "running at or after its start; null: none)",
    ),
    Metric("tti_fault_p99_s", "s", "derived", "p99 of the same (null: none)"),
    Metric(
        "fault_recovery_s",
        "s",
        "derived",
        "fault end to the start of the first faults.rate_bin_s bin after it whose rate is within faults.recovery_band "
        "of the pre-fault rate, or in which the burst's last sandbox ran (0 if all ran before the end); null: it did "
        "not recover by the run's end (see fault_recovered)",
    ),
    Metric(
        "fault_recovered",
        "flag",
        "derived",
        "1: the creation rate recovered (fault_recovery_s is a time); 0: it did not by the run's end",
    ),
)


def measure(fp: FaultParams, requested: np.ndarray, running: np.ndarray, count: int, lost: int, restarted: int) -> dict:
    """The recovery figures of a run with a fault (``METRICS``) from its records (NaN: did not happen)."""
    a, e = window(fp)
    done = ~np.isnan(running)
    t = np.sort(running[done])
    tti = (running - requested)[done]
    ran = running[done]
    first = float(t[0]) if len(t) else NAN
    before = int(np.searchsorted(t, a, side="left"))  # running before the fault began
    rate_before = before / (a - first) if before and a > first else NAN
    during = int(np.searchsorted(t, e, side="left")) - before
    until = min(e, float(t[-1])) if len(t) else a  # the burst may end within the window: the rate while it ran
    rate_during = during / (until - a) if until > a else NAN
    tti_p50, tti_p99 = tti_in_flight(requested, running, a, e)
    after = tti[ran >= a]
    if before:
        p99 = float(np.percentile(tti[ran < a], 99))
        delayed = int((after > p99).sum())
    else:
        delayed = len(after)
    recovery, recovered = NAN, 0
    if len(t) == 0:
        pass
    elif t[-1] < e:  # the burst's last created sandbox ran before the fault ended: nothing left to recover
        recovery, recovered = 0.0, int(len(t) + lost >= count)
        if not recovered:  # some still missing after the end: no bin after the end created anything
            recovery = NAN
    else:
        b = fp.rate_bin_s
        target = (1 - fp.recovery_band) * rate_before if rate_before == rate_before else 0.0
        last = float(t[-1])
        complete = len(t) + lost >= count  # every sandbox the burst still wants ran
        bins = math.floor((last - e) / b) + 1
        edges = e + b * np.arange(bins + 1)
        counts = np.diff(np.searchsorted(t, edges, side="left"))
        for i, k in enumerate(counts):
            if (k / b >= target and k > 0) or (complete and edges[i + 1] > last):
                recovery, recovered = float(i * b), 1
                break
    return {
        "sandboxes_lost": lost,
        "sandboxes_restarted": restarted,
        "sandboxes_delayed": delayed,
        "creation_rate_before_fault_per_s": None if rate_before != rate_before else rate_before,
        "creation_rate_during_fault_per_s": None if rate_during != rate_during else rate_during,
        "tti_fault_p50_s": tti_p50,
        "tti_fault_p99_s": tti_p99,
        "fault_recovery_s": None if recovery != recovery else recovery,
        "fault_recovered": recovered,
    }


def tti_in_flight(requested: np.ndarray, running: np.ndarray, a: float, e: float) -> tuple[float | None, float | None]:
    """The p50 and p99 time to interactive of the sandboxes in flight during [a, e) (module docstring), or None each
    when there are none; also taken from a run without the fault over the same window (experiments/faults.py)."""
    inflight = (requested < e) & (running >= a)  # NaN compares false: not requested, or not running
    tti = (running - requested)[inflight]
    if not len(tti):
        return None, None
    return float(np.percentile(tti, 50)), float(np.percentile(tti, 99))
