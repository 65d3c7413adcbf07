"""Where a load test's clients run (calibration/ways/loadtest.py): each in its own OS process by default, all in this
process, or each in its own Modal container (``--driver modal``); their rows merged into one calls table.

Why not all in one process: the modal client keeps one gRPC channel per process (modal/client.py
``_Client.from_env`` is a singleton; one HTTP/2 connection per server URL), and grpclib parks the requests past the
server's cap on concurrent streams (grpclib/protocol.py: ``TooManyStreamsError``, then ``stream_close_waiter``) and
wakes every parked request each time a stream closes, so thousands of calls in flight over one channel cost the
caller time that grows with the calls in flight: the harness measures itself. On the Modal stand-in (two shared
cores), 8 clients × 1,000 calls got 10 to 47 calls/s back from one process and 80 to 218 from two. The reference
load test ran each client in its own process (a Modal container in us-east), with its own channel.

- **In this process** (``--client-procs 0``): ``run_job`` with every client; the callers take targets with modal's
  method names, so tests pass in-process stand-ins.
- **Local processes** (default: one per client up to the cores, ``default_procs``; ``--client-procs P``: the
  clients in P contiguous shares): each child is ``python -m calibration.clients``, a fresh interpreter (not a
  fork: modal's synchronicity thread and its event loop do not survive ``fork``), with its own modal client.
  Over its stdin and a duplicate of its stdout it receives its ``Job``, looks up and hydrates its handles once
  (callers.py ``hydrated``) and says it is ready; when every child is, the parent sends the common start ``t0``
  (``START_S`` ahead, so that every child gets it in time; one clock, the machine's); each runs its share and sends
  its rows back. A child that fails sends one line; one that dies (killed, crashed) is seen by its pipe's end:
  either is ``RunFailed`` naming it, and the other children are killed. Children ignore SIGINT (Ctrl-C reaches the
  whole foreground process group: the parent kills them in its ``finally``, on Ctrl-C, on the run's timeout and on
  any error) and end when their parent does (stdin's end; on Linux also ``PR_SET_PDEATHSIG``): none is orphaned.
- **Modal containers** (``--driver modal``): the deployed app gets a Function ``drive_clients``
  (calibration/apps/loadtest.py, the app's image and ``region``) that runs one client's ``Job`` and returns its
  rows; the parent spawns one call per client, each its own container (one input per container, at most
  ``clients`` containers), with ``t0`` = now + ``--client-lead`` seconds: a container ready later than
  ``LATE_S`` after ``t0`` fails the run (its client would start late) with a line naming the option. Container
  clocks are taken as NTP-synchronised with each other (the trace's ``clock_offset_s`` assumption).
- **File descriptors**: the server way opens up to min(calls, connections) sockets per client; past the soft
  ``RLIMIT_NOFILE`` (1,024 on Linux, 256 on macOS) each connect fails with EMFILE. Every client process raises its
  soft limit to the hard one (``raise_nofile``: an unprivileged process may raise it up to the hard limit,
  setrlimit(2)); a run whose processes would need more than the hard limit is refused before anything is deployed
  (``check_descriptors``), rather than paced: fewer connections than calls in flight is another experiment (the
  simulator's ``clients.connection_limit``), which the trace would not say it ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import pickle
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from calibration import callers
from calibration.callers import Backoff, Clock, Load

DRIVER_FUNCTION = "drive_clients"  # the Function of --driver modal (calibration/apps/loadtest.py)
START_S = 0.5  # t0 = when the last child is ready + this: time for the go message to reach every child
READY_S = 120.0  # a child must be ready (started, handles hydrated) within this
LATE_S = 1.0  # a client container ready later than this after t0 fails the run (its load would start late)
FD_MARGIN = 64  # descriptors a client process needs besides its sockets: stdio, pipes, the gRPC channel, the loop
MACOS_OPEN_MAX = 10240  # macOS refuses a soft limit above OPEN_MAX even when the hard one is "unlimited"


class ClientError(Exception):
    """A client process or container that cannot run its share (one line)."""


@dataclass(frozen=True)
class Job:
    """What one client process (or container) runs: ``load``'s loop (``closed``: callers.py ``closed_loop_rows``;
    ``rounds``: ``rounds_rows``; ``http``: ``server_rows``) for ``clients``, against ``targets`` (app name,
    Function name: looked up with ``modal.Function.from_name``; client i calls ``targets[i % len]``) or ``url``."""

    loop: str
    load: Load
    clients: tuple[int, ...]
    targets: tuple[tuple[str, str], ...] = ()
    spawn: bool = False  # .spawn then .get (way 1), else .remote
    chunk: bool = False  # the call's argument is the list of works (batching's chunks)
    round_items: int = 0
    chunk_items: int = 0
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # the proxy token: never printed
    connection_limit: int = 1000
    backoff: Backoff | None = None

    def share(self, clients: Sequence[int]) -> Job:
        return dataclasses.replace(self, clients=tuple(clients))

    def descriptors(self) -> int:
        """File descriptors this share needs at most: a socket per connection (the server way), plus a margin."""
        per_client = min(self.load.in_flight, self.connection_limit) if self.loop == "http" else 0
        return len(self.clients) * per_client + FD_MARGIN

    def as_dict(self) -> dict[str, Any]:
        """Plain data (a Modal input: no class of this project needed to read it)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Job:
        d = dict(d)
        d["load"] = Load(**d["load"])
        d["backoff"] = Backoff(**d["backoff"]) if d.get("backoff") else None
        d["clients"] = tuple(d["clients"])
        d["targets"] = tuple(tuple(t) for t in d["targets"])
        return cls(**d)


