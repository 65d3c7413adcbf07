"""Way 2: app copies (docs/sources.md §1). ``--copies`` deployed copies of the app (``...-copy-<i>``), each its own
Function with its own limits; client i calls copy i mod copies with ``.remote``. In the simulator the copies are a
deployment choice (``function.copies``) of the ``remote`` call style: the ``loadtest-copies`` preset."""

from __future__ import annotations

import argparse
import math
from typing import Any

from calibration.plan import AppPlan, app_name
from calibration.ways.base import Option, capped
from calibration.ways.loadtest import CLIENTS, MAX_INPUTS, Remote, closed_loop


class Copies(Remote):
    name = "copies"
    preset = "loadtest-copies"
    options = (Option("--copies", int, 8, "app copies for `copies` (default 8)", (1, 100)), MAX_INPUTS, *CLIENTS)
    reference = True
    slowness = 3

    def deploy(self, args: argparse.Namespace, name: str, common: dict[str, Any]) -> tuple[list[AppPlan], int, str]:
        from calibration.apps import loadtest

        per_copy = math.ceil(args.clients / args.copies) * args.calls
        n = capped(args, math.ceil(per_copy / args.max_inputs))
        opts = {**common, "ways": ("work",), "max_inputs": args.max_inputs, "max_containers": n}
        apps = []
        for i in range(args.copies):
            nm = app_name(self.name, args.run_id, f"-copy-{i}")
            apps.append(AppPlan(nm, ["work"], lambda nm=nm: loadtest.make_app(nm, **opts)))
        return apps, n * args.copies, closed_loop(args)

    def own_sets(self, args: argparse.Namespace) -> dict[str, Any]:
        return {**super().own_sets(args), "function.copies": args.copies}

    def functions(self, args: argparse.Namespace) -> int:
        return args.copies
