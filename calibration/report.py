"""What a fit reports: the selection table, per-figure residuals, predictions, profiles, and the parameter file.

Model selection. The loss is a sum of squared residuals standardized by a stated tolerance, so if each tolerance is read
as the standard deviation of the model–measurement mismatch (σ known, not estimated from the residuals), −2 ln L = loss
+ const and Akaike's criterion is loss + 2k; with n ≈ 20 targets and up to 7 free parameters the small-sample correction
matters, so the criterion is AICc = loss + 2k + 2k(k + 1) / (n − k − 1). The candidate kept is the one that puts the
most fitted figures within their acceptance bands (calibration/targets.py: the bands are what the parameter set must
meet), and among those the lowest AICc. (This rule was set after seeing a first table, where the lowest-AICc candidate
left three figures outside their bands and the kept one one: docs/explanation/calibration.md.) n·ln(loss/n) + 2k (σ
estimated from the residuals) is not used: it rewards driving the loss toward 0 without bound (ln), which treats the
acceptance bands as if they said nothing about how close is close enough. The tolerances are acceptance bands, not
measured noise, so AICc here ranks candidates; it is not a likelihood-ratio test.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from calibration.objective import prediction_rows, residual_rows
from calibration.search import Fit
from calibration.targets import Prediction
from sim.scenario import ScenarioError, parse_value


def aicc(loss: float, k: int, n: int) -> float:
    if n - k - 1 <= 0:
        return float("inf")
    return loss + 2 * k + 2 * k * (k + 1) / (n - k - 1)


def within_bands(f: Fit) -> int:
    """How many of the fit's targets its figures meet within their bands."""
    return sum(r["within"] for r in residual_rows(f.figures, f.targets))


def kept(fits: list[Fit], n: int, cvs: dict | None = None) -> Fit | None:
    """The fitted candidate that predicts best by cross-validation (``cvs``: calibration/crossval.py), or without
    it the one with the most figures within band, then the lowest AICc (None if all were skipped)."""
    done = [f for f in fits if not f.skipped]
    if cvs:
        from calibration.crossval import chosen

        name = chosen(list(cvs.values()))[0].candidate.name
        return next(f for f in done if f.candidate.name == name)
    return min(done, key=lambda f: (-within_bands(f), aicc(f.loss, f.candidate.k, n))) if done else None


def alternatives(fits: list[Fit], cvs: dict | None) -> list[Fit]:
    """The full fits of the candidates whose CV score is within noise of the kept one's (none without ``cvs``)."""
    if not cvs:
        return []
    from calibration.crossval import chosen

    names = {c.candidate.name for c in chosen(list(cvs.values()))[1]}
    return [f for f in fits if f.candidate.name in names]


