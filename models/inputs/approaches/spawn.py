"""Way 1: ``fc = f.spawn(x); fc.get()`` (docs/sources.md §1): asynchronous accept limits (1,500/s, 1,000,000 pending),
then the start limit binds."""

from __future__ import annotations

from models.inputs.approaches.base import Approach
from models.inputs.platform.function import ASYNC


class Spawn(Approach):
    name = "spawn"
    style = ASYNC
    call_is_input = True
    label = ".spawn"
    colour = "#dd8452"
