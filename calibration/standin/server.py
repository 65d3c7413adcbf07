"""Starting and stopping the stand-in: the gRPC service, the sandboxes' task command router (a second gRPC service)
and the HTTP proxy on 127.0.0.1, in this process's event loop (``serve``) or as a child process (``StandIn``, for
tests and for ``calibration.run`` users trying it out)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from calibration.standin.api import TOKEN_ID, TOKEN_SECRET, Service
from calibration.standin.platform import PARAMS, Params, Platform
from calibration.standin.sandboxes import Router
from sim.scenario import ScenarioError


def env(url: str) -> dict[str, str]:
    """The modal client's own configuration for the stand-in at ``url`` (modal/config.py's variables)."""
    return {"MODAL_SERVER_URL": url, "MODAL_TOKEN_ID": TOKEN_ID, "MODAL_TOKEN_SECRET": TOKEN_SECRET}


async def serve(params: Params, port: int = 0, proxy_port: int = 0, workdir: Path | None = None) -> None:
    """Run the stand-in until SIGTERM or SIGINT; print ``MODAL_SERVER_URL=...`` once it listens. A port it cannot
    listen on is a ScenarioError naming the flag."""
    platform = Platform(params)
    own = workdir is None  # a folder of its own is removed when it stops
    work = Path(workdir or tempfile.mkdtemp(prefix="scalesim-standin-"))
    try:
        await _serve(platform, work, port, proxy_port)
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


async def _serve(platform: Platform, work: Path, port: int, proxy_port: int) -> None:
    import grpclib.server
    from aiohttp import web

    from calibration.standin.proxy import make_proxy

    proxy = web.AppRunner(make_proxy(platform), access_log=None)
    await proxy.setup()
    try:
        site = web.TCPSite(proxy, "127.0.0.1", proxy_port)
        await site.start()
    except OSError as e:
        await proxy.cleanup()
        raise ScenarioError(f"--proxy-port {proxy_port}: cannot listen on it ({e.strerror})") from None
    proxy_url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    service = Service(platform, work, lambda: proxy_url)
    server = grpclib.server.Server([service])
    try:
        await server.start("127.0.0.1", port)
    except OSError as e:
        await proxy.cleanup()
        raise ScenarioError(f"--port {port}: cannot listen on it ({e.strerror})") from None
    url = f"http://127.0.0.1:{server._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    platform.client_env = env(url)  # a container's modal client calls back here (a driver Function's clients)
    # the sandboxes' task command router: a second gRPC service on its own port (calibration/standin/sandboxes.py)
    router = grpclib.server.Server([Router(service.sandboxes)])
    await router.start("127.0.0.1", 0)
    service.sandboxes.router_url = f"http://127.0.0.1:{router._server.sockets[0].getsockname()[1]}"  # type: ignore
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"MODAL_SERVER_URL={url}", flush=True)
    await stop.wait()
    for app_id in list(service.apps):
        await service._stop_app(app_id)
    await service.sandboxes.close()  # any sandbox left: every process killed and reaped
    for s in (router, server):
        s.close()
        await s.wait_closed()
    await proxy.cleanup()


class StandIn:
    """The stand-in as a child process: ``with StandIn(params) as s: subprocess.run(..., env=s.env)``; ``s.url``."""

    def __init__(self, params: Path = PARAMS, log: Path | None = None) -> None:
        self.params, self.log = params, log

    def __enter__(self) -> StandIn:
        out = open(self.log, "w") if self.log else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "calibration.standin", "--params", str(self.params)],
            stdout=subprocess.PIPE,
            stderr=out,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("MODAL_SERVER_URL="):
            self.proc.kill()
            raise RuntimeError(f"the Modal stand-in did not start ({line!r})")
        self.url = line.strip().split("=", 1)[1]
        self.env = {**os.environ, **env(self.url)}
        return self

    def __exit__(self, *exc: Any) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def wait_for(predicate: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False
