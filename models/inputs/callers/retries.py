"""What a caller does with an attempt that is refused or late: its retry policy, the modal client's own retries of
the input plane's refusals, and its timeouts (the ``clients`` section's keys; the callers hold one of each that is
on: models/inputs/callers/clients.py ``Load``).

A rejected single call is handled by the client's retry policy (modal 1.6.4 client source, docs/sources.md §1):
- ``none``: a single ``.remote``/``.spawn`` raises; the load test's task for that call ends (as an unhandled
  exception ends an asyncio task), so the client keeps one call fewer in flight;
- ``backoff``: the call is retried after min(backoff_max_s, backoff_base_s · 2^attempt), jittered by
  uniform(0.5, 1), forever (the harness's own policy; ``.map``'s is models/inputs/callers/mapcall.py's);
- ``exponential``: the same delays without the jitter (every caller rejected together retries together);
- ``fixed``: after ``retry_delay_s``; ``random``: after an exponential time of mean ``retry_delay_s`` (the
  classical retrial queue's orbit, Falin and Templeton 1997); ``immediate``: at once (at the clock's next tick).
With ``max_attempts`` > 0 a call rejected on its last try fails (kind as rejected) instead of retrying again. These
are the policies users write around a call (assumptions); a retry storm they cause is stopped by the run budget.

Before any of them, the modal client itself (``on_rate_limit``): modal 1.6.4's ``_retry_transient_errors``
(modal/_utils/grpc_utils.py) follows a retry instruction the server attaches to an error (``RPCRetryPolicy``: it
sleeps max(retry_after_secs, 0.1 s) and tries again, on any status and without limit unless ``max_throttle_wait``
is set), while a bare ``RESOURCE_EXHAUSTED`` raises ``ResourceExhaustedError`` to the caller. Which of the two
Modal's input plane sends when a call passes its accept limits (``rate_limited``, ``queue_full``) is not published
(docs/sources.md §1, "Client behaviour"), so it is a structural alternative: ``raise`` (the default: the refusals
the docs quote reached their callers) or ``retry_after`` (the client waits ``retry_after_s`` and tries again, within
``max_throttle_wait_s`` of the call's first try; past it the rejection goes to the retry policy as above). The
ranges carry both (experiments/uncertainty.py). Single calls on the Function path only: a map call has its own
retries (models/inputs/callers/mapcall.py), and the server's 503/429 come from its proxy, not from the input plane.

With ``timeout_s`` > 0 a caller stops waiting for an attempt that is not back that long after it was sent (as
``asyncio.wait_for`` around ``.remote.aio()`` or ``FunctionCall.get(timeout=...)`` does): the attempt counts as
rejected with kind ``timeout`` and the retry policy handles it as any rejection (``none``: the call fails). The
input itself is *abandoned*, not cancelled: modal 1.6.4's client sends ``FunctionCallCancel`` only from
``FunctionCall.cancel()``, never when a caller stops waiting, so the Function still runs it to its end (counted in
``abandoned``; its work reaches nobody). The caller's call moves to a new row of the log for its next try, while the
abandoned row stays the Function's until it is done with it (``CallLog.orphans``): a retry after a timeout adds an
input without taking one away, the mechanism by which retries keep an overloaded Function overloaded (Bronson et al.,
HotOS'21). Timeouts are modelled for single calls on the Function path without a stream cap.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from models.inputs.records import CallLog
from sim.dists import Exponential, Uniform
from sim.engine import Sim
from sim.rng import PerClient, Streams

THROTTLED = frozenset(("rate_limited", "queue_full"))  # the input plane's refusals (ResourceExhaustedError)
THROTTLE_FLOOR_S = 0.1  # modal 1.6.4: max(retry_after_secs, 0.1)


class RetryParams(Protocol):
    """What the retries read of the ``clients`` section (models/inputs/callers/clients.py ``ClientParams``)."""

    @property
    def retry(self) -> str: ...
    @property
    def retry_delay_s(self) -> float: ...
    @property
    def backoff_base_s(self) -> float: ...
    @property
    def backoff_max_s(self) -> float: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def retry_after_s(self) -> float: ...
    @property
    def max_throttle_wait_s(self) -> float: ...


class Retries:
    """When a rejected attempt is tried again: the modal client's wait where it follows the server's retry
    instruction (``throttled``), else the caller's retry policy; or never (the call fails)."""

    def __init__(self, cp: RetryParams, streams: Streams, until: float, throttled: bool) -> None:
        self.on = cp.retry != "none"  # retried at all
        self._jittered = cp.retry == "backoff"
        self._jitter = PerClient(streams, "backoff", Uniform(0.5, 1.0))  # client i's retry jitter (drawn in batches)
        self._max_attempts = cp.max_attempts or None
        # the backoff after try k + 1, min(backoff_max_s, backoff_base_s · 2^min(k, 1000)), until it is the same for
        # every try after (the exponent capped: 2 ** 1,100 would not fit a float); the last holds for the rest
        self._delays = [min(cp.backoff_max_s, cp.backoff_base_s * 2.0 ** min(k, 1000)) for k in range(1001)]
        while len(self._delays) > 1 and self._delays[-2] == cp.backoff_max_s:
            self._delays.pop()
        if cp.retry in ("fixed", "immediate"):
            # immediate: the clock's resolution at the run's end (``until``), so a retry is a later event, never the
            # same instant
            tick = max(1e-9, math.ulp(until) * 4)
            self._delays = [cp.retry_delay_s if cp.retry == "fixed" else tick]
        self._random = PerClient(streams, "retry", Exponential(cp.retry_delay_s)) if cp.retry == "random" else None
        # on_rate_limit = retry_after: the modal client follows the server's retry instruction (module docstring)
        self._throttled = throttled
        self._throttle_delay = max(cp.retry_after_s, THROTTLE_FLOOR_S)
        self._throttle_max = cp.max_throttle_wait_s or math.inf

    def after(self, client: int, kind: str, attempt: int, issued: float, now: float) -> float | None:
        """The wait before the next try of a call of ``client`` first issued at ``issued``, rejected now with
        ``kind`` on its try ``attempt``; None if it is not tried again."""
        if self._throttled and kind in THROTTLED:
            delay = self._throttle_delay
            if now + delay - issued < self._throttle_max:  # modal: final once the wait would reach it
                return delay
        if self.on and (self._max_attempts is None or attempt < self._max_attempts):
            if self._random is not None:
                return self._random[client]()
            delays = self._delays
            delay = delays[attempt - 1] if attempt <= len(delays) else delays[-1]
            if self._jittered:
                delay *= self._jitter[client]()
            return delay
        return None


