"""The simulated systems, by the scenario's ``model`` key: one descriptor each (sim/model.py). Adding a model: its
package or module with a ``MODEL`` descriptor, and its line below."""

from __future__ import annotations

from models.coldstart import MODEL as COLDSTART
from models.inputs.loadtest import MODEL as FUNCTION
from models.sandboxes.creation import MODEL as SANDBOXES
from sim.model import Model
from sim.scenario import ScenarioError

MODELS: dict[str, Model] = {m.name: m for m in (FUNCTION, SANDBOXES, COLDSTART)}


def model_of(tree: dict) -> Model:
    """The model of a raw scenario tree (its ``model`` key; default ``function``)."""
    name = tree.get("model", "function")
    if not isinstance(name, str) or name not in MODELS:
        raise ScenarioError(f"model: must be one of {', '.join(MODELS)}; got {name!r}")
    return MODELS[name]
