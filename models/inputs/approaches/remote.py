"""The baseline: every client calls the Function with ``.remote`` (synchronous limits, docs/sources.md §1); and, as a
plan's option, the same Function called with ``.map`` (``Map``: the modal client's map call, models/inputs/callers/
mapcall.py)."""

from __future__ import annotations

from typing import Any

from models.inputs.approaches.base import Approach
from models.inputs.base import Scenario


class Remote(Approach):
    name = "remote"
    call_is_input = True
    label = ".remote"
    colour = "#4c72b0"


class Map(Remote):
    """``.map`` over a caller's inputs (``clients.api = "map"``), a plan's option: no approach of its own (the remote
    approach's clients mapping). A map needs its inputs at hand, so it is modelled for closed-loop clients only: the
    scenario refuses it for open-loop arrivals or a trace, and a plan says so."""

    name = "map"
    label = ".map"
    colour = "#55a868"

    def plan_settings(self, copies: int, chunk: int, sc: Scenario) -> dict[str, Any]:
        return {"approach": Remote.name, "function.copies": copies, "clients.api": "map"}
