"""Ranges instead of single numbers: a run under each plausible model of its model, at several seeds.

Every model says where its plausible models come from (``Model.plausible``, sim/model.py ``Plausibles``): the ones a
fit wrote beside the parameter file in use (``NAME.plausible.json``), and the ``plausible`` values its schema's keys
declare (``param``, sim/scenario.py): a fitted key's range where the fit gives one, a sourced or assumed key's range
from docs/sources.md, and the rival mechanisms (a choice's other values the sources leave open). The load test's
file is the shipped fit's (calibration/params/reference-loadtest.plausible.json: every parameter set
``calibration.fit`` scored, of any candidate, within max(1, 10%) of the kept fit's loss; the candidates that predict
held-out ways as well as the kept one, ``alternative``; and the parameters no fitted figure reads at the ends of their
ranges, ``unread``: calibration/report.py, calibration/crossval.py); with ``--params FILE`` the last file that has
one. Container start and sandbox creation have no such file: their ranges are their keys' (models/coldstart.py,
models/sandboxes/).

A model's keys count only where the scenario reads them (the model's ``unread``: a section that another approach or
control plane adds, a snapshot's keys in a lazy start), and models that coincide on every key left are one model. Of
the plausible models a run takes the *envelope*: the kept fit (the scenario as it is); for each calibrated key it
reads (a number, or a distribution's median), the file's model with its least and the one with its greatest value (a
model already taken wins a tie), so that every direction the data leave open is tried at its extremes; for each figure
of the reference way nearest the question (the model's ``nearest``), the models that gave its least and its greatest
value there (recorded per seed by calibration/plausible.py), since a model between two parameters' extremes can give a
figure beyond both; every ``alternative`` and ``unread`` model; then the kept model with each assumption the model
carries (its ``assumed``) and with each declared plausible value of a key it reads, one setting a model, each saying
where it comes from (the key's ``source``). A key the user sets (``--set``) wins over every model's and is no longer
a range. On a reference way itself at the recorded seeds, the range so holds every plausible model's figures; away
from it, the models that bound them there stand in for the rest. Every model runs at the user's seed and the n − 1
after it (the scenario's own keys on top): common random numbers (the same streams for every model, so a model's
difference from the kept one is its parameters', not its draws'), and each model's own seed-to-seed spread. The
user's own run is the kept model at its seed, and runs that are the same scenario at the same seed run once. A
figure's central value is the kept model's mean over its seeds; its range is the least and the greatest over every
run: parameter and structural uncertainty and run-to-run noise together.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import statistics
import sys
import time
import typing
from collections.abc import Callable, Iterator
from concurrent.futures import as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from models.registry import MODELS
from models.runs import load_scenario, run_scenario
from sim import files, runcache
from sim.cli import cap_jobs, progress_bar
from sim.dists import Dist
from sim.guard import OverBudget
from sim.model import Plausibles
from sim.pools import process_pool
from sim.scenario import ScenarioError, leading_number

PARAMS = Path(__file__).resolve().parent.parent / "calibration" / "params"


def plausible_file(params: list[str], shipped: str = Plausibles.shipped) -> Path | None:
    """The plausible models of the parameters in use: the last ``--params`` file that has them, else the model's
    shipped file (``shipped``, in calibration/params/; None if it has none)."""
    for p in reversed(params):
        side = Path(p).with_name(Path(p).stem + ".plausible.json")
        if os.path.lexists(side):  # whatever it is: a folder or a pipe there is an error, never the shipped set
            return side
    return PARAMS / shipped if shipped else None


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

    def envelope(self, sc: Any, how: Plausibles) -> list[list[str]]:
        """The envelope of the file's models for the scenario ``sc`` of a model that declares ``how`` (``envelope``):
        the settings it reads, the figures of its nearest reference ways, the assumptions it reads."""
        ways = how.nearest(sc, self.ways) if self.ways else []
        figs = [{f"{w}.{k}": v for w in ways for k, v in f.get(w, {}).items()} for f in self.figures]
        return envelope(self.kept, self.models, how.unread(sc), self.always, how.assumed(sc), figs)


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


@dataclass(frozen=True)
class Envelope:
    """The models a run with ``--uncertainty`` takes: each as settings on top of the scenario (the first, the kept
    model: the scenario as it is), where they come from (``file``: the plausible-models file, if any; ``of``: how
    many models the file and the declared ranges hold) and, for the models of declared ranges, each one's source."""

    file: str
    of: int
    models: list[list[str]]
    sources: dict[str, str]  # a declared model's setting → where its value comes from


