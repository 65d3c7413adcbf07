"""The client side of calibration runs: callers that drive the apps of ``calibration/apps`` and record traces.

A load test is a closed loop (docs/sources.md §1, the reference load test): ``clients`` clients each keep ``in_flight``
calls outstanding for ``duration_s`` seconds; a call that returns is followed at once by the next; after the
duration the caller waits up to ``drain_s`` for the calls in flight, then cancels the rest (their ``finished`` stays
NaN). Batching runs rounds of ``round_items`` items per client in chunks (docs/sources.md §1, way 3). The work of each
call is drawn by the caller (uniform(work_min, work_max) seconds, each client from its own seeded generator, so its
draws do not depend on which process runs it) and slept by the remote side. Each loop can run a share of the
clients from a given start ``t0`` and return rows (``*_rows``): calibration/clients.py runs the shares in separate
processes or containers and merges their rows (``calls_table``); pandas is imported only where a table is made.

Per call the trace records (calibration/trace.py, kind ``calls``): the client, ``issued`` (first attempt),
``finished`` (back at the caller), the outcome's error kind and the attempts; from the remote side the container
(``MODAL_TASK_ID``) and the work's ``started``/``ended``. Times are seconds since the run's start on the caller's
clock (``time.time()``); the remote side's ``time.time()`` is put on the same axis by subtracting the run's start
and the manifest's ``clock_offset_s`` (0: the caller's and Modal's clocks are taken as NTP-synchronised, an
assumption; ``started`` before ``issued`` in a trace shows the offset).

Call styles (modal 1.6.4, modal/_functions.py): ``await f.remote.aio(x)``; ``fc = await f.spawn.aio(x)`` then
``await fc.get.aio()`` (way 1); app copies call copy ``client mod copies`` (way 2). A single ``.remote``/``.spawn``
does not retry a rejection (docs/sources.md §1), so a failed call ends its slot, as the simulator's ``clients.retry =
"none"`` does. The server's callers use aiohttp (docs/sources.md §1: "aiohttp is needed for high concurrency"), one
session per client with ``connection_limit`` connections, and retry 503 and 429 with capped exponential backoff
(the simulator's ``clients.retry = "backoff"``). Every caller takes its target as an object with modal's method
names, so tests pass in-process stand-ins.

Error kinds (models/inputs/summary.py ``ERROR_KINDS``): a ``modal.exception.ResourceExhaustedError`` (gRPC
RESOURCE_EXHAUSTED, modal/_grpc_client.py) is ``queue_full`` when its text names the pending-input queue ("reached
pending input queue limit") and ``rate_limited`` otherwise ("Input rate limit (200/s) exceeded"; docs/sources.md §1);
HTTP 503 and 429 are ``http_503`` and ``http_429``; anything else is ``other``.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas only where a table is made: a client process or container sends rows
    import pandas as pd

Clock = Callable[[], float]
# (client index, the works of one call) -> (the remote side's result, attempts); raises CallFailed
Call = Callable[[int, list[float]], Awaitable[tuple[Any, int]]]
PROXY_KEY_ENV = "SCALESIM_PROXY_KEY"  # a workspace proxy token (`modal workspace proxy-tokens`): Modal-Key
PROXY_SECRET_ENV = "SCALESIM_PROXY_SECRET"  # and its secret: Modal-Secret (never written by this project)


async def hydrated(handles: list[Any]) -> list[Any]:
    """``handles`` (``Function.from_name``, ``Cls.from_name``: lazy, modal/_object.py ``hydrate_lazily``) looked up
    once each before the load: otherwise every call in flight at t = 0 sends its own ``FunctionGet``, a lookup storm
    of one request per slot whose throttled lookups end the slots (found on the Modal stand-in)."""
    for h in handles:
        await h.hydrate.aio()
    return handles


class CallFailed(Exception):
    """A call that came back failed: its error kind and the attempts it took."""

    def __init__(self, kind: str, attempts: int = 1, detail: str = "") -> None:
        super().__init__(detail or kind)
        self.kind, self.attempts = kind, attempts


def error_kind(exc: BaseException) -> str:
    """The trace's error kind of a Modal exception (modal/exception.py; docs/sources.md §1's rejection texts)."""
    from modal.exception import ResourceExhaustedError

    if isinstance(exc, ResourceExhaustedError):
        return "queue_full" if "queue" in str(exc).lower() else "rate_limited"
    return "other"


def http_kind(status: int) -> str:
    """The trace's error kind of an HTTP status that is not a success (docs/sources.md §1: 503 with no ready container,
    429 above ``max_concurrency``)."""
    return {503: "http_503", 429: "http_429"}.get(status, "other")


@dataclass(frozen=True)
class Load:
    """A closed loop's shape (the simulator's ``clients.*``, ``duration_s``, ``warmup_s``, ``drain_s``, ``work``)."""

    clients: int = 8
    in_flight: int = 1000
    duration_s: float = 60.0
    warmup_s: float = 0.0
    drain_s: float = 60.0
    work_min: float = 1.0
    work_max: float = 10.0
    seed: int = 0

    def work(self) -> str:
        """The work as the simulator's distribution string."""
        if self.work_min == self.work_max:
            return f"constant({self.work_min!r})"
        return f"uniform({self.work_min!r}, {self.work_max!r})"


