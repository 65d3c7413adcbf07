"""The control-plane fault table: v1, v2 and Kubernetes under each fault that applies to them, at each scale
(models/sandboxes/faults.py; docs/sources.md §2's claim that v2 has "no single point of failure").

``python -m experiments.faults [--counts 100000,1000000] [--length 5] [--dead 1000] [--seed 0] [--out FILE.md]``

For each control plane's preset (sandboxes-v1, sandboxes-v2, sandboxes-k8s: the planes' ``PRESET``, in their
``ORDER``), each ``sandboxes.count`` and each variant of the preset (the plane's ``FAULT_VARIANTS``: v2's scheduler
outage is run with the preset's 32 schedulers and with one), a run without faults gives the makespan and the
records; each fault then begins at the middle of that makespan and lasts ``--length`` seconds (a worker death kills
``--dead`` workers there, their sandboxes lost). Every run is the preset's with ``--set`` keys only, and the
same seed, so one command reproduces the table.

Columns: the fault's start, the makespan without and with it, the creation rate (sandboxes becoming running per
second) before the fault and during it (over the part of the fault window the burst still ran), the p50 / p99 time
to interactive of the sandboxes in flight during the fault window (requested before its end, running at or after its
start; models/sandboxes/faults.py), in the run without the fault over the same window and in the run with it, the
sandboxes delayed and lost, the recovery time (the fault's end to the first 1 s bin whose creation rate is back
within 10% of the rate before, or the bin the burst's last sandbox ran in; the rate only), and the faulted run's wall
time. The table prints in Markdown (and to ``--out``).
"""

from __future__ import annotations

import math

import numpy as np

from models.runs import check_size, load_scenario, run_scenario
from models.sandboxes import faults
from models.sandboxes.planes import PLANES, ControlPlane
from sim import files
from sim.cli import ArgParser, main_guard, out_path
from sim.files import check_out
from sim.scenario import ScenarioError

# the planes in the table's order (their ``ORDER``), each with its preset and faults (models/sandboxes/planes/)
IN_ORDER = sorted(PLANES.values(), key=lambda plane: plane.ORDER)
COLUMNS = (
    "plane",
    "fault",
    "sandboxes",
    "fault at s",
    "makespan s (no fault)",
    "makespan s",
    "rate before /s",
    "rate during /s",
    "tti p50 / p99 s in flight (no fault)",
    "tti p50 / p99 s in flight",
    "delayed",
    "lost",
    "recovery s",
    "wall s",
)


def fault_sets(fault: str, at: float, length: float, dead: int) -> list[str]:
    if fault == "worker_death":
        return [f"faults.worker_death_at_s={at}", f"faults.worker_death_workers={dead}"]
    return [f"faults.{fault}_at_s={at}", f"faults.{fault}_s={length}"]