def shares(clients: int, procs: int) -> list[tuple[int, ...]]:
    """Clients 0..clients-1 in ``procs`` contiguous shares as even as can be (at most one share per client)."""
    procs = max(1, min(procs, clients))
    q, r = divmod(clients, procs)
    out, start = [], 0
    for k in range(procs):
        n = q + (k < r)
        out.append(tuple(range(start, start + n)))
        start += n
    return out


def default_procs(clients: int) -> int:
    """One process per client (each its own channel, as the reference test's clients) up to the cores: more only
    compete for the cores (each process also costs ~1.3 s of CPU and ~140 MB to start, modal imported), and on the
    stand-in, which shares the machine, eight client processes on two cores starved it."""
    return max(1, min(clients, cores()))


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the system says, else the machine's)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else (os.cpu_count() or 1)


def layout(job: Job, procs: int | None) -> list[Job]:
    """``job``'s shares for ``procs`` local processes (None: ``default_procs``; 0: one share, run in this process)."""
    n = default_procs(len(job.clients)) if procs is None else max(1, procs)
    return [job.share([job.clients[i] for i in s]) for s in shares(len(job.clients), n)]


# --- file descriptors ----------------------------------------------------------------------------------------------


def nofile_limits() -> tuple[int, int]:
    """(soft, hard) RLIMIT_NOFILE; ``resource.RLIM_INFINITY`` as a large number."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    inf = resource.RLIM_INFINITY
    return (2**62 if soft == inf else soft), (2**62 if hard == inf else hard)


def raise_nofile(need: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE toward its hard limit (setrlimit(2): an unprivileged process may, up to
    the hard one; macOS refuses more than OPEN_MAX whatever the hard limit says) and return the soft limit after;
    ClientError if it is still below ``need``."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    inf = resource.RLIM_INFINITY
    if soft != inf and (hard == inf or soft < hard):
        for target in ([] if hard == inf else [hard]) + [MACOS_OPEN_MAX, need]:
            if target <= soft or (hard != inf and target > hard):
                continue
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                break
            except (ValueError, OSError):
                continue
    soft = nofile_limits()[0]
    if soft < need:
        raise ClientError(f"needs {need} file descriptors, and its limit is {soft} (ulimit -n)")
    return soft


def check_descriptors(jobs: Sequence[Job], option: str) -> None:
    """ScenarioError (naming ``option``) if a client process of ``jobs`` would need more descriptors than this
    system's hard RLIMIT_NOFILE allows (the children inherit it): checked before anything is deployed."""
    from sim.scenario import ScenarioError

    hard = nofile_limits()[1]
    worst = max(jobs, key=Job.descriptors)
    if worst.descriptors() > hard:
        n = len(worst.clients)
        raise ScenarioError(
            f"{option}: {n} client(s) per process × {min(worst.load.in_flight, worst.connection_limit)} connections "
            f"+ {FD_MARGIN} need {worst.descriptors()} file descriptors, above this system's hard limit of {hard} "
            "(ulimit -Hn); lower --connections or --calls, or spread the clients over more --client-procs"
        )