@dataclass(frozen=True)
class Backoff:
    """Retries of 503/429: wait min(max_s, base_s·2^attempt) × uniform(0.5, 1) (the simulator's
    ``clients.backoff_base_s``/``backoff_max_s``)."""

    base_s: float = 0.5
    max_s: float = 15.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        return min(self.max_s, self.base_s * 2.0 ** min(attempt, 60)) * rng.uniform(0.5, 1.0)


# --- call adapters: modal Functions (or stand-ins with the same method names) ------------------------------------


def _arg(works: list[float], chunk: bool) -> Any:
    return list(works) if chunk else works[0]


def remote_call(fns: Sequence[Any], chunk: bool = False) -> Call:
    """``await fn.remote.aio(x)``, client i on ``fns[i % len(fns)]`` (one Function, or app copies)."""

    async def call(client: int, works: list[float]) -> tuple[Any, int]:
        fn = fns[client % len(fns)]
        try:
            return await fn.remote.aio(_arg(works, chunk)), 1
        except Exception as e:
            raise CallFailed(error_kind(e), 1, f"{type(e).__name__}: {e}") from e

    return call


def spawn_call(fns: Sequence[Any], chunk: bool = False) -> Call:
    """``fc = await fn.spawn.aio(x); await fc.get.aio()`` (docs/sources.md §1, way 1)."""

    async def call(client: int, works: list[float]) -> tuple[Any, int]:
        fn = fns[client % len(fns)]
        try:
            fc = await fn.spawn.aio(_arg(works, chunk))
            return await fc.get.aio(), 1
        except Exception as e:
            raise CallFailed(error_kind(e), 1, f"{type(e).__name__}: {e}") from e

    return call


def proxy_headers(environ: dict[str, str]) -> dict[str, str]:
    """The proxy-auth headers (``Modal-Key``/``Modal-Secret``: modal/cli/workspace.py, proxy tokens) from the
    environment; empty if unset. Never logged or written."""
    key, secret = environ.get(PROXY_KEY_ENV, ""), environ.get(PROXY_SECRET_ENV, "")
    return {"Modal-Key": key, "Modal-Secret": secret} if key and secret else {}


