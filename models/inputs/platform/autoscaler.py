"""Containers and the autoscaler that adds and removes them (docs/sources.md §1 "Autoscaler"; docs guide/scale).

Every ``interval_s`` (at a random phase) the autoscaler compares the containers it has (starting or ready) with
the number its owner wants (a Function: inputs in the system ÷ target_inputs; an HTTP server: recent
concurrency ÷ target_concurrency), plus ``buffer_containers``, within [min_containers, max_containers]. It adds
at most ``scaleup_step`` containers per decision (0: no cap) beyond those it keeps warm (``min_containers``, added
at once), and no more than its launch bucket allows
(``launch_rate_per_s`` after ``launch_burst`` at once: containers are placed on workers, not conjured; the rest at
the next decisions); each becomes ready after a cold start drawn from ``cold_start`` (or, with ``program``, from
the container-start model of models/coldstart.py). A container idle
for longer than ``scaledown_window_s`` is removed at the next decision while the pool is above what is wanted.

Work that reaches an empty pool triggers a decision at once (docs/sources.md §1: the first input or request triggers a
cold start). By default that decision sees only what has arrived so far: the first input of a same-instant burst. With
``burst_aware`` (an assumption, a calibration target; off by default) it is taken once, after the events already
scheduled for the current instant, so that it sees the whole burst the callers submitted at that instant (the
closed-loop callers submit their calls in flight in one go) and sizes the pool to it; with ``gather_s`` > 0 it is taken
that long after the first work arrived, so that a burst the network legs spread over a fraction of a second is seen
whole too (a short gathering window: an assumption, a candidate of calibration/candidates.py). What a Function "wants"
is set by ``size_to`` (models/inputs/platform/function.py): inputs in the system (default) or those its start limit can
start within one interval; the HTTP server has no start limit and ignores it.

All the autoscaled pools of one run share one workspace's cap and placement rate (models/inputs/platform/workspace.py).

Left out: the early shrink of a well over-provisioned pool and placement on workers (§2).

A decision runs after every other event at its instant (``Sim.schedule_late``): it sees all that happened then, and
its place among same-instant events does not depend on when it was scheduled.

Idle time is free. Decisions fall on a fixed grid (the phase, then every ``interval_s``), but one that cannot change
anything is not simulated: after a decision the pool sleeps until the first grid point where one could, so a run costs
events in proportion to its work, not to simulated time ÷ interval. A decision can act only if the wanted containers
differ from those the pool has: more (it launches: woken by the owner's ``poke`` when its load changes), or fewer with a
container idle for the scaledown window (woken at the grid point when the earliest can be: no earlier than the least
idle_since seen at the last decision, or that decision's time, plus the window; with none idle, woken when one goes
idle: ``went_idle``). An owner whose wanted count moves with time alone (a Function with inputs pending under a start
limit that sizes the pool; the HTTP server's sliding window of peaks) is decided at every grid point. The grid points
are the same floating-point sums whether or not a decision is skipped (``DecisionGrid``), and a skipped decision would
have drawn nothing and changed nothing, so results are identical: the ``idle_decisions`` shortcut
(models/inputs/shortcuts.py), proven by the differential tests (tests/models/inputs/test_shortcuts.py) against runs with
``shortcuts = "all,-idle_decisions"``. A container that becomes ready with nothing to run wakes a sleeping pool too (it
may retire without any change of load).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from models.inputs.platform.autoscaler_params import AutoscalerParams
from models.inputs.shortcut_names import IDLE_DECISIONS
from sim.engine import Handle, Sim
from sim.limiter import TokenBucket
from sim.rng import Streams
from sim.stats import TimeBins

if TYPE_CHECKING:
    from models.inputs.platform.workspace import Workspace


class Container:
    __slots__ = ("cpu_free", "crashed", "idle_since", "listed", "retired", "running")

    def __init__(self, now: float) -> None:
        self.running = 0  # inputs (or requests) in progress
        self.cpu_free = 0.0  # the web server's CPU is busy until then (models/inputs/platform/proxy.py)
        self.idle_since = now
        self.retired = False
        self.crashed = False  # it crashed (models/inputs/platform/faults.py): gone with the inputs on it
        self.listed = False  # in its owner's list of containers with spare capacity


class ContainerPool:
    """The containers of one Function (or one web server), scaled by the autoscaler."""

    def __init__(
        self,
        sim: Sim,
        params: AutoscalerParams,
        streams: Streams,
        name: str,
        wanted: Callable[[], int],
        on_ready: Callable[[Container], None],
        fixed: int = 0,
        steady: Callable[[], bool] | None = None,
        demand: tuple[Callable[[], int], Callable[[int], int]] | None = None,
    ) -> None:
        """``wanted``: the containers the owner wants now. ``steady``: whether that count changes only with the
        owner's load, and ``demand``: that load now and the wanted count at a load, (load(), wanted_at(n)); with
        both the pool may sleep, and the owner pokes it when its load leaves [quiet_lo, quiet_hi] (None: every grid
        point is decided)."""
        self.sim = sim
        self.p = params
        self.wanted = wanted
        self.on_ready = on_ready
        self.ready: list[Container] = []
        self.starting = 0
        self.peak = 0
        self.cold_starts = 0
        # container-seconds (what Modal bills, docs/sources.md §6: a container from its start, cold start included,
        # until it is removed, busy or idle): ∫ size dt, accumulated when the size changes
        self._billed = 0.0
        self._since = 0.0
        # the measurement window's bounds (the run's part sets them): container-seconds up to each, kept as the
        # billing passes it (the steady cost per hour is the window's)
        self.marks: tuple[float, ...] = ()
        self._at_mark: dict[float, float] = {}
        self.bins: TimeBins | None = None  # container-seconds per bin of the window (the steady cost's MSER-5 series)
        self.fixed = fixed  # always-warm containers, no autoscaling
        self.workspace: Workspace | None = None  # the run's, when it caps autoscaled containers (Workspace sets it)
        self._deferred = False  # burst_aware: a scale-from-zero decision is scheduled for the end of this instant
        if params.program:  # the container-start model of a named program (models/coldstart.py)
            from models.coldstart import Starter, load_program
            from sim.scenario import ScenarioError

            try:
                program = load_program(params.program, params.program_mode)
            except ScenarioError as e:
                raise ScenarioError(f"autoscaler.program: {e}") from None
            self._cold_start = Starter(program, streams, f"coldstart/{name}").sampler(lambda: sim.now)
        else:
            self._cold_start = params.cold_start.sampler(streams.get(f"cold_start/{name}"))
        # The autoscaler's loop runs on its own clock: the first decision falls at a random point of an interval.
        self._phase = float(streams.get(f"autoscaler/{name}").uniform(0.0, params.interval_s))
        self._steady = steady if IDLE_DECISIONS in sim.shortcuts and demand else None
        self._demand = demand
        # while asleep, the owner's loads for which no decision could act: outside, it pokes (inf: it never does)
        self.quiet_lo, self.quiet_hi = -math.inf, math.inf
        self.asleep = False  # the next decision is not at the next grid point: a poke may bring it earlier
        self._grid = self._phase  # the last grid point decided (or the first, before any)
        self._grid_points = DecisionGrid(self._phase, params.interval_s)
        self._due = math.inf  # the grid point of the scheduled decision
        self._decision: Handle | None = None  # its entry (cancelled when an earlier one supersedes it)
        self._retire_from = math.inf  # no container can reach its scaledown window before this time
        # containers are placed at a bounded rate (launch_rate_per_s): a decision launches what the bucket allows,
        # the next one the rest
        rate = params.launch_rate_per_s
        self._launches = TokenBucket(rate, params.launch_burst) if rate > 0 else None
        if fixed:  # an always-warm pool of `fixed` containers, no autoscaling (the mmc preset)
            for _ in range(fixed):
                self._ready(False)
        else:
            self._schedule(self._phase)

    @property
    def size(self) -> int:
        return len(self.ready) + self.starting

    def _bill(self) -> None:
        now, size = self.sim.now, self.size
        for m in self.marks:
            if self._since < m <= now:
                self._at_mark[m] = self._billed + size * (m - self._since)
        if self.bins is not None:
            self.bins.add(self._since, now, size)
        self._billed += size * (now - self._since)
        self._since = now

    def container_seconds(self, at: float | None = None) -> float:
        """Container-seconds from the start of the run to ``at`` (default: now; a mark passed, or a time since the
        size last changed)."""
        at = self.sim.now if at is None else at
        if at in self._at_mark:
            return self._at_mark[at]
        if at <= 0.0:
            return 0.0
        if at < self._since:
            raise ValueError(f"container-seconds at {at}: before the last change ({self._since}) and not a mark")
        return self._billed + self.size * (at - self._since)

    def container_bins(self, at: float) -> np.ndarray:
        """Container-seconds per bin of the window (``bins``, which the run's part sets) up to ``at`` (≥ the last
        change)."""
        bins = self.bins
        assert bins is not None, "container_bins: the run's part sets the window's bins first"
        return bins.upto(self._since, at, self.size)

    @property
    def changed_at(self) -> float:
        """When the size last changed (a launch or a removal)."""
        return self._since

    def settled(self) -> bool:
        """Whether nothing is left to remove: none starting, and no more than the pool keeps with no load (its
        min_containers)."""
        return self.fixed > 0 or (self.starting == 0 and self.size <= self._clamp(0))

    def launch(self, n: int) -> None:
        """Start ``n`` containers now; each is ready after its cold start."""
        self._bill()
        if self.workspace is not None:
            self.workspace.resize(n)
        for _ in range(n):
            self.starting += 1
            self.cold_starts += 1
            self.sim.call_in(self._cold_start(), self._ready, True)
        self.peak = max(self.peak, self.size)

    def lose(self, dead: list[Container]) -> None:
        """Ready containers crashed (models/inputs/platform/faults.py): they leave the pool now, billed to now. A fixed
        pool starts as many again (each after a cold start); an autoscaled one replaces them when it next decides."""
        if not dead:
            return
        self._bill()
        gone = {id(c) for c in dead}
        self.ready = [c for c in self.ready if id(c) not in gone]
        if self.workspace is not None:
            self.workspace.resize(-len(dead))
        if self.fixed:
            self.launch(len(dead))
        else:
            self.poke()

    def scale_from_zero(self) -> None:
        """Work arrived at an empty pool: decide now rather than at the next tick (the first input or
        request triggers a cold start, docs/sources.md §1)."""
        if self.size == 0:
            if not self.p.burst_aware:
                self.decide()
            elif not self._deferred:
                self._deferred = True
                self.sim.call_at(self.sim.now + self.p.gather_s, self._decide_from_zero)

    def _decide_from_zero(self, _arg: None) -> None:
        """burst_aware: the deferred scale-from-zero decision, once the instant's burst has been submitted."""
        self._deferred = False
        if self.size == 0:
            self.decide()

    def _ready(self, launched: bool) -> None:
        if launched:
            self.starting -= 1
        c = Container(self.sim.now)
        self.ready.append(c)
        self.peak = max(self.peak, self.size)
        self.on_ready(c)
        if self.asleep and c.running == 0:
            self.went_idle()

    def went_idle(self) -> None:
        """A container of a sleeping pool has just become idle (its last input finished, or it is ready with nothing
        to run): if fewer containers are wanted it may retire once idle for the window, although the owner's load
        may not have moved; if as many are wanted, it may once the load falls (without this call a pool that slept
        through either would miss the retirement)."""
        self.poke()

    def decide(self) -> None:
        """One scaling decision."""
        p = self.p
        want = self.wanted()
        if want > 0:
            want += p.buffer_containers
        want = max(want, p.min_containers)
        if p.max_containers:
            want = min(want, p.max_containers)
        if want > self.size:
            add = want - self.size
            if p.scaleup_step:  # the step caps the growth with demand, not the containers kept warm (min_containers)
                add = max(min(p.scaleup_step, add), p.min_containers - self.size)
            if self.workspace is not None:
                add = self.workspace.admit(self.sim.now, add, self._launches)
            elif self._launches is not None:
                add = self._launches.take_up_to(self.sim.now, add)
            self.launch(add)
        elif want < self.size:
            excess = self.size - want
            cutoff = self.sim.now - p.scaledown_window_s
            keep = []
            for c in self.ready:
                if excess and c.running == 0 and c.idle_since <= cutoff:
                    c.retired = True
                    excess -= 1
                else:
                    keep.append(c)
            if len(keep) < len(self.ready):
                self._bill()  # before the size changes
                if self.workspace is not None:
                    self.workspace.resize(len(keep) - len(self.ready))
                self.ready = keep

    # --- the decision grid ------------------------------------------------------------------------------------
    def _schedule(self, t: float, asleep: bool = False) -> None:
        """The next decision at grid point ``t``; ``asleep``: it is not the next grid point, so a poke may bring an
        earlier one."""
        self._due = t
        self._sleep(asleep)
        if self._decision is not None:
            self._decision.cancel()  # superseded (or run already: harmless)
        # after everything else at its instant, whenever it was scheduled: skipping or not, the same order
        self._decision = self.sim.schedule_late(t, self._tick, t)

    def _sleep(self, asleep: bool) -> None:
        self.asleep = asleep
        if not asleep:
            self.quiet_lo, self.quiet_hi = -math.inf, math.inf
            return
        # the loads around the present one at which the wanted count stays where it is relative to the size
        demand = self._demand
        assert demand is not None, "a pool sleeps only with its owner's demand (_steady is set with it)"
        load, wanted_at = demand
        n, size = load(), self.size
        want = self._clamp(wanted_at(n))
        self.quiet_hi = _last(n, lambda k: self._clamp(wanted_at(k)) <= size, up=True)
        if want == size:
            self.quiet_lo = _last(n, lambda k: self._clamp(wanted_at(k)) >= size, up=False)
        elif self._due == math.inf:  # fewer wanted, none idle yet: a container that goes idle pokes (went_idle)
            self.quiet_lo = -math.inf
        else:  # fewer wanted, a retirement already scheduled at the earliest it can be
            self.quiet_lo = -math.inf

    def _tick(self, t: float) -> None:
        self._grid = t
        self.decide()
        nxt = t + self.p.interval_s
        if self._steady is None or not self._steady():
            self._schedule(nxt)
            return
        # the least idle_since of the idle containers, plus the window: none retires before
        idle = [c.idle_since for c in self.ready if c.running == 0]
        self._retire_from = (min(idle) if idle else math.inf) + self.p.scaledown_window_s
        want, size = self._clamped(), self.size
        if want > size:
            self._schedule(nxt)
        elif want < size and self._retire_from < math.inf:
            self._schedule(self._grid_points.at_or_after(max(nxt, self._retire_from), t), asleep=True)
        else:
            self._due = math.inf
            self._sleep(True)

    def poke(self, unsteady: bool = False) -> None:
        """The owner's load changed while the pool sleeps: schedule the first grid point where a decision could act
        (``unsteady``: the wanted count now moves with time alone, so the next grid point)."""
        want, size = self._clamped(), self.size
        if want > size or unsteady:
            target = self.sim.now
        elif want < size:
            # an idle container retires no earlier than the least idle_since seen at the last decision (or that
            # decision's time, for containers idle since) plus the window
            target = max(self.sim.now, min(self._retire_from, self._grid + self.p.scaledown_window_s))
        else:
            if self.asleep:  # nothing to decide now: watch the loads around this one (the idle set has changed)
                self._sleep(True)
            return
        if target > self._due - 0.5 * self.p.interval_s:
            return  # the decision already scheduled is the first grid point at or after target (or earlier)
        t = self._grid_points.at_or_after(max(target, math.nextafter(self._grid, math.inf)), self.sim.now)
        if t < self._due:
            self._schedule(t, asleep=t > self._grid + self.p.interval_s)

    def _clamped(self) -> int:
        return self._clamp(self.wanted())

    def _clamp(self, want: int) -> int:
        """The wanted count within the pool's bounds: plus the buffer (under load), at least min, at most max."""
        p = self.p
        if want > 0:
            want += p.buffer_containers
        want = max(want, p.min_containers)
        return min(want, p.max_containers) if p.max_containers else want