# --- one share of the clients: in this process, a child process or a container ------------------------------------


async def _prepare(job: Job) -> callers.Call | None:
    """The call of a share: its handles looked up and hydrated once (only the targets its clients use)."""
    if job.loop == "http":
        import aiohttp  # noqa: F401  # imported before t0, not on the clock

        return None
    import modal

    used = sorted({c % len(job.targets) for c in job.clients})
    handles = {k: modal.Function.from_name(*job.targets[k]) for k in used}
    await callers.hydrated(list(handles.values()))
    fns = [handles.get(k) for k in range(len(job.targets))]
    return (callers.spawn_call if job.spawn else callers.remote_call)(fns, chunk=job.chunk)


async def run_job(
    job: Job, start: Callable[[], Awaitable[float]], *, clock: Clock = time.time
) -> tuple[list[dict[str, Any]], float]:
    """Run one share: raise the descriptor limit, hydrate, ``await start()`` for t0 (ClientError if already more
    than LATE_S past), wait for it, run the loop; (its rows, t0)."""
    raise_nofile(job.descriptors())
    call = await _prepare(job)
    t0 = await start()
    if (late := clock() - t0) > LATE_S:
        who = f"clients {_span(job.clients)}"
        raise ClientError(f"{who}: ready {late:.1f} s after the common start; raise --client-lead")
    await asyncio.sleep(max(0.0, t0 - clock()))
    load, mine = job.load, job.clients
    if job.loop == "http":
        opts = {"connection_limit": job.connection_limit, "backoff": job.backoff}
        rows = await callers.server_rows(job.url, load, job.headers, t0, clients=mine, clock=clock, **opts)
    elif job.loop == "rounds":
        assert call is not None
        rows = await callers.rounds_rows(call, load, job.round_items, job.chunk_items, t0, clients=mine, clock=clock)
    else:
        assert call is not None
        rows = await callers.closed_loop_rows(call, load, t0, clients=mine, clock=clock)
    return rows, t0


def _span(clients: Sequence[int]) -> str:
    return f"{clients[0]}" if len(clients) == 1 else f"{clients[0]}-{clients[-1]}"


def _error(e: BaseException) -> str:
    from sim.cli import one_line

    return one_line(str(e)) if isinstance(e, ClientError) else one_line(f"{type(e).__name__}: {e}")


# --- the parent: where the shares run -------------------------------------------------------------------------------


@dataclass
class Clients:
    """The merged calls table, the common start, and where each share ran (the manifest's ``clients``)."""

    table: Any
    t0: float
    where: dict[str, Any]


async def run(job: Job, *, procs: int | None, driver: str = "local", app: str = "", lead_s: float = 60.0) -> Clients:
    """Run ``job`` (every client of a run): on Modal (``driver == "modal"``: one container per client of app
    ``app``'s ``drive_clients``), in this process (``procs == 0``) or in ``procs`` local processes (None: the
    default, ``default_procs``)."""
    if driver == "modal":
        rows, t0, where = await on_modal(app, [job.share([c]) for c in job.clients], lead_s)
        info = {"driver": "modal", "shares": where}
    elif procs == 0:
        rows, t0 = await run_job(job, _now)
        info = {"driver": "in-process", "shares": [{"clients": list(job.clients), "pid": os.getpid()}]}
    else:
        rows, t0, where = await in_processes(layout(job, procs))
        info = {"driver": "processes", "shares": where}
    return Clients(callers.calls_table(rows), t0, info)


