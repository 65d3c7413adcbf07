"""Fit the input plane's unknown parameters to the reference load test: ``python -m calibration.fit``.

domain.md §1 gives measured calls/s and "first 8,000 calls back" for three approaches (spawn, app copies, server).
Three parameters have no source and are fitted to those six figures at once, by simulation:

- ``limits.start_rate``: the undocumented start limit (inputs started per second per Function). The reference
  test bounds it only from below (above some rate it never binds), so the fit reports the lowest rate that keeps
  the objective within 5% of its best, and the objective's profile along it;
- ``autoscaler.interval_s``: the time between scaling decisions;
- the median of ``autoscaler.cold_start`` (its shape, lognormal sigma 0.3, is an assumption);
and ``autoscaler.scaleup_step`` (containers added per decision) is chosen from a small grid.

The objective is the sum over the six figures of (relative error / tolerance)², tolerances 10% for calls/s and 20%
for first-back (the issue's acceptance bands), averaged over seeds with common random numbers. Nelder–Mead refines
the best grid point. The result is written as a parameter file that ``experiments.run --params`` accepts; the
code's defaults carry the same values (a test keeps them equal). Nothing else is fitted: ``limits.start_burst`` and
the other unknowns are assumptions, and the other measured figures (batching, remote, the containers counts, the
added latency percentiles) are the model's predictions, checked out of sample in tests/test_reference.py.
"""

from __future__ import annotations

import itertools
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from scipy import optimize

from experiments.cli import ArgParser, load_scenario
from models.inputs import loadtest

# domain.md §1, "Measured (these are the calibration targets the project may use)"
REFERENCE = {
    "spawn": {"calls_per_s": 589.0, "first_n_back_s": 34.6},
    "copies": {"calls_per_s": 1391.0, "first_n_back_s": 18.2},
    "server": {"calls_per_s": 1401.0, "first_n_back_s": 15.6},
}
TOLERANCE = {"calls_per_s": 0.10, "first_n_back_s": 0.20}
COLD_START_SIGMA = 0.3  # assumption: the shape of the cold-start distribution
OUT = Path(__file__).resolve().parent / "params" / "reference-loadtest.toml"
PROFILE = (0.5, 0.75, 0.9, 1.0, 2.0)  # start_rate multiples at which the written file reports the objective
QUICK_RUNS = ("duration_s=10",)  # --quick: shorter load tests (the figures then are not the reference's)


def overrides(start_rate: float, interval_s: float, cold_median_s: float, step: int) -> list[str]:
    return [
        f"limits.start_rate={start_rate:.6g}",
        f"autoscaler.interval_s={interval_s:.6g}",
        f"autoscaler.cold_start=lognormal({cold_median_s:.6g}, {COLD_START_SIGMA})",
        f"autoscaler.scaleup_step={step}",
    ]


def _simulate(job: tuple[str, tuple[str, ...], int]) -> dict:
    approach, sets, seed = job
    return loadtest.run(load_scenario(f"loadtest-{approach}", list(sets), []), seed=seed)


class Objective:
    def __init__(self, pool: ProcessPoolExecutor, seeds: list[int], extra: tuple[str, ...] = ()) -> None:
        self.pool = pool
        self.seeds = seeds
        self.extra = extra  # overrides applied to every simulation (--quick shortens the runs)

    def figures(self, sets: list[str]) -> dict[str, dict[str, float]]:
        jobs = [(a, (*self.extra, *sets), s) for a in REFERENCE for s in self.seeds]
        results = list(self.pool.map(_simulate, jobs))
        out = {}
        for a in REFERENCE:
            rows = [r for (ja, _, _), r in zip(jobs, results, strict=True) if ja == a]
            out[a] = {k: float(np.mean([r[k] if r[k] is not None else np.inf for r in rows])) for k in TOLERANCE}
        return out

    def loss(self, sets: list[str]) -> float:
        figs = self.figures(sets)
        return sum(
            ((figs[a][k] - REFERENCE[a][k]) / REFERENCE[a][k] / TOLERANCE[k]) ** 2 for a in REFERENCE for k in TOLERANCE
        )


