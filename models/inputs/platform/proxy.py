"""The HTTP proxy and the web server's containers: the ``server`` approach's way (docs/sources.md §1, way 4).

The approach is models/inputs/approaches/server.py; the parameters, models/inputs/platform/proxy_params.py.

Requests bypass the input queue, so no accept or start limit applies. The proxy sends a request to the ready container
with the fewest requests in progress (of equals, the first to have become ready), if it has fewer than
``max_concurrency``; with no ready container it answers 503 (and a request reaching an empty pool triggers a cold
start); when every ready container is at ``max_concurrency`` it answers 429. The autoscaler aims at
``target_concurrency`` requests per container, taking the peak concurrency seen over ``scaleup_window_s`` (requests
answered 503 count as demand). Serialization, retries and timeouts are the client's (models/inputs/callers/clients.py).

Container CPU (off by default: ``server.container_cpu`` and ``server.cpu_per_request_s`` both 0). With both > 0,
each request needs ``cpu_per_request_s`` core-seconds of CPU (parsing, routing, serialization: everything but the
handler's sleep) on its container, before its work. The container's CPU serves this work one request at a time, in
arrival order (one uvicorn event loop: a single server, FCFS), at ``container_cpu`` core-seconds per second; so a
request's CPU phase lasts cpu_per_request_s ÷ container_cpu and waits for the requests before it. (A server running
several worker processes on a multi-core container would serve them in parallel: not modelled.) The proxy still
picks the container with the fewest requests in progress. ``container_cpu`` is the reference test's ``cpu=1``
(docs/sources.md §1); ``cpu_per_request_s`` is an assumption and a calibration target.

With ``autoscaler.burst_aware``, the requests answered 503 at one instant count together as demand (without it each
counts as one request more than those in progress), so that the deferred scale-from-zero decision sees the burst.

The proxy's choice costs O(log containers) per request, not a scan of the ready list: a heap holds a key per ready
container, (requests in progress, ready order) packed in one integer, least first, so its top is the container a scan
(``min`` over the ready list by requests in progress: the first of equals in ready order) would pick. The pool
appends a container to its ready list when it becomes ready and removes only retired ones, keeping the order, so
ready order is the order in which containers became ready. A request replaces its container's key at the top; a
finished request pushes the new key and leaves the old one behind, stale (the count it holds is no longer the
container's), like the keys of retired containers: stale keys are dropped when they reach the top, and all of them
in one linear rebuild once the heap holds more than twice as many keys as containers plus ``REBUILD_SLACK``.
A finished request's new key is held back while its caller is told (``_freed``): a closed-loop client sends its next
request then, and when the held key is at most the heap's top that request goes to the same container (the heap holds
every ready container's key, so nothing else is less), which leaves the heap as it was; else the key goes in and the
choice is the heap's. tests/models/inputs/test_server.py checks the choice against the scan.

Each request crosses the proxy twice (in, and back with the response), each hop lognormal around
``proxy_latency_s`` with spread ``proxy_sigma`` (both assumptions), drawn from its client's stream
(``proxy/client-i``); the container's CPU serves requests in the order the proxy sent them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from heapq import heapify, heappop, heappush, heapreplace
from typing import Final

from models.inputs.platform.autoscaler import AutoscalerParams, Container, ContainerPool, containers_for
from models.inputs.platform.proxy_params import ServerParams
from models.inputs.records import CallLog, Row
from sim.dists import LogNormal
from sim.engine import Sim
from sim.rng import PerClient, Streams

# a key (requests in progress above) and a request's finish entry (its call above) hold the container's ready order in
# their low bits: fewer than 2^32 containers per run
ORDER_BITS: Final = 32
ORDER_ONE: Final = 1 << ORDER_BITS  # one request in progress, in a key
ORDER_MASK: Final = ORDER_ONE - 1
REBUILD_SLACK = 64  # stale keys allowed beyond one per ready container before a rebuild


class Proxy:
    """The HTTP proxy and the web server's containers. ``submit`` returns None or "http_503"/"http_429"."""

    def __init__(
        self,
        sim: Sim,
        name: str,
        sp: ServerParams,
        ap: AutoscalerParams,
        streams: Streams,
        log: CallLog,
        on_done: Callable[[int], None],
    ) -> None:
        self.sim = sim
        self.sp = sp
        self.log = log
        self.on_done = on_done
        self.active = 0
        self.started = 0  # requests started so far (the monitor's cumulative series)
        self._burst_aware = ap.burst_aware
        self._n503, self._t503 = 0, -1.0  # burst_aware: requests answered 503 at the instant _t503
        # seconds of CPU per request on one container (0: CPU not modelled)
        self._cpu_s = sp.cpu_per_request_s / sp.container_cpu if sp.cpu_per_request_s > 0 else 0.0
        self._peak_since_decision = 0
        self._peaks: deque[tuple[float, int]] = deque()
        # The ready containers by (requests in progress, ready order), least first: a heap of keys
        # running << ORDER_BITS | order (module docstring, "The proxy's choice").
        self._keys: list[int] = []
        self._by_order: dict[int, Container] = {}  # order -> container, ready ones (and retired ones until rebuilt)
        self._orders = 0  # containers made ready so far: the next one's order
        # the container of the request that has just finished while its caller is told, and its key held back
        # (module docstring): None outside ``_finish``
        self._freed: Container | None = None
        self._freed_key = 0
        self.pool = ContainerPool(sim, ap, streams, name, self._wanted, self._container_ready)
        # each request's two hops through the proxy, from its client's stream (None: constant hops)
        hop = LogNormal(sp.proxy_latency_s, sp.proxy_sigma) if sp.proxy_latency_s > 0 and sp.proxy_sigma > 0 else None
        self._hops = PerClient(streams, "proxy", hop) if hop is not None else None
        # hot-path aliases: the log's columns (the same arrays all run), the cap, the constant hop, the callback (one
        # bound method for every request's entry, not one each)
        self._client, self._started, self._work = log.client, log.started, log.work
        self._cap, self._hop, self._finish_cb = sp.max_concurrency, sp.proxy_latency_s, self._finish
        self._env, self._call_at = sim.env, sim.call_at

    def submit(self, call: Row, style: int = 0) -> str | None:
        if not self.pool.ready:
            return self._unready()
        c = self._freed
        if c is not None and self._freed_key <= self._keys[0]:  # the container just freed is the least (docstring)
            if self._cap and c.running >= self._cap:
                self._unfree()
                return "http_429"
            self._freed = None  # it takes this request: its key in the heap is valid again
            order = self._freed_key & ORDER_MASK
        else:
            if c is not None:
                self._unfree()
            keys, by_order = self._keys, self._by_order
            while True:  # the least valid key: the container min(ready, key=running) picks (the first of equals)
                key = keys[0]
                order = key & ORDER_MASK
                c = by_order[order]
                if c.running == key >> ORDER_BITS and not c.retired:
                    break
                heappop(keys)  # stale: that container's count has changed since, or it has retired
            if self._cap and c.running >= self._cap:
                return "http_429"
            heapreplace(keys, key + ORDER_ONE)  # its key, one request more
        c.running += 1
        self.active += 1
        if self.active > self._peak_since_decision:
            self._peak_since_decision = self.active
        now = self._env._now
        if self._hops is None:
            there = back = self._hop
        else:
            hop = self._hops[self._client[call]]
            there, back = hop(), hop()
        self._started[call] = now + there
        self.started += 1
        if self._cpu_s:  # FCFS on the container's CPU (in the order the proxy sent them), the work, the way back
            cpu_done = max(now + there, c.cpu_free) + self._cpu_s
            c.cpu_free = cpu_done
            self._call_at(cpu_done + self._work[call] + back, self._finish_cb, call << ORDER_BITS | order)
        else:
            self._call_at(now + there + self._work[call] + back, self._finish_cb, call << ORDER_BITS | order)
        return None

    def _unready(self) -> str:
        """No container is ready: 503 (the request counts as demand; at an empty pool it triggers a cold start)."""
        if self._burst_aware:  # the 503s of this instant are one burst of demand
            now = self.sim.env._now
            if now != self._t503:
                self._n503, self._t503 = 0, now
            self._n503 += 1
            self._peak_since_decision = max(self._peak_since_decision, self.active + self._n503)
        else:
            self._peak_since_decision = max(self._peak_since_decision, self.active + 1)
        if not self.pool.starting:  # none ready and none starting: the pool is empty
            self.pool.scale_from_zero()
        return "http_503"

    def _finish(self, request: Row) -> None:
        """A request is done: ``request`` is ``call << ORDER_BITS | order`` (its container's ready order)."""
        call, order = request >> ORDER_BITS, request & ORDER_MASK
        c = self._by_order[order]  # it has a request in progress: not retired, so still there
        c.running -= 1
        if c.running == 0:
            c.idle_since = self._env._now
        self.active -= 1
        self._hold(c, c.running << ORDER_BITS | order)  # held back while the caller is told
        self.on_done(call)
        if self._freed is not None:  # no request took it
            self._unfree()

    def _hold(self, c: Container, key: int) -> None:
        """Hold back the key of ``c``, just freed (a method, not two stores in ``_finish``: there the type checker
        would take ``_freed`` for set after ``on_done``, which a request may have cleared, and the compiled core would
        check it)."""
        self._freed, self._freed_key = c, key

    def _unfree(self) -> None:
        """The held key of the container just freed goes in the heap (its previous key is left behind, stale)."""
        self._freed = None
        keys = self._keys
        heappush(keys, self._freed_key)
        if len(keys) > 2 * len(self.pool.ready) + REBUILD_SLACK:
            self._rebuild()

    def violations(self, now: float) -> list[str]:
        """What its counts break of its limits' bounds (models/inputs/checks/invariants.py): nothing (no accept or start
        limit applies to requests)."""
        return []

    def state(self) -> tuple[int, int, int, str | None]:
        """(running, pending, containers, why): the proxy queues nothing; its limits show as 503 and 429."""
        return self.active, 0, self.pool.size, None

    def _wanted(self) -> int:
        now = self.sim.now
        self._peaks.append((now, self._peak_since_decision))
        self._peak_since_decision = self.active
        while self._peaks and self._peaks[0][0] < now - self.sp.scaleup_window_s:
            self._peaks.popleft()
        peak = max(p for _, p in self._peaks)
        return containers_for(peak, self.sp.target_concurrency)

    def _container_ready(self, c: Container) -> None:
        if self._freed is not None:
            self._unfree()
        order = self._orders  # the pool appends c to its ready list: last in ready order
        self._orders += 1
        self._by_order[order] = c
        heappush(self._keys, order)  # no request in progress

    def _rebuild(self) -> None:
        """Drop the stale keys and the retired containers: one key per ready container (linear time, once per more
        keys added than there are containers, so constant time per request amortized)."""
        if len(self._by_order) > len(self.pool.ready):  # some have retired since
            self._by_order = {o: c for o, c in self._by_order.items() if not c.retired}
        self._keys = [c.running << ORDER_BITS | o for o, c in self._by_order.items()]
        heapify(self._keys)
