"""Model selection by prediction: leave-one-way-out cross-validation of each candidate (``calibration.fit --cv``).

The simulator's test is what it predicts where it was not fitted, so candidates are compared on that, beside their
in-sample AICc. For each candidate and each way W of the reference test (spawn, app copies, batching, server):

- **The fold**: the candidate fitted to every figure but W's, by the same search as the full fit, started from its
  grid and from the full fit's values. A parameter that none of the remaining ways reads (its section is read by W
  alone: ``server.*`` without the server) is not fitted: it stays at its search's start and is carried as its whole
  range (``unread``). Convergence is checked: the full fit's values may not beat the fold's fit on the fold's own
  objective (if they do, the fold takes them and says so: ``restarted``).
- **The score**: W's figures predicted at the fold's parameters, Σ((model − measured) / tolerance)² over W's
  targets (calibration/objective.py), at ``replicates`` sets of seeds (the fit's seeds, then as many after them), so
  that the score's own noise is known.

A candidate's CV score is the sum over ways, averaged over the replicates; its standard error is the replicates'
spread ÷ √replicates. The candidate kept predicts best (the lowest CV score); those within noise of it (the gap
under 2 × the standard error of the difference) are kept beside it as structural alternatives: their full fits join
the plausible models (calibration/report.py), so every range carries them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from calibration.candidates import Candidate, Free
from calibration.objective import Objective, Runner, loss, reference
from calibration.search import Fit, fit_candidate, joint, profile
from calibration.targets import APPROACHES, Target, predictions, targets
from models.inputs.approaches import APPROACHES as MODEL_APPROACHES
from models.runs import load_scenario

NOISE_SE = 2.0  # candidates whose CV score is within this many standard errors of the best's are alternatives


@dataclass
class Fold:
    """One way held out: the fit without it, what was not fitted, and the held-out way's score per replicate."""

    way: str
    fit: Fit
    unread: tuple[Free, ...] = ()  # parameters only the held-out way reads: not fitted, carried as their range
    scores: list[float] = field(default_factory=list)
    restarted: bool = False  # the full fit's values beat the fold's search on its own objective, and were taken

    @property
    def score(self) -> float:
        return statistics.fmean(self.scores)


@dataclass
class CrossVal:
    """A candidate's folds, one per way."""

    candidate: Candidate
    folds: dict[str, Fold]

    def totals(self) -> list[float]:
        """The CV score of each replicate: the sum over ways."""
        n = min(len(f.scores) for f in self.folds.values())
        return [sum(f.scores[r] for f in self.folds.values()) for r in range(n)]

    @property
    def score(self) -> float:
        return statistics.fmean(self.totals())

    @property
    def se(self) -> float:
        t = self.totals()
        return statistics.stdev(t) / math.sqrt(len(t)) if len(t) > 1 else math.inf


def read_by(key: str, ways: Iterable[str]) -> bool:
    """Whether any of ``ways`` reads ``key``: a key of a section that some approaches add (``server.*``,
    ``batching.*``: models/inputs/approaches) is read only by ways of those approaches; every other key by all."""
    section = key.partition(".")[0]
    owners = {a for a, ap in MODEL_APPROACHES.items() if section in ap.sections}
    if not owners:
        return True
    return any(load_scenario(reference(w).preset, [], []).approach in owners for w in ways)


def unread(cand: Candidate, ways: Iterable[str]) -> tuple[Free, ...]:
    """The candidate's free parameters that none of ``ways`` reads (every key they set)."""
    ways = tuple(ways)
    return tuple(f for f in cand.free if not any(read_by(k, ways) for k in (f.key, *f.also)))


def without(cand: Candidate, fixed: tuple[Free, ...]) -> Candidate:
    """``cand`` with the parameters ``fixed`` held at their starts instead of fitted."""
    if not fixed:
        return cand
    held = tuple(s for f in fixed for s in f.setting(f.start))
    keys = {k for f in fixed for k in (f.key, *f.also)}
    own = tuple(s for s in cand.fixed if s.partition("=")[0] not in keys)
    return replace(cand, fixed=(*own, *held), free=tuple(f for f in cand.free if f not in fixed))


def fold(
    runner: Runner,
    full: Fit,
    way: str,
    seeds: list[int],
    replicates: int,
    max_evals: int,
    extra: tuple[str, ...] = (),
    quick: bool = False,
) -> Fold:
    """Fit ``full``'s candidate without ``way``'s figures and score them at ``replicates`` sets of seeds."""
    rest = [w for w in APPROACHES if w != way]
    fixed = unread(full.candidate, rest)
    cand = without(full.candidate, fixed)
    start = tuple(x for f, x in zip(full.candidate.free, full.values, strict=True) if f not in fixed)
    obj = Objective(runner, seeds, targets(way), extra)
    fit = fit_candidate(obj, cand, quick, max_evals, 0, starts=(start,))  # profiled if kept (``profile_fold``)
    restarted = False
    full_loss = obj(cand.settings(start))
    if full_loss < fit.loss:  # the search stopped short of a point it was given: take it
        fit = replace(fit, values=start, loss=full_loss, figures=obj.figures(cand.settings(start)))
        restarted = True
    fit.figures = obj.figures(fit.settings, APPROACHES, [p.key for p in predictions(way)])  # the held-out way too
    held: tuple[Target, ...] = tuple(t for t in targets() if t.approach == way)
    n = len(seeds)
    scores = []
    for r in range(replicates):
        rep = Objective(runner, [s + r * n for s in seeds], held, extra)
        scores.append(loss(rep.figures(fit.settings, [way]), held))
    return Fold(way, fit, fixed, scores, restarted)


def profile_fold(runner: Runner, fo: Fold, seeds: list[int], profile_points: int, extra: tuple[str, ...] = ()) -> None:
    """Profile a fold's fit (the kept candidate's folds are written as leave-out files), on its own objective: the
    scans join the sets it scored, and each interval comes from the joint plausible set (calibration/search.py)."""
    obj = Objective(runner, seeds, targets(fo.way), extra)
    f = fo.fit
    f.profiles = profile(obj, f.candidate, f.values, f.loss, profile_points)
    f.seen = [*f.seen, *obj.seen]
    for p in f.profiles:
        joint(p, f.seen, f.loss)


def cross_validate(
    runner: Runner,
    full: Fit,
    seeds: list[int],
    replicates: int,
    max_evals: int,
    extra: tuple[str, ...] = (),
    quick: bool = False,
) -> CrossVal:
    """Every fold of ``full``'s candidate (one per way of the reference test)."""
    folds = {}
    for way in APPROACHES:
        folds[way] = fold(runner, full, way, seeds, replicates, max_evals, extra, quick)
        f = folds[way]
        print(
            f"{full.candidate.name} without {way}: fold loss {f.fit.loss:.4g}, {way} scored {f.score:.4g}", flush=True
        )
    return CrossVal(full.candidate, folds)


def chosen(cvs: list[CrossVal]) -> tuple[CrossVal, list[CrossVal]]:
    """(the candidate that predicts best, the others within noise of it: the structural alternatives)."""
    best = min(cvs, key=lambda c: c.score)
    alts = [c for c in cvs if c is not best and c.score - best.score <= NOISE_SE * math.hypot(c.se, best.se)]
    return best, alts