async def _now() -> float:
    return time.time()


async def _first_failure(aws: Sequence[Awaitable[Any]], timeout_s: float, what: str) -> list[Any]:
    """Every result of ``aws``, in order; the first failure cancels the rest and is raised; past ``timeout_s``:
    ClientError naming ``what``."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        done, pending = await asyncio.wait(tasks, timeout=timeout_s, return_when=asyncio.FIRST_EXCEPTION)
        for t in done:
            if t.exception() is not None:
                raise t.exception()  # type: ignore[misc]
        if pending:
            raise ClientError(f"{what}: not done within {timeout_s:g} s")
        return [t.result() for t in tasks]
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _Child:
    """A client process (``python -m calibration.clients``) and its pipes; frames are a 4-byte big-endian length
    and a pickle (this project's own processes at both ends)."""

    def __init__(self, index: int, job: Job, proc: asyncio.subprocess.Process) -> None:
        self.index, self.job, self.proc = index, job, proc
        self.tail: deque[str] = deque(maxlen=5)  # its stderr's last lines, for the message if it dies
        self.drain = asyncio.ensure_future(self._drain())

    @classmethod
    async def start(cls, index: int, job: Job) -> _Child:
        P = asyncio.subprocess.PIPE
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "calibration.clients", stdin=P, stdout=P, stderr=P
        )
        child = cls(index, job, proc)
        child.send(job.as_dict())
        return child

    async def _drain(self) -> None:
        assert self.proc.stderr is not None
        async for line in self.proc.stderr:
            if text := line.decode(errors="replace").strip():
                self.tail.append(text)

    def send(self, msg: Any) -> None:
        assert self.proc.stdin is not None
        data = pickle.dumps(msg)
        self.proc.stdin.write(len(data).to_bytes(4, "big") + data)

    def name(self) -> str:
        return f"client process {self.index} (clients {_span(self.job.clients)}, pid {self.proc.pid})"

    async def receive(self, op: str) -> Any:
        assert self.proc.stdout is not None
        try:
            head = await self.proc.stdout.readexactly(4)
            kind, value = pickle.loads(await self.proc.stdout.readexactly(int.from_bytes(head, "big")))
        except (asyncio.IncompleteReadError, ConnectionError):
            rc = await self.proc.wait()
            await asyncio.wait([self.drain], timeout=1.0)
            how = f"was killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with {rc}"
            last = f": {self.tail[-1]}" if self.tail else ""
            raise ClientError(f"{self.name()} {how} before it sent its {op}{last}") from None
        if kind == "error":
            raise ClientError(f"{self.name()}: {value}")
        return value

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    async def end(self) -> None:
        self.kill()
        await self.proc.wait()
        self.drain.cancel()
        await asyncio.gather(self.drain, return_exceptions=True)


async def in_processes(jobs: Sequence[Job]) -> tuple[list[dict[str, Any]], float, list[dict[str, Any]]]:
    """Run each share of ``jobs`` in its own child process from a common t0 (the module docstring); (the rows of
    all, t0, each share's clients and pid). Every child is ended on the way out, whatever happens."""
    from calibration.ways.base import RunFailed

    children: list[_Child] = []
    try:
        for i, job in enumerate(jobs):
            children.append(await _Child.start(i, job))
        await _first_failure([c.receive("ready") for c in children], READY_S, "the client processes' start")
        t0 = time.time() + START_S
        for c in children:
            c.send(t0)
        load = jobs[0].load
        limit = START_S + load.duration_s + load.drain_s + 60.0
        outs = await _first_failure([c.receive("rows") for c in children], limit, "the client processes' rows")
    except (ClientError, OSError) as e:
        raise RunFailed(_error(e)) from None
    finally:
        for c in children:
            c.kill()  # at once, before any await: a second cancellation cannot leave one running
        await asyncio.shield(asyncio.gather(*(c.end() for c in children), return_exceptions=True))
    where = [{"clients": list(c.job.clients), "pid": c.proc.pid} for c in children]
    return [r for out in outs for r in out], t0, where


