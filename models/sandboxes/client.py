"""The benchmark client of a sandbox-creation run and the sandboxes' records (``Creation``: the control planes'
``Client``, models/sandboxes/planes/base.py).

It issues creates in ticks (``client.rate``, at most ``client.concurrency`` out at once), hears each one placed and
when it runs, and marks the span of the run: from the first create request until the last sandbox is running, or
until the end of the run (``horizon_s``) when not all are created (models/sandboxes/summary.py reads it). A burst the
fleet cannot hold (``fleet.allow_overload``; otherwise it is an error before the run) ends as soon as the fleet is
full (its placed sandboxes' start paths are already computed, and they count as created). It also carries out
``faults.worker_death`` (models/sandboxes/faults.py), which every plane takes: the sandboxes on the dead workers are
lost or created again.
"""

from __future__ import annotations

import heapq
from array import array

import numpy as np

from models.sandboxes import faults
from models.sandboxes.fleet import Fleet, Meter
from models.sandboxes.planes import ControlPlane
from models.sandboxes.scenario import SandboxScenario
from sim.engine import Sim
from sim.stats import NAN


class Creation:
    """The benchmark client and the sandboxes' records: issues creates, hears them accepted and running (the planes'
    ``Client``: models/sandboxes/planes/base.py)."""

    def __init__(self, sim: Sim, sc: SandboxScenario) -> None:
        self.sim = sim
        self.sc = sc
        n = sc.sandboxes.count
        # raw doubles (array.array), not lists of float objects: ten million sandboxes hold 240 MB, not 1 GB
        self.requested = array("d", [NAN]) * n  # first create attempt
        self.placed = array("d", [NAN]) * n  # the create call returned: placed on a worker and starting
        self.running = array("d", [NAN]) * n  # able to run user code
        self.issued = 0
        self.outstanding = 0
        self.placements = 0
        self.last_running = 0.0
        self._tokens = 0.0
        self.cp: ControlPlane | None = None
        self.fleet: Fleet | None = None
        self.meters: dict[str, Meter] = {}
        # (time, busy time of each resource) at the start and the end of the span (module docstring)
        self.span_start: tuple[float, dict[str, float]] | None = None
        self.span_end: tuple[float, dict[str, float]] | None = None
        self._returns: list[float] = []  # a heap: when each create call still out returns (placed ones)
        self.full = False  # the run ended because the fleet was full for good (module docstring)
        self.lost = 0  # sandboxes gone with their workers (faults.worker_death, policy lost)
        self.restarted = 0  # sandboxes created again after their workers died (policy restart)
        self.worker: array | None = None  # the worker of each placed sandbox (only with faults.worker_death)
        fp = sc.faults
        if faults.on(fp, "worker_death"):
            self.worker = array("l", [-1]) * n
            sim.call_at(fp.worker_death_at_s, self._workers_die, None)

    def reading(self, at: float | None = None) -> tuple[float, dict[str, float]]:
        """``at`` (default now), and the busy time of every resource by then (after the run's end: the service
        booked, as it will have run by then)."""
        at = self.sim.env._now if at is None else at
        return at, {k: m.busy_by_now(at) for k, m in self.meters.items()}

    # the client as a Meter: a token bucket holding one tick's refill (at least one token) refilled at its rate, so
    # each create issued is 1/rate of its time and a span of t seconds holds at most burst/rate + t
    def busy_by_now(self, now: float | None = None) -> float:
        return self.issued / self.sc.client.rate

    def capacity(self, span: float) -> float:
        c = self.sc.client
        return max(1.0, c.rate * c.tick_s) / c.rate + span

    def start(self) -> None:
        self.sim.call_in(0.0, self._tick)

    def _tick(self, _arg: None) -> None:
        c = self.sc.client
        now = self.sim.env._now
        while self._returns and self._returns[0] <= now:  # create calls back by now
            heapq.heappop(self._returns)
            self.outstanding -= 1
        self._tokens = min(self._tokens + c.rate * c.tick_s, max(1.0, c.rate * c.tick_s))
        n = min(int(self._tokens), c.concurrency - self.outstanding, self.sc.sandboxes.count - self.issued)
        if n > 0 and self.span_start is None:
            self.span_start = self.reading()
        if n > 0:
            first = self.issued
            self.issued += n
            self.outstanding += n
            self._tokens -= n
            requested = self.requested
            for sb in range(first, first + n):
                requested[sb] = now
            self.cp.submit_many(range(first, first + n))
        if self.issued < self.sc.sandboxes.count:
            self.sim.call_in(c.tick_s, self._tick)

    def placed_at(
        self, sandbox: int, worker: int, returns: float, starts: float, accepted: float | None = None
    ) -> None:
        """The control plane placed the sandbox: the worker accepted it at ``accepted`` (default now), its create
        call returns to the client at ``returns`` and the worker begins its start path at ``starts`` (both >=
        accepted). Its running time is known at once (the start path is computed, not simulated step by step); the
        run's end waits for the last one."""
        self.placed[sandbox] = returns
        heapq.heappush(self._returns, returns)  # the client counts it outstanding until then
        accepted = self.sim.env._now if accepted is None else accepted
        if self.worker is not None:
            if self.fleet.dead is not None and self.fleet.dead[worker]:  # accepted, then its worker died (kubernetes)
                self._gone([sandbox], redo=False)
                return
            self.worker[sandbox] = worker
        running = self.running[sandbox] = self.fleet.start(worker, starts, accepted)
        placements = self.placements = self.placements + 1
        if running > self.last_running:
            self.last_running = running
        sp = self.sc.sandboxes
        if sp.lifetime_s > 0:
            self.sim.call_at(running + sp.lifetime_s, self._finished, (sandbox, worker))
        if placements == sp.count:  # all placed: the span ends when the last runs (and the run, if none leave)
            self.sim.call_at(self.last_running, self._end, "stop" if sp.lifetime_s == 0 else "")
        elif sp.lifetime_s == 0 and placements - self.lost == self.fleet.total:
            # the fleet is full and nothing will ever leave it (fleet.allow_overload): every create still out
            # would be rejected for good, so the run ends now (no retry storm while the last starts finish); the
            # sandboxes placed will run at their computed times, and count as created
            self._end("full")

    def placed_on(self, sandbox: int, worker: int) -> None:
        """The control plane placed the sandbox now: the create call returns, and the worker, told by RPC, begins its
        start path once it has handled it (``fleet.rpc_s``)."""
        now = self.sim.env._now
        self.placed_at(sandbox, worker, now, now + self.sc.fleet.rpc_s)

    def _end(self, why: str) -> None:
        """The span ends (the last sandbox placed is running); ``why``: "stop" (all created), "full" (the fleet is
        full for good) or "" (sandboxes come and go until the horizon)."""
        if why == "stop" and self.placements < self.sc.sandboxes.count:  # a worker died since: restarts still to come
            return
        self.full = why == "full"
        # full: the sandboxes placed count as created, so the span runs until the last of them is running
        self.span_end = self.reading(self.last_running if self.full else None)
        if why:
            self.sim.stop()

    def cut(self, end: float) -> None:
        """The records as arrays at the end of the run: a create call not back by ``end`` was not placed, a sandbox
        not running by then was not created (their times were computed ahead, beyond the run)."""
        for name in ("requested", "placed", "running"):
            a = np.asarray(getattr(self, name), dtype=float)
            a[a > end] = NAN
            setattr(self, name, a)
        self.running[np.isnan(self.placed)] = NAN

    def _finished(self, arg: tuple[int, int]) -> None:
        sandbox, worker = arg
        if self.fleet.dead is not None and self.fleet.dead[worker]:  # it went with its worker (faults.worker_death)
            return
        self.fleet.release(worker)
        self.cp.finished(sandbox)

    # --- faults.worker_death (models/sandboxes/faults.py) ----------------------------------------------------------
    def _workers_die(self, _arg: None) -> None:
        fp, now = self.sc.faults, self.sim.env._now
        dead = range(fp.worker_death_workers)
        self.fleet.kill(dead)
        worker = np.asarray(self.worker)
        running = np.asarray(self.running)
        on = (worker >= 0) & (worker < fp.worker_death_workers) & ~np.isnan(running)
        if self.sc.sandboxes.lifetime_s > 0:  # those that finished before now had left their worker
            on &= running + self.sc.sandboxes.lifetime_s > now
        self._gone(np.flatnonzero(on).tolist(), redo=True)

    def _gone(self, sandboxes: list[int], redo: bool) -> None:
        """Sandboxes whose worker died: lost, or (``restart``) created again after the detection delay; ``redo``:
        they were counted placed (a placement after the death was not)."""
        if not sandboxes:
            return
        for sb in sandboxes:
            self.running[sb] = NAN
            self.worker[sb] = -1
        if self.sc.faults.worker_death_policy == "lost":
            self.lost += len(sandboxes)
            if not redo:
                self._count_placement()
            elif self.placements - self.lost == self.fleet.total and self.sc.sandboxes.lifetime_s == 0:
                self._end("full")
            return
        self.restarted += len(sandboxes)
        self.cp.retries += len(sandboxes)
        if redo:
            self.placements -= len(sandboxes)  # placed again later
        self.sim.call_in(self.sc.faults.worker_death_detect_s, self._recreate, sandboxes)

    def _recreate(self, sandboxes: list[int]) -> None:
        for sb in sandboxes:
            self.cp.submit(sb)

    def _count_placement(self) -> None:
        """A placement that ends where it was accepted (lost with its worker): the burst's end checks as in
        ``placed_at``."""
        placements = self.placements = self.placements + 1
        sp = self.sc.sandboxes
        if placements == sp.count:
            self.sim.call_at(max(self.last_running, self.sim.env._now), self._end, "stop" if sp.lifetime_s == 0 else "")
        elif sp.lifetime_s == 0 and placements - self.lost == self.fleet.total:
            self._end("full")
