"""The baseline: every client calls the Function with ``.remote`` (synchronous limits, docs/sources.md §1)."""

from __future__ import annotations

from models.inputs.approaches.base import Approach


class Remote(Approach):
    name = "remote"
