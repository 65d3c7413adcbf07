"""Fit model parameters to recorded traces or reference measurements: ``python -m calibration.fit [SOURCE...]``.

SOURCE (calibration/sources.py) is a trace directory (calibration.run's, or the simulator's) or a reference table
(default ``loadtest``). Traces of calls are fitted by the method of simulated moments: each trace's statistics are
targets (bands: bootstrap over its calls and the run-to-run noise of its experiment, ``widen``), its experiment is
simulated at each candidate's parameters, and the same search, profiles and selection as below apply. Traces of starts
give the cold-start distribution; traces of sandbox creates the v2 request time.

The reference load test:

Every released figure of docs/sources.md §1's measured table is a target (calibration/targets.py: calls/s, first 8,000
back, added-latency p50/p90/p99, containers and errors of spawn, app copies, batching and server, with their
acceptance bands); the cells kept aside are predictions, reported and never fitted. Each candidate set of mechanisms
(calibration/candidates.py) is fitted by a grid then Nelder–Mead over its free parameters (calibration/search.py) on
Σ((model − measured) / tolerance)² of the figures' means over seeds (calibration/objective.py); each fitted parameter
gets an interval over the joint plausible set and a "not pinned down" flag. The candidate kept: with ``--cv`` the one
that predicts held-out ways best (leave-one-way-out cross-validation: calibration/crossval.py; those within noise of
it are kept beside it as structural alternatives), else the one with the most figures within their bands, then the
lowest AICc (calibration/report.py). ``--leave-out APPROACH`` fits without that approach's targets and reports its
figures as predictions. ``--out FILE`` writes the kept candidate's parameters as a file ``experiments.run
--params`` accepts; without it nothing is written (the shipped calibration/params/reference-loadtest.toml is replaced
only on purpose, with ``--out``).

``python -m calibration.fit coldstart`` fits the coldstart presets' platform parameters (calibration/coldstart.py);
``python -m calibration.fit sandboxes`` the v2 sandbox create path's request time (calibration/sandboxes.py).
"""

from __future__ import annotations

import math
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

from calibration import crossval, plausible, report, sources
from calibration.candidates import Candidate, by_name, with_range
from calibration.coldstart import COLDSTART_OUT, COLDSTART_RATIO, COLDSTART_REFERENCE, fit_coldstart
from calibration.envelope import envelope
from calibration.objective import Objective, Runner, spread
from calibration.objective import reference as reference_run
from calibration.sandboxes import SANDBOXES_OUT, fit_sandboxes
from calibration.search import Fit, fit_candidate
from calibration.sources import COLDSTART_TRACE_OUT, Source
from calibration.targets import APPROACHES, REFERENCE, Target, predictions, targets
from models.runs import load_scenario
from sim.cli import ArgParser, add_set_option, cap_jobs, main_guard, out_path
from sim.files import check_out
from sim.scenario import ScenarioError

__all__ = ["COLDSTART_OUT", "COLDSTART_RATIO", "COLDSTART_REFERENCE", "OUT", "main"]

OUT = Path(__file__).resolve().parent / "params" / "reference-loadtest.toml"  # the shipped fit (code defaults)

QUICK_RUNS = ("duration_s=5", "clients.in_flight=100")  # --quick: small, short load tests (not the reference)
MAX_SEEDS, MAX_EVALS, MAX_PROFILE_POINTS = 1000, 100_000, 1000  # beyond these a fit would run for weeks
QUICK_EVALS, QUICK_PROFILE = 3, 2  # --quick: Nelder–Mead evaluations, profile points per parameter


def fit_all(
    cands: list[Candidate],
    seeds: list[int],
    jobs: int,
    quick: bool,
    leave_out: str | None,
    max_evals: int,
    profile_points: int,
    extra: tuple[str, ...] = (),
    traces: tuple[Source, ...] = (),
    reference: Path | None = REFERENCE,
) -> tuple[list[Fit], tuple[Target, ...]]:
    """Each candidate fitted to the targets: the ``reference`` table's (every approach but ``leave_out``), and those
    of each trace of calls; skipped candidates say why."""
    tgts = (*(targets(leave_out, reference) if reference else ()), *(t for src in traces for t in src.targets))
    experiments = {src.experiment.name: src.experiment for src in traces}
    report_keys = [p.key for p in predictions(leave_out, reference)] if reference else []
    shown = (*(APPROACHES if reference else ()), *experiments)
    fits = []
    with Runner(jobs) as runner:
        extra = (*QUICK_RUNS, *extra) if quick else extra
        if traces and cands:  # a trace's bands: its bootstrap and the run-to-run noise of its experiment
            tgts = widen(tgts, runner, experiments, [*extra, *cands[0].settings(cands[0].start())], len(seeds))
        obj = Objective(runner, seeds, tgts, extra, experiments)
        for c in cands:
            why = c.check([obj.experiment(name) for name in shown])
            if why:
                print(f"{c.name}: skipped: {why}", flush=True)
                fits.append(Fit(c, skipped=why, targets=tgts))
                continue
            t0 = time.perf_counter()
            f = fit_candidate(obj, c, quick, QUICK_EVALS if quick else max_evals, profile_points)
            f.figures = obj.figures(f.settings, shown, report_keys)  # every experiment, predictions included
            print(f"{c.name}: loss {f.loss:.4g}, {f.evaluations} evaluations, {time.perf_counter() - t0:.1f} s")
            fits.append(f)
    return fits, tgts