def fit(seeds: list[int], jobs: int, quick: bool = False) -> tuple[list[str], float, dict, dict]:
    """Grid, then Nelder–Mead, then the start-rate bisection. ``quick``: one grid point, a few steps and 10 s runs
    (a smoke test of the whole procedure, not a fit)."""
    with ProcessPoolExecutor(jobs) as pool:
        obj = Objective(pool, seeds, QUICK_RUNS if quick else ())
        if quick:
            grid = itertools.product([1000.0], [4.5], [1.5], [1])
        else:
            grid = itertools.product([500.0, 1000.0, 2000.0], [3.0, 4.5, 6.0], [1.0, 2.0, 3.0], [1, 2])
        scored = sorted((obj.loss(overrides(*g)), g) for g in grid)
        best_loss, (sr, iv, cm, step) = scored[0]
        print(f"grid best: loss {best_loss:.3f} at start_rate={sr} interval_s={iv} cold={cm} step={step}", flush=True)

        def f(x: np.ndarray) -> float:
            return obj.loss(overrides(*np.exp(x), step))

        x0 = np.log([sr, iv, cm])
        simplex = np.array([x0, *(x0 + 0.3 * np.eye(3)[i] for i in range(3))])  # ±35% first steps
        res = optimize.minimize(
            f,
            x0,
            method="Nelder-Mead",
            options={"initial_simplex": simplex, "xatol": 0.01, "fatol": 0.005, "maxfev": 4 if quick else 150},
        )
        sr, iv, cm = np.exp(res.x)
        # The reference test bounds the start limit only from below: above some rate it never binds and the loss
        # is flat. Take the lowest rate whose loss stays within 5% of the best, found by bisection (in log space).
        best = obj.loss(overrides(sr, iv, cm, step))
        lo, hi = np.log(sr / 8), np.log(sr)
        for _ in range(1 if quick else 8):
            mid = (lo + hi) / 2
            if obj.loss(overrides(np.exp(mid), iv, cm, step)) <= best * 1.05:
                hi = mid
            else:
                lo = mid
        sr, iv, cm = (float(f"{v:.3g}") for v in (np.exp(hi), iv, cm))  # round to 3 significant figures
        sets = overrides(sr, iv, cm, step)
        # How well the data pin the start limit: the loss as it is lowered (flat = only a lower bound).
        profile = {k: obj.loss(overrides(sr * k, iv, cm, step)) for k in ((0.5, 1.0) if quick else PROFILE)}
        return sets, obj.loss(sets), obj.figures(sets), profile


