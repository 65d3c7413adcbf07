"""The baseline: every client calls the Function with ``.remote`` (synchronous limits, docs/sources.md §1); and way 2,
app copies of it, as a plan's option (``Copies``)."""

from __future__ import annotations

from typing import Any

from models.inputs.approaches.base import Approach, copies_text
from models.inputs.base import Scenario


class Remote(Approach):
    name = "remote"
    call_is_input = True
    label = ".remote"
    colour = "#4c72b0"


class Copies(Remote):
    """Way 2 (docs/sources.md §1): ``.remote`` over app copies, a plan's option whose copies it searches; no approach
    of its own (the schema reads ``copies`` as a deprecated alias of ``remote``)."""

    name = "copies"
    searches_copies = True
    colour = "#55a868"

    def plan_settings(self, copies: int, chunk: int, sc: Scenario) -> dict[str, Any]:
        return {"approach": Remote.name, "function.copies": copies}

    def describe(self, config: dict[str, Any]) -> str:
        return copies_text(config["function.copies"])
