"""The load-test approaches: the baseline and the four ways past a Function's input limits (domain.md §1), looked up
by the scenario's ``approach`` key. Adding one: a module here (a subclass of ``Approach``) and its line below."""

from __future__ import annotations

from models.inputs.approaches.base import Approach
from models.inputs.approaches.batching import Batching
from models.inputs.approaches.copies import Copies
from models.inputs.approaches.remote import Remote
from models.inputs.approaches.server import Server
from models.inputs.approaches.spawn import Spawn

APPROACHES: dict[str, Approach] = {a.name: a for a in (Remote(), Spawn(), Copies(), Batching(), Server())}
