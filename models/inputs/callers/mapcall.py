"""``.map`` and ``.spawn_map``: how a client's calls leave it when it maps over them (``clients.api = "map"``; the
modal 1.6.4 client's source, modal/parallel_map.py and modal/_functions.py; docs/sources.md §1, "Client behaviour").

Each closed-loop client is one map call over its calls in flight:

- ``.map`` (synchronous style, the remote approach): one pump sends the client's queued inputs in requests of up to
  49 (``MAP_INVOCATION_CHUNK_SIZE``), one request at a time, each waiting for its answer; at most 1,000 inputs are
  outstanding (``MAX_INPUTS_OUTSTANDING_DEFAULT``), from entering the queue until their output is back; an input
  beyond waits at the client. A request cut short because the queue ran empty is followed by a 15 ms pause
  (``queue_batch_iterator``'s debounce).
- ``.spawn_map`` (asynchronous style, the spawn approach): 256 requests at once (``async_map(..., concurrency=256)``),
  each one input (``_spawn_map_inner``: a ``FunctionMap`` with one pipelined input); no cap on outstanding inputs.
  (``experimental_spawn_map`` sends 512 inputs per request: not modelled.)

A rejected input is retried forever (``Retry(max_retries=None, additional_status_codes=[RESOURCE_EXHAUSTED])``):
after 0.1 s, doubling each time (``Retry.base_delay``, ``delay_factor``), at most 15 s apart for ``.map``
(``PUMP_INPUTS_MAX_RETRY_DELAY``) and 30 s for ``.spawn_map``, without jitter; the request's slot waits it out (the
pump awaits its RPC's retries). Modal's answer to a request some of whose inputs exceed a limit is not published:
assumed that the inputs within the limits are accepted and the rest retried (for ``.spawn_map``'s one-input
requests this is the source's own behaviour).

A request crosses the network to the Function's accept (a draw of ``overhead.submit`` from the client's stream
``overhead/submit/client-i``) and its answer crosses back (the same distribution, stream ``overhead/reply/client-i``:
the same network path, an assumption). Outputs come back one by one over ``overhead.result``, as for single calls.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from models.inputs.platform.function import ASYNC, SYNC
from models.inputs.platform.overhead import is_zero
from models.inputs.platform.overhead_params import OverheadParams
from sim.engine import Sim
from sim.rng import PerClient, Streams


@dataclass(frozen=True)
class Policy:
    """What the modal client does for one map call of a call style."""

    batch: int  # inputs per request
    requests: int  # requests in flight at once
    outstanding: int  # inputs outstanding per map call (0: no cap)
    retry_max_s: float  # the longest wait between tries


POLICIES = {SYNC: Policy(49, 1, 1000, 15.0), ASYNC: Policy(1, 256, 0, 30.0)}  # .map, .spawn_map (modal 1.6.4)
RETRY_BASE_S = 0.1  # modal 1.6.4 Retry.base_delay, doubled after each try (delay_factor 2)
DEBOUNCE_S = 0.015  # modal 1.6.4 queue_batch_iterator: the pause after a request the empty queue cut short


class MapCalls:
    """The map calls of one load's clients: ``put`` an input made by the client, ``release`` when its output is back.

    ``offer(call)`` hands one input to its Function (None: accepted, else the rejection's kind); ``rejected(call,
    kind, delay)`` is told of each rejected try and the wait before the next."""

    def __init__(
        self,
        sim: Sim,
        op: OverheadParams,
        streams: Streams,
        style: int,
        offer: Callable[[int], str | None],
        rejected: Callable[[int, str, float], None],
    ) -> None:
        self.sim = sim
        self.policy = POLICIES[style]
        self._offer, self._rejected = offer, rejected
        self._there = None if is_zero(op.submit) else PerClient(streams, "overhead/submit", op.submit)
        self._back = None if is_zero(op.submit) else PerClient(streams, "overhead/reply", op.submit)
        self._queue: dict[int, deque[int]] = {}  # client → inputs waiting to be sent
        self._held: dict[int, deque[int]] = {}  # client → inputs waiting for an outstanding place (.map)
        self._outstanding: dict[int, int] = {}  # client → inputs sent or queued, output not yet back
        self._idle: dict[int, int] = {}  # client → request slots free

    def put(self, client: int, call: int) -> None:
        if client not in self._queue:
            self._queue[client], self._held[client] = deque(), deque()
            self._outstanding[client], self._idle[client] = 0, self.policy.requests
        cap = self.policy.outstanding
        if cap and self._outstanding[client] >= cap:
            self._held[client].append(call)
            return
        self._enqueue(client, call)

    def release(self, client: int) -> None:
        """An output is back: its place is free for the next input held (.map)."""
        self._outstanding[client] -= 1
        if self._held[client]:
            self._enqueue(client, self._held[client].popleft())

    def _enqueue(self, client: int, call: int) -> None:
        self._outstanding[client] += 1
        self._queue[client].append(call)
        if self._idle[client]:
            self._send(client)

    def _send(self, client: int) -> None:
        """A free slot takes up to a request's worth of the queue and sends it."""
        self._idle[client] -= 1
        queue = self._queue[client]
        batch = [queue.popleft() for _ in range(min(self.policy.batch, len(queue)))]
        self._travel((client, batch, 0, not queue))

    def _travel(self, request: tuple[int, list[int], int, bool]) -> None:
        if self._there is None:
            self._arrive(request)
        else:
            self.sim.call_in(self._there[request[0]](), self._arrive, request)

    def _arrive(self, request: tuple[int, list[int], int, bool]) -> None:
        client, batch, tries, short = request
        again = []
        delay = self._wait(tries)
        for call in batch:
            kind = self._offer(call)
            if kind is not None:
                self._rejected(call, kind, delay)
                again.append(call)
        answer = (client, again, tries + 1, short, delay)
        if self._back is None:
            self._answered(answer)
        else:
            self.sim.call_in(self._back[client](), self._answered, answer)

    def _answered(self, answer: tuple[int, list[int], int, bool, float]) -> None:
        client, again, tries, short, delay = answer
        if again:  # the slot waits, then sends the rejected inputs again
            self.sim.call_in(delay, self._travel, (client, again, tries, short))
        elif short:
            self.sim.call_in(DEBOUNCE_S, self._free, client)
        else:
            self._free(client)

    def _wait(self, tries: int) -> float:
        """The wait after the try numbered ``tries`` (0: the first) was rejected (the exponent capped: 2 ** 1,100
        would not fit a float, and the cap has long bound by then)."""
        return min(self.policy.retry_max_s, RETRY_BASE_S * 2.0 ** min(tries, 1000))

    def _free(self, client: int) -> None:
        self._idle[client] += 1
        if self._queue[client]:
            self._send(client)
