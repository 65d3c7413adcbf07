"""A Function served as a web app behind Modal's HTTP proxy (docs/sources.md §1, way 4: "server").

The proxy and the web server's containers (what a request meets, how the proxy picks a container, how the pool
scales, the container's CPU, the hops) are models/inputs/platform/proxy.py; their parameters, the ``server`` section,
models/inputs/platform/proxy_params.py.

Left out: proxy authentication (Modal-Key/Modal-Secret), HTTP keep-alive and TLS costs, request bodies.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from models.inputs.approaches.base import Approach
from models.inputs.base import Scenario
from models.inputs.callers.clients import Load, Target
from models.inputs.platform.proxy import Proxy
from models.inputs.platform.proxy_params import ServerParams
from models.inputs.records import CallLog
from sim.engine import Sim
from sim.rng import Streams


class Server(Approach):
    name = "server"
    http = True
    maps = False
    sections: ClassVar[dict[str, type]] = {"server": ServerParams}
    calls_function = False  # the proxy and its one pool
    label = "web server"
    colour = "#c44e52"

    def parts(self, sc: Scenario) -> int:
        return 1  # every client calls the one proxy

    def targets(
        self, sim: Sim, sc: Scenario, streams: Streams, log: CallLog, load: Load, part: int = 0, parts: int = 1
    ) -> list[Target]:
        return [Proxy(sim, "server", sc.server, sc.autoscaler, streams, log, load.work_ended)]

    def least_added(self, sc: Scenario) -> float:
        """The proxy's hop each way, when constant."""
        return 0.0 if sc.server.proxy_sigma > 0 else 2.0 * sc.server.proxy_latency_s

    def plus_legs(self, sc: Scenario, works: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The proxy's least, added (nothing drawn)."""
        return works + self.least_added(sc)

    def plan_settings(self, copies: int, chunk: int, sc: Scenario) -> dict[str, Any]:
        """One server, its containers as the Function's."""
        f = sc.function
        return {"approach": self.name, "server.max_concurrency": f.max_inputs, "server.target_concurrency": f.target}
