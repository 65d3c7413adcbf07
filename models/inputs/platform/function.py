"""A Modal Function's input plane (docs/sources.md §1, "A Modal Function's input plane").

An input is first *accepted* into the Function's queue, then *started* on a container; the two have separate
limits, both per Function:

- accept: a token bucket (rate, burst) per call style, and caps on *pending* inputs (accepted, not started) and,
  for synchronous calls, on inputs in the system (pending + running). Past a limit the call is rejected with a
  kind: ``rate_limited`` or ``queue_full``.
- start: a token bucket of inputs started per second per Function. Modal does not document it ("spawned inputs
  start more slowly than they are accepted"); its rate is fitted to the reference load test (calibration/fit.py),
  its burst is an assumption. With ``limits.start_ramp_per_s`` > 0 its rate ramps up while a backlog persists, up to
  ``limits.start_rate_max``, and falls back by ``limits.start_relax_per_s`` when the backlog clears
  (models/inputs/platform/startlimit.py).
- containers run up to ``max_inputs`` inputs at once (``@modal.concurrent``); inputs go to a container below
  ``target_inputs`` first and burst up to ``max_inputs`` only when every container is at its target. The
  autoscaler (models/inputs/platform/autoscaler.py) sizes the pool to inputs in the system ÷ target_inputs
  (``autoscaler.size_to = "in_system"``), or to the inputs it could run by the time a container launched now is ready
  (``"startable"``: running + min(pending, what the start bucket can start within the expected cold start, or
  ``interval_s`` if longer), so that it does
  not provision containers the start limit would leave without work; an assumption, a calibration target).
- per-call overhead (models/inputs/platform/overhead.py, off by default): ``overhead.dispatch`` between an input's start
  (records' ``started``) and its work on the container, holding its slot. ``overhead.submit`` and ``overhead.result``
  (the end of its work, when the slot is freed, to the caller hearing back) are the callers'
  (models/inputs/callers/clients.py).

Faults (models/inputs/platform/faults.py, off by default): containers crash (``crash``: the inputs on them fail), and a
failed input is retried by the Function as Modal's ``retries`` policy does (``function.retries``: after
``retry_initial_delay_s`` × ``retry_backoff`` ** (retry − 1), at most ``retry_max_delay_s``; modal 1.6.4
retries.py), back into the pending queue (it is not accepted again: an assumption) and through the start limit;
past its retries it fails, error kind ``container_crash``. While a dependency is slow (``faults.slow_*``) an input's
work takes ``slow_factor`` times as long, so added latency includes the slow-down.

Left out: input timeouts on the server side, the 2-minute cancel of a sync call whose caller left, result retention
of spawned calls, and regions.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from heapq import heappush
from typing import Final

from mypy_extensions import mypyc_attr

from models.inputs.platform.autoscaler import AutoscalerParams, Container, ContainerPool, containers_for
from models.inputs.platform.function_params import FunctionParams, LimitParams
from models.inputs.platform.startlimit import RampingStartBucket, StartBucket
from models.inputs.records import CallLog, Row, Time
from sim.engine import NORMAL, Sim
from sim.limiter import TokenBucket
from sim.rng import Streams

# call styles: .remote/.map/.starmap vs .spawn/.spawn_map (Final: compiled, inlined)
SYNC: Final = 0
ASYNC: Final = 1


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled (sim.build), subclassed by uncompiled code
class Function:
    """One deployed Function: limits, pending queue, containers. Callers use ``submit``; the Function calls
    ``on_done(call)`` when a started input's work ends."""

    def __init__(
        self,
        sim: Sim,
        name: str,
        fp: FunctionParams,
        limits: LimitParams,
        ap: AutoscalerParams,
        streams: Streams,
        log: CallLog,
        on_done: Callable[[int], None],
        dispatch: Callable[[], float] | None = None,
    ) -> None:
        self.sim = sim
        self.env = sim.env
        self.on_done = on_done
        # overhead.dispatch's sampler (models/inputs/platform/overhead.py), None when it is 0: no draw
        self._dispatch = dispatch
        # bound once: the per-input path below reads these millions of times
        self._call_at = sim.call_at
        self._heap, self._ids, self._heap_below = sim.heap, sim.ids, sim.direct  # call_at inlined (Sim.heap)
        self._finish_cb = self._finish
        self._wake_cb = self._wake
        self._work = log.work
        self._started_at = log.started
        self.log = log
        self.fp = fp
        # faults.crash (models/inputs/platform/faults.py): the container and style of each input running, kept only then
        self.on: dict[int, tuple[Container, int]] | None = None
        self.tries: dict[int, int] = {}  # the Function's retries of each failed input so far (function.retries)
        self.retried = 0  # retries of failed inputs the Function made
        self.pending: deque[tuple[int, int]] = deque()  # (call, style)
        self.n_pending = [0, 0]
        self.n_running = [0, 0]
        self.started = 0  # inputs started so far (the monitor's cumulative series)
        self.accepted = [0, 0]  # inputs accepted so far by call style (counted only under the accept limits)
        self.accept: list[TokenBucket] | None
        if limits.enabled:
            self.accept = [
                TokenBucket(limits.sync_accept_rate, limits.sync_accept_burst),
                TokenBucket(limits.async_accept_rate, limits.async_accept_burst),
            ]
            self.pending_cap = [limits.sync_pending_cap, limits.async_pending_cap]
            self.in_system_cap = limits.sync_in_system_cap
            if limits.start_ramp_per_s > 0:
                self.start_bucket: StartBucket | None = RampingStartBucket(
                    limits.start_rate,
                    limits.start_burst,
                    limits.start_ramp_per_s,
                    limits.start_rate_max,
                    limits.start_relax_per_s,
                )
            else:
                self.start_bucket = StartBucket(limits.start_rate, limits.start_burst)
        else:
            self.accept = None
            self.start_bucket = None
        # the bucket to tell when a backlog begins and clears, only if it ramps (None: nothing to tell)
        self._ramping = self.start_bucket if isinstance(self.start_bucket, RampingStartBucket) else None
        self._startable = ap.size_to == "startable"
        # size_to = "startable" looks ahead over the time a container launched now needs to become useful: its
        # expected cold start, or the decision interval if that is longer (a program's starts: the interval)
        self._horizon = max(ap.interval_s, 0.0 if ap.program else ap.cold_start.mean)
        self._wake_pending = False
        self._spare: list[Container] = []  # containers below target_inputs (a stack; retired ones skipped)
        self._target = fp.target
        self._max = fp.max_inputs
        self._in_system = 0  # pending + running: what the autoscaler sizes the pool to
        self.pool = ContainerPool(
            sim,
            ap,
            streams,
            name,
            self._wanted,
            self._container_ready,
            fixed=fp.containers,
            steady=self._steady,
            demand=(self._load, self._wanted_at),
        )

    # --- accepting -------------------------------------------------------------------------------------------
    def submit(self, call: Row, style: int = SYNC) -> str | None:
        """Offer an input; return None if accepted, else the rejection kind."""
        now = self.env._now
        accept = self.accept
        if accept is not None:
            n_pending = self.n_pending
            if style == SYNC and n_pending[SYNC] + self.n_running[SYNC] >= self.in_system_cap:
                return "queue_full"
            if n_pending[style] >= self.pending_cap[style]:
                return "queue_full"
            if not accept[style].try_take(now):
                return "rate_limited"
            self.accepted[style] += 1
        self._admit(call, style, now)
        return None

    def _admit(self, call: Row, style: int, now: Time) -> None:
        """An accepted input (or one the Function retries) joins: it starts at once if it can, else it waits."""
        self._in_system += 1
        if self._in_system > self.pool.quiet_hi:
            self.pool.poke()
        pending = self.pending
        if not pending:  # nothing waits: start at once if a container has room and a start token is there
            spare = self._spare
            c = spare[-1] if spare else None
            if c is None or c.running >= self._target or c.retired:
                c = self._container() if spare or self._max > self._target else None  # None: no container has room
            bucket = self.start_bucket
            if c is not None and (bucket is None or bucket.try_take(now)):
                c.running += 1
                self._start(call, style, c, now)
                return
        pending.append((call, style))
        self.n_pending[style] += 1
        if len(pending) == 1:
            # Otherwise the queue is already waiting for a container or a start token, and whatever brings one
            # (a finished input, a ready container, the limiter's wake-up) starts it.
            if self.pool.asleep and not self._steady():
                self.pool.poke(unsteady=True)  # a start limit that sizes the pool: decide at every grid point again
            if self._ramping is not None:
                self._ramping.backlog(now, True)
            if not self.pool.ready and not self.pool.starting:
                self.pool.scale_from_zero()
            self._start_pending()

    # --- starting --------------------------------------------------------------------------------------------
    def _container(self) -> Container | None:
        """A container with room: below target first, else any below max_inputs (a burst)."""
        spare = self._spare
        while spare:
            c = spare[-1]
            if c.retired or c.running >= self._target:
                spare.pop()
                c.listed = False
                continue
            return c
        if self._max > self._target:
            for c in self.pool.ready:
                if c.running < self._max:
                    return c
        return None

    def _start_pending(self) -> None:
        now = self.env._now
        pending = self.pending
        bucket = self.start_bucket
        while pending:
            c = self._container()
            if c is None:
                return  # the autoscaler adds capacity
            if bucket is not None and not bucket.try_take(now):
                if not self._wake_pending:
                    self._wake_pending = True
                    # not before the next representable time: one below the clock's resolution would wake forever
                    t = max(now + bucket.next_token_in(now), math.nextafter(now, math.inf))
                    if len(self._heap) < self._heap_below:  # call_at, inlined: a backlog wakes at every token
                        heappush(self._heap, (t, NORMAL, next(self._ids), self._wake_cb, None))
                    else:
                        self._call_at(t, self._wake_cb)
                return
            call, style = pending.popleft()
            self.n_pending[style] -= 1
            c.running += 1
            self._start(call, style, c, now)
        if self._ramping is not None:
            self._ramping.backlog(now, False)  # the queue is empty: the backlog has cleared

    def _start(self, call: Row, style: int, c: Container, now: Time) -> None:
        """Start ``call`` on container ``c``, whose slot it holds (counted in ``c.running``): every start, this is
        the per-call hot path."""
        self.n_running[style] += 1
        self._started_at[call] = now
        self.started += 1
        if self.on is not None:
            self.on[call] = (c, style)
        end = now + self._work[call]
        if self._dispatch is not None:
            end += self._dispatch()
        heap = self._heap
        if len(heap) < self._heap_below:  # call_at, inlined
            heappush(heap, (end, NORMAL, next(self._ids), self._finish_cb, (call, style, c)))
        else:
            self._call_at(end, self._finish_cb, (call, style, c))

    def _wake(self, _arg: None) -> None:
        self._wake_pending = False
        self._start_pending()

    def _finish(self, arg: tuple[Row, int, Container]) -> None:
        call, style, c = arg
        if self.on is not None:
            if c.crashed:
                return  # it failed with its container (crash): this end never comes
            del self.on[call]
        now = self.env._now
        self.n_running[style] -= 1
        self._in_system -= 1
        pool = self.pool
        if self._in_system < pool.quiet_lo:
            pool.poke()
        pending = self.pending
        bucket = self.start_bucket
        if pending and (bucket is None or bucket.try_take(now)):
            # The freed slot takes the next pending input before the caller hears back. It is the right slot:
            # with inputs pending, every other container is full (or at target, and this one is no emptier).
            nxt, nstyle = pending.popleft()
            self.n_pending[nstyle] -= 1
            self._start(nxt, nstyle, c, now)  # in the freed slot (c.running unchanged)
            if not pending and self._ramping is not None:
                self._ramping.backlog(now, False)
        else:
            c.running -= 1
            if c.running == 0:
                c.idle_since = now
                if pool.asleep:
                    pool.went_idle()
            if not c.listed and c.running < self._target:
                c.listed = True
                self._spare.append(c)
            if pending:  # the start limit refused at this instant (above); asked again now, it would again
                if self._wake_pending:
                    self._container()  # all _start_pending would do: its wake-up is on the way
                else:
                    self._start_pending()  # schedules the limiter's wake-up
        self.on_done(call)  # the result sets out for the caller (overhead.result: the callers'); the slot is free

    # --- faults (models/inputs/platform/faults.py)
    # ---------------------------------------------------------------------
    def crash(self, n: int) -> int:
        """``n`` of the ready containers (the first ones; all if fewer) crash now: they leave the pool at once and
        the inputs on them fail, each retried by ``function.retries`` or failed for good. Returns the inputs lost."""
        dead = self.pool.ready[:n]
        for c in dead:
            c.crashed = c.retired = True
        self.pool.lose(dead)
        on = self.on
        assert on is not None, "crash needs the inputs' containers (faults.crash sets Function.on)"
        failed = [(call, style) for call, (c, style) in on.items() if c.crashed]
        for call, style in failed:
            del on[call]
            self.n_running[style] -= 1
            self._in_system -= 1
            self._failed(call, style)
        if self._in_system < self.pool.quiet_lo:
            self.pool.poke()
        return len(failed)

    def _failed(self, call: int, style: int) -> None:
        """A started input failed: the Function retries it after modal.Retries' delay, or it fails for good (its
        caller hears of it as it would of a result: kind ``container_crash``)."""
        retry = self.tries.get(call, 0) + 1
        if retry <= self.fp.retries:
            self.tries[call] = retry
            self.retried += 1
            self.sim.call_in(self.fp.retry_delay(retry), self._retry, (call, style))
        else:
            self.log.kind[call] = "container_crash"
            self.on_done(call)

    def _retry(self, arg: tuple[int, int]) -> None:
        call, style = arg
        self._admit(call, style, self.env._now)

    def violations(self, now: float) -> list[str]:
        """What this Function's counts break of its limits' bounds by time ``now`` (models/inputs/checks/invariants.py):
        a token bucket of rate r and burst b admits at most b + r·t in t seconds; the start bucket's rate never
        passes its ceiling."""
        out = []
        if self.accept is not None:
            for style, bucket in enumerate(self.accept):
                most = bucket.burst + bucket.rate * now
                if self.accepted[style] > most * (1 + 1e-9) + 1e-6:
                    out.append(
                        f"accepted {self.accepted[style]:,} {('sync', 'async')[style]} inputs by t = {now:g} s, "
                        f"more than the accept limit admits ({most:,.1f})"
                    )
        starts = self.start_bucket
        if starts is not None:
            if isinstance(starts, RampingStartBucket):
                peak = starts.peak_rate
                if peak > starts.cap * (1 + 1e-12):
                    out.append(f"start rate {peak:,.1f}/s above its ceiling {starts.cap:,.1f}/s")
                most = starts.burst + starts.peak_rate * now
            else:
                most = starts.burst + starts.rate * now
            if self.started > most * (1 + 1e-9) + 1e-6:
                out.append(
                    f"started {self.started:,} inputs by t = {now:g} s, more than the start limit admits ({most:,.1f})"
                )
        return out

    def state(self) -> tuple[int, int, int, str | None]:
        """(running, pending, containers, why pending inputs wait): what models/inputs/platform/monitor.py samples."""
        pending = len(self.pending)
        why = None
        if pending:  # a container with room: the start limit holds them back; else the pool is full
            why = "start_rate" if any(c.running < self._max for c in self.pool.ready) else full_pool_wait(self.pool)
        return sum(self.n_running), pending, self.pool.size, why

    # --- autoscaling -----------------------------------------------------------------------------------------
    def _load(self) -> int:
        return self._in_system

    def _wanted_at(self, n: int) -> int:
        """The containers wanted at ``n`` inputs in the system, none pending (what a sleeping pool watches)."""
        return containers_for(n, self._target)

    def _wanted(self) -> int:
        if self.pending and self._startable and self.start_bucket is not None:
            # size_to = "startable": running inputs plus the pending ones the start limit can start before a
            # container launched now is ready; the rest of the queue would find no start token, whatever the containers
            pending = len(self.pending)
            startable = self.start_bucket.startable_within(self.env._now, self._horizon)
            return containers_for(self._in_system - pending + min(pending, startable), self._target)
        return containers_for(self._in_system, self._target)

    def _steady(self) -> bool:
        """Whether the wanted containers change only when the load does (then the pool may sleep between pokes): not
        while inputs wait under a start limit that sizes the pool (size_to = "startable": tokens refill with time)."""
        return not (self._startable and self.start_bucket is not None and self.pending)

    def _container_ready(self, c: Container) -> None:
        c.listed = True
        self._spare.append(c)
        self._start_pending()


def full_pool_wait(pool: ContainerPool) -> str:
    """Why pending inputs wait when every container is full: the pool is fixed (``containers``), at
    ``max_containers``, or the run's pools
    together at ``workspace.max_containers``, or the autoscaler has more on the way or not yet asked for."""
    if pool.fixed:
        return "containers"
    if pool.p.max_containers and pool.size >= pool.p.max_containers:
        return "max_containers"
    return "workspace_cap" if pool.workspace is not None and pool.workspace.full else "autoscaler"
