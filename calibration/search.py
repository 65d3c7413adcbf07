"""Fitting one candidate: a grid, then Nelder–Mead, then a profile of each fitted parameter.

The search works in unit coordinates: each free parameter's range mapped to [0, 1], on a log scale where the
parameter is log-scaled (so a step is a ratio, as in the old fit's log-parameters). The grid is the product of the
parameters' grid values; Nelder–Mead starts from its best point with first steps of 0.1 (a sixth to a third of a
decade for the log ranges here), within the bounds. Fitted values are rounded to 3 significant figures.

Identifiability. Each fitted parameter is scanned alone, the others held at the fit, over evenly spaced unit
coordinates of its range plus the fitted value. Its profile interval is the contiguous run of scanned values around
the fit whose loss stays within max(1, 10% of the best) of the best: +1 is one figure moving by one tolerance band
from on target, and 10% keeps the rule meaningful when the best loss is large (a loss of 40 from misfits no
parameter fixes should not make every interval look sharp). A parameter is "not pinned down" when its interval
reaches a bound of its range or spans more than a factor 4 (for a linear range starting at 0: when it reaches 0).
The interval and the flag come from the joint plausible set (``joint``): every parameter set the fit scored within
that rule, the scan's points among them, so that parameters which trade off against each other along a ridge show
the ridge's whole extent instead of the sharp minimum a one-at-a-time scan sees.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from calibration.candidates import Candidate, Free
from calibration.objective import Figures, Objective
from calibration.targets import Target

SPREAD = 4.0  # an interval wider than this ratio is "not pinned down"


def within_profile(loss: float, best: float) -> bool:
    return loss <= best + max(1.0, 0.1 * best)


@dataclass
class Profile:
    """One parameter's scan: (value, loss) pairs sorted by value, the interval, and the flag."""

    free: Free
    points: list[tuple[float, float]]
    low: float
    high: float
    pinned: bool
    why: str = ""


@dataclass
class Fit:
    candidate: Candidate
    values: tuple[float, ...] = ()
    loss: float = float("nan")
    figures: Figures = field(default_factory=dict)
    profiles: list[Profile] = field(default_factory=list)
    evaluations: int = 0
    skipped: str = ""  # why the candidate was not fitted
    targets: tuple[Target, ...] = ()  # what it was scored on
    seen: list[tuple[tuple[str, ...], float]] = field(default_factory=list)  # every set scored, and its loss

    @property
    def settings(self) -> list[str]:
        return self.candidate.settings(self.values)


def profile(obj: Objective, cand: Candidate, values: tuple[float, ...], best: float, points: int) -> list[Profile]:
    out = []
    for i, f in enumerate(cand.free):
        us = np.linspace(0.0, 1.0, points) if points > 1 else np.array([0.0, 1.0])
        xs = sorted({*(f.from_unit(u) for u in us), values[i]})
        pts = []
        for x in xs:
            v = list(values)
            v[i] = x
            pts.append((x, obj(cand.settings(v))))
        j = xs.index(values[i])
        lo = hi = j
        while lo > 0 and within_profile(pts[lo - 1][1], best):
            lo -= 1
        while hi < len(pts) - 1 and within_profile(pts[hi + 1][1], best):
            hi += 1
        low, high = pts[lo][0], pts[hi][0]
        why = []
        if lo == 0:
            why.append("reaches the lower bound")
        if hi == len(pts) - 1:
            why.append("reaches the upper bound")
        if low > 0 and high / low > SPREAD:
            why.append(f"spans ×{high / low:.3g}")
        out.append(Profile(f, pts, low, high, not why, "; ".join(why)))
    return out


def fit_candidate(
    obj: Objective,
    cand: Candidate,
    quick: bool,
    max_evals: int,
    profile_points: int,
    starts: tuple[tuple[float, ...], ...] = (),
) -> Fit:
    """Grid (``quick``: the start point only) and ``starts`` (further points to start from: a fold starts from the
    full fit too), Nelder–Mead from the best (at most ``max_evals`` evaluations), rounding, profile (none with
    ``profile_points`` 0)."""
    from scipy import optimize  # (here, not at the top: the commands' --help need not load it)

    start_evals, start_seen = obj.evaluations, len(obj.seen)
    grids = [(f.start,) if quick or not f.grid else f.grid for f in cand.free]
    points = dict.fromkeys([*itertools.product(*grids), *(tuple(s) for s in starts)])
    scored = sorted((obj(cand.settings(g)), g) for g in points)
    best_loss, best = scored[0]
    print(f"{cand.name}: grid of {len(scored)}, best loss {best_loss:.4g} at {fmt_values(cand, best)}", flush=True)

    if cand.k and max_evals > 0:
        x0 = np.array([f.to_unit(x) for f, x in zip(cand.free, best, strict=True)])
        simplex = np.array([x0, *(np.clip(x0 + 0.1 * e, 0, 1) for e in np.eye(cand.k))])
        for i in range(1, cand.k + 1):  # a vertex clipped onto x0 (x0 at the upper bound): step the other way
            if np.allclose(simplex[i], x0):
                simplex[i, i - 1] -= 0.1

        def f(u: np.ndarray) -> float:
            return obj(cand.settings([p.from_unit(x) for p, x in zip(cand.free, u, strict=True)]))

        res = optimize.minimize(
            f,
            x0,
            method="Nelder-Mead",
            bounds=[(0.0, 1.0)] * cand.k,
            options={"initial_simplex": simplex, "xatol": 0.005, "fatol": 0.01, "maxfev": max_evals},
        )
        if res.fun < best_loss:
            best = tuple(p.from_unit(x) for p, x in zip(cand.free, res.x, strict=True))
    values = tuple(float(f"{x:.3g}") for x in best)
    loss = obj(cand.settings(values))
    if scored[0][0] < loss:  # rounding lost more than the search gained: keep the best point scored
        loss, values = scored[0]
    profiles = profile(obj, cand, values, loss, profile_points) if profile_points else []
    figs = obj.figures(cand.settings(values))
    seen = obj.seen[start_seen:]
    for p in profiles:
        joint(p, seen, loss)
    return Fit(cand, values, loss, figs, profiles, obj.evaluations - start_evals, targets=obj.targets, seen=seen)


def joint(p: Profile, seen: list[tuple[tuple[str, ...], float]], best: float) -> None:
    """Set the profile's interval and flag from the joint plausible set: the least and greatest value of the
    parameter over every set the fit scored within max(1, 10%) of the best (the grid, the search, every profile's
    scan), so that two parameters that trade off along a ridge both show the ridge's extent (a one-at-a-time scan
    holds the others at the fit and sees a sharp minimum). Not pinned down: the interval reaches a bound of the
    range, or spans more than ×SPREAD (a linear range from 0: reaches 0)."""
    values = [v for sets, loss in seen if within_profile(loss, best) and (v := p.free.value_of(sets)) is not None]
    if not values:
        return
    p.low, p.high = min(values), max(values)
    f, why = p.free, []
    if p.low <= f.low * (1 + 1e-9) + 1e-12:
        why.append("reaches the lower bound")
    if p.high >= f.high * (1 - 1e-9):
        why.append("reaches the upper bound")
    if p.low > 0 and p.high / p.low > SPREAD:
        why.append(f"spans ×{p.high / p.low:.3g}")
    p.pinned, p.why = not why, "; ".join(why)


def fmt_values(cand: Candidate, values: tuple[float, ...] | list[float]) -> str:
    return ", ".join(f"{f.name}={x:.4g}" for f, x in zip(cand.free, values, strict=True))
