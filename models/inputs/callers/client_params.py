"""The callers' parameters (the ``clients`` section; models/inputs/callers/clients.py). Apart from clients.py, which
``python -m sim.build`` compiles: mypyc rewrites a compiled dataclass's annotations, which the scenario schema reads
(sim/scenario.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sim.scenario import param


@dataclass(frozen=True)
class ClientParams:
    count: int = param(8, ge=1, le=1_000_000, source="reference load test: 8 clients (docs/sources.md §1)")
    in_flight: int = param(1000, ge=1, source="reference load test: 1,000 calls in flight per client")
    retry: Literal["none", "backoff", "exponential", "fixed", "random", "immediate"] = param(
        "none",
        source="modal 1.6.4: a single .remote/.spawn does not retry; the others are the policies callers write "
        "(assumption: what a user's own retry loop does)",
        doc="what a caller does with a rejected call (module docstring): none, backoff (exponential, jittered), "
        "exponential (no jitter), fixed (retry_delay_s), random (exponential times of mean retry_delay_s: the "
        "retrial queue's), immediate (at once)",
    )
    on_rate_limit: Literal["raise", "retry_after"] = param(
        "raise",
        source="modal 1.6.4 _retry_transient_errors: a server retry instruction is followed, a bare "
        "RESOURCE_EXHAUSTED raises; which one Modal's input plane sends is not published (docs/sources.md §1, "
        "'Client behaviour'): an assumption, a structural alternative the ranges carry",
        doc="what the modal client does with a call refused by the accept limits (rate_limited, queue_full): raise "
        "(to the retry policy ``retry``) or retry_after (it waits retry_after_s and tries again, within "
        "max_throttle_wait_s); single calls on the Function path",
    )
    retry_after_s: float = param(
        1.0,
        gt=0,
        le=86400,
        source="assumption: the server's retry_after_secs is not published; modal 1.6.4 waits at least 0.1 s",
        doc="on_rate_limit = retry_after: the wait the server asks for (the client waits max(this, 0.1 s))",
    )
    max_throttle_wait_s: float = param(
        0.0,
        ge=0,
        le=1e9,
        source="modal 1.6.4 config max_throttle_wait (MODAL_MAX_THROTTLE_WAIT; default unset: no limit)",
        doc="on_rate_limit = retry_after: the client stops following retry instructions once the next try would be "
        "this long after the call's first try, and the rejection goes to ``retry``; 0 = no limit (modal's default)",
    )
    backoff_base_s: float = param(0.5, gt=0, source="assumption: first retry delay of the test's HTTP client")
    backoff_max_s: float = param(15.0, gt=0, source="modal 1.6.4 .map: at most 15 s between tries")
    retry_delay_s: float = param(1.0, gt=0, source="assumption", doc="fixed: the delay; random: its mean")
    max_attempts: int = param(
        0, ge=0, le=1_000_000, source="assumption", doc="give up after this many tries of a call (0: never)"
    )
    timeout_s: float = param(
        0.0,
        ge=0,
        source="assumption: a caller's own deadline (asyncio.wait_for, FunctionCall.get(timeout=...)); modal 1.6.4 "
        "does not cancel an input whose caller stops waiting, so it runs on",
        doc="a caller gives up on an attempt not back this many seconds after it was sent (kind timeout, then the "
        "retry policy); the input still runs; 0 = waits forever; single calls on the Function path only",
    )
    reissue: bool = param(
        True,
        doc="false: the calls in flight at the start are made once and not followed by others (N spawned or mapped "
        "calls; the run ends when all are back)",
    )
    connection_limit: int = param(
        1000, ge=0, source="assumption: aiohttp connector limit raised to the calls in flight; 0 = no limit"
    )
    api: Literal["single", "map"] = param(
        "single",
        source="reference load test: one .remote/.spawn per call; map: modal 1.6.4 .map/.spawn_map "
        "(docs/sources.md §1)",
        doc="how a client's calls leave it: one request per call, or one map call over them (.map on the remote "
        "approach, .spawn_map on spawn: models/inputs/callers/mapcall.py)",
    )
    streams: int = param(
        0,
        ge=0,
        source="assumption: Modal's server's HTTP/2 concurrent-stream cap is not published; the reference test's "
        "1,000 calls in flight per client came back at 96% of the ideal (copies), so it did not bind there",
        doc="on the Function path, the calls in flight a client's one HTTP/2 connection carries at once (each holds "
        "a stream until its result is back); the rest wait at the client; 0 = no cap; closed-loop clients only",
    )
