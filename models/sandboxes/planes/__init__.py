"""The sandbox control planes (docs/sources.md §2), looked up by the scenario's ``control_plane`` key. Adding one: a
module here (a subclass of ``ControlPlane`` declaring its facts: base.py), its line below and its preset."""

from __future__ import annotations

from models.sandboxes.planes.base import ControlPlane
from models.sandboxes.planes.kubernetes import Kubernetes
from models.sandboxes.planes.modal_v1 import ModalV1
from models.sandboxes.planes.modal_v2 import ModalV2

PLANES: dict[str, type[ControlPlane]] = {p.name: p for p in (ModalV2, ModalV1, Kubernetes)}
DEFAULT = ModalV2.name  # the scenario's ``control_plane`` when it names none