def http_call(
    sessions: Sequence[Any],
    url: str,
    headers: dict[str, str],
    *,
    backoff: Backoff | None,
    deadline: Callable[[], bool],
    seed: int | str = 0,
) -> Call:
    """``GET {url}/work?seconds=S`` on client i's aiohttp session; 503 and 429 are retried with ``backoff`` until
    ``deadline()`` (none: the first failure is final)."""
    rng = random.Random(seed)
    target = url.rstrip("/") + "/work"

    async def call(client: int, works: list[float]) -> tuple[Any, int]:
        session = sessions[client % len(sessions)]
        attempt = 0
        while True:
            attempt += 1
            try:
                async with session.get(target, params={"seconds": repr(works[0])}, headers=headers) as r:
                    if r.status == 200:
                        return await r.json(), attempt
                    kind = http_kind(r.status)
                    await r.read()
            except Exception as e:  # connection errors, timeouts, bad JSON
                raise CallFailed("other", attempt, f"{type(e).__name__}: {e}") from e
            if kind == "other" or backoff is None or deadline():
                raise CallFailed(kind, attempt, f"HTTP {r.status}")
            await asyncio.sleep(backoff.delay(attempt - 1, rng))

    return call


# --- loops ---------------------------------------------------------------------------------------------------------


def _row(client: int, issued: float, works: list[float], initial: bool) -> dict[str, Any]:
    return {
        "client": client,
        "issued": issued,
        "started": math.nan,
        "finished": math.nan,
        "work": max(works),
        "items": len(works),
        "kind": "",
        "attempts": 1,
        "initial": initial,
        "container": "",
        "ended": math.nan,
    }


def _fill(row: dict[str, Any], result: Any, t0: float, offset: float) -> None:
    parts = result if isinstance(result, list) else [result]
    parts = [p for p in parts if isinstance(p, dict)]
    if not parts:
        return
    row["container"] = str(parts[0].get("container", ""))
    row["started"] = min(float(p["started"]) for p in parts) - t0 - offset
    row["ended"] = max(float(p["ended"]) for p in parts) - t0 - offset


async def _one(call: Call, client: int, works: list[float], row: dict, t0: float, offset: float, clock: Clock) -> bool:
    try:
        result, row["attempts"] = await call(client, works)
    except CallFailed as e:
        row["finished"], row["kind"], row["attempts"] = clock() - t0, e.kind, e.attempts
        return False
    row["finished"] = clock() - t0
    _fill(row, result, t0, offset)
    return True


async def _drive(tasks: list[asyncio.Task], until: float, clock: Clock) -> None:
    """Wait for ``tasks`` until the clock reads ``until``; cancel what is left."""
    timeout = max(0.0, until - clock())
    _, pending = await asyncio.wait(tasks, timeout=timeout) if tasks else (set(), set())
    for t in pending:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _clients(load: Load, clients: Sequence[int] | None) -> list[int]:
    """The clients a caller runs: ``clients`` (one process's share of a run, calibration/clients.py), else all."""
    return list(range(load.clients)) if clients is None else list(clients)


def client_rng(load: Load, client: int) -> random.Random:
    """Client ``client``'s own draws of the work, seeded by the run's seed and the client's number: the same
    whichever process runs the client (a string seed is hashed with SHA-512, the same in every interpreter)."""
    return random.Random(f"{load.seed}:{client}")


async def closed_loop_rows(
    call: Call,
    load: Load,
    t0: float,
    *,
    clients: Sequence[int] | None = None,
    clock: Clock = time.time,
    offset: float = 0.0,
) -> list[dict[str, Any]]:
    """The calls of ``load``'s closed loop for ``clients`` (default all), started at ``t0``: rows of the calls
    table (``calls_table`` makes it; a client process sends the rows)."""
    rows: list[dict[str, Any]] = []

    async def slot(client: int, rng: random.Random) -> None:
        initial = True
        while (issued := clock() - t0) < load.duration_s:
            works = [rng.uniform(load.work_min, load.work_max)]
            row = _row(client, issued, works, initial)
            rows.append(row)
            initial = False
            if not await _one(call, client, works, row, t0, offset, clock):
                return  # a single .remote/.spawn raises: this slot of the test ends (clients.retry = "none")

    rngs = {c: client_rng(load, c) for c in _clients(load, clients)}
    tasks = [asyncio.create_task(slot(c, rng)) for c, rng in rngs.items() for _ in range(load.in_flight)]
    await _drive(tasks, t0 + load.duration_s + load.drain_s, clock)
    return rows


