"""The envelope of a fit: what its runs covered, written beside the fitted parameters.

``calibration.fit --out`` writes it as the parameter file's ``[envelope]`` table (models/inputs/checks/envelope.py's
keys, which a run is compared with): the most clients, calls in flight per client, app copies and ideal calls/s, and the
longest duration, of the experiments the fit was scored on (the reference load test's approaches, a trace's experiment),
and the longest backlog and most containers those experiments had at the kept parameters, over the fit's seeds.
"""

from __future__ import annotations

from calibration.objective import Experiment, Runner, simulate
from models.inputs.checks.envelope import copies
from models.runs import load_scenario

MEASURED = ("backlog_longest_s", "containers_peak")  # what the runs measure (the rest is in their scenarios)


def envelope(runs: str, experiments: list[Experiment], sets: list[str], seeds: list[int], runner: Runner) -> list[str]:
    """The ``envelope.*`` settings of ``experiments`` (each with ``sets``: the fit's extra ``--set``s, then the
    kept parameters) over ``seeds``; ``runs`` says what they were, in words."""
    scs = [load_scenario(e.preset, [*e.sets, *sets], []) for e in experiments]
    jobs = [(e, tuple(sets), s, MEASURED) for e in experiments for s in seeds]
    got = runner.map(simulate, jobs)
    closed = [sc for sc in scs if sc.load == "clients"]
    bounds = {
        "runs": runs,
        "clients": max((sc.clients.count for sc in closed), default=0),
        "in_flight": max((sc.clients.in_flight for sc in closed), default=0),
        "duration_s": max(sc.duration_s for sc in scs),
        "copies": max(copies(sc) for sc in scs),
        "calls_per_s": max(sc.ideal_calls_per_s() for sc in scs),
        "backlog_s": max(m["backlog_longest_s"] for m in got),
        "containers": max(m["containers_peak"] for m in got),
    }
    return [f"envelope.{k}={v}" for k, v in bounds.items()]