SPREAD_SEEDS = tuple(range(1000, 1008))  # runs that measure a trace experiment's run-to-run noise (not the fit's seeds)


def widen(tgts: tuple[Target, ...], runner: Runner, experiments: dict, sets: list[str], n: int) -> tuple[Target, ...]:
    """A trace target's band: √(bootstrap s.e.² + sd² (1 + 1/n)), sd the run-to-run standard deviation of the
    figure over SPREAD_SEEDS at the first candidate's start, n the fit's seeds. A recorded trace is one run: its own
    noise (the sd) and the model's mean over n seeds (sd²/n) both stand between it and the right parameters."""
    keys = tuple(dict.fromkeys(t.key for t in tgts if t.approach in experiments))
    sd = spread(runner, experiments.values(), sets, list(SPREAD_SEEDS), keys)
    out = []
    for t in tgts:
        s = sd.get(t.approach, {}).get(t.key)
        out.append(replace(t, band_s=math.sqrt(t.band_s**2 + s**2 * (1 + 1 / n))) if t.band_s and s else t)
    return tuple(out)


def describe(f: Fit, leave_out: str | None, reference: Path | None = REFERENCE) -> list[str]:
    """The kept fit: its parameters, residuals, predictions and profiles (Markdown)."""
    lines = [f"Candidate {f.candidate.name}: {f.candidate.doc}.", f"Objective {f.loss:.4g}; settings:"]
    lines += [f"  {s}" for s in f.settings]
    lines += ["", "Residuals (the fitted figures, model = mean over seeds):", *report.residual_table(f)]
    if reference:
        what = f"the figures of {leave_out}, left out of the fit, and " if leave_out else ""
        lines += ["", f"Predictions ({what}the cells kept aside; never fitted):"]
        lines += report.prediction_table(f, predictions(leave_out, reference))
    lines += [
        "",
        "Intervals (each parameter over the joint plausible set, its profile's scan included; calibration/search.py):",
    ]
    return lines + report.profile_table(f)


