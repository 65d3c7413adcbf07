"""A sweep's rows: one (point, seed) run (``run_point``), and the row of a run that never returned
(``failed_row``). Every executor (experiments/executors.py) and the sweep's own process (experiments/sweep.py) make
their rows with these, so the rows are the same whatever the executor; they live in a module of their own so that a
worker process, a Dask worker or a Modal container finds them by reference, also when the sweep runs as
``__main__``.
"""

from __future__ import annotations

import time
from typing import Any

from experiments.spec import Point
from sim.scenario import ScenarioError, flatten, to_dict


def row_keys(point: Point, seed: int) -> dict[str, Any]:
    """What identifies a row: the point, its variant and seed, and under --uncertainty its plausible model."""
    row: dict[str, Any] = {"point": point.index, "variant": point.variant, "seed": seed}
    if point.kept is not None:
        row.update(plausible=point.plausible, kept_point=point.kept)
    return row


def run_point(point: Point, seed: int) -> dict:
    """One row: the point's parameters, the seed, its metrics, wall_s and error (empty if it ran)."""
    from models.registry import MODELS  # (the models here and below, not at the top: a sweep's --help loads none)
    from models.runs import build_scenario, run_scenario

    row = row_keys(point, seed)
    t0 = time.perf_counter()
    try:
        tree, base = point.tree()
        row.update(flatten(tree))
        sc = build_scenario(tree, base)
        row.update(flatten(to_dict(sc)))
        metrics = run_scenario(sc, seed=seed)
        row.update(MODELS[sc.model].metrics(sc).flatten(metrics))
        row["error"] = ""
    except ScenarioError as e:
        row["error"] = str(e)
    except Exception as e:  # a failing point records its error; the sweep goes on
        row["error"] = f"{type(e).__name__}: {e}"
    row["wall_s"] = time.perf_counter() - t0
    return row


def failed_row(point: Point, seed: int, error: str) -> dict:
    """The row of a run that never returned (its task killed every worker that took it): the point's parameters as
    far as they build, and the error."""
    from models.runs import build_scenario

    row = row_keys(point, seed)
    try:
        tree, base = point.tree()
        row.update(flatten(tree))
        row.update(flatten(to_dict(build_scenario(tree, base))))
    except Exception:  # its own error is in run_point's rows; this one says why the run was lost
        pass
    row["error"], row["wall_s"] = error, float("nan")
    return row
