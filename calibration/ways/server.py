"""Way 4: a web server (docs/sources.md §1): ``@app.server`` behind Modal's HTTP proxy, called over HTTP (aiohttp) by
closed-loop clients of ``--connections`` connections each; the proxy requires a workspace proxy token."""

from __future__ import annotations

import argparse
import math
import os
from typing import Any

from calibration.plan import AppPlan
from calibration.ways.base import Option, RunFailed, capped
from calibration.ways.loadtest import CLIENTS, LoadTest, closed_loop
from sim.scenario import ScenarioError


class Server(LoadTest):
    name = "server"
    preset = "loadtest-server"
    options = (
        Option("--target-concurrency", int, 1000, "server: target_concurrency (default 1000)", (1, 100_000)),
        Option("--connections", int, 1000, "server: connections per client (default 1000)", (1, 100_000)),
        *CLIENTS,
    )
    reference = True
    slowness = 4

    def deploy(self, args: argparse.Namespace, name: str, common: dict[str, Any]) -> tuple[list[AppPlan], int, str]:
        from calibration.apps import loadtest

        n = capped(args, math.ceil(args.clients * args.calls / args.target_concurrency))
        opts = {**common, "ways": ("server",), "target_concurrency": args.target_concurrency, "max_containers": n}
        calls = f"{closed_loop(args)}; HTTP (aiohttp), {args.connections} connections per client"
        return [AppPlan(name, ["WorkServer"], lambda: loadtest.make_app(name, **opts))], n, calls

    def own_sets(self, args: argparse.Namespace) -> dict[str, Any]:
        return {
            "clients.in_flight": args.calls,
            "server.target_concurrency": args.target_concurrency,
            "clients.connection_limit": args.connections,
        }

    def check(self, args: argparse.Namespace) -> None:
        from calibration.callers import PROXY_KEY_ENV, PROXY_SECRET_ENV, proxy_headers

        if not proxy_headers(dict(os.environ)):
            raise ScenarioError(
                f"server: set {PROXY_KEY_ENV} and {PROXY_SECRET_ENV} to a workspace proxy token "
                "(`modal workspace proxy-tokens`): the server requires proxy auth"
            )
        super().check(args)

    def descriptor_opts(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"loop": "http", "connection_limit": args.connections}

    async def job(self, args: argparse.Namespace, names: list[str], load: Any) -> Any:
        import modal

        from calibration import callers
        from calibration.clients import Job

        headers = callers.proxy_headers(dict(os.environ))  # --driver modal: sent with each client's input
        url = await modal.Server.from_name(names[0], "WorkServer").get_url.aio()
        if not url:
            raise RunFailed(f"app {names[0]}: the server has no URL")
        return Job("http", load, tuple(range(load.clients)), url=url, headers=headers,
                   connection_limit=args.connections, backoff=callers.Backoff())  # fmt: skip