def main(argv: list[str] | None = None) -> int:
    p = ArgParser(prog="python -m calibration.fit", description=__doc__.splitlines()[0])
    p.add_argument(
        "sources",
        nargs="*",
        metavar="SOURCE",
        help="what to fit to (default loadtest): a trace directory (calibration.run, or the simulator's), a reference "
        "table file, or a reference name: loadtest (the input plane), coldstart (the container-start platform), "
        "sandboxes (the v2 create path)",
    )
    p.add_argument("--seeds", type=int, default=3, help="replications per evaluation, seeds 0..N-1 (default 3)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument(
        "--out",
        type=out_path,
        help=f"parameter file to write (loadtest: none unless given; coldstart: default {COLDSTART_OUT.name}; "
        f"sandboxes: default {SANDBOXES_OUT.name})",
    )
    p.add_argument("--quick", action="store_true", help="a smoke test of the procedure (seconds), not a fit")
    p.add_argument(
        "--candidate",
        action="append",
        metavar="NAME",
        help="a candidate mechanism set to fit (repeatable; default all: see calibration/candidates.py)",
    )
    p.add_argument(
        "--range",
        action="append",
        default=[],
        metavar="NAME=LOW..HIGH",
        help="search a free parameter over another range, e.g. start_rate=10..5000 (repeatable)",
    )
    p.add_argument("--leave-out", choices=APPROACHES, help="fit without this approach's figures; report them")
    p.add_argument(
        "--cv",
        action="store_true",
        help="choose the candidate by leave-one-way-out cross-validation (calibration/crossval.py): each fitted "
        "without each way and scored on it; with --out, the kept candidate's folds are written beside FILE as "
        "leave-out-WAY.toml",
    )
    p.add_argument(
        "--cv-replicates",
        type=int,
        default=2,
        help="--cv: seed sets each held-out way is scored at (the score's noise; default 2)",
    )
    p.add_argument("--max-evals", type=int, default=150, help="Nelder–Mead evaluations per candidate (default 150)")
    p.add_argument("--profile-points", type=int, default=9, help="scan points per parameter's profile (default 9)")
    add_set_option(p, help="override applied to every simulation, e.g. duration_s=30 (repeatable)")
    args = p.parse_args(argv)
    if not (1 <= args.seeds <= MAX_SEEDS) or args.jobs < 1 or not (0 <= args.max_evals <= MAX_EVALS):
        p.error(f"--seeds must be 1 to {MAX_SEEDS}, --jobs >= 1, --max-evals 0 to {MAX_EVALS}")
    if not (2 <= args.profile_points <= MAX_PROFILE_POINTS):
        p.error(f"--profile-points must be 2 to {MAX_PROFILE_POINTS}")
    if not (2 <= args.cv_replicates <= MAX_SEEDS):
        p.error(f"--cv-replicates must be 2 to {MAX_SEEDS}")
    if args.cv and args.leave_out:
        p.error("--cv holds every way out in turn: it does not take --leave-out")
    seeds = list(range(args.seeds))
    try:
        cands = by_name(args.candidate)
        for r in args.range:
            cands = with_range(cands, r)
    except ValueError as e:
        p.error(str(e))

    def go() -> int:
        if args.out:
            check_out(args.out)  # before the fit, not after it
            check_out(report.plausible_path(args.out))  # written beside it (a loadtest fit)
        given = args.sources or ["loadtest"]
        named = sources.names(given)
        srcs = [sources.load(s, name=named.get(s)) for s in given]
        models = sorted({s.model for s in srcs})
        if len(models) > 1:
            raise ScenarioError(f"sources: one model at a time, got {', '.join(models)} ({', '.join(args.sources)})")
        traces = tuple(s for s in srcs if s.trace is not None)
        if models == ["coldstart"]:
            if traces:
                print(sources.fit_starts(traces, args.out or COLDSTART_TRACE_OUT))
            else:
                print(fit_coldstart(seeds, args.out or COLDSTART_OUT))
            return 0
        if models == ["sandboxes"]:
            want = sources.schedule_p50(traces) if traces else None
            print(fit_sandboxes(seeds, args.out or SANDBOXES_OUT, want, [str(t.trace.path) for t in traces]))
            return 0
        refs = [s for s in srcs if s.trace is None]
        reference = None if not refs else REFERENCE if refs[0].name == "loadtest" else Path(refs[0].name)
        if (args.leave_out or args.cv) and reference != REFERENCE:
            flag = "--cv" if args.cv else "--leave-out"
            raise ScenarioError(f"{flag}: applies to the reference load test's ways (source loadtest)")
        runs = len(seeds) * (len(APPROACHES) * bool(reference) + len(traces))
        args.jobs = cap_jobs(p.prog, args.jobs, runs)
        return _loadtest(args, cands, seeds, argv, traces, reference)

    return main_guard(p.prog, go)