def declared(schema: type, prefix: str = "") -> Iterator[tuple[str, tuple, str]]:
    """(key, its plausible values, its source): every key of ``schema`` that declares plausible values."""
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp) and tp is not Dist:
            yield from declared(tp, f"{prefix}{f.name}.")
        elif f.metadata.get("plausible"):
            yield prefix + f.name, f.metadata["plausible"], f.metadata.get("source", "")


def current(sc: Any, key: str) -> Any:
    """The value of the dotted ``key`` in the scenario ``sc``."""
    for part in key.split("."):
        sc = getattr(sc, part)
    return sc


def as_setting(key: str, v: Any) -> str:
    """``key=value`` as ``--set`` reads it back."""
    return f"{key}={str(v).lower() if isinstance(v, bool) else (f'{v:g}' if isinstance(v, float) else v)}"


def _read(path: Path) -> Plausible:
    """``load``, once a process for a sweep's many points while the file stays as it is (a file rewritten is read
    again; one that fails is read again, and fails again)."""
    try:
        st = os.stat(path)
    except OSError:
        return load(path)  # which says what is wrong with it
    return _loaded(path, (st.st_mtime_ns, st.st_size, st.st_ino))


@functools.lru_cache(maxsize=8)
def _loaded(path: Path, stamp: tuple[int, int, int]) -> Plausible:
    return load(path)


def envelope_of(sc: Any, params: list[str], users: set[str] = frozenset()) -> Envelope:
    """The envelope of the scenario ``sc`` (loaded with ``params``): its model's plausible-models file's models, then
    the kept model with each declared plausible value of a key it reads and the user has not set (``users``: the
    keys of the ``--set``s), each once. Bad input (no plausible model at all, an unreadable file) is ScenarioError."""
    model = MODELS[sc.model]
    how = model.plausible
    path = plausible_file(params, how.shipped)
    if path is not None:
        plausible = _read(path)
        chosen, of = plausible.envelope(sc, how), len(plausible.models)
    else:
        chosen, of = [[]], 1  # the kept model: the scenario as it is
    skip = how.unread(sc)
    sources = {}
    for key, values, source in declared(model.schema):
        for v in values:
            setting = as_setting(key, v)
            if key in users or skip(setting) or v == current(sc, key):
                continue
            of += 1
            m = with_setting(chosen[0], setting)
            if m not in chosen:
                chosen.append(m)
                sources[setting] = source
    if len(chosen) == 1 and path is None:
        raise ScenarioError(f"--uncertainty: the {model.name!r} scenario reads no key with plausible values")
    return Envelope(str(path or "the keys' declared ranges (docs/reference/keys.md)"), of, chosen, sources)


def run_one(args: tuple[str, list[str], list[str], int]) -> dict:
    """One run (scenario, its ``--set``s, parameter files, seed) of many (an envelope, a search); past its budget,
    what it is and why (``OVER``), not the end of every run."""
    scenario, sets, params, seed = args
    try:
        return run_scenario(load_scenario(scenario, sets, params), seed=seed)
    except OverBudget as e:
        return {OVER: str(e), MEASURED: e.measured}


OVER = "over_budget"  # a run's result that went past its budget: why (sim/guard.py)
MEASURED = "over_budget_measured"  # and whether by this machine's memory (not kept on disk: sim/runcache.py)