async def closed_loop(
    call: Call,
    load: Load,
    *,
    clock: Clock = time.time,
    offset: float = 0.0,
    t0: float | None = None,
    clients: Sequence[int] | None = None,
) -> tuple[pd.DataFrame, float]:
    """Run ``load`` against ``call``; returns the calls table (trace schema) and the run's start ``t0``."""
    t0 = clock() if t0 is None else t0
    rows = await closed_loop_rows(call, load, t0, clients=clients, clock=clock, offset=offset)
    return calls_table(rows), t0


async def rounds_rows(
    call: Call,
    load: Load,
    round_items: int,
    chunk_items: int,
    t0: float,
    *,
    clients: Sequence[int] | None = None,
    clock: Clock = time.time,
    offset: float = 0.0,
) -> list[dict[str, Any]]:
    """Batching's closed loop for ``clients`` (default all), started at ``t0``: rows of the calls table."""
    rows: list[dict[str, Any]] = []

    async def client_loop(client: int) -> None:
        rng = client_rng(load, client)
        initial = True
        while (issued := clock() - t0) < load.duration_s:
            works = [rng.uniform(load.work_min, load.work_max) for _ in range(round_items)]
            chunks = [works[i : i + chunk_items] for i in range(0, round_items, chunk_items)]
            batch = [_row(client, issued, chunk, initial) for chunk in chunks]
            rows.extend(batch)
            initial = False
            await asyncio.gather(
                *(_one(call, client, c, r, t0, offset, clock) for c, r in zip(chunks, batch, strict=True))
            )

    tasks = [asyncio.create_task(client_loop(c)) for c in _clients(load, clients)]
    await _drive(tasks, t0 + load.duration_s + load.drain_s, clock)
    return rows


async def rounds(
    call: Call,
    load: Load,
    round_items: int,
    chunk_items: int,
    *,
    clock: Clock = time.time,
    offset: float = 0.0,
    t0: float | None = None,
    clients: Sequence[int] | None = None,
) -> tuple[pd.DataFrame, float]:
    """Batching's closed loop: each client sends a round of ``round_items`` items as chunks of ``chunk_items`` (one
    call each) and starts the next round when the whole round is back (docs/sources.md §1, way 3)."""
    t0 = clock() if t0 is None else t0
    rows = await rounds_rows(call, load, round_items, chunk_items, t0, clients=clients, clock=clock, offset=offset)
    return calls_table(rows), t0


async def server_rows(
    url: str,
    load: Load,
    headers: dict[str, str],
    t0: float,
    *,
    clients: Sequence[int] | None = None,
    connection_limit: int = 1000,
    backoff: Backoff | None = None,
    clock: Clock = time.time,
    offset: float = 0.0,
) -> list[dict[str, Any]]:
    """The server way's closed loop over HTTP for ``clients`` (default all), started at ``t0``: rows of the calls
    table. One aiohttp session per client (``connection_limit`` connections each, the simulator's
    ``clients.connection_limit``), 503/429 retried with ``backoff`` until the drain ends."""
    import aiohttp

    mine = _clients(load, clients)
    timeout = aiohttp.ClientTimeout(total=load.duration_s + load.drain_s)
    sessions = {
        c: aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connection_limit), timeout=timeout) for c in mine
    }
    end = t0 + load.duration_s + load.drain_s
    try:
        by_index = [sessions.get(c) for c in range(max(mine, default=-1) + 1)]
        seed = f"{load.seed}:backoff:{mine[0] if mine else 0}"
        call = http_call(by_index, url, headers, backoff=backoff, deadline=lambda: clock() >= end, seed=seed)
        return await closed_loop_rows(call, load, t0, clients=mine, clock=clock, offset=offset)
    finally:
        await asyncio.gather(*(s.close() for s in sessions.values()), return_exceptions=True)


