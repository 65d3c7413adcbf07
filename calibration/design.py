"""Calibration runs that identify the model: ``python -m calibration.run plan [options] [--dry-run] [--out DIR]``.

One closed-loop test cannot tell the input plane's mechanisms apart: a closed loop's throughput is the calls in
flight over their time in the system, so a start limit that queues the backlog and a longer round trip per call
give the same calls/s and the same added latency (on the Modal stand-in a fit of one spawn run put the start rate at
212/s and the round trip at its bound for a true 40/s and 20 ms). The fit's parameters (calibration/candidates.py:
start rate and burst, the decision interval, the cold start, the per-call legs) each move a different figure when
the load moves, so the plan is a small set of runs around the reference shape, each named for what it pins:

- ``reference``: the options as given (the reference load test's shape, scaled by ``--clients``/``--calls``/
  ``--duration``): the start limit in steady state, the backlog's latency.
- ``light``: 1/40 of the calls in flight, where the start limit does not bind: each call's latency is its round
  trip, so the legs are pinned apart from the start limit.
- ``long``: three times the duration: the start limit over minutes (a rate that ramps with a persisting backlog
  keeps rising; a token bucket's does not).
- ``from-zero``: the light load with ``--max-inputs`` set so that it needs eight containers: the containers, not the
  start limit, bind; the autoscaler adds them decision by decision from none, pinning the decision interval and the
  cold start in the first quarter's calls back. (At the reference load the start limit binds first and one
  container serves every call: the interval moves no figure.)

Each is a ``spawn`` run of ``calibration.run`` (its own app, trace, stop), written to ``DIR/<run>/spawn``; the
plan's upper-bound cost is the sum of the runs' bounds and is printed, with the runs, before anything deploys.
A run whose trace is already there is kept (the plan resumes). Fit all of them together with
``python -m calibration.fit DIR/*/spawn``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from calibration.ways import WAYS

WAY = next(w.name for w in WAYS.values() if w.designed)  # the way every designed run is a run of
LIGHT = 40  # the light run's calls in flight: 1/LIGHT of the reference's
LONG = 3  # the long run's duration: LONG × the reference's
FROM_ZERO_CONTAINERS = 8  # the from-zero run's containers: its load over --max-inputs
SUFFIX = len("-reference")  # a designed run's id: the plan's and its name


@dataclass(frozen=True)
class DesignedRun:
    name: str  # its folder under --out
    pins: str  # what it pins, in words
    changes: Callable[[argparse.Namespace], dict[str, str]]  # the options it changes from the reference's


def _light(a: argparse.Namespace) -> dict[str, str]:
    return {"--calls": str(max(1, a.calls // LIGHT))}


def _long(a: argparse.Namespace) -> dict[str, str]:
    return {"--duration": f"{a.duration * LONG:g}"}


def _from_zero(a: argparse.Namespace) -> dict[str, str]:
    calls = max(1, a.calls // LIGHT)
    return {"--calls": str(calls), "--max-inputs": str(max(1, math.ceil(a.clients * calls / FROM_ZERO_CONTAINERS)))}


DESIGN: tuple[DesignedRun, ...] = (
    DesignedRun("reference", "the start limit in steady state; the backlog's latency", lambda a: {}),
    DesignedRun("light", "the per-call round trip (the start limit does not bind)", _light),
    DesignedRun("long", "the start limit over minutes (a ramp keeps rising, a bucket does not)", _long),
    DesignedRun("from-zero", "the decision interval and the cold start (containers added from none)", _from_zero),
)

# The options a designed run passes on from the plan's command line (the load, the work, the container, prices).
PASSED = ("--clients", "--calls", "--duration", "--warmup", "--drain", "--work-min", "--work-max", "--seed",
          "--max-inputs", "--max-containers", "--cpu", "--memory-mib", "--region", "--cpu-price",
          "--memory-price", "--driver", "--client-procs", "--client-lead")  # fmt: skip


def argv(args: argparse.Namespace, run: DesignedRun, out: Path) -> list[str]:
    """The ``calibration.run`` command line of ``run`` (without the program), from the plan's ``args``."""
    opts: dict[str, str] = {}
    for flag in PASSED:
        v = getattr(args, flag.removeprefix("--").replace("-", "_"))
        if v is not None:
            opts[flag] = f"{v:g}" if isinstance(v, float) else str(v)
    opts |= run.changes(args)
    line = [WAY, *(x for kv in opts.items() for x in kv), "--out", str(out / run.name)]
    return [*line, "--run-id", f"{args.run_id}-{run.name}"] if args.run_id else line


def done(out: Path, run: DesignedRun) -> bool:
    """Whether ``run``'s trace is already under ``out`` (its manifest is written last: calibration/trace.py)."""
    return (out / run.name / WAY / "manifest.json").is_file()


def plan(
    args: argparse.Namespace, out: Path, make: Callable[[list[str]], tuple[float, str]]
) -> tuple[list[str], float]:
    """The plan in lines: each run, what it pins, its cost bound (``make(argv)`` -> (cost, its plan in a line)),
    and the total; a run already done is marked and costs nothing more. And the total."""
    lines, total = [f"calibration.run plan: {len(DESIGN)} {WAY} runs to {out}"], 0.0
    for run in DESIGN:
        cost, what = make(argv(args, run, out))
        if done(out, run):
            lines.append(f"  {run.name}: done (its trace is in {out / run.name}); kept")
            continue
        total += cost
        lines.append(f"  {run.name}: {run.pins}\n    {what}; at most ${cost:.4f}")
    lines.append(f"  upper-bound cost of the plan: ${total:.4f}")
    lines.append(f"  then: python -m calibration.fit {out}/*/{WAY}")
    return lines, total