class Timeouts:
    """``clients.timeout_s``: each attempt's deadline, by row of the log, and the inputs abandoned. ``expired(row,
    "timeout")`` is told of the new row a call goes on in when its caller stops waiting."""

    def __init__(self, sim: Sim, log: CallLog, timeout_s: float, expired: Callable[[int, str], None]) -> None:
        self.env = sim.env
        self._call_at = sim.call_at
        self.log = log
        self._timeout = timeout_s
        self._expired = expired
        self.deadline: dict[int, float] = {}
        self.abandoned = 0

    def arm(self, call: int) -> None:
        """An attempt of ``call`` leaves now: it times out at now + timeout_s unless it is back or rejected first."""
        at = self.deadline[call] = self.env._now + self._timeout
        self._call_at(at, self._expire, call)

    def heard(self, call: int) -> bool:
        """The attempt ``call`` is back or rejected: its deadline is dropped. False if it was abandoned (an orphan
        of the log): nobody hears of it, and the Function is done with it."""
        if call in self.log.orphans:
            self.log.discard(call, self.env._now)
            return False
        self.deadline.pop(call, None)
        return True

    def _expire(self, call: int) -> None:
        """A deadline passed: if it is still the attempt's (not back, not rejected, the row not since reused by
        another attempt with another deadline), the caller stops waiting. The input stays the Function's (an
        orphan of the log, kind ``abandoned``); the call goes on in a new row as a rejection of kind ``timeout``."""
        if self.deadline.get(call) != self.env._now:
            return
        del self.deadline[call]
        log = self.log
        log.kind[call] = "abandoned"  # (a kind: nothing that is back with one follows it with a next call)
        log.orphans.add(call)
        self.abandoned += 1
        again = log.new(log.client[call], log.issued[call], log.work[call])
        if log.initial[call]:
            log.initial[again] = 1
        log.attempts[again] = log.attempts[call]
        self._expired(again, "timeout")