def _num(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "—"
    return f"{x:.{digits}g}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.0%}"


def table(header: list[str], rows: Iterable[list[str]]) -> list[str]:
    """A Markdown table, one line per row."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def selection_table(fits: list[Fit], n: int, cvs: dict | None = None) -> list[str]:
    """Each candidate's in-sample objective, AICc and figures within band, and with ``cvs`` its cross-validation
    score per held-out way and in all (mean ± s.e. over the seed replicates), the kept one and its alternatives."""
    best = kept(fits, n, cvs)
    alts = {f.candidate.name for f in alternatives(fits, cvs)}
    ways = list(next(iter(cvs.values())).folds) if cvs else []
    rows = []
    for f in fits:
        if f.skipped:
            rows.append([f.candidate.name, str(f.candidate.k), *["—"] * (4 + len(ways) + bool(ways))])
            rows[-1].append(f"skipped: {f.skipped}")
            continue
        cv = cvs.get(f.candidate.name) if cvs else None
        scores = [f"{cv.folds[w].score:.3g}" for w in ways] if cv else []
        total = [f"{cv.score:.3g} ± {cv.se:.2g}"] if cv else []
        role = "kept" if f is best else "alternative" if f.candidate.name in alts else ""
        rows.append(
            [
                f.candidate.name,
                str(f.candidate.k),
                f"{f.loss:.4g}",
                f"{aicc(f.loss, f.candidate.k, n):.4g}",
                f"{within_bands(f)}/{n}",
                str(f.evaluations),
                *scores,
                *total,
                role,
            ]
        )
    header = ["candidate", "free k", "objective", f"AICc (n={n})", "within band", "evaluations"]
    header += [f"CV {w}" for w in ways] + (["CV total"] if ways else []) + ["kept"]
    return table(header, rows)


def residual_table(f: Fit) -> list[str]:
    rows = [
        [
            r["approach"],
            r["figure"],
            f"{r['measured']:g}",
            _num(r["model"]),
            _pct(r["rel_error"]),
            r["band"],
            "yes" if r["within"] else "no",
            f"{r['term']:.3g}",
        ]
        for r in residual_rows(f.figures, f.targets)
    ]
    return table(["approach", "figure", "measured", "model", "rel. error", "band", "within", "loss term"], rows)


def bootstrap_table(boot: dict[str, tuple[float, float, float, float]], resamples: int) -> list[str]:
    """A trace's statistics: value, bootstrap standard error and 95% interval (over its calls)."""
    rows = [[k, _num(v), _num(se, 3), f"{_num(lo)} .. {_num(hi)}"] for k, (v, se, lo, hi) in boot.items()]
    return table(["statistic", "trace", "bootstrap s.e.", f"95% interval ({resamples} resamples)"], rows)


def prediction_table(f: Fit, preds: tuple[Prediction, ...]) -> list[str]:
    rows = [
        [
            r["approach"],
            r["figure"],
            "kept aside" if r["measured"] is None else f"{r['measured']:g} (left out)",
            _num(r["model"]),
            _pct(r["rel_error"]),
        ]
        for r in prediction_rows(f.figures, preds)
    ]
    return table(["approach", "figure", "measured", "model (predicted)", "rel. error"], rows)


def profile_table(f: Fit) -> list[str]:
    rows = [
        [
            p.free.name,
            f"{x:.4g}",
            f"{p.low:.4g} .. {p.high:.4g}",
            f"{p.free.low:g} .. {p.free.high:g}" + (" (log)" if p.free.log else ""),
            "yes" if p.pinned else f"not pinned down ({p.why})",
        ]
        for p, x in zip(f.profiles, f.values, strict=True)
    ]
    return table(["parameter", "fitted", "plausible interval", "range", "pinned down"], rows)


def toml_value(text: str) -> str:
    """A ``--set`` value as a TOML value (strings quoted)."""
    v = parse_value(text)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    return repr(v)


def parameter_file(settings: list[str], comments: list[str]) -> str:
    """A parameter file ``experiments.run --params`` accepts: ``comments``, then one table per section."""
    sections: dict[str, list[str]] = {}
    top: list[str] = []
    for s in settings:
        key, text = s.split("=", 1)
        sec, _, name = key.rpartition(".")
        line = f"{name} = {toml_value(text)}"
        (sections.setdefault(sec, []) if sec else top).append(line)
    lines = [("# " + c).rstrip() for c in comments]
    if top:
        lines += ["", *top]
    for sec, rows in sections.items():
        lines += ["", f"[{sec}]", *rows]
    return "\n".join(lines) + "\n"


def write(path: Path, f: Fit, comments: list[str]) -> None:
    write_settings(path, f.settings, comments, "loadtest-spawn")


def plausible_path(params: Path) -> Path:
    """Where the plausible models of a parameter file are: beside it, ``NAME.plausible.json``."""
    return params.with_name(params.stem + ".plausible.json")


def plausible(fits: list[Fit], best: Fit, alts: Iterable[Fit] = (), unread: Iterable = ()) -> list[dict]:
    """Every parameter set the fit scored, of any candidate, whose loss is within max(1, 10%) of the kept fit's
    (the profiles' rule, calibration/search.py): the models the data do not tell from the one kept. Each once (the
    lowest loss it was scored at), best first. Then the structural alternatives (``alts``: the fits of candidates
    that predict as well, whatever their loss; marked ``alternative``), and for each parameter the data did not
    read (``unread``: calibration/crossval.py) the kept fit with it at either end of its range (marked
    ``unread``)."""
    from calibration.search import within_profile

    found: dict[tuple[str, ...], dict] = {}
    for f in fits:
        for sets, value in f.seen:
            if within_profile(value, best.loss) and (sets not in found or value < found[sets]["loss"]):
                found[sets] = {"candidate": f.candidate.name, "loss": round(value, 6), "settings": list(sets)}
    models = sorted(found.values(), key=lambda m: (m["loss"], m["settings"]))
    for f in alts:
        models.append({"candidate": f.candidate.name, "loss": round(f.loss, 6), "settings": f.settings})
        models[-1]["alternative"] = True
    for free in unread:
        keys = {free.key, *free.also}
        for x in (free.low, free.high):
            sets = [*(s for s in best.settings if s.partition("=")[0] not in keys), *free.setting(x)]
            models.append({"candidate": best.candidate.name, "loss": None, "settings": sets, "unread": free.key})
    return models


def write_plausible(
    params: Path, fits: list[Fit], best: Fit, command: str, alts: Iterable[Fit] = (), unread: Iterable = ()
) -> Path:
    """Write the plausible models beside the parameter file (experiments/uncertainty.py reads them)."""
    path = plausible_path(params)
    doc = {
        "about": f"The plausible models of {params.name}: every parameter set `{command}` scored whose loss is within "
        f"max(1, 10%) of the kept fit's ({best.loss:.4g}), the structural alternatives that predict held-out ways as "
        "well (alternative), and the parameters the data left unread at the ends of their ranges (unread); "
        "experiments/uncertainty.py runs them for ranges.",
        "kept": {"candidate": best.candidate.name, "loss": best.loss, "settings": best.settings},
        "models": plausible(fits, best, alts, unread),
    }
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def write_settings(path: Path, settings: list[str], comments: list[str], preset: str) -> str:
    """Write a parameter file of ``settings`` (``KEY=VALUE``) headed by ``comments``, checked as ``write_checked``
    checks it on ``preset``; return its text."""
    return write_checked(path, parameter_file(settings, comments), preset)


def write_checked(path: Path, text: str, preset: str) -> str:
    """Write ``text`` as the parameter file ``path`` only if ``experiments.run PRESET --params PATH`` accepts it: it
    is written beside ``path`` first, loaded by the path ``run`` takes (models/runs.py ``load_scenario``), and only
    then moved into place; a file ``run`` would reject is a ScenarioError naming ``path`` and why, and nothing is
    written (a fit never leaves a parameter file behind that its users cannot load)."""
    from models.runs import load_scenario

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    try:
        load_scenario(preset, [], [str(tmp)])
    except ScenarioError as e:
        tmp.unlink(missing_ok=True)
        why = str(e).replace(str(tmp), str(path))
        raise ScenarioError(f"{path}: not written: `run {preset} --params` would reject the fit ({why})") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return text
