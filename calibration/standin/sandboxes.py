"""The stand-in's sandboxes (docs/sources.md §2): ``modal.Sandbox.create`` / ``exec`` / ``wait`` / ``terminate`` through
the real modal 1.6.4 client, each sandbox a real local process, each exec a real process beside it.

The protocol, as the client speaks it (modal/sandbox/ in site-packages):

- **create, V2** (the client's default: ``sandbox_v2`` is on in modal/config.py; modal/sandbox/_impl_v2.py):
  ``AuthTokenGet`` (api.py; the V2 calls carry its token as ``x-modal-auth-token``), then ``SandboxCreateV2``, which
  returns once the sandbox is placed, with its task id and its command router's access (URL and JWT).
- **create, V1** (``MODAL_SANDBOX_V2=0``, or a GPU, a network file system or a PTY; modal/sandbox/_impl_v1.py):
  ``SandboxCreate`` returns the sandbox id at once, the client polls ``SandboxGetTaskId`` (every 0.5 s,
  modal/sandbox/_common.py ``_TASK_ID_POLL_INTERVAL``) until the sandbox is placed, and fetches the router's access
  with ``TaskGetCommandRouterAccess``. A V1 sandbox id is ``sb-`` and 22 letters or digits (_common.py
  ``_is_v1_sandbox_id``: the client picks its implementation by the id's shape); a V2 task id ends in ``V``.
- **exec** (modal/sandbox/_common.py ``exec_via_tcr``) talks to a second gRPC service, the task command router
  (modal_proto.task_command_router_grpc ``TaskCommandRouter``: ``Router`` below, served on its own port), with
  the access's JWT as ``authorization: Bearer`` (modal/sandbox/_task_command_router_client.py, which reads the
  JWT's ``exp`` unverified: the stand-in's JWTs are unsigned, ``exp`` a year ahead): ``TaskExecStart``;
  ``ContainerProcess.wait`` is ``TaskExecWait``, ``poll`` is ``TaskExecPoll`` (modal/container_process.py);
  reading an exec's stdout or stderr (``StreamType.PIPE``, the default, reads only when asked: modal/io_streams.py)
  is ``TaskExecStdioRead``, streamed from an offset until the process's pipe is closed and drained, then ended.
- **wait, poll**: ``SandboxWait`` / ``SandboxWaitV2`` (a long poll of up to the request's timeout, 10 s from the
  client); **terminate**: ``SandboxTerminate`` / ``SandboxTerminateV2``; ``App.stop`` (api.py ``AppStop``) terminates
  the app's sandboxes, as Modal's does ("terminates all of its running containers and sandboxes", modal/app.py).

Assumptions of the stand-in (``params.toml`` ``[sandboxes]``; not measured on Modal):

- **placed**: a create is placed ``sandboxes.create_s`` after it arrives (no capacity limit, no queue, no rate
  limit): then ``SandboxCreateV2`` returns and ``SandboxGetTaskId`` answers the task id.
- **started**: the sandbox's container starts ``sandboxes.start_s`` after it is placed: its command is launched
  then; an exec that arrives earlier waits for it (``TaskExecStart`` returns once the exec is running).
- **lifetime**: the create's ``timeout`` counts from the start; past it the sandbox is killed, result TIMEOUT. A
  sandbox whose command exits ends (SUCCESS on 0, else FAILURE with its exit code, 128 + signal if killed).
- **processes**: the sandbox's command and each exec run as this machine's programs (the image's filesystem is
  not emulated), each in its own session (process group), in the sandbox's directory under the stand-in's
  workdir (an exec's ``workdir`` is ignored), with the stand-in's environment plus ``MODAL_TASK_ID``,
  ``MODAL_SANDBOX_ID`` and the env of inline secret sources, stdin ``/dev/null`` (stdin writes are not
  implemented), and ``PR_SET_PDEATHSIG`` SIGKILL (Linux) so that none outlives a stand-in killed outright. An
  exec of a program not found exits 127 with the error on its stderr; an exec's ``timeout_secs`` kills it.
- **ends**: terminate, a timeout, ``App.stop`` and the stand-in's shutdown (``close``) kill every process group of
  the sandbox with SIGKILL and reap each process before answering; every start and reap is logged
  (``sandbox <id> started pid <n>``, ``sandbox <id> reaped pid <n>``), so a test can check that none is left.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpclib.const
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from modal_proto import api_pb2, task_command_router_grpc
from modal_proto import task_command_router_pb2 as sr_pb2

R = api_pb2.GenericResult
CHUNK = 64 * 1024  # the most bytes of output in one TaskExecStdioRead message
STDOUT, STDERR = 1, 2


def jwt(claims: dict[str, Any]) -> str:
    """An unsigned JWT (``alg: none``) of ``claims`` with an ``exp`` a year ahead: well formed for the client's
    unverified parsing of ``exp`` (modal/_utils/auth_token_manager.py, modal/sandbox/_task_command_router_client.py
    ``_parse_jwt_expiration``)."""

    def b64(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64({'exp': int(time.time()) + 365 * 86400, **claims})}."


def _parent_death_kill() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGKILL the child when the stand-in dies (``prctl(PR_SET_PDEATHSIG)``);
    None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    PR_SET_PDEATHSIG = 1

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    return preexec


PREEXEC = _parent_death_kill()


def _env(sources: Any, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for source in sources:
        if source.HasField("env"):
            env.update(source.env.contents)
    return env | extra


async def _kill_and_reap(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL ``proc``'s process group (its own session) and wait for asyncio's child watcher to reap ``proc``.
    Not ``proc.kill()``: ``Popen.send_signal`` polls first, reaping the child behind the watcher's back (which then
    reports "Unknown child process", returncode 255)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()


@dataclass
class Exec:
    """One ``Sandbox.exec``: its process, its output so far (by file descriptor) and how it ended."""

    id: str
    proc: asyncio.subprocess.Process | None = None
    output: dict[int, bytearray] = field(default_factory=lambda: {STDOUT: bytearray(), STDERR: bytearray()})
    closed: dict[int, bool] = field(default_factory=lambda: {STDOUT: False, STDERR: False})
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    returncode: int | None = None
    task: asyncio.Task | None = None

    def exit_status(self) -> dict[str, int]:
        """``code`` or ``signal`` (TaskExecWaitResponse's ``exit_status``); empty while it runs."""
        if self.returncode is None:
            return {}
        return {"signal": -self.returncode} if self.returncode < 0 else {"code": self.returncode}


@dataclass
class Sandbox:
    """One sandbox: placed, started (its command's process), finished (its result)."""

    id: str
    task_id: str
    app_id: str
    definition: api_pb2.Sandbox
    env: dict[str, str]
    workdir: Path
    placed: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    result: api_pb2.GenericResult | None = None
    proc: asyncio.subprocess.Process | None = None
    execs: dict[str, Exec] = field(default_factory=dict)
    life: asyncio.Task | None = None

    def metadata(self) -> api_pb2.SandboxHandleMetadata:
        md = api_pb2.SandboxHandleMetadata(app_id=self.app_id)
        if self.result is not None:
            md.result.CopyFrom(self.result)
        return md


class Sandboxes:
    """Every sandbox of the stand-in (by sandbox id and task id), their lives, and the access to ``Router``."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.params = service.platform.params
        self.by_id: dict[str, Sandbox] = {}
        self.by_task: dict[str, Sandbox] = {}
        self.tokens: dict[str, str] = {}  # router JWT -> task id
        self.router_url = ""  # set by server.py once the router listens

    def log(self, text: str) -> None:
        self.service.platform.log(text)

    # --- the control plane (api.py's rpc_Sandbox* call these) ------------------------------------------------------
    def create(self, app_id: str, definition: api_pb2.Sandbox, sources: Any = (), v2: bool = True) -> Sandbox:
        """A new sandbox of ``definition`` in ``app_id``, its life begun (placed after ``create_s``)."""
        app = self.service.apps.get(app_id)
        if app is None or app.state == api_pb2.APP_STATE_STOPPED:
            raise GRPCError(Status.NOT_FOUND, f"App {app_id} not found (or stopped)")
        n = next(self.service.ids)
        sid = f"sb-standin{n:06d}-v2" if v2 else f"sb-standin{n:015d}"  # V1: 22 letters or digits after sb-
        task_id = f"ta-standinsb{n:06d}" + ("V" if v2 else "")
        workdir = Path(self.service.workdir) / "sandboxes" / sid
        workdir.mkdir(parents=True, exist_ok=True)
        env = _env(sources, MODAL_TASK_ID=task_id, MODAL_SANDBOX_ID=sid)
        sb = Sandbox(sid, task_id, app_id, definition, env, workdir)
        self.by_id[sid] = sb
        sb.life = asyncio.create_task(self._life(sb))
        return sb

    def get(self, sandbox_id: str) -> Sandbox:
        if sandbox_id not in self.by_id:
            raise GRPCError(Status.NOT_FOUND, f"Sandbox {sandbox_id} not found")
        return self.by_id[sandbox_id]

    def task(self, task_id: str) -> Sandbox:
        if task_id not in self.by_task:
            raise GRPCError(Status.NOT_FOUND, f"Task {task_id} not found")
        return self.by_task[task_id]

    def access(self, sb: Sandbox) -> api_pb2.CommandRouterAccess:
        """The URL of ``Router`` and a JWT for ``sb``'s task (the client attaches it to every router call)."""
        token = jwt({"task_id": sb.task_id, "sandbox_id": sb.id})
        self.tokens[token] = sb.task_id
        return api_pb2.CommandRouterAccess(url=self.router_url, jwt=token)

    async def wait(self, sb: Sandbox, timeout: float) -> None:
        """Until ``sb`` has finished or ``timeout`` s passed (SandboxWait's long poll)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(sb.finished.wait(), max(0.0, timeout))

    async def terminate(self, sb: Sandbox) -> api_pb2.GenericResult | None:
        """End ``sb`` (result TERMINATED) once its processes are reaped; its result if it had already finished."""
        existing = sb.result
        sb.stop.set()
        await sb.finished.wait()
        return existing

    async def stop_app(self, app_id: str) -> None:
        """Terminate every sandbox of ``app_id`` (api.py's ``_stop_app``: AppStop, a client's disconnect)."""
        await asyncio.gather(*(self.terminate(sb) for sb in self.by_id.values() if sb.app_id == app_id))

    async def close(self) -> None:
        """Terminate every sandbox left (the stand-in's shutdown)."""
        await asyncio.gather(*(self.terminate(sb) for sb in self.by_id.values()))

    # --- the RPCs' answers (api.py's hooks) ------------------------------------------------------------------------
    def auth_token(self) -> api_pb2.AuthTokenGetResponse:
        """``AuthTokenGet``: a JWT the V2 calls carry as ``x-modal-auth-token`` (not checked: the token id and
        secret authenticate every call, api.py)."""
        return api_pb2.AuthTokenGetResponse(token=jwt({"sub": "standin"}))

    async def create_v1(self, req: api_pb2.SandboxCreateRequest) -> api_pb2.SandboxCreateResponse:
        sb = self.create(req.app_id, req.definition, v2=False)
        return api_pb2.SandboxCreateResponse(sandbox_id=sb.id, metadata=sb.metadata())

    async def create_v2(self, req: api_pb2.SandboxCreateV2Request) -> api_pb2.SandboxCreateV2Response:
        """Returns once the sandbox is placed (with its task id and router access), or ended before it was."""
        sb = self.create(req.app_id, req.definition, req.secret_sources, v2=True)
        placed, ended = asyncio.ensure_future(sb.placed.wait()), asyncio.ensure_future(sb.finished.wait())
        try:
            await asyncio.wait({placed, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            placed.cancel()
            ended.cancel()
        if not sb.placed.is_set():
            raise GRPCError(Status.FAILED_PRECONDITION, f"Sandbox {sb.id} was terminated before it was placed")
        return api_pb2.SandboxCreateV2Response(
            sandbox_id=sb.id, task_id=sb.task_id, metadata=sb.metadata(), command_router_access=self.access(sb)
        )

    async def get_task_id(self, req: api_pb2.SandboxGetTaskIdRequest) -> api_pb2.SandboxGetTaskIdResponse:
        """The task id once placed (waiting up to ``timeout`` for it); with the result once finished."""
        sb = self.get(req.sandbox_id)
        if req.timeout > 0 and not sb.placed.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(sb.placed.wait(), req.timeout)
        resp = api_pb2.SandboxGetTaskIdResponse(task_id=sb.task_id if sb.placed.is_set() else "")
        if sb.result is not None:
            resp.task_result.CopyFrom(sb.result)
        return resp

    async def wait_rpc(self, req: api_pb2.SandboxWaitRequest) -> api_pb2.SandboxWaitResponse:
        sb = self.get(req.sandbox_id)
        await self.wait(sb, req.timeout)
        return api_pb2.SandboxWaitResponse(result=sb.result or R(), metadata=sb.metadata())

    async def terminate_rpc(self, req: api_pb2.SandboxTerminateRequest) -> api_pb2.SandboxTerminateResponse:
        existing = await self.terminate(self.get(req.sandbox_id))
        return api_pb2.SandboxTerminateResponse(existing_result=existing)

    async def task_access(self, req: api_pb2.TaskGetCommandRouterAccessRequest) -> Any:
        access = self.access(self.task(req.task_id))
        return api_pb2.TaskGetCommandRouterAccessResponse(jwt=access.jwt, url=access.url)

    async def sandbox_access(self, req: api_pb2.SandboxGetCommandRouterAccessRequest) -> Any:
        sb = self.get(req.sandbox_id) if req.sandbox_id else self.task(req.task_id)
        if not sb.placed.is_set():
            raise GRPCError(Status.FAILED_PRECONDITION, f"Sandbox {sb.id} is not placed yet")
        access = self.access(sb)
        return api_pb2.SandboxGetCommandRouterAccessResponse(jwt=access.jwt, url=access.url)

    # --- a sandbox's life ------------------------------------------------------------------------------------------
    async def _until(self, sb: Sandbox, work: Coroutine[Any, Any, Any], timeout: float | None) -> str:
        """Run ``work`` until it is done (``"done"``), ``sb`` is told to stop (``"stop"``) or ``timeout`` passed."""
        main, stop = asyncio.ensure_future(work), asyncio.ensure_future(sb.stop.wait())
        done, _ = await asyncio.wait({main, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        for t in (main, stop):
            t.cancel()
        return "done" if main in done else "stop" if stop in done else "timeout"

    async def _life(self, sb: Sandbox) -> None:
        p = self.params
        result = R(status=R.GENERIC_STATUS_TERMINATED)
        try:
            if await self._until(sb, asyncio.sleep(p.create_s), None) != "done":
                return
            self.by_task[sb.task_id] = sb
            sb.placed.set()
            if await self._until(sb, asyncio.sleep(p.start_s), None) != "done":
                return
            args = list(sb.definition.entrypoint_args) or ["sleep", "infinity"]  # an image's default CMD: stays up
            try:
                null = asyncio.subprocess.DEVNULL
                sb.proc = await self._spawn(args, sb, sb.env, null, null)
            except OSError as e:
                result = R(status=R.GENERIC_STATUS_FAILURE, exitcode=127, exception=f"{args[0]}: {e}")
                return
            self.log(f"sandbox {sb.id} started pid {sb.proc.pid}: {' '.join(args)}")
            sb.started.set()
            timeout = sb.definition.timeout_secs or 300  # Sandbox.create's default (modal/sandbox/_sandbox.py)
            how = await self._until(sb, sb.proc.wait(), timeout)
            if how == "timeout":
                result = R(status=R.GENERIC_STATUS_TIMEOUT, exception=f"Sandbox timed out after {timeout} s")
            elif how == "done":
                rc = sb.proc.returncode or 0
                code = 128 - rc if rc < 0 else rc
                status = R.GENERIC_STATUS_SUCCESS if code == 0 else R.GENERIC_STATUS_FAILURE
                result = R(status=status, exitcode=code)
        finally:
            await self._end(sb, result)

    async def _end(self, sb: Sandbox, result: api_pb2.GenericResult) -> None:
        """Kill and reap every process of ``sb``, then record its result (shielded: a cancelled life still reaps)."""

        async def reap() -> None:
            procs = [sb.proc] + [e.proc for e in sb.execs.values()]
            await asyncio.gather(*(_kill_and_reap(proc) for proc in procs if proc is not None))
            for e in list(sb.execs.values()):
                if e.task is not None:
                    await asyncio.gather(e.task, return_exceptions=True)
            if sb.proc is not None:
                self.log(f"sandbox {sb.id} reaped pid {sb.proc.pid}")
            for e in list(sb.execs.values()):
                if e.proc is not None:
                    self.log(f"sandbox {sb.id} reaped pid {e.proc.pid} (exec)")
            if sb.result is None:
                sb.result = result
            sb.started.set()  # an exec waiting for the start sees the sandbox finished
            sb.finished.set()

        await asyncio.shield(reap())

    async def _spawn(
        self, args: list[str], sb: Sandbox, env: dict[str, str], stdout: int, stderr: int
    ) -> asyncio.subprocess.Process:
        """A process of ``sb``: its own session, the sandbox's directory, stdin /dev/null, killed if we die."""
        return await asyncio.create_subprocess_exec(
            *args,
            cwd=sb.workdir,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            preexec_fn=PREEXEC,
        )

    # --- execs (Router's calls) ------------------------------------------------------------------------------------
    async def exec_start(self, req: sr_pb2.TaskExecStartRequest) -> None:
        """Start ``req``'s command in its sandbox once that has started (idempotent by ``exec_id``)."""
        sb = self.task(req.task_id)
        await sb.started.wait()
        if sb.finished.is_set() or sb.stop.is_set():
            raise GRPCError(Status.NOT_FOUND, f"Task {req.task_id} has finished")
        if req.exec_id in sb.execs:
            return
        ex = Exec(req.exec_id)
        sb.execs[ex.id] = ex
        PIPE = sr_pb2.TaskExecStdoutConfig.TASK_EXEC_STDOUT_CONFIG_PIPE
        pipe_out = req.stdout_config == PIPE
        pipe_err = req.stderr_config == sr_pb2.TaskExecStderrConfig.TASK_EXEC_STDERR_CONFIG_PIPE
        out = asyncio.subprocess.PIPE if pipe_out else asyncio.subprocess.DEVNULL
        err = asyncio.subprocess.PIPE if pipe_err else asyncio.subprocess.DEVNULL
        env = sb.env | _env(req.secret_sources)
        try:
            ex.proc = await self._spawn(list(req.command_args), sb, env, out, err)
        except OSError as e:  # a program not found: a shell's 127, the error on stderr
            if pipe_err:
                ex.output[STDERR] += f"{req.command_args[0]}: {e.strerror or e}\n".encode()
            ex.closed = {STDOUT: True, STDERR: True}
            ex.returncode = 127
            ex.done.set()
            ex.changed.set()
            return
        timeout = req.timeout_secs if req.HasField("timeout_secs") and req.timeout_secs > 0 else None
        ex.task = asyncio.create_task(self._exec_life(ex, timeout))
        if sb.stop.is_set():  # terminated while it was starting: the sandbox's reaping may have missed it
            await _kill_and_reap(ex.proc)
            await asyncio.gather(ex.task, return_exceptions=True)
            self.log(f"sandbox {sb.id} reaped pid {ex.proc.pid} (exec)")

    async def _exec_life(self, ex: Exec, timeout: float | None) -> None:
        proc = ex.proc
        assert proc is not None

        async def pump(fd: int, stream: asyncio.StreamReader | None) -> None:
            if stream is not None:
                while data := await stream.read(CHUNK):
                    ex.output[fd] += data
                    ex.changed.set()
            ex.closed[fd] = True
            ex.changed.set()

        pumps = asyncio.gather(pump(STDOUT, proc.stdout), pump(STDERR, proc.stderr))  # as it comes: a full pipe blocks
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            await _kill_and_reap(proc)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pumps, 5)  # its group is dead: the pipes close, unless a process left it
            ex.closed = {STDOUT: True, STDERR: True}
            ex.returncode = proc.returncode
            ex.done.set()
            ex.changed.set()

    def exec(self, task_id: str, exec_id: str) -> Exec:
        sb = self.task(task_id)
        if exec_id not in sb.execs:
            raise GRPCError(Status.NOT_FOUND, f"Exec {exec_id} not found in task {task_id}")
        return sb.execs[exec_id]


class Router:
    """The task command router (modal_proto.task_command_router_grpc ``TaskCommandRouterBase``, grpclib's
    ``__mapping__``): the exec calls below answer; any other answers UNIMPLEMENTED with its name and is logged.
    Every call must carry a router JWT the stand-in issued (``authorization: Bearer``), else UNAUTHENTICATED (the
    client then fetches a fresh one once and retries)."""

    def __init__(self, sandboxes: Sandboxes) -> None:
        self.sandboxes = sandboxes
        self.unimplemented: list[str] = []

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        class Names:
            def __getattr__(self, name: str) -> str:
                return name

        base = task_command_router_grpc.TaskCommandRouterBase
        out = {}
        for path, h in base.__mapping__(Names()).items():  # type: ignore[arg-type]
            out[path] = grpclib.const.Handler(self._handler(h.func, h.cardinality), *h[1:])
        return out

    def _handler(self, name: str, cardinality: grpclib.const.Cardinality) -> Callable:
        impl = getattr(self, f"rpc_{name}", None)

        async def handle(stream: Any) -> None:
            task_id = self._authenticate(stream.metadata)
            request = await stream.recv_message()
            if impl is None:
                self.unimplemented.append(name)
                self.sandboxes.log(f"unimplemented (router): {name}")
                raise GRPCError(Status.UNIMPLEMENTED, f"the Modal stand-in's command router does not implement {name}")
            if getattr(request, "task_id", task_id) != task_id:
                raise GRPCError(Status.PERMISSION_DENIED, f"the token is not for task {request.task_id}")
            await answer(stream, impl, request, cardinality)

        return handle

    def _authenticate(self, metadata: Any) -> str:
        auth = metadata.get("authorization", "")
        task_id = self.sandboxes.tokens.get(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None
        if task_id is None:
            raise GRPCError(Status.UNAUTHENTICATED, "invalid command router token (the Modal stand-in)")
        return task_id

    async def rpc_TaskExecStart(self, req: sr_pb2.TaskExecStartRequest) -> sr_pb2.TaskExecStartResponse:
        await self.sandboxes.exec_start(req)
        return sr_pb2.TaskExecStartResponse()

    async def rpc_TaskExecWait(self, req: sr_pb2.TaskExecWaitRequest) -> sr_pb2.TaskExecWaitResponse:
        ex = self.sandboxes.exec(req.task_id, req.exec_id)
        await ex.done.wait()
        return sr_pb2.TaskExecWaitResponse(**ex.exit_status())

    async def rpc_TaskExecPoll(self, req: sr_pb2.TaskExecPollRequest) -> sr_pb2.TaskExecPollResponse:
        ex = self.sandboxes.exec(req.task_id, req.exec_id)
        return sr_pb2.TaskExecPollResponse(**ex.exit_status())

    async def rpc_TaskExecStdioRead(
        self, req: sr_pb2.TaskExecStdioReadRequest
    ) -> AsyncIterator[sr_pb2.TaskExecStdioReadResponse]:
        """The exec's output on ``file_descriptor`` from ``offset``, as it comes, until its pipe is closed and all of
        it sent; then the stream ends (the client's EOF). Never an empty message (the client rejects those)."""
        ex = self.sandboxes.exec(req.task_id, req.exec_id)
        fd = STDERR if req.file_descriptor == sr_pb2.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR else STDOUT
        offset = req.offset
        while True:
            ex.changed.clear()
            buf = ex.output[fd]
            while offset < len(buf):
                chunk = bytes(buf[offset : offset + CHUNK])
                offset += len(chunk)
                yield sr_pb2.TaskExecStdioReadResponse(data=chunk)
            if ex.closed[fd] and offset >= len(ex.output[fd]):
                return
            await ex.changed.wait()


async def answer(stream: Any, impl: Any, request: Any, cardinality: Any) -> None:
    """Send ``impl(request)``'s reply on ``stream``: each message of a server stream, else the one reply (both
    services' handlers: the API's and the command router's)."""
    if cardinality is grpclib.const.Cardinality.UNARY_STREAM:
        async for reply in impl(request):
            await stream.send_message(reply)
    else:
        await stream.send_message(await impl(request))
