"""Fit the coldstart presets' shared platform parameters to docs/sources.md §3.

Run: ``python -m calibration.fit coldstart``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

# docs/sources.md §3, "Results": the container-start figures the coldstart presets are fitted to. Lazy starts are
# compared by their mean ("a typical cold start"), restores by their median (the blog's p50).
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
COLDSTART_BOUNDS = ((5e-6, 0.0005, 0.02, 0.02), (500e-6, 0.1, 2.0, 1.5))  # the fit's search box, per fitted key
# assumption: the blog's figures are rounded ("~5 s", "about 2.5x faster"), so a parameter set whose every fitted
# figure is within 10% of the published one is as plausible as the fit (the fit itself is within 7.7%)
COLDSTART_TOLERANCE = 0.10


def coldstart_figures(values: dict[str, float], seeds: list[int]) -> dict:
    """The fitted figures of the three coldstart presets with platform ``values``, mean over seeds."""
    from models.runs import load_scenario, run_scenario

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
    from scipy import optimize  # (here, not at the top: the commands' --help need not load it)

    x0 = np.log([50e-6, 0.006, 0.4, 0.4])
    bounds = (np.log(COLDSTART_BOUNDS[0]), np.log(COLDSTART_BOUNDS[1]))

    def f(x: np.ndarray) -> np.ndarray:
        return coldstart_residuals(coldstart_figures(dict(zip(COLDSTART_FITTED, np.exp(x), strict=True)), seeds))

    res = optimize.least_squares(f, x0, bounds=bounds, diff_step=0.05, max_nfev=200)
    values = {k: float(f"{v:.3g}") for k, v in zip(COLDSTART_FITTED, np.exp(res.x), strict=True)}
    figs = coldstart_figures(values, seeds)
    lines = [
        "# Written by `python -m calibration.fit coldstart`: the platform parameters shared by the coldstart presets,",
        "# fitted to docs/sources.md §3's results by least squares on relative errors (seeds " + str(seeds) + ").",
    ]
    for (program, mode, k), want in COLDSTART_REFERENCE.items():
        lines.append(f"#   {program} {mode} {k}: {figs[(program, mode, k)]:.3g} (measured {want:g})")
    program, want = COLDSTART_RATIO
    ratio = figs[(program, "lazy", "cold_start_mean_s")] / figs[(program, "snapshot", "cold_start_p50_s")]
    lines.append(f"#   {program} lazy mean / snapshot p50: {ratio:.3g} (measured {want:g})")
    bands = coldstart_bands(values, seeds)  # what models/coldstart.py declares as the keys' plausible values
    lines.append(f"# Plausible, each alone with every figure within {COLDSTART_TOLERANCE:.0%} (coldstart_bands):")
    lines += [f"#   {k}: {low:.3g} .. {high:.3g}" for k, (low, high) in bands.items()]
    lines += ["", "[coldstart]"]
    lines += [f"{k} = {v!r}" for k, v in values.items()]
    from calibration.report import write_checked

    return write_checked(path, "\n".join(lines) + "\n", "coldstart-torch")  # as `run coldstart-torch --params` loads it


def coldstart_bands(values: dict[str, float], seeds: list[int], tolerance: float = COLDSTART_TOLERANCE) -> dict:
    """Each fitted key's plausible range (what models/coldstart.py declares as its ``plausible`` values): from the
    fitted ``values``, the least and the greatest value of the key alone, the others fitted, at which every fitted
    figure is still within ``tolerance`` of the published one (root finding on the worst relative error; the fit's
    search box where it stays within), rounded to 3 significant figures."""
    from scipy import optimize  # (here, not at the top: the commands' --help need not load it)

    def excess(key: str, v: float) -> float:
        return float(np.max(np.abs(coldstart_residuals(coldstart_figures({**values, key: v}, seeds))))) - tolerance

    out = {}
    for key, low, high in zip(COLDSTART_FITTED, *COLDSTART_BOUNDS, strict=True):
        ends = []
        for bound in (low, high):
            if excess(key, bound) <= 0:
                ends.append(bound)
            else:  # on a log scale: the keys span decades
                x = optimize.brentq(lambda x, k=key: excess(k, math.exp(x)), math.log(values[key]), math.log(bound))
                ends.append(float(f"{math.exp(x):.3g}"))
        out[key] = tuple(ends)
    return out
