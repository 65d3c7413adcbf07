"""The calibration runs on Modal (``python -m calibration.run WHAT``), looked up by name: the reference load test's
ways (docs/sources.md §1), container starts (§3) and sandbox creation (§2). The fit (calibration/targets.py,
calibration/objective.py) finds its reference experiments here too. Adding one: a module here (a subclass of
``Way``) and its line below."""

from __future__ import annotations

from calibration.ways.base import Way
from calibration.ways.batching import Batching
from calibration.ways.coldstart import ColdStart
from calibration.ways.copies import Copies
from calibration.ways.loadtest import Remote, Spawn
from calibration.ways.sandboxes import Sandboxes
from calibration.ways.server import Server

WAYS: dict[str, Way] = {
    w.name: w for w in (Remote(), Spawn(), Copies(), Batching(), Server(), ColdStart(), Sandboxes())
}
