"""The drain question: the time until ``--calls`` N calls, spawned (``--via spawn``) or mapped (``--via map``) at once,
are all back (retried with backoff when rejected, as ``.map`` does), and which limit binds; the other way is the
runner-up.
"""

from __future__ import annotations

import argparse

from experiments.whatif.base import Flag, Search, positive
from experiments.whatif.search import Evaluation, Simulator, robustness, row, size_search
from models.inputs.approaches.remote import Remote
from models.inputs.approaches.spawn import Spawn
from sim.scenario import ScenarioError

# how the N calls are made (``--via``, the first the default): the approach each is, the other the runner-up
VIA = {"spawn": Spawn.name, "map": Remote.name}


class Drain(Search):
    """How long N calls made at once take to be all back, and what binds (this module's docstring)."""

    name = "drain"
    flags = (
        Flag("--calls", "drain: how many calls"),
        Flag("--via", f"drain: how they are made (default {next(iter(VIA))})", next(iter(VIA)), tuple(VIA)),
    )
    scenario = "loadtest-spawn"
    defaults = ("duration_s=3600", "warmup_s=0")  # an hour's window (the run ends when every call is back)

    def search(self, args: argparse.Namespace, sim: Simulator, shape: str) -> tuple[dict, list[Evaluation]]:
        if args.calls is None:
            raise ScenarioError("--calls: drain needs how many calls")
        out = drain(sim, positive("--calls", int, 10_000_000)(args.calls), args.via)
        out["search"] = "the chosen way and the other"
        if args.uncertainty and out["chosen"]:
            out["uncertainty"] = u = robustness(sim, out, None, args.jobs)
            back = u["ranges"].get("first_n_back_s")
            if back and back["low"] > 0:  # calls/s while draining, as drain gives
                n = out["chosen"]["config"]["clients.in_flight"]
                u["ranges"]["calls_per_s"] = {
                    "central": n / back["central"],
                    "low": n / back["high"],
                    "high": n / back["low"],
                }
        return out, []


def drain(sim: Simulator, calls: int, via: str) -> dict:
    size_search(sim, "drain", 2, [_drain_config(calls, way) for way in VIA])
    other = next(way for way in VIA if way != via)
    results = {}
    for way in (via, other):
        e = results[way] = sim.evaluate(_drain_config(calls, way))
        e.meets, e.why = True, ""
        back, ci = e.metrics["first_n_back_s"]
        # calls/s while draining: N over the time until all are back (the window's calls/s is not the drain's)
        e.metrics["calls_per_s"] = (calls / back, calls / back**2 * ci if ci else None) if back else (None, None)
    chosen, other = results[via], results[other]
    return {
        "question": f"how long until {calls:,} {via} calls are all back, and what binds",
        "answer": {"first_n_back_s": chosen.metrics["first_n_back_s"][0], "binding_limit": chosen.binding},
        "chosen": row(chosen),
        "runners_up": [row(other)],
        "next_cheaper_fails": [],
    }


def _drain_config(calls: int, way: str) -> dict:
    """N calls at once from one caller, made once (no reissue), retried with backoff when rejected."""
    return {
        "approach": VIA[way],
        "load": "clients",
        "clients.count": 1,
        "clients.in_flight": calls,
        "clients.reissue": "false",
        "clients.retry": "backoff",
    }
