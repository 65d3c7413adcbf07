"""The stand-in's sandboxes (docs/sources.md §2): ``Sandbox.create`` / ``exec`` / ``wait`` / ``terminate``."""

from __future__ import annotations

from typing import Any


class Sandboxes:
    def __init__(self, service: Any) -> None:
        self.service = service

    async def stop_app(self, app_id: str) -> None:
        return None
