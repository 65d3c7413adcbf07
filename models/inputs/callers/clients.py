"""The callers of a load test (docs/sources.md §1, the reference load test): what every kind of caller the scenario's
``load`` key names shares (``Load``, read from the ``clients`` section: models/inputs/callers/client_params.py; the
kinds, ``LOADS``: models/inputs/approaches/base.py; closed-loop clients: models/inputs/callers/closedloop.py;
open-loop arrivals and trace replay: models/inputs/callers/arrivals.py). An approach may bring its own callers
(batching's rounds of chunks: models/inputs/approaches/batching.py).

A call leaves its client as one request of its own (``api = "single"``: ``.remote``/``.spawn``) or as an input of the
client's map call (``api = "map"``: ``.map``/``.spawn_map``, with the modal client's batching and retries:
models/inputs/callers/mapcall.py). On the Function path a client's single calls share its one HTTP/2 connection, which
carries at most ``streams`` at once (0: no cap); the rest wait at the client, in order. For the server approach the
client owns an HTTP connection pool of ``connection_limit`` connections instead (``Connections``).

What a caller does with a rejected attempt (its retry policy, ``on_rate_limit``) and with one that is late
(``timeout_s``) is models/inputs/callers/retries.py's: a ``Load`` holds a ``Retries`` and, where timeouts are on, a
``Timeouts``.

On the Function path a call reaches the Function's accept ``overhead.submit`` after it is issued (models/inputs/
overhead.py; a leg of 0: at once, no event); the client learns of a rejection when the call arrives.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import ClassVar, Protocol

from mypy_extensions import mypyc_attr

from models.inputs.callers.client_params import ClientParams
from models.inputs.callers.mapcall import MapCalls
from models.inputs.callers.retries import Retries, Timeouts
from models.inputs.platform.overhead import leg
from models.inputs.platform.overhead_params import OverheadParams
from models.inputs.records import CallLog, Row
from models.inputs.shortcut_names import BACKS
from sim.dists import Dist
from sim.engine import Sim
from sim.rng import PerClient, Streams


class Scenario(Protocol):
    """What the callers read of a load test's scenario (models/inputs/base.py's ``Scenario`` adds the rest)."""

    @property
    def work(self) -> Dist: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def warmup_s(self) -> float: ...
    @property
    def drain_s(self) -> float: ...
    @property
    def clients(self) -> ClientParams: ...
    @property
    def overhead(self) -> OverheadParams: ...


class Target(Protocol):
    def submit(self, call: int, style: int = 0) -> str | None: ...


class Connections:
    """Each client's connections (the server's HTTP pool, ``connection_limit``) or its HTTP/2 connection's streams
    (``streams``), where they can bind: at most ``limit`` of a client's calls out at once, the rest waiting in order;
    ``send`` is told of a waiting call when a connection frees up for it."""

    def __init__(self, clients: int, limit: int, send: Callable[[int], None]) -> None:
        self.limit = limit
        self._used = [0] * clients  # connections (streams) in use, by client
        self._waiting: list[deque[int]] = [deque() for _ in range(clients)]  # calls waiting for one, by client
        self._send = send

    def take(self, client: int, call: int) -> bool:
        """Whether ``call`` of ``client`` takes a connection now; else it waits for one."""
        if self._used[client] >= self.limit:
            self._waiting[client].append(call)
            return False
        self._used[client] += 1
        return True

    def release(self, client: int) -> None:
        """A call of ``client`` gave its connection back: the first call waiting, if any, is sent."""
        self._used[client] -= 1
        if self._waiting[client]:
            self._send(self._waiting[client].popleft())


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled (sim.build), subclassed by uncompiled code
class Load:
    """The callers of one run: issue calls, handle rejections, count what is outstanding. The features that may be
    on are objects it holds (None where off): its ``retries``, ``timeouts``, ``connections`` and map calls."""

    def __init__(
        self,
        sim: Sim,
        sc: Scenario,
        log: CallLog,
        streams: Streams,
        targets: list[Target],
        style: int,
        http: bool,
        clients: Sequence[int] | None = None,
    ) -> None:
        self.sim = sim
        self.env = sim.env
        self.log = log
        self.cp = cp = sc.clients
        self.targets = targets
        self.style = style
        self._http = http
        self.duration = sc.duration_s
        self._w0 = sc.warmup_s  # the window's start (``_windowed``)
        self.streams = streams
        self.work_of = PerClient(streams, "work", sc.work)  # client i's work draws
        self.clients = range(sc.clients.count) if clients is None else clients  # the clients this load drives
        self._copies, self._first = 1, 0  # client i calls targets[i mod copies − first] (``route``)
        self.outstanding = 0  # inputs issued and not yet back: the run ends when none are, after the duration
        self.drained_at: float | None = None  # when the load stopped the clock: nothing in flight, nothing to come
        # on_rate_limit = retry_after is the modal client's on single calls to the Function (retries.py)
        throttled = cp.on_rate_limit == "retry_after" and not http and cp.api == "single"
        self.retries = Retries(cp, streams, sc.duration_s + sc.drain_s, throttled)
        self._call_at = sim.call_at
        self.timeouts = Timeouts(sim, log, cp.timeout_s, self._rejected) if cp.timeout_s else None
        self.rejections: dict[str, int] = {}  # every rejected attempt, retried or not, by kind
        self.lost: dict[str, float] = {}  # input-seconds lost to rejections, by kind (platform/monitor.py)
        # hot-path aliases (the log's columns are the same objects all run)
        self._kinds, self._finished, self._close, self._client = log.kind, log.finished, log.close, log.client
        # .map/.spawn_map: each client's calls leave through its map call (None: one request per call)
        self._map = (
            MapCalls(sim, sc.overhead, streams, style, self._offer, self._map_rejected) if cp.api == "map" else None
        )
        # the client's HTTP connection pool (server) or HTTP/2 connection's streams (Function path), where they bind
        limit = cp.connection_limit if http else cp.streams if self.connected else 0
        binds = self._map is None and self._pool_binds(limit, cp.in_flight)
        self.connections = Connections(cp.count, limit, self._send) if binds else None
        # the entries a subclass may take over with its own way of sending (models/inputs/callers/closedloop.py): every
        # retry's (one bound method, not one each); client → accept on the Function path (overhead.submit; None:
        # the call arrives at once); and what a call whose work ended is told (the result's way back, overhead.result
        # on the Function path, then done)
        self._send_cb = self._send
        self._submit = (
            None if http or self._map is not None else leg(sim, sc.overhead, "submit", streams, self._reach, log.client)
        )
        self.work_ended: Callable[[int], None] = (
            self.done if http else leg(sim, sc.overhead, "result", streams, self.done, log.client) or self.done
        )
        # the ``backs`` shortcut (models/inputs/shortcuts.py): an open loop's call is back after the result leg, drawn
        # from the leg's stream when the work ends, and done then as at its back (``_back_at``): one event fewer
        self._results = PerClient(streams, "overhead/result", sc.overhead.result)
        self._until = sc.duration_s + sc.drain_s  # the run's end: a call back at or after it is never back
        self._last_back = -1.0  # the latest back of the calls done so far (``_back_at``)
        self._drain_cb = self._drain_check
        if BACKS in sim.shortcuts and not http:
            self.work_ended = self._back_at
        # what a closed-loop caller does when a call is back (a subclass's method ``returned``); open loops do nothing
        self._returned: Callable[[int], None] | None = getattr(self, "returned", None)

    @staticmethod
    def _pool_binds(limit: int, in_flight: int) -> bool:
        """Whether a client's connections (or streams) can ever hold a call back (``limit`` 0: no limit)."""
        return limit > 0

    @property
    def abandoned(self) -> int:
        """Inputs whose caller stopped waiting (``clients.timeout_s``)."""
        return self.timeouts.abandoned if self.timeouts is not None else 0

    def route(self, copies: int, first: int = 0) -> None:
        """Client i calls app copy i mod ``copies``, which is ``targets[i mod copies − first]`` (a part holds the
        copies from ``first`` on)."""
        self._copies, self._first = copies, first

    def begin(self) -> None:
        """Issue the calls in flight at the start."""
        self.log.starting = True
        self.start()
        self.log.starting = False

    def start(self) -> None:
        raise NotImplementedError

    # --- sending ---------------------------------------------------------------------------------------------
    def new_call(self, client: int, work: float, items: int = 1, fails: bool = False) -> int:
        log = self.log
        call = log.new(client, self.env._now, work)
        if items != 1:
            log.items[call] = items
        if fails:
            log.kind[call] = "item_failed"  # runs to the end, then reports the failure
        self.outstanding += 1
        self._send(call)
        return call

    def _send(self, call: int) -> None:
        if self.timeouts is not None:
            self.timeouts.arm(call)
        client = self._client[call]
        if self._map is not None:
            self._map.put(client, call)
            return
        connections = self.connections
        if connections is not None and not connections.take(client, call):
            return
        if self._submit is not None:
            self._submit(call)
            return
        kind = self.targets[client % self._copies - self._first].submit(call, self.style)
        if kind is not None:
            if connections is not None:
                connections.release(client)
            self._rejected(call, kind)

    def _reach(self, call: int) -> None:
        """The call reaches its target after ``overhead.submit`` (the Function path: no connection pool)."""
        kind = self.targets[self._client[call] % self._copies - self._first].submit(call, self.style)
        if kind is not None:
            if self.connections is not None:
                self.connections.release(self._client[call])
            self._rejected(call, kind)

    def _offer(self, call: int) -> str | None:
        """Hand ``call`` to its target as it arrives: None (taken) or the rejection's kind (a map call's input)."""
        return self.targets[self.log.client[call] % self._copies - self._first].submit(call, self.style)

    def _map_rejected(self, call: int, kind: str, delay: float) -> None:
        """A map call's input was rejected; the client tries it again after ``delay``
        (models/inputs/callers/mapcall.py)."""
        self.rejections[kind] = self.rejections.get(kind, 0) + 1
        self.log.attempts[call] += 1
        self.lost[kind] = self.lost.get(kind, 0.0) + self._windowed(delay)

    def _rejected(self, call: int, kind: str) -> None:
        """An attempt of ``call`` was rejected (or timed out): tried again after the retries' wait, or failed."""
        self.rejections[kind] = self.rejections.get(kind, 0) + 1
        if self.timeouts is not None and not self.timeouts.heard(call):
            return  # an abandoned input rejected as it arrives: nobody hears of it
        log = self.log
        attempt = log.attempts[call]
        now = self.env._now
        delay = self.retries.after(self._client[call], kind, attempt, log.issued[call], now)
        if delay is None:
            self.lost[kind] = self.lost.get(kind, 0.0) + self._windowed(self.loss_of_failure(call))
            self._failed(call, kind)
            return
        log.attempts[call] = attempt + 1
        self.lost[kind] = self.lost.get(kind, 0.0) + self._windowed(delay)
        self._call_at(now + delay, self._send_cb, call)  # call_in, without its check: delay > 0

    # --- coming back -----------------------------------------------------------------------------------------
    def done(self, call: Row) -> None:
        """A started call finished (the Function's or proxy's callback)."""
        if self.timeouts is not None and not self.timeouts.heard(call):
            return  # the Function is done with an abandoned input
        if self.connections is not None:
            self.connections.release(self._client[call])
        elif self._map is not None:
            self._map.release(self._client[call])
        if call in self._kinds:  # ran, but an item failed (batching)
            self._failed(call, self._kinds[call])
            return
        self._finished[call] = self.env._now
        # _back, inlined: this is every call's way back
        self.outstanding -= 1
        if self._returned is not None:
            self._returned(call)
        self._close(call)
        if self.outstanding == 0:
            self._maybe_drained()

    def _back_at(self, call: Row) -> None:
        """The work of ``call`` ended: its result is back after ``overhead.result`` (varying), drawn now from its
        client's stream as the leg draws it, and it is done now as ``done`` would do it then (the ``backs`` shortcut:
        an open loop does nothing at a back but count it). Past the run's end it is never back, as its back event
        would never come; the last call back stops the clock at its back (``_drain_check``)."""
        delay = self._results[self._client[call]]()
        if delay < 0:
            raise ValueError(f"negative delay {delay}")
        back = self.env._now + delay
        if back >= self._until:
            return
        self._finished[call] = back  # (a failed call keeps its kind: ``_failed`` would set the same)
        self.outstanding -= 1
        self._close(call)
        if back > self._last_back:
            self._last_back = back
        if self.outstanding == 0:
            self._call_at(self._last_back, self._drain_cb)

    def _drain_check(self, _arg: None) -> None:
        """The latest back of the calls done when none was left out: still none out, and none back later, this is
        the back that would have emptied the run (``done``'s ``_maybe_drained``)."""
        if self.outstanding == 0 and self.env._now >= self._last_back:
            self._maybe_drained()

    def _failed(self, call: int, kind: str) -> None:
        log = self.log
        log.finished[call] = self.env._now
        log.kind[call] = kind
        self._back(call)

    def _back(self, call: int) -> None:
        """The call is back for good: the caller moves on, the log folds the call in."""
        self.outstanding -= 1
        if self._returned is not None:
            self._returned(call)
        self._close(call)
        if self.outstanding == 0:
            self._maybe_drained()

    def settle(self) -> None:
        """The run has ended: what the callers did that is still to be told (nothing, unless a subclass defers)."""

    def _maybe_drained(self) -> None:
        if self.env._now >= self.duration or not self.reissue:
            self._stop()

    def _stop(self) -> None:
        """The test is over: nothing more is in flight or will be issued (said once: one stop of the clock)."""
        if self.drained_at != self.env._now:
            self.drained_at = self.env._now
            self.sim.stop()

    reissue = True  # a closed loop follows a call that is back with the next (ClientParams.reissue)
    # its callers are clients with a connection of their own to Modal (clients.streams); ClassVar: read through the
    # class also where compiled (sim.build), so that a subclass's own value holds
    connected: ClassVar[bool] = False

    def loss_of_failure(self, call: int) -> float:
        """Input-seconds lost when ``call`` fails unretried: in a closed loop its slot ends."""
        return max(0.0, self.duration - self.env._now)

    def _windowed(self, lost: float) -> float:
        """What of ``lost`` input-seconds from now falls in the measurement window [warm-up, duration): the shares
        the diagnosis takes are of the window's input-seconds (models/inputs/platform/monitor.py), so a backoff past
        its end or a failure before it counts only its part inside."""
        now = self.env._now
        end = now + lost
        return max(0.0, (end if end < self.duration else self.duration) - (now if now > self._w0 else self._w0))