def write(sets: list[str], loss: float, figs: dict, profile: dict, seeds: list[int], path: Path) -> None:
    lines = [
        "# Written by `python -m calibration.fit`: the input plane's unknown parameters, fitted to the reference",
        "# load test (domain.md §1, measured calls/s and first 8,000 calls back for spawn, app copies and server).",
        f"# Seeds {seeds}; objective sum((rel. error / tolerance)^2) = {loss:.3f}. Fitted figures vs measured:",
    ]
    for a, ref in REFERENCE.items():
        got = ", ".join(f"{k} {figs[a][k]:.4g} (measured {ref[k]:g})" for k in TOLERANCE)
        lines.append(f"#   {a}: {got}")
    lines.append("# Objective with start_rate scaled by " + ", ".join(f"{k:g}: {v:.3g}" for k, v in profile.items()))
    sections: dict[str, list[str]] = {}
    for s in sets:
        key, value = s.split("=", 1)
        sec, name = key.split(".")
        sections.setdefault(sec, []).append(f'{name} = "{value}"' if "(" in value else f"{name} = {value}")
    for sec, rows in sections.items():
        lines += ["", f"[{sec}]", *rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


# domain.md §3, "Results": the container-start figures the coldstart presets are fitted to. Lazy starts are compared
# by their mean ("a typical cold start"), restores by their median (the blog's p50).
COLDSTART_REFERENCE = {
    ("torch", "lazy", "cold_start_mean_s"): 5.0,
    ("torch", "snapshot", "cold_start_p50_s"): 1.05,
    ("torch", "snapshot", "cold_start_p0_s"): 0.69,
    ("sd", "lazy", "cold_start_mean_s"): 13.0,
    ("sd", "snapshot", "cold_start_p50_s"): 3.5,
}
COLDSTART_RATIO = ("gpt2", 2.5)  # lazy mean ÷ snapshot median
COLDSTART_FITTED = ("op_s", "network_file_s", "restore_s", "pages_tail_sigma")
COLDSTART_OUT = Path(__file__).resolve().parent / "params" / "coldstart.toml"


def coldstart_figures(values: dict[str, float], seeds: list[int]) -> dict:
    """The fitted figures of the three coldstart presets with platform ``values``, mean over seeds."""
    from experiments.cli import load_scenario, run_scenario

    sets = [f"coldstart.{k}={float(v)!r}" for k, v in values.items()]
    out = {}
    for program in ("torch", "sd", "gpt2"):
        for mode in ("lazy", "snapshot"):
            runs = [
                run_scenario(load_scenario(f"coldstart-{program}", [*sets, f"coldstart.mode={mode}"], []), seed=s)
                for s in seeds
            ]
            for k in ("cold_start_mean_s", "cold_start_p50_s", "cold_start_p0_s"):
                out[(program, mode, k)] = float(np.mean([r[k] for r in runs]))
    return out


def coldstart_residuals(figs: dict) -> np.ndarray:
    res = [figs[key] / want - 1 for key, want in COLDSTART_REFERENCE.items()]
    program, want = COLDSTART_RATIO
    res.append(
        figs[(program, "lazy", "cold_start_mean_s")] / figs[(program, "snapshot", "cold_start_p50_s")] / want - 1
    )
    return np.asarray(res)


def fit_coldstart(seeds: list[int], path: Path) -> str:
    """Least squares on the relative errors; writes the platform parameters the three presets share."""
    x0 = np.log([50e-6, 0.006, 0.4, 0.4])
    bounds = (np.log([5e-6, 0.0005, 0.02, 0.02]), np.log([500e-6, 0.1, 2.0, 1.5]))

    def f(x: np.ndarray) -> np.ndarray:
        return coldstart_residuals(coldstart_figures(dict(zip(COLDSTART_FITTED, np.exp(x), strict=True)), seeds))

    res = optimize.least_squares(f, x0, bounds=bounds, diff_step=0.05, max_nfev=200)
    values = {k: float(f"{v:.3g}") for k, v in zip(COLDSTART_FITTED, np.exp(res.x), strict=True)}
    figs = coldstart_figures(values, seeds)
    lines = [
        "# Written by `python -m calibration.fit coldstart`: the platform parameters shared by the coldstart presets,",
        "# fitted to domain.md §3's results by least squares on relative errors (seeds " + str(seeds) + ").",
    ]
    for (program, mode, k), want in COLDSTART_REFERENCE.items():
        lines.append(f"#   {program} {mode} {k}: {figs[(program, mode, k)]:.3g} (measured {want:g})")
    program, want = COLDSTART_RATIO
    ratio = figs[(program, "lazy", "cold_start_mean_s")] / figs[(program, "snapshot", "cold_start_p50_s")]
    lines += [f"#   {program} lazy mean / snapshot p50: {ratio:.3g} (measured {want:g})", "", "[coldstart]"]
    lines += [f"{k} = {v!r}" for k, v in values.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path.read_text()


def main(argv: list[str] | None = None) -> int:
    p = ArgParser(prog="python -m calibration.fit", description=__doc__.splitlines()[0])
    p.add_argument(
        "what",
        nargs="?",
        choices=["loadtest", "coldstart"],
        default="loadtest",
        help="loadtest: the input plane (default); coldstart: the container-start platform",
    )
    p.add_argument("--seeds", type=int, default=3, help="replications per evaluation (default 3)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--out", type=Path, help=f"parameter file to write (default {OUT.name} or {COLDSTART_OUT.name})")
    p.add_argument("--quick", action="store_true", help="a smoke test of the procedure (seconds), not a fit")
    args = p.parse_args(argv)
    seeds = list(range(args.seeds))
    if args.seeds < 1 or args.jobs < 1:
        p.error("--seeds and --jobs must be >= 1")
    if args.what == "coldstart":
        print(fit_coldstart(list(range(args.seeds)), args.out or COLDSTART_OUT))
        return 0
    args.out = args.out or OUT
    sets, loss, figs, profile = fit(seeds, args.jobs, args.quick)
    write(sets, loss, figs, profile, seeds, args.out)
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
