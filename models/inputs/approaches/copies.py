"""Way 2: app copies (domain.md §1). Limits are per Function, so ``function.copies`` deployed copies give that many
times the limits; client i calls copy i mod copies (``function.copies = 0``: one copy per client)."""

from __future__ import annotations

from models.inputs.approaches.base import Approach


class Copies(Approach):
    name = "copies"