def fault_runs(plane: type[ControlPlane]) -> list[tuple[str, tuple[str, ...]]]:
    """A plane's runs in the table: each fault that applies to it (``FAULTS``), and after it the same with the keys
    of its variant (``FAULT_VARIANTS``), if it has one."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for fault in plane.FAULTS:
        out.append((fault, ()))
        if fault in plane.FAULT_VARIANTS:
            out.append((fault, plane.FAULT_VARIANTS[fault]))
    return out


def rows(counts: list[int], length: float, dead: int, seed: int, planes: tuple[str, ...] | None = None) -> list[dict]:
    """One row per (plane, fault, count): the fault's figures and the run's wall time; ``planes``: only these."""
    out = []
    for plane in IN_ORDER:
        if planes is not None and plane.name not in planes:
            continue
        for count in counts:
            base_sets = [f"sandboxes.count={count}"]
            bases: dict[tuple[str, ...], tuple[float, np.ndarray, np.ndarray]] = {}  # each variant's no-fault run
            for fault, extra in fault_runs(plane):
                if extra not in bases:
                    b = run_scenario(load_scenario(plane.PRESET, [*base_sets, *extra], []), seed=seed, records=True)
                    rec = b["records"]
                    bases[extra] = (
                        float(b["creation_makespan_s"]),
                        rec["requested"].to_numpy(),
                        rec["running"].to_numpy(),
                    )
                makespan, requested, running = bases[extra]
                at = round(makespan / 2, 2)
                sc = load_scenario(plane.PRESET, [*base_sets, *extra, *fault_sets(fault, at, length, dead)], [])
                m = run_scenario(sc, seed=seed)
                a, e = faults.window(sc.faults)
                name = fault + (f" ({', '.join(extra)})" if extra else "")
                if fault == "worker_death":
                    name += f" ({dead:,} workers)"
                else:
                    name += f" ({length:g} s)"
                recovery = m["fault_recovery_s"]
                out.append(
                    {
                        "plane": plane.name,
                        "fault": name,
                        "sandboxes": count,
                        "fault at s": at,
                        "makespan s (no fault)": makespan,
                        "makespan s": m["creation_makespan_s"],
                        "rate before /s": m["creation_rate_before_fault_per_s"],
                        "rate during /s": m["creation_rate_during_fault_per_s"],
                        "tti p50 / p99 s in flight (no fault)": faults.tti_in_flight(requested, running, a, e),
                        "tti p50 / p99 s in flight": (m["tti_fault_p50_s"], m["tti_fault_p99_s"]),
                        "delayed": m["sandboxes_delayed"],
                        "lost": m["sandboxes_lost"],
                        "recovery s": "did not recover" if not m["fault_recovered"] else recovery,
                        "wall s": m["wall_s"],
                    }
                )
                print(_line(out[-1]), flush=True)
    return out


def _cell(v: object) -> str:
    if isinstance(v, tuple):
        return " / ".join(_cell(x) for x in v)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _line(row: dict) -> str:
    return "| " + " | ".join(_cell(row[c]) for c in COLUMNS) + " |"


def table(rs: list[dict]) -> str:
    head = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n"
    return head + "\n".join(_line(r) for r in rs) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = ArgParser(prog="python -m experiments.faults", description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="100000,1000000", help="sandboxes.count values, comma-separated")
    ap.add_argument("--length", type=float, default=5.0, help="each timed fault's length in seconds")
    ap.add_argument("--dead", type=int, default=1000, help="workers a worker_death kills")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=out_path, help="also write the table (Markdown) here")
    a = ap.parse_args(argv)

    def go() -> int:
        counts = parse_counts(a.counts)
        if not (math.isfinite(a.length) and a.length > 0):
            raise ScenarioError(f"--length: a fault lasts a positive, finite number of seconds, not {a.length:g}")
        if a.dead < 1:
            raise ScenarioError(f"--dead: a worker death kills at least one worker, not {a.dead}")
        if a.seed < 0:
            raise ScenarioError(f"--seed: a seed is 0 or more, not {a.seed}")
        if a.out is not None:
            check_out(a.out)
        for plane in IN_ORDER:  # every run's scenario is checked before the first runs (and sized)
            for count in counts:
                for fault, extra in fault_runs(plane):
                    sets = [f"sandboxes.count={count}", *extra, *fault_sets(fault, 1.0, a.length, a.dead)]
                    check_size(load_scenario(plane.PRESET, sets, []))
        text = table(rows(counts, a.length, a.dead, a.seed))
        print(text)
        if a.out:
            files.write_text(a.out, text)
        return 0

    return main_guard("experiments.faults", go)


def parse_counts(text: str) -> list[int]:
    """``--counts``: positive integers separated by commas."""
    try:
        if not text.isascii():  # int() reads full-width digits; every other number flag does not
            raise ValueError(text)
        counts = [int(c) for c in text.split(",")]
    except ValueError:
        raise ScenarioError(f"--counts: expected integers separated by commas, got {text!r}") from None
    if not counts or any(c < 1 for c in counts):
        raise ScenarioError(f"--counts: each count is a positive number of sandboxes, got {text!r}")
    return counts


if __name__ == "__main__":
    raise SystemExit(main())