async def server_loop(
    url: str,
    load: Load,
    headers: dict[str, str],
    *,
    connection_limit: int = 1000,
    backoff: Backoff | None = None,
    clock: Clock = time.time,
    offset: float = 0.0,
    clients: Sequence[int] | None = None,
) -> tuple[pd.DataFrame, float]:
    """The server way's closed loop over HTTP (``server_rows``); returns the calls table and ``t0``."""
    import aiohttp  # noqa: F401  # imported before t0, not on the clock

    t0 = clock()
    rows = await server_rows(
        url, load, headers, t0, clients=clients, connection_limit=connection_limit, backoff=backoff, clock=clock,
        offset=offset,
    )  # fmt: skip
    return calls_table(rows), t0


async def coldstart_loop(
    probe: Any, starts: int, interval_s: float, *, seed: int = 0, clock: Clock = time.time, timeout_s: float = 900.0
) -> tuple[pd.DataFrame, float]:
    """Container starts at Poisson times (mean ``interval_s`` apart; the simulator's ``coldstart.start_interval_s``),
    each a call of ``probe.remote.aio()`` on a single-use container (calibration/apps/coldstart.py): ``t`` = the
    call's issue, ``total`` = the container's ready time (its last ``@modal.enter``) − ``t``; NaN if it failed."""
    import pandas as pd

    t0 = clock()
    rng = random.Random(seed)
    at = 0.0
    rows: list[dict[str, float]] = []

    async def one(delay: float) -> None:
        await asyncio.sleep(delay)
        row = {"t": clock() - t0, "total": math.nan}
        rows.append(row)
        try:
            out = await probe.remote.aio()
            row["total"] = float(out["ready"]) - t0 - row["t"]
        except Exception:
            return

    tasks = []
    for _ in range(starts):
        tasks.append(asyncio.create_task(one(at)))
        at += rng.expovariate(1.0 / interval_s)
    await _drive(tasks, t0 + at + timeout_s, clock)
    return pd.DataFrame(rows, columns=["t", "total"]).sort_values("t", ignore_index=True), t0


# --- traces ----------------------------------------------------------------------------------------------------------

CALL_COLUMNS = ("client", "issued", "started", "finished", "work", "items", "kind", "attempts", "initial")


def calls_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows as the trace's calls table, in issue order; a call that never came back (no error, ``finished`` NaN:
    cancelled when the drain ended) is of kind ``unfinished``, never a success."""
    import pandas as pd

    from calibration.trace import UNFINISHED

    cols = [*CALL_COLUMNS, "container", "ended"]
    table = pd.DataFrame(rows, columns=cols)
    table = table.astype({"client": "int64", "items": "int64", "attempts": "int64", "initial": "bool"})
    table["container"] = table["container"].astype(object)
    table["kind"] = table["kind"].astype(object)
    table.loc[(table["kind"] == "") & table["finished"].isna(), "kind"] = UNFINISHED
    return table.sort_values(["issued", "client"], kind="stable", ignore_index=True)


def utc(t: float) -> str:
    """A Unix time as UTC ISO 8601."""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def manifest(
    kind: str,
    what: str,
    preset: str,
    sets: dict[str, Any],
    window: tuple[float, float],
    *,
    t0: float,
    t1: float,
    apps: list[str],
    parameters: dict[str, Any],
    region: str | None = None,
    clock_offset_s: float = 0.0,
) -> dict[str, Any]:
    """A real run's manifest (calibration/trace.py's docstring lists the fields)."""
    import modal

    return {
        "kind": kind,
        "what": what,
        "source": "modal",
        "scenario": {"preset": preset, "set": sets},
        "window": [float(window[0]), float(window[1])],
        "modal_version": modal.__version__,
        "region": region,
        "started_at": utc(t0),
        "ended_at": utc(t1),
        "apps": apps,
        "parameters": parameters,
        "clock_offset_s": clock_offset_s,
    }