def _last(n: int, ok: Callable[[int], bool], up: bool) -> float:
    """From ``n`` (where ``ok`` holds) going up (or down), the last integer where the monotone ``ok`` still holds:
    doubling steps, then bisection (inf or -inf beyond 2^40: it holds for every load)."""
    sign = 1 if up else -1
    good, step = n, 1
    while ok(n + sign * step):
        good = n + sign * step
        step *= 2
        if step > 2**40:
            return sign * math.inf
        if not up and good <= 0:
            return -math.inf  # holds down to no load at all
    bad = n + sign * step
    while abs(bad - good) > 1:
        mid = (good + bad) // 2
        if ok(mid):
            good = mid
        else:
            bad = mid
    return good


class DecisionGrid:
    """The decision times: the phase, then each plus ``interval`` in turn, summed in floating point exactly as a loop
    of timeouts does (numpy's accumulate adds in order), CHUNK points at a time, kept as a list of floats (a bisection
    on a list costs a tenth of numpy's searchsorted on one value); points before the clock dropped."""

    CHUNK = 4096

    def __init__(self, phase: float, interval: float) -> None:
        self.interval = interval
        self.points = [phase]

    def at_or_after(self, target: float, now: float) -> float:
        """The first grid point ≥ ``target`` (≥ ``now``, the clock: earlier points are not asked for again, so a
        chunk wholly before it is summed, to carry the sum on, but not kept)."""
        points = self.points
        if target > points[-1]:
            kept = points[bisect_left(points, now) :]
            last = points[-1]
            steps = np.full(self.CHUNK, self.interval)
            while target > last:
                steps[0] = last + self.interval
                chunk = np.add.accumulate(steps)
                last = float(chunk[-1])
                if last >= now:
                    kept += chunk.tolist()
            self.points = points = kept
        return points[bisect_left(points, target)]


def containers_for(load: float, per_container: int) -> int:
    return math.ceil(load / per_container) if load > 0 else 0