def _loadtest(
    args, cands: list[Candidate], seeds: list[int], argv: list[str] | None, traces: tuple, reference: Path | None
) -> int:
    for a in APPROACHES if reference else ():
        load_scenario(f"loadtest-{a}", args.sets, [])  # a bad --set fails here, not as a skipped candidate
    for src in traces:
        load_scenario(src.experiment.preset, [*src.experiment.sets, *args.sets], [])
    profile_points = QUICK_PROFILE if args.quick else args.profile_points
    fits, tgts = fit_all(
        cands,
        seeds,
        args.jobs,
        args.quick,
        args.leave_out,
        args.max_evals,
        profile_points,
        tuple(args.sets),
        traces,
        reference,
    )
    n = len(tgts)
    cvs: dict[str, crossval.CrossVal] = {}
    if args.cv:
        extra = (*QUICK_RUNS, *args.sets) if args.quick else tuple(args.sets)
        with Runner(args.jobs) as runner:
            for f in fits:
                if not f.skipped:
                    cvs[f.candidate.name] = crossval.cross_validate(
                        runner, f, seeds, args.cv_replicates, args.max_evals, extra, args.quick
                    )
    selection = report.selection_table(fits, n, cvs)
    best = report.kept(fits, n, cvs)
    rule = (
        "CV = the held-out way's score at the fold's fit, summed over ways (mean ± s.e. over seed replicates); kept: "
        "lowest CV; alternatives: within 2 s.e. of it"
        if cvs
        else "AICc = objective + 2k + 2k(k+1)/(n-k-1); kept: most within band, then lowest AICc"
    )
    print(f"\nModel selection ({rule}):", *selection, sep="\n")
    if best is None:
        print("no candidate could be fitted", file=sys.stderr)
        return 1
    body = describe(best, args.leave_out, reference)
    for src in traces:
        body += ["", f"Trace {src.trace.path} ({src.trace.manifest.get('source')}, {len(src.trace.table)} calls):"]
        body += report.bootstrap_table(src.bootstrap, sources.RESAMPLES)
    print("", *body, sep="\n")
    if args.out:
        cmd = shlex.join(["python", "-m", "calibration.fit", *(argv if argv is not None else sys.argv[1:])])
        scope = f"every approach but {args.leave_out}" if args.leave_out else "every approach"
        what = [f"The reference load test (docs/sources.md §1), fitted to the released figures of {scope}."]
        what = what if reference else []
        what += [f"Fitted to the trace {src.trace.path} (method of simulated moments)." for src in traces]
        extra_runs = [*QUICK_RUNS, *args.sets] if args.quick else args.sets
        comments = [
            f"Written by `{cmd}`.",
            *what,
            f"Seeds {seeds} (the model's figure is the mean over them)"
            + (f"; every run with {', '.join(extra_runs)}." if extra_runs else "."),
            "",
            *body,
            "",
            "Model selection:",
            *selection,
        ]
        by_name = {src.experiment.name: src.experiment for src in traces}  # as the objective looks them up
        exps = [by_name.get(a) or reference_run(a) for a in dict.fromkeys(t.approach for t in tgts)]
        table = "the reference load test" if reference == REFERENCE else f"the reference table {reference}"
        runs = [table + (f" without {args.leave_out}" if args.leave_out else "")] if reference else []
        runs += [f"the trace {src.trace.path}" for src in traces]
        with Runner(args.jobs) as runner:
            bounds = envelope(" and ".join(runs), exps, [*extra_runs, *best.settings], seeds, runner)
        comments += ["", "The envelope: what the fit's runs covered (calibration/envelope.py)."]
        report.write_settings(args.out, [*best.settings, *bounds], comments, "loadtest-spawn")
        alts = report.alternatives(fits, cvs)
        side = report.write_plausible(Path(args.out), fits, best, cmd, alts)
        plausible.annotate(side, args.jobs, seeds, extra_runs)
        print(f"\nwrote {args.out} and {side}")
        if cvs:
            _write_folds(args, cvs, best, seeds, cmd, extra_runs)
    return 0


def _write_folds(args, cvs: dict, best: Fit, seeds: list[int], cmd: str, extra_runs) -> None:
    """The kept candidate's folds as leave-out-WAY.toml beside ``--out``, each with its plausible models (the
    fold's own, its unfitted parameters at the ends of their ranges, and the alternatives' folds of that way)."""
    cv = cvs[best.candidate.name]
    alts = crossval.chosen(list(cvs.values()))[1]
    points = QUICK_PROFILE if args.quick else args.profile_points
    with Runner(args.jobs) as runner:
        for fo in cv.folds.values():
            crossval.profile_fold(runner, fo, seeds, points, tuple(extra_runs))
    for way, fo in cv.folds.items():
        path = Path(args.out).with_name(f"leave-out-{way}.toml")
        unread = ", ".join(f.key for f in fo.unread)
        comments = [
            f"Written by `{cmd}`: the fold of {best.candidate.name} without {way} (calibration/crossval.py).",
            f"The reference load test (docs/sources.md §1), fitted to the released figures of all but {way}.",
            f"Seeds {seeds} (the model's figure is the mean over them).",
            *([f"Not fitted (only {way} reads them; carried as their ranges): {unread}."] if unread else []),
            *(["The full fit's values beat the fold's search on its own objective and were taken."] * fo.restarted),
            "",
            *describe(fo.fit, way),
        ]
        exps = [reference_run(a) for a in APPROACHES if a != way]
        with Runner(args.jobs) as runner:
            bounds = envelope(
                f"the reference load test without {way}", exps, [*extra_runs, *fo.fit.settings], seeds, runner
            )
        report.write_settings(path, [*fo.fit.settings, *bounds], comments, "loadtest-spawn")
        others = [c.folds[way].fit for c in alts]
        side = report.write_plausible(path, [fo.fit], fo.fit, cmd, others, fo.unread)
        plausible.annotate(side, args.jobs, seeds, extra_runs)
        print(f"wrote {path} and {side}")


if __name__ == "__main__":
    sys.exit(main())
