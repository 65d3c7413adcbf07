"""A stand-in container: one worker process that runs a deployed Function's own code, as a Modal container does.

Started by calibration/standin/platform.py as ``python container.py FD SPEC`` (a script, not ``-m``: the project's
own folder must not be on its path). It sees only what the app shipped: the image's mounted source under the
container's ``root`` (Modal mounts it at ``/root``, which is on ``sys.path``), and the interpreter's site-packages
standing in for the image's pip packages; the project's editable install is taken off the path, so a file the app
did not ship (a ``.toml`` that ``add_local_python_source``'s default ``ignore`` drops) is missing here as it would
be on Modal.

The platform's part of its cold start ends at ``not_before`` (the runtime booted, modal imported: it waits until then);
the user's part follows. It loads the Function as modal's container runtime does (modal/_runtime/user_code_imports.py):
a function by module and name, or unpickled when it was sent ``serialized``; a class is instantiated and its
``@modal.enter`` methods run (``_find_callables_for_obj``). A server's port is mapped to the one the platform gave this
container (what a container's own network namespace does on Modal). Then it reads inputs from the platform over the
socket ``FD`` and answers each with its result or its exception, running up to as many at once as it is sent.

Frames both ways: a 4-byte big-endian length, then a pickle of a dict.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import pickle
import socket
import sys
import time
import traceback
from typing import Any


def hidden(entry: str, project: str, interpreter: tuple[str, ...]) -> bool:
    """Whether a ``sys.path`` entry is the project's own source: strictly under the project's folder (a folder
    beside it whose name starts the same is not) and not the interpreter's (a virtual environment inside the
    checkout holds the image's packages: modal among them)."""

    def under(path: str, folder: str) -> bool:
        return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)

    path = os.path.abspath(entry)
    return bool(project) and under(path, project) and not any(under(path, p) for p in interpreter)


def isolate(root: str) -> None:
    """The container's path: its mounted source first; the project's editable install taken off (its finder and
    any path entry of the project's source, ``SCALESIM_STANDIN_HIDE``: ``hidden``)."""
    project = os.path.abspath(os.environ["SCALESIM_STANDIN_HIDE"]) if os.environ.get("SCALESIM_STANDIN_HIDE") else ""
    interpreter = tuple(dict.fromkeys(os.path.abspath(p) for p in (sys.prefix, sys.exec_prefix)))
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
    sys.path[:] = [p for p in sys.path if p and not hidden(p, project, interpreter)]
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p) != here]
    sys.path.insert(0, root)
    os.chdir(root)


def map_port(server_port: int, local_port: int) -> None:
    """Bind the server's port to ``local_port`` instead (the container's network namespace)."""
    bind = socket.socket.bind

    def mapped(self: socket.socket, address: Any) -> None:
        if isinstance(address, tuple) and len(address) >= 2 and address[1] == server_port:
            address = ("127.0.0.1", local_port, *address[2:])
        bind(self, address)

    socket.socket.bind = mapped  # type: ignore[method-assign]


async def load(spec: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """(callables by method name, the class instance or None), the ``@modal.enter`` methods run."""
    from modal._partial_function import _find_callables_for_obj, _PartialFunctionFlags

    if spec.get("serialized"):
        with open(spec["serialized"], "rb") as f:
            obj = pickle.load(f)
    else:
        import importlib

        obj = getattr(importlib.import_module(spec["module"]), spec["name"])
    if not spec.get("is_class"):
        return {"": getattr(obj, "raw_f", obj)}, None
    instance = obj()
    for flags in (_PartialFunctionFlags.ENTER_PRE_SNAPSHOT, _PartialFunctionFlags.ENTER_POST_SNAPSHOT):
        for enter in _find_callables_for_obj(instance, flags).values():
            if inspect.iscoroutine(out := enter()):
                await out
    return dict(_find_callables_for_obj(instance, _PartialFunctionFlags.CALLABLE_INTERFACE)), instance


async def call(fn: Any, args: tuple, kwargs: dict) -> Any:
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


async def serve(fd: int, spec: dict[str, Any]) -> None:
    reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=fd))
    lock = asyncio.Lock()

    async def send(msg: dict[str, Any]) -> None:
        data = pickle.dumps(msg)
        async with lock:
            writer.write(len(data).to_bytes(4, "big") + data)
            await writer.drain()

    try:  # a container that cannot boot (modal missing from its path) or load the Function says so, then exits
        isolate(spec["root"])
        import modal._partial_function  # noqa: F401  # the runtime boots (the platform's part of the cold start)

        await asyncio.sleep(max(0.0, spec.get("not_before", 0.0) - time.time()))  # then the user's: import, enter
        if spec.get("server_port"):
            map_port(spec["server_port"], spec["local_port"])
        methods, instance = await load(spec)
    except BaseException as e:
        await send({"op": "failed", "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
        return
    await send({"op": "ready", "t": time.time()})

    async def run(msg: dict[str, Any]) -> None:
        started = time.time()
        try:
            fn = methods[msg.get("method") or next(iter(methods))]
            if msg["batched"]:  # modal.batched: the items of single-item calls, as one list
                args, kwargs = ([pickle.loads(raw)[0][0] for raw in msg["args"]],), {}
            else:
                args, kwargs = pickle.loads(msg["args"][0])
            result = await call(fn, args, kwargs)
            out = {"op": "done", "id": msg["id"], "ok": True, "data": pickle.dumps(result)}
        except BaseException as e:
            try:
                data = pickle.dumps(e)
            except Exception:
                data = b""
            out = {
                "op": "done",
                "id": msg["id"],
                "ok": False,
                "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(),
                "data": data,
            }
        out |= {"started": started, "ended": time.time()}
        await send(out)

    tasks: set[asyncio.Task] = set()
    while True:
        try:
            head = await reader.readexactly(4)
            msg = pickle.loads(await reader.readexactly(int.from_bytes(head, "big")))
        except (asyncio.IncompleteReadError, ConnectionError):
            break
        if msg["op"] == "stop":
            break
        task = asyncio.create_task(run(msg))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if instance is not None:
        from modal._partial_function import _find_callables_for_obj, _PartialFunctionFlags

        for stop in _find_callables_for_obj(instance, _PartialFunctionFlags.EXIT).values():
            if inspect.iscoroutine(out := stop()):
                await out


def main() -> None:
    import json

    fd, spec = int(sys.argv[1]), json.loads(sys.argv[2])
    asyncio.run(serve(fd, spec))


if __name__ == "__main__":
    main()