async def on_modal(app: str, jobs: Sequence[Job], lead_s: float) -> tuple[list[dict[str, Any]], float, list[Any]]:
    """Run each share of ``jobs`` as a call of app ``app``'s ``drive_clients`` (its own container), from t0 = now +
    ``lead_s``; (the rows, t0, each share's clients and container). Calls not done are cancelled on the way out
    (``FunctionCall.cancel``); the app's stop ends their containers anyway."""
    import modal

    from calibration.ways.base import RunFailed

    (fn,) = await callers.hydrated([modal.Function.from_name(app, DRIVER_FUNCTION)])
    t0 = time.time() + lead_s
    calls: list[Any] = []
    done = False
    load = jobs[0].load
    try:
        for job in jobs:
            calls.append(await fn.spawn.aio(job.as_dict(), t0))
        limit = lead_s + load.duration_s + load.drain_s + 120.0
        outs = await _first_failure([fc.get.aio() for fc in calls], limit, "the client containers")
        done = True
    except Exception as e:
        raise RunFailed(f"a client container failed: {_error(e)}") from None
    finally:
        if not done:
            for fc in calls:
                with contextlib.suppress(Exception):
                    await asyncio.shield(fc.cancel.aio())
    where = [{"clients": list(j.clients), "container": out["container"]} for j, out in zip(jobs, outs, strict=True)]
    return [r for out in outs for r in out["rows"]], t0, where


async def in_container(job: dict[str, Any], t0: float) -> dict[str, Any]:
    """A client container's share (``drive_clients``): its rows and its container (``MODAL_TASK_ID``)."""

    async def start() -> float:
        return t0

    rows, _ = await run_job(Job.from_dict(job), start)
    return {"rows": rows, "container": os.environ.get("MODAL_TASK_ID", "")}


# --- a child process ------------------------------------------------------------------------------------------------


def _read(stream: Any) -> Any:
    head = stream.read(4)
    if len(head) < 4:
        raise EOFError
    return pickle.loads(stream.read(int.from_bytes(head, "big")))


def child_main() -> int:
    """``python -m calibration.clients``: one share of a run's clients (the module docstring's protocol)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent ends us
    from sim.processes import die_with_parent

    die_with_parent(os.getppid())
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever else prints goes to stderr (the parent keeps its last lines)
    lock = threading.Lock()

    def send(kind: str, value: Any) -> None:
        data = pickle.dumps((kind, value))
        with lock:
            out.write(len(data).to_bytes(4, "big") + data)
            out.flush()

    try:
        job = Job.from_dict(_read(sys.stdin.buffer))
    except EOFError:
        return 1

    async def main() -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        go: asyncio.Future[float] = loop.create_future()

        def listen() -> None:  # the parent's t0; then its end (EOF) ends this process
            try:
                t0 = _read(sys.stdin.buffer)
                loop.call_soon_threadsafe(lambda: go.done() or go.set_result(float(t0)))
                while sys.stdin.buffer.read(1 << 16):
                    pass
            except Exception:
                pass
            os._exit(1)

        async def start() -> float:
            send("ready", os.getpid())
            threading.Thread(target=listen, daemon=True).start()
            return await go

        rows, _ = await run_job(job, start)
        return rows

    try:
        rows = asyncio.run(main())
    except BaseException as e:
        send("error", _error(e))
        return 1
    send("rows", rows)
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
