"""Parameter recovery through the real client path: ``python -m calibration.recovery [--out DIR] [options]``.

Starts the Modal stand-in (calibration/standin) with known parameters (``--params``, default its params.toml),
runs the designed plan against it through the real modal client (``calibration.run plan``, calibration/design.py),
then fits the ``overhead`` candidate (calibration/candidates.py: the stand-in's autoscaler has its mechanisms,
``scaleup_step`` 1, ``size_to`` in_system, no burst awareness) twice, to the reference-shaped run alone and to the
whole design, and prints, per parameter, the truth, each fit's value and its profile interval, and whether the
interval holds the truth. Nothing here is tuned to the truth: both fits use the same ranges, grid and search
(``--range start_rate=10..5000``: the stand-in's start rate, scaled for local runs, is below the range set for
Modal's), and the truth is read only to be printed next to the fits.

The stand-in's cold start is a floor on its platform part (calibration/standin/platform.py): the truth printed is
that floor; a container's own start adds tens of milliseconds. The round trip's truth is the stand-in's leg
(``overhead.submit_s``); gRPC over the loopback adds a few milliseconds per leg.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from calibration import fit, sources
from calibration.candidates import by_name, with_range
from calibration.design import WAY
from calibration.search import Fit, Profile
from calibration.standin.platform import PARAMS, Params
from sim.cli import ArgParser, main_guard, out_path
from sim.files import check_out

if TYPE_CHECKING:
    from calibration.standin.server import StandIn

PROG = "python -m calibration.recovery"
CANDIDATE = "overhead"
RANGE = "start_rate=10..5000"
TRUTH = {  # the candidate's parameter -> the stand-in's (calibration/standin/params.toml)
    "start_rate": "start_rate",
    "interval_s": "interval_s",
    "cold_start_median_s": "cold_start_s",
    "overhead_leg_s": "submit_s",
}
LOAD = ["--clients", "2", "--calls", "100", "--duration", "10", "--drain", "10", "--work-min", "0.1",
        "--work-max", "0.4"]  # fmt: skip


def run_design(standin: StandIn, out: Path, load: list[str]) -> None:
    """``calibration.run plan`` against the stand-in (resumes: runs whose traces are there are kept)."""
    cmd = [sys.executable, "-m", "calibration.run", "plan", *load, "--yes", "--out", str(out)]
    r = subprocess.run(cmd, env=standin.env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"{PROG}: the plan failed: {r.stderr.strip().splitlines()[-1:]}")


def fit_traces(paths: list[Path], seeds: int, max_evals: int, points: int, jobs: int) -> Fit:
    """The candidate fitted to the traces at ``paths`` (calibration.fit's own procedure)."""
    texts = [str(p) for p in paths]
    named = sources.names(texts)
    traces = tuple(sources.load(t, name=named.get(t)) for t in texts)
    cands = with_range(by_name([CANDIDATE]), RANGE)
    fits, _ = fit.fit_all(cands, list(range(seeds)), jobs, False, None, max_evals, points, (), traces, None)
    return fits[0]


def resolved(p: Profile) -> tuple[float, float]:
    """A profile interval to its scan's resolution: out to the midpoint (on the parameter's scale) between its end
    and the first scanned value outside it; a value in there cannot be told from the interval's end."""
    values = sorted(v for v, _ in p.points)
    below = [v for v in values if v < p.low]
    above = [v for v in values if v > p.high]

    def mid(a: float, b: float) -> float:
        return math.sqrt(a * b) if p.free.log else (a + b) / 2

    return (mid(below[-1], p.low) if below else p.low), (mid(p.high, above[0]) if above else p.high)


def table(truth: Params, fits: dict[str, Fit]) -> list[str]:
    """Markdown: per parameter, the truth and each fit's value, its profile interval to the scan's resolution
    (``resolved``), and whether that holds the truth."""
    head = "| parameter | truth | " + " | ".join(f"{n}: fitted (interval) | holds" for n in fits) + " |"
    lines = [head, "|---|---|" + "---|---|" * len(fits)]
    for i, name in enumerate(p.free.name for p in next(iter(fits.values())).profiles):
        true = float(getattr(truth, TRUTH[name]))
        cells = []
        for f in fits.values():
            p = f.profiles[i]
            low, high = resolved(p)
            flag = "" if p.pinned else ", not pinned"
            holds = "yes" if low <= true <= high else "no"
            cells.append(f"{f.values[i]:.3g} ({low:.3g} .. {high:.3g}{flag}) | {holds}")
        lines.append(f"| {name} | {true:g} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = ArgParser(prog=PROG, description=__doc__.splitlines()[0])
    p.add_argument("--out", type=out_path, default=Path("calibration/data/recovery"), help="the design's traces")
    p.add_argument("--params", type=Path, default=PARAMS, help="the stand-in's parameter file (the truth)")
    p.add_argument(
        "--seeds", type=int, default=8, help="replications per evaluation (default 8: at 3 the objective is rough)"
    )
    p.add_argument("--max-evals", type=int, default=150, help="Nelder–Mead evaluations (default 150)")
    p.add_argument("--profile-points", type=int, default=41, help="scan points per profile (default 41)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    args = p.parse_args(argv)

    def go() -> int:
        from calibration.standin.server import StandIn  # (grpc, here: --help need not load it)

        truth = Params.load(args.params)
        check_out(args.out, folder=True)
        with StandIn(params=args.params, log=args.out / "standin.log") as standin:
            run_design(standin, args.out, LOAD)
        one = fit_traces([args.out / "reference" / WAY], args.seeds, args.max_evals, args.profile_points, args.jobs)
        all_runs = sorted(args.out.glob(f"*/{WAY}"))
        design = fit_traces(all_runs, args.seeds, args.max_evals, args.profile_points, args.jobs)
        print("\n".join(table(truth, {"reference run alone": one, f"the design ({len(all_runs)} runs)": design})))
        return 0

    return main_guard(PROG, go)


if __name__ == "__main__":
    sys.exit(main())
