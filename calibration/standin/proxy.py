"""The stand-in's HTTP proxy in front of ``@app.server`` Functions (docs/sources.md §1, way 4): a request to
``/proxy/<function id>/<path>`` goes to one of the Function's ready containers after ``server.proxy_latency_s``.

- Proxy auth: ``App.server``'s ``unauthenticated`` defaults to False, so a request without ``Modal-Key`` and
  ``Modal-Secret`` headers gets 401, as on Modal.
- No ready container: 503 (the request still counts as demand, so the autoscaler starts one: "the first request
  still triggers a cold start").
- The autoscaler follows the requests in flight at the proxy over ``target_concurrency`` each.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp import web

from calibration.standin.platform import Platform


def make_proxy(platform: Platform) -> web.Application:
    session: dict[str, aiohttp.ClientSession] = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        fid, path = request.match_info["fid"], request.match_info["path"]
        fn = platform.functions.get(fid)
        if fn is None or not fn.server_port:
            return web.Response(status=404, text=f"no server {fid}")
        if "Modal-Key" not in request.headers or "Modal-Secret" not in request.headers:
            return web.Response(status=401, text="missing Modal-Key/Modal-Secret (proxy auth)")
        platform.proxy_load[fid] = platform.proxy_load.get(fid, 0) + 1
        fn.requested()
        try:
            await asyncio.sleep(platform.params.proxy_latency_s)
            ready = [c for c in fn.containers if c.ready and not c.stopped]
            if not ready:
                return web.Response(status=503, text="no ready container")
            c = min(ready, key=lambda c: c.proxied)
            c.proxied += 1
            try:
                if "s" not in session:
                    session["s"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
                url = f"http://127.0.0.1:{c.local_port}/{path}"
                async with session["s"].request(request.method, url, params=request.query) as r:
                    body = await r.read()
                    return web.Response(status=r.status, body=body, content_type=r.content_type)
            finally:
                c.proxied -= 1
        finally:
            platform.proxy_load[fid] -= 1

    async def close(_: Any) -> None:
        if "s" in session:
            await session["s"].close()

    app = web.Application()
    app.router.add_route("*", "/proxy/{fid}/{path:.*}", handle)
    app.on_cleanup.append(close)
    return app
