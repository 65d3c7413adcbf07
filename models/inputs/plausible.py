"""What a load test's ranges read (``--uncertainty``: experiments/uncertainty.py): which plausible-models file, which
of its settings a test reads, the assumptions it carries as ranges, and the reference ways nearest it.

The shipped fit's plausible models are ``calibration/params/reference-loadtest.plausible.json`` (calibration.fit
writes them beside the parameters). A model's keys count only where the scenario reads them: a section that another
approach adds (``server.*`` for a spawn or remote test, ``batching.*``: models/inputs/approaches/*.py ``sections``)
is not read. The assumptions no fit reads are carried as ranges, each as the kept model with that one setting: the
accept bursts, from what the reference test had accepted at once without an error (docs/sources.md §1: 1,000
synchronous calls per copy, 8,000 spawns) to an assumed five times that, by the call style that reads each; and what
the modal client does with a refusal by the accept limits, which Modal does not publish
(models/inputs/callers/clients.py ``on_rate_limit``), for single calls on the Function path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from models.inputs.approaches import APPROACHES
from models.inputs.platform.function import ASYNC, SYNC
from sim.model import Plausibles

ACCEPT_BURSTS = {
    SYNC: ("limits.sync_accept_burst", 1000.0, 5000.0),
    ASYNC: ("limits.async_accept_burst", 8000.0, 40000.0),
}
ON_RATE_LIMIT = "clients.on_rate_limit=retry_after"


def assumed(sc: Any) -> list[str]:
    """The settings of the assumptions ``sc`` reads, one model each (``ACCEPT_BURSTS``, ``ON_RATE_LIMIT``)."""
    ap = APPROACHES.get(sc.approach)
    if ap is None or ap.http or not sc.limits.enabled:
        return []
    key, low, high = ACCEPT_BURSTS[ap.style]
    out = [f"{key}={low:g}", f"{key}={high:g}"]
    if sc.clients.api == "single":
        out.append(ON_RATE_LIMIT)
    return out


def unread(approach: str) -> Callable[[str], bool]:
    """Whether a setting (``key=value``) is of a section that only other approaches read."""
    own = set(APPROACHES[approach].sections) if approach in APPROACHES else set()
    others = {s for a in APPROACHES.values() for s in a.sections} - own
    return lambda setting: setting.partition("=")[0].partition(".")[0] in others


def nearest(sc: Any, ways: Mapping[str, dict]) -> list[str]:
    """The recorded ways nearest ``sc``: those of its approach with app copies as it has them (one or several),
    else those of its approach, else every one."""
    same = [w for w, d in ways.items() if d.get("approach") == sc.approach]
    alike = [w for w in same if (ways[w].get("copies", 1) > 1) == (sc.function.copies > 1)]
    return alike or same or list(ways)


PLAUSIBLE = Plausibles(
    shipped="reference-loadtest.plausible.json",
    unread=lambda sc: unread(sc.approach),
    assumed=assumed,
    nearest=nearest,
)