def ranges(
    scenario: str,
    sets: list[str],
    params: list[str],
    seeds: int,
    jobs: int,
    seed: int = 0,
    known: dict | None = None,
    bar: Any = None,
) -> tuple[dict, dict]:
    """(the user's run at ``seed``, the ranges): the scenario under every model of the envelope at ``seeds`` seeds
    from ``seed`` (common random numbers); per numeric metric its central value (the kept model's
    mean over its seeds) and its range (least, greatest over every run). The user's run is one of the runs; the
    models' declared settings, each with its source, under ``sources``. ``known``: runs already made (by scenario and
    seed), not made again, and this call's added to it (a search that adds seeds only where its answer is not yet
    clear: experiments/whatif/search.py ``robustness``); a run kept on disk by an earlier call is read back
    (sim/runcache.py), and each run made is kept as it ends. ``runs`` counts the runs this call made, ``read`` those it
    read back. The runs made go on ``bar`` (a search's progress bar: its total grows by this call's runs), else on a
    bar of their own, shown once they have taken 3 s, on a terminal (sim/cli.py ``progress_bar``)."""
    began = time.time()
    sc = load_scenario(scenario, sets, params)
    env = envelope_of(sc, params, {s.partition("=")[0].strip() for s in sets})
    chosen = env.models
    own = (scenario, list(sets), params, seed)
    wanted = [own] + [(scenario, [*m, *sets], params, seed + i) for m in chosen for i in range(seeds)]
    # the same scenario at the same seed is the same run (reproducible): each runs once
    scenarios = [load_scenario(s, st, p) for s, st, p, _ in wanted]
    key = [(repr(s), w[3]) for s, w in zip(scenarios, wanted, strict=True)]
    unique = list(dict.fromkeys(key))
    known = {} if known is None else known
    # and a run kept on disk by an earlier call (the same command again, or one stopped part way) is read back
    disk = {k: runcache.key(scenarios[key.index(k)], k[1]) for k in unique if k not in known}
    read = {k: m for k, m in ((k, runcache.load(d)) for k, d in disk.items()) if m is not None}
    known.update(read)
    todo = [k for k in unique if k not in known]
    work = [wanted[key.index(k)] for k in todo]
    jobs = cap_jobs("--uncertainty", jobs, max(1, len(work)))

    def ended(k: tuple[str, int], metrics: dict) -> dict:
        if not metrics.get(MEASURED):  # stopped by this machine's memory: another may finish it (sim/runcache.py)
            runcache.store(disk[k], metrics)
        bar.update()
        return metrics

    own_bar = bar is None
    if own_bar:
        bar = progress_bar(total=len(work), unit="run", desc="--uncertainty", delay=3.0, leave=False)
    else:
        bar.total = (bar.total or bar.n) + len(work)
        bar.refresh()
    try:
        if jobs > 1:
            with process_pool(jobs) as pool:
                futures = {pool.submit(run_one, w): k for k, w in zip(todo, work, strict=True)}
                for f in as_completed(futures):
                    ended(futures[f], f.result())
                done = [f.result() for f in futures]
        else:
            done = [ended(k, run_one(w)) for k, w in zip(todo, work, strict=True)]
    finally:
        if own_bar:
            bar.close()
        runcache.prune(began)  # the folder stays bounded: the runs least recently used go, never this call's
    known.update(zip(todo, done, strict=True))
    result: dict[Any, dict] = {k: known[k] for k in unique}
    mine = result[key[0]]
    if OVER in mine:  # the user's own run: its error, as without --uncertainty
        raise OverBudget(mine[OVER])
    # a plausible model's run past its budget (a retry storm the kept model does not have) is left out of the ranges,
    # and named: they do not hold that model's figures
    over = [
        {"settings": wanted[i][1][: len(wanted[i][1]) - len(sets)], "seed": wanted[i][3], "why": result[k][OVER]}
        for i, k in enumerate(key)
        if i and OVER in result[k]
    ]
    runs = [result[k] for k in key[1:] if OVER not in result[k]]
    out = {}
    for k, v in runs[0].items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or k in ("wall_s", "events"):
            continue
        values = [r[k] for r in runs if isinstance(r.get(k), (int, float))]
        central = [r[k] for r in runs[:seeds] if isinstance(r.get(k), (int, float))]
        if values and central:
            out[k] = {"central": statistics.fmean(central), "low": min(values), "high": max(values)}
    doc = {"file": env.file, "models": len(chosen), "of": env.of, "seeds": seeds, "runs": len(work), "read": len(read)}
    if over:
        doc[OVER] = over
        print(
            f"warning: --uncertainty: {len(over)} of {len(key) - 1} runs of the plausible models went past their run "
            f"budget and are not in the ranges (first: {' '.join(over[0]['settings'])}, seed {over[0]['seed']}: "
            f"{over[0]['why']})",
            file=sys.stderr,
        )
    if env.sources:  # where each declared model comes from (a file's models are the fit's)
        doc["sources"] = env.sources
    return mine, {**doc, "ranges": out}
