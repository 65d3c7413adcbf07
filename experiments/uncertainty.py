"""Ranges instead of single numbers: a load test run under each plausible model, at several seeds.

The plausible models are the ones ``calibration.fit`` wrote beside the parameter file in use
(``NAME.plausible.json``: every parameter set the fit scored, of any candidate, within max(1, 10%) of the kept
fit's loss; the candidates that predict held-out ways as well as the kept one, ``alternative``; and the parameters
no fitted figure reads at the ends of their ranges, ``unread``: calibration/report.py, calibration/crossval.py). The
code's defaults are the shipped fit (calibration/params/reference-loadtest.toml), so a run without ``--params``
reads that file's; with ``--params FILE`` the last file that has one.

A model's keys count only where the scenario reads them: a section that another approach adds (``server.*`` for a
spawn or remote test, ``batching.*``: models/inputs/approaches/*.py ``sections``) is not read, so its keys are left
out of every model, and models that coincide on every key left are one model. Of the plausible models a run takes
the *envelope*: the kept fit; for each calibrated key it reads (a number, or a distribution's median), the plausible
model with its least and the one with its greatest value (a model already taken wins a tie), so that every direction
the data leave open is tried at its extremes; for each figure of the reference way nearest the question (its
approach, with one app copy or several: ``Plausible.nearest``), the models that gave its least and its greatest value
there (recorded per seed by calibration/plausible.py), since a model between two parameters' extremes can give a
figure beyond both; every ``alternative`` and ``unread`` model; and the assumptions no fit reads (``ASSUMED``: the
accept bursts over their ranges, the modal client's answer to a refusal), each as the kept model with that one
setting. On a reference way itself at the recorded seeds, the range so holds every plausible model's figures; away
from it, the models that bound them there stand in for the rest. Every model runs at the user's seed and the n − 1
after it (the scenario's own keys on top: a key the user sets wins over the model's): common random numbers (the
same streams for every model, so a model's difference from the kept one is its parameters', not its draws'), and
each model's own seed-to-seed spread. The user's own run is the kept model at its seed (the defaults being the kept
fit), and runs that are the same scenario at the same seed run once. A figure's central value is the kept model's
mean over its seeds; its range is the least and the greatest over every run: parameter and structural uncertainty
and run-to-run noise together.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from models.inputs.approaches import APPROACHES
from models.inputs.platform.function import ASYNC, SYNC
from models.runs import load_scenario, run_scenario
from sim import files
from sim.cli import cap_jobs
from sim.pools import process_pool
from sim.scenario import ScenarioError, leading_number

SHIPPED = Path(__file__).resolve().parent.parent / "calibration" / "params" / "reference-loadtest.plausible.json"


def plausible_file(params: list[str]) -> Path:
    """The plausible models of the parameters in use: the last ``--params`` file that has them, else the shipped."""
    for p in reversed(params):
        side = Path(p).with_name(Path(p).stem + ".plausible.json")
        if os.path.lexists(side):  # whatever it is: a folder or a pipe there is an error, never the shipped set
            return side
    return SHIPPED


# Assumptions no fit reads, carried as ranges: the accept bursts, from what the reference test had accepted at once
# without an error (docs/sources.md §1: 1,000 synchronous calls per copy, 8,000 spawns) to an assumed five times that,
# by the call style that reads each; and what the modal client does with a refusal by the accept limits, which
# Modal does not publish (models/inputs/callers/clients.py ``on_rate_limit``), for single calls on the Function path.
ACCEPT_BURSTS = {
    SYNC: ("limits.sync_accept_burst", 1000.0, 5000.0),
    ASYNC: ("limits.async_accept_burst", 8000.0, 40000.0),
}
ON_RATE_LIMIT = "clients.on_rate_limit=retry_after"


def assumed(sc: Any) -> list[str]:
    """The settings of the assumptions ``sc`` reads, one model each (``ACCEPT_BURSTS``, ``ON_RATE_LIMIT``)."""
    ap = APPROACHES.get(sc.approach)
    if ap is None or ap.http or not sc.limits.enabled:
        return []
    key, low, high = ACCEPT_BURSTS[ap.style]
    out = [f"{key}={low:g}", f"{key}={high:g}"]
    if sc.clients.api == "single":
        out.append(ON_RATE_LIMIT)
    return out


@dataclass(frozen=True)
class Plausible:
    """A plausible-models file: the kept model's settings, every plausible model's settings, the models every
    envelope takes (the structural alternatives and the unread parameters' extremes), and, where the file records
    them (calibration/plausible.py), each model's figures on the reference ways (way → figure → a value per seed)
    and what each way runs (its approach and app copies)."""

    path: Path
    kept: list[str]
    models: list[list[str]]
    always: list[list[str]]
    figures: list[dict]
    ways: dict[str, dict]

    def nearest(self, sc: Any) -> list[str]:
        """The recorded ways nearest ``sc``: those of its approach with app copies as it has them (one or several),
        else those of its approach, else every one."""
        ways = self.ways
        same = [w for w, d in ways.items() if d.get("approach") == sc.approach]
        alike = [w for w in same if (ways[w].get("copies", 1) > 1) == (sc.function.copies > 1)]
        return alike or same or list(ways)

    def envelope(self, sc: Any) -> list[list[str]]:
        """The envelope of the models for the scenario ``sc`` (``envelope``): the settings it reads, the figures
        of its nearest reference ways, the assumptions it reads."""
        ways = self.nearest(sc)
        figs = [{f"{w}.{k}": v for w in ways for k, v in f.get(w, {}).items()} for f in self.figures]
        return envelope(self.kept, self.models, unread(sc.approach), self.always, assumed(sc), figs)


def load(path: Path) -> Plausible:
    """A plausible-models file (calibration/report.py writes it, calibration/plausible.py adds the figures)."""
    doc = files.read_json(path, "a plausible-models file")

    def bad(what: str) -> NoReturn:
        raise ScenarioError(f"{files.shown(path)}: not a plausible-models file ({what})")

    def settings(x: Any, where: str) -> list[str]:
        if not isinstance(x, list) or not all(isinstance(s, str) and "=" in s for s in x):
            bad(f"{where}: expected a list of KEY=VALUE strings")
        return list(x)

    def figures(x: Any, where: str) -> dict:
        def numbers(v: Any) -> bool:
            return isinstance(v, list) and all(n is None or _finite(n) for n in v)

        ok = isinstance(x, dict) and all(isinstance(f, dict) and all(map(numbers, f.values())) for f in x.values())
        return dict(x) if ok else bad(f"{where}: expected way → figure → a list of numbers")

    if not isinstance(doc, dict) or not isinstance(doc.get("kept"), dict) or not isinstance(doc.get("models"), list):
        bad("expected an object with 'kept' and a list 'models'")
    kept = settings(doc["kept"].get("settings"), "kept.settings")
    models, always, figs = [], [], []
    for i, m in enumerate(doc["models"]):
        if not isinstance(m, dict):
            bad(f"models[{i}]: expected an object")
        models.append(settings(m.get("settings"), f"models[{i}].settings"))
        if m.get("alternative") or m.get("unread"):
            always.append(models[-1])
        figs.append(figures(m.get("figures") or {}, f"models[{i}].figures"))
    of = doc.get("figures_of") or {}
    ways = of.get("ways", {}) if isinstance(of, dict) else None
    if not isinstance(ways, dict) or not all(
        isinstance(d, dict) and isinstance(d.get("approach"), str) and isinstance(d.get("copies", 1), int)
        for d in ways.values()
    ):
        bad("figures_of.ways: expected way → {approach, copies}")
    return Plausible(path, kept, models, always, figs, {str(w): dict(d) for w, d in ways.items()})


def unread(approach: str) -> Callable[[str], bool]:
    """Whether a setting (``key=value``) is of a section that only other approaches read."""
    own = set(APPROACHES[approach].sections) if approach in APPROACHES else set()
    others = {s for a in APPROACHES.values() for s in a.sections} - own
    return lambda setting: setting.partition("=")[0].partition(".")[0] in others


def value(model: list[str], key: str) -> float | None:
    """``key``'s value in a model: a number, or a distribution's first parameter (a lognormal's median, a constant's
    value); None for a switch or a key the model does not set."""
    for s in model:
        k, _, v = s.partition("=")
        if k == key:
            return leading_number(v)
    return None


def envelope(
    kept: list[str],
    models: list[list[str]],
    skip: Callable[[str], bool] | None = None,
    always: list[list[str]] = (),
    extra: list[str] = (),
    figures: list[dict] | None = None,
) -> list[list[str]]:
    """The kept model, then for each calibrated key the models with its least and greatest value, then for each
    figure of ``figures`` (one dict per model: figure → its values, one per seed) the models that give its least and
    its greatest value, then every model of ``always`` and the kept model with each setting of ``extra``
    (``assumed``), each once: the settings ``skip`` says are not read are left out of every model first, and models
    then alike are one model."""

    def read(model: list[str]) -> list[str]:
        return [s for s in model if skip is None or not skip(s)]

    kept, models = read(kept), [read(m) for m in models]
    chosen = [kept]

    def take(ranked: list[tuple[float, list[str]]]) -> None:
        for pick in (min, max):
            if ranked:
                best = pick(x for x, _ in ranked)
                tied = [m for x, m in ranked if x == best]
                if not any(m in chosen for m in tied):  # one already taken wins a tie
                    chosen.append(tied[0])

    for key in [s.partition("=")[0] for s in kept if value(kept, s.partition("=")[0]) is not None]:
        take([(x, m) for m in [*chosen, *models] if (x := value(m, key)) is not None])
    for name in dict.fromkeys(k for f in figures or () for k in f):
        take([(x, m) for m, f in zip(models, figures, strict=True) for x in f.get(name) or () if _finite(x)])
    for m in [*(read(m) for m in always), *(with_setting(kept, x) for x in extra)]:
        if m not in chosen:
            chosen.append(m)
    return chosen


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def with_setting(model: list[str], setting: str) -> list[str]:
    """``model`` with ``setting`` (``KEY=VALUE``) in place of its own value of that key."""
    key = setting.partition("=")[0]
    return [*(s for s in model if s.partition("=")[0] != key), setting]


def _run(args: tuple[str, list[str], list[str], int]) -> dict:
    scenario, sets, params, seed = args
    return run_scenario(load_scenario(scenario, sets, params), seed=seed)


def ranges(
    scenario: str, sets: list[str], params: list[str], seeds: int, jobs: int, seed: int = 0
) -> tuple[dict, dict]:
    """(the user's run at ``seed``, the ranges): the scenario under every model of the envelope at ``seeds`` seeds
    from ``seed`` (common random numbers); per numeric metric its central value (the kept model's
    mean over its seeds) and its range (least, greatest over every run). The user's run is one of the runs."""
    sc = load_scenario(scenario, sets, params)
    if sc.model != "function":
        raise ScenarioError(f"--uncertainty: only the load-test model has plausible models, not {sc.model!r}")
    path = plausible_file(params)
    plausible = load(path)
    chosen = plausible.envelope(sc)
    own = (scenario, list(sets), params, seed)
    wanted = [own] + [(scenario, [*m, *sets], params, seed + i) for m in chosen for i in range(seeds)]
    # the same scenario at the same seed is the same run (reproducible): each runs once
    key = [(repr(load_scenario(s, st, p)), sd) for s, st, p, sd in wanted]
    unique = list(dict.fromkeys(key))
    work = [wanted[key.index(k)] for k in unique]
    jobs = cap_jobs("--uncertainty", jobs, len(work))
    if jobs > 1:
        with process_pool(jobs) as pool:
            done = list(pool.map(_run, work))
    else:
        done = [_run(w) for w in work]
    result: dict[Any, dict] = dict(zip(unique, done, strict=True))
    mine, runs = result[key[0]], [result[k] for k in key[1:]]
    out = {}
    for k, v in runs[0].items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or k in ("wall_s", "events"):
            continue
        values = [r[k] for r in runs if isinstance(r.get(k), (int, float))]
        central = [r[k] for r in runs[:seeds] if isinstance(r.get(k), (int, float))]
        if values and central:
            out[k] = {"central": statistics.fmean(central), "low": min(values), "high": max(values)}
    doc = {"file": str(path), "models": len(chosen), "of": len(plausible.models), "seeds": seeds, "runs": len(work)}
    return mine, {**doc, "ranges": out}
