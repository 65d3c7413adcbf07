"""The load-test approaches, the call styles of docs/sources.md §1's ways past a Function's input limits: the baseline's
``.remote``, ``.spawn`` (way 1), batching (way 3) and the server (way 4), looked up by the scenario's ``approach`` key.
Way 2, app copies, is not a call style but a deployment choice (``function.copies``), combined with any of them.
Adding one: a module here (a subclass of ``Approach``) and its line in ``APPROACHES`` (and in ``PLAN_WAYS``, where
experiments/plan.py is to weigh it)."""

from __future__ import annotations

from models.inputs.approaches.base import Approach
from models.inputs.approaches.batching import Batching
from models.inputs.approaches.remote import Map, Remote
from models.inputs.approaches.server import Server
from models.inputs.approaches.spawn import Spawn

APPROACHES: dict[str, Approach] = {a.name: a for a in (Remote(), Spawn(), Batching(), Server())}
ALIASES = {"copies": Remote.name}  # former approach names the schema still reads (copies: function.copies)
# the call styles a plan (experiments/whatif/plan.py) weighs, in its table's order, each over app copies where it
# calls the Function: the approaches, and .map
PLAN_WAYS: dict[str, Approach] = {w.name: w for w in (Remote(), Spawn(), Map(), Batching(), Server())}
