"""The stand-in's platform, in wall time: each deployed Function's input plane, its containers and its autoscaler.

The mechanisms are the simulator's (docs/sources.md §1, models/inputs/platform/function.py), run for real with known
parameters (``Params``, from a parameter file; calibration/standin/params.toml), so that a fit of the traces taken
through the real modal client can be checked against the truth:

- **accepted**: an input is accepted under a token bucket per Function and call style (``.remote`` sync,
  ``.spawn`` async: ``limits.*_accept_rate``/``_burst``) and a cap on the inputs pending (``limits.*_pending_cap``);
  past either the call is rejected with gRPC RESOURCE_EXHAUSTED and Modal's own texts ("Input rate limit (200/s)
  exceeded for function …", "Function … reached pending input queue limit (2000)").
- **started**: a pending input starts on a container with a free slot (``max_inputs`` per container,
  ``@modal.concurrent``) under the start limit, a token bucket (``limits.start_rate``, ``limits.start_burst``).
  A batched Function (``@modal.batched``) starts up to ``max_batch_size`` pending inputs as one call, waiting up to
  ``wait_ms`` for a batch to fill.
- **containers**: worker processes (calibration/standin/container.py) running the app's own code in the image's
  environment (its ``ENV`` directives). The platform's part of a cold start (scheduling, image, runtime boot; here
  the interpreter's start and modal's import) takes ``autoscaler.cold_start_s`` at the least (more if the process
  is slower); then the user's part runs (the app's module imported, its ``@modal.enter`` methods), as long as it
  takes, and the container is ready.
- **the autoscaler** decides every ``autoscaler.interval_s``, and at once when work reaches an empty pool (the
  first input triggers a cold start): containers for the inputs running and pending at ``target_inputs`` (else
  ``max_inputs``) each, between ``min_containers`` and ``max_containers``, at most ``autoscaler.scaleup_step``
  more per decision (0: no cap); a container idle for ``autoscaler.scaledown_window_s`` is stopped.
- **overheads**: an input becomes pending ``overhead.submit_s`` after it is accepted, and its output visible
  ``overhead.result_s`` after its container returns it.
- **sandboxes** (calibration/standin/sandboxes.py): a create is placed ``sandboxes.create_s`` after it arrives, and
  its command starts ``sandboxes.start_s`` after that (assumptions of the stand-in, not Modal's figures).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import os
import pickle
import socket
import sys
import time
import tomllib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

CONTAINER_SCRIPT = Path(__file__).resolve().parent / "container.py"
STDERR_LINES = 20  # a container's last stderr lines kept, to say why it died
PROJECT = Path(__file__).resolve().parents[2]  # hidden from containers: they see only what an app ships
PARAMS = Path(__file__).resolve().parent / "params.toml"
SYNC, ASYNC = "sync", "async"


class Rejected(Exception):
    """An input past a limit (gRPC RESOURCE_EXHAUSTED with Modal's text)."""


@dataclass(frozen=True)
class Params:
    """The platform's known parameters (the simulator's keys; calibration/standin/params.toml)."""

    sync_accept_rate: float = 200.0
    sync_accept_burst: float = 1000.0
    sync_pending_cap: int = 2000
    async_accept_rate: float = 1500.0
    async_accept_burst: float = 8000.0
    async_pending_cap: int = 1_000_000
    start_rate: float = 533.0
    start_burst: float = 17.6
    interval_s: float = 1.0
    scaleup_step: int = 0
    cold_start_s: float = 1.0
    scaledown_window_s: float = 60.0
    submit_s: float = 0.0
    result_s: float = 0.0
    proxy_latency_s: float = 0.0
    create_s: float = 0.5
    start_s: float = 0.5

    SECTIONS: ClassVar[dict[str, tuple[str, ...]]] = {
        "limits": ("sync_accept_rate", "sync_accept_burst", "sync_pending_cap", "async_accept_rate",
                   "async_accept_burst", "async_pending_cap", "start_rate", "start_burst"),
        "autoscaler": ("interval_s", "scaleup_step", "cold_start_s", "scaledown_window_s"),
        "overhead": ("submit_s", "result_s"),
        "server": ("proxy_latency_s",),
        "sandboxes": ("create_s", "start_s"),
    }  # fmt: skip

    @classmethod
    def load(cls, path: Path = PARAMS) -> Params:
        """The parameters of a TOML file of the sections above (every key optional; an unknown one is an error)."""
        if not path.is_file():  # a folder, a named pipe or a device would never end or never parse
            raise ValueError(f"{path}: not a regular file")
        if path.stat().st_size > 1_000_000:
            raise ValueError(f"{path}: over 1 MB, not a parameter file")
        try:
            data = tomllib.loads(path.read_text())
        except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as e:  # (nested thousands deep)
            raise ValueError(f"{path}: not TOML ({e})") from None
        values: dict[str, Any] = {}
        for section, table in data.items():
            if section not in cls.SECTIONS or not isinstance(table, dict):
                raise ValueError(f"{path}: unknown section [{section}] (known: {', '.join(cls.SECTIONS)})")
            for key, value in table.items():
                if key not in cls.SECTIONS[section]:
                    raise ValueError(f"{path}: unknown key {section}.{key}")
                number = isinstance(value, int | float) and not isinstance(value, bool)
                low, high = cls.bounds(key)
                if not number or not math.isfinite(value) or not (value > 0 if low == 0 else value >= 0):
                    need = "> 0" if low == 0 else "≥ 0"
                    raise ValueError(f"{path}: {section}.{key} must be a finite number {need}, got {value!r}")
                if value > high:
                    raise ValueError(f"{path}: {section}.{key} must be at most {high:g}, got {value!r}")
                if cls.__dataclass_fields__[key].type == "int" and value != int(value):
                    raise ValueError(f"{path}: {section}.{key} must be a whole number, got {value!r}")
                values[key] = value
        return cls(**values)

    # what the stand-in can run in wall time: rates and the decision interval above 0 (a rate of 0 starts nothing,
    # an interval of 0 spins), every duration within an hour, counts within a billion
    POSITIVE: ClassVar[tuple[str, ...]] = ("sync_accept_rate", "async_accept_rate", "start_rate", "interval_s")

    @classmethod
    def bounds(cls, key: str) -> tuple[float, float]:
        """(0 if the key must be above 0 else -1, its greatest value)."""
        return (0 if key in cls.POSITIVE else -1), (3600.0 if key.endswith("_s") else 1e9)

    def keys(self) -> dict[str, float]:
        """Every parameter under its dotted name (``limits.start_rate``, ...)."""
        return {f"{s}.{k}": getattr(self, k) for s, ks in self.SECTIONS.items() for k in ks}


class Bucket:
    """A token bucket in wall time: ``rate`` tokens/s, at most ``burst`` stored; starts full."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst = rate, max(1.0, burst)
        self.tokens, self.t = self.burst, time.monotonic()

    def _refill(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.t) * self.rate)
        self.t = now

    def take(self) -> bool:
        self._refill()
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False

    async def wait(self) -> None:
        while not self.take():
            await asyncio.sleep((1 - self.tokens) / self.rate)


@dataclass
class Input:
    id: str
    call: Call
    idx: int
    args: bytes  # modal's serialization of (args, kwargs), unpickled in the container
    method: str
    accepted_at: float = field(default_factory=time.time)


@dataclass
class Call:
    """A function call: its inputs' outputs as they arrive (``FunctionGetOutputs`` waits on ``changed``)."""

    id: str
    function: Function
    outputs: dict[int, dict[str, Any]] = field(default_factory=dict)
    unfinished: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def put(self, idx: int, output: dict[str, Any]) -> None:
        self.outputs[idx] = output
        self.unfinished -= 1
        self.changed.set()


class Container:
    """One worker process running the Function's code (calibration/standin/container.py)."""

    ids = itertools.count(1)

    def __init__(self, fn: Function) -> None:
        self.fn, self.id = fn, f"ta-standin{next(Container.ids):06d}"
        self.ready, self.stopped = False, False
        self.running: dict[str, list[Input]] = {}  # message id -> the inputs it carries
        self.idle_since = time.monotonic()
        self.local_port = 0
        self.proxied = 0  # requests in flight from the proxy (servers)
        self.launched = time.monotonic()
        self.stderr: list[str] = []  # the last lines it wrote to stderr (when the platform is quiet)
        self.was_ready = False
        self.stopping = False  # the platform stops it (scale-down, shutdown): an exit that is no failure
        self.task = asyncio.create_task(self._run())

    @property
    def load(self) -> int:
        return len(self.running)

    async def _run(self) -> None:
        mine, theirs = socket.socketpair()
        spec = dict(self.fn.spec)
        if self.fn.server_port:
            self.local_port = free_port()
            spec |= {"server_port": self.fn.server_port, "local_port": self.local_port}
        spec["not_before"] = time.time() + self.fn.params.cold_start_s - (time.monotonic() - self.launched)
        env = {**os.environ, **spec.pop("env", {}), **self.fn.platform.client_env}
        env |= {"MODAL_TASK_ID": self.id, "SCALESIM_STANDIN_HIDE": str(PROJECT)}
        env.pop("PYTHONPATH", None)
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(CONTAINER_SCRIPT),
            str(theirs.fileno()),
            json.dumps(spec),
            pass_fds=(theirs.fileno(),),
            env=env,
            cwd=spec["root"],
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE if self.fn.platform.quiet else None,
        )
        theirs.close()
        errors = asyncio.create_task(self._stderr_tail()) if self.proc.stderr else None
        self.reader, self.writer = await asyncio.open_connection(sock=mine)
        failed = False
        try:
            while True:
                head = await self.reader.readexactly(4)
                msg = pickle.loads(await self.reader.readexactly(int.from_bytes(head, "big")))
                if msg["op"] == "ready":
                    self.ready = self.was_ready = True
                    self.fn.wake()
                elif msg["op"] == "failed":
                    failed = True
                    self.fn.platform.log(f"container {self.id} of {self.fn.name} failed to start: {msg['error']}")
                    self.fn.fail_start(msg)
                    break
                else:
                    self.fn.finished(self, msg)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            if not self.was_ready and not failed and not self.stopping:  # it died before it could say why
                await self.proc.wait()
                if errors:
                    await errors
                tail = " | ".join(self.stderr[-STDERR_LINES:]) or "no output"
                error = f"container exited with code {self.proc.returncode} before it was ready: {tail}"
                self.fn.platform.log(f"container {self.id} of {self.fn.name} failed to start: {error}")
                self.fn.fail_start({"error": error, "traceback": "\n".join(self.stderr)})
            self.stopped, self.ready = True, False
            for inputs in self.running.values():
                self.fn.lost(self, inputs)
            self.running.clear()
            self.fn.wake()

    async def _stderr_tail(self) -> None:
        """Keep the last lines the container wrote to stderr (read as it writes: a pipe nobody reads blocks it)."""
        assert self.proc.stderr is not None
        async for line in self.proc.stderr:
            self.stderr.append(line.decode(errors="replace").rstrip())
            del self.stderr[:-STDERR_LINES]

    async def send(self, mid: str, inputs: list[Input], batched: bool) -> None:
        self.running[mid] = inputs
        raw = [i.args for i in inputs]
        data = pickle.dumps({"op": "call", "id": mid, "args": raw, "batched": batched, "method": inputs[0].method})
        self.writer.write(len(data).to_bytes(4, "big") + data)
        await self.writer.drain()

    async def stop(self) -> None:
        self.stopping = True
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 5)
            except TimeoutError:
                self.proc.kill()
        await self.task


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Function:
    """A deployed Function's input plane, containers and autoscaler (the module docstring)."""

    def __init__(self, platform: Platform, fid: str, name: str, spec: dict[str, Any], opts: dict[str, Any]) -> None:
        self.platform, self.id, self.name, self.spec = platform, fid, name, spec
        self.params = platform.params
        p = self.params
        self.max_inputs = max(1, int(opts.get("max_inputs") or 1))
        self.target_inputs = int(opts.get("target_inputs") or 0) or self.max_inputs
        self.max_containers = int(opts.get("max_containers") or 0) or 10**6
        self.min_containers = int(opts.get("min_containers") or 0)
        self.batch_size = int(opts.get("batch_max_size") or 0)
        self.batch_linger_s = float(opts.get("batch_linger_ms") or 0) / 1000
        self.single_use = bool(opts.get("single_use"))
        self.server_port = int(opts.get("server_port") or 0)
        self.target_concurrency = int(opts.get("target_concurrency") or 0) or self.max_inputs
        self.last_request = -math.inf  # a server's last request at the proxy (monotonic)
        self.accept = {SYNC: Bucket(p.sync_accept_rate, p.sync_accept_burst),
                       ASYNC: Bucket(p.async_accept_rate, p.async_accept_burst)}  # fmt: skip
        self.pending_cap = {SYNC: p.sync_pending_cap, ASYNC: p.async_pending_cap}
        self.start = Bucket(p.start_rate, p.start_burst)
        self.pending: deque[Input] = deque()
        self.containers: list[Container] = []
        self.started_total = 0
        self.messages = itertools.count(1)
        self._wake = asyncio.Event()
        self.tasks = [asyncio.create_task(self._dispatch()), asyncio.create_task(self._autoscale())]

    # --- accepted --------------------------------------------------------------------------------------------------
    def submit(self, inp: Input, style: str) -> None:
        """Accept ``inp`` or raise Rejected (the accept limit, then the pending cap)."""
        if not self.accept[style].take():
            rate = self.params.sync_accept_rate if style == SYNC else self.params.async_accept_rate
            raise Rejected(f"Input rate limit ({rate:g}/s) exceeded for function {self.name}")
        if len(self.pending) >= self.pending_cap[style]:
            raise Rejected(f"Function {self.name} reached pending input queue limit ({self.pending_cap[style]})")
        inp.call.unfinished += 1
        if self.params.submit_s > 0:
            asyncio.get_running_loop().call_later(self.params.submit_s, self._enqueue, inp)
        else:
            self._enqueue(inp)

    def _enqueue(self, inp: Input) -> None:
        self.pending.append(inp)
        if not any(not c.stopped for c in self.containers):
            self.decide()  # work at an empty pool: a decision now, not at the next tick (docs/sources.md §1)
        self.wake()

    def wake(self) -> None:
        self._wake.set()

    # --- started ---------------------------------------------------------------------------------------------------
    def _free(self) -> Container | None:
        ready = [c for c in self.containers if c.ready and not c.stopped and c.load < self.max_inputs]
        if self.single_use:
            ready = [c for c in ready if not getattr(c, "used", False)]
        return max(ready, key=lambda c: c.load) if ready else None  # fill the busiest first (the pool can shrink)

    async def _dispatch(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self.pending and (c := self._free()) is not None:
                await self.start.wait()
                if c.stopped or not self.pending:
                    break
                if self.batch_size > 1 and len(self.pending) < self.batch_size and self.batch_linger_s > 0:
                    await asyncio.sleep(self.batch_linger_s)  # let the batch fill (modal.batched's wait_ms)
                n = max(1, self.batch_size)
                batch = [self.pending.popleft() for _ in range(min(n, len(self.pending)))]
                if not batch:
                    break
                c.used = True  # type: ignore[attr-defined]
                self.started_total += len(batch)
                await c.send(f"m{next(self.messages)}", batch, self.batch_size > 0)

    def finished(self, c: Container, msg: dict[str, Any]) -> None:
        inputs = c.running.pop(msg["id"], [])
        c.idle_since = time.monotonic()
        results: list[Any] = [None] * len(inputs)
        if msg["ok"] and self.batch_size > 0:
            results = pickle.loads(msg["data"])
        for k, inp in enumerate(inputs):
            if msg["ok"]:
                data = pickle.dumps(results[k]) if self.batch_size > 0 else msg["data"]
                out = {"ok": True, "data": data}
            else:
                out = {"ok": False, "error": msg["error"], "traceback": msg["traceback"], "data": msg["data"]}
            out |= {"task_id": c.id, "input_id": inp.id, "started": msg["started"], "ended": time.time()}
            self._deliver(inp, out)
        if self.single_use:
            self.platform.background(c.stop())
        self.wake()

    def _deliver(self, inp: Input, out: dict[str, Any]) -> None:
        if self.params.result_s > 0:
            asyncio.get_running_loop().call_later(self.params.result_s, inp.call.put, inp.idx, out)
        else:
            inp.call.put(inp.idx, out)

    def lost(self, c: Container, inputs: list[Input]) -> None:
        for inp in inputs:
            out = {"ok": False, "internal": True, "error": f"container {c.id} stopped", "data": b""}
            self._deliver(inp, out | {"task_id": c.id, "input_id": inp.id})

    def fail_start(self, msg: dict[str, Any]) -> None:
        """A container that cannot load the Function fails the inputs pending (Modal: a crash-looping container's
        error escalated to the inputs), so that callers hear of it instead of waiting."""
        while self.pending:
            inp = self.pending.popleft()
            out = {"ok": False, "error": msg["error"], "traceback": msg["traceback"], "data": b""}
            self._deliver(inp, out | {"task_id": "", "input_id": inp.id})

    # --- the autoscaler --------------------------------------------------------------------------------------------
    def demand(self) -> int:
        """The inputs running and pending (a server's: the requests in flight at its proxy)."""
        if self.server_port:
            return self.platform.proxy_load.get(self.id, 0)
        running = sum(len(v) for c in self.containers for v in c.running.values())
        return running + len(self.pending)

    def wanted(self) -> int:
        if self.server_port:  # requests in flight over target_concurrency; one while requests keep coming
            n = math.ceil(self.demand() / self.target_concurrency)
            if time.monotonic() - self.last_request < self.params.scaledown_window_s:
                n = max(n, 1)
        else:
            n = math.ceil(self.demand() / (self.target_inputs * max(1, self.batch_size)))
        return max(self.min_containers, min(self.max_containers, n))

    def requested(self) -> None:
        """A request reached a server's proxy: with no container live, one starts now (the first request
        triggers a cold start, docs/sources.md §1)."""
        self.last_request = time.monotonic()
        if not any(not c.stopped for c in self.containers):
            self.containers.append(Container(self))

    def decide(self) -> None:
        """One scaling decision's scale-up: the containers wanted, at most ``autoscaler.scaleup_step`` more (0: no
        cap)."""
        self.containers = [c for c in self.containers if not c.stopped]
        add = self.wanted() - len(self.containers)
        if self.params.scaleup_step:
            add = min(add, self.params.scaleup_step)
        for _ in range(add):
            self.containers.append(Container(self))

    async def _autoscale(self) -> None:
        while True:
            self.decide()
            want = self.wanted()
            live = [c for c in self.containers if not c.stopped]
            now = time.monotonic()
            idle = [c for c in live if c.ready and c.load == 0 and now - c.idle_since > self.params.scaledown_window_s]
            for c in idle[: max(0, len(live) - max(want, self.min_containers))]:
                self.platform.background(c.stop())
            await asyncio.sleep(self.params.interval_s)

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*(c.stop() for c in self.containers), return_exceptions=True)
        self.containers.clear()


class Platform:
    """Every deployed Function, the proxy's load per server Function, and where the stand-in logs."""

    def __init__(self, params: Params, quiet: bool = True) -> None:
        self.params, self.quiet = params, quiet
        self.functions: dict[str, Function] = {}
        self.proxy_load: dict[str, int] = {}
        # what a container's own modal client is given to reach the stand-in (a Modal container's client reaches
        # Modal's API with the task's identity; here the server's URL and its token): set by server.serve
        self.client_env: dict[str, str] = {}
        self.tasks: set[asyncio.Task] = set()

    def background(self, coro: Any) -> None:
        """Run ``coro`` as a task kept until it is done."""
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def log(self, text: str) -> None:
        print(f"standin: {text}", file=sys.stderr, flush=True)
