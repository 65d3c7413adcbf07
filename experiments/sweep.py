"""Sweep scenarios across scales: ``python -m experiments.sweep [SPEC] [--set K=V]... [--factor K=V1,V2,...]...
[--seeds N] [--out DIR] [--jobs N] [--executor process|serial|dask-local|dask://HOST:PORT|modal] [--fresh]
[--quick]``.

A sweep is a spec (experiments/spec.py: a base scenario, named variants, factors and seeds; with no SPEC the
built-in ``loadtest-scale``), or a scenario swept over the ``--factor``s. Seed s is the same seed at every point, so
points share their random streams (common random numbers) while seeds are independent replications.

Rows (one per point and seed: every parameter, the seed, the metrics, wall_s and error) are appended to
``OUT/results.csv`` as points finish. A point that fails records its error and the sweep goes on. One sweep at a time
writes OUT (experiments/results.py ``lock``). Running the same command again continues where a killed sweep stopped,
keeping the rows that check out against the spec (``resume``); ``--fresh`` starts over. At the end the table is also
written as ``results.parquet`` (sorted by point and seed), summaries across seeds as ``summary.csv``, and the plotted
report (experiments/report.py) under OUT (default ``runs/<spec name>/``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from experiments import executors
from experiments.results import Appender, WriteFailed, lock, plan, read_results, resume, write_whole
from experiments.rows import run_point
from experiments.spec import DEFAULT, Spec, check_size, load_spec
from sim import files
from sim.cli import ArgParser, add_set_option, cap_jobs, main_guard, one_line, out_path, progress_bar
from sim.files import check_out
from sim.pools import WORKER_DIED
from sim.scenario import ScenarioError

if TYPE_CHECKING:
    import pandas as pd

# the files a sweep and its report write under --out: each a regular file or absent, checked up front
SWEEP_FILES = ("results.csv", "spec.json", "sweep.json", "results.parquet", "summary.csv", "report.html", "*.png")

# --- running ---------------------------------------------------------------------------------------------------


def run_sweep(spec: Spec, out: Path, jobs: int, executor: str = "process", fresh: bool = False) -> pd.DataFrame:
    """Run every (point, seed) not yet kept in OUT/results.csv (``resume``) as the one writer of OUT (``lock``);
    return the whole table, sorted."""
    check_size(spec)  # (bad input before anything is written: points × seeds × a run's estimated cost)
    out.mkdir(parents=True, exist_ok=True)
    with lock(out):
        return _run_sweep(spec, out, jobs, executor, fresh)


def _run_sweep(spec: Spec, out: Path, jobs: int, executor: str, fresh: bool) -> pd.DataFrame:
    results, spec_file = out / "results.csv", out / "spec.json"
    if fresh:
        for f in (results, spec_file, out / "sweep.json", out / "results.parquet", out / "summary.csv"):
            f.unlink(missing_ok=True)
    if spec_file.exists() and files.read_text(spec_file, "a sweep's spec.json", files.JSON_CAP) != spec.key():
        raise ScenarioError(f"{out}: holds results of a different sweep; use --fresh or another --out")
    if not files.exists(spec_file) and files.exists(results):  # whose rows they are cannot be told
        raise ScenarioError(f"{out}: holds results.csv without the spec.json that wrote it; use --fresh or another out")
    write_whole(spec_file, spec.key())  # (never half a file: a resume compares it)
    meta = {
        "name": spec.name,
        "description": spec.description,
        "scale": spec.scale,
        "report_point": spec.report_point,
        "seeds": spec.seeds,
        "factors": spec.factors,
    }
    write_whole(out / "sweep.json", json.dumps(meta, indent=1))

    header, rows = plan(spec.points, spec.seeds)
    header, done = resume(results, header, rows)
    total = sum(p.seeds(spec.seeds) for p in spec.points)
    todo = (  # lazily: a sweep of a hundred million seeds allocates nothing before its first run
        (p, s)
        for p in sorted(spec.points, key=lambda p: -p.cost())
        for s in range(p.seeds(spec.seeds))
        if (p.index, s) not in done
    )
    if executor in ("process", "dask-local"):
        jobs = cap_jobs("experiments.sweep", jobs, total - len(done))
    if executor == "modal" and len(done) < total:
        executors.check_modal()  # credentials first: bad input, before anything is built
    client = executors.dask_client(executor, jobs) if executor.startswith("dask") and len(done) < total else None
    # a bar of runs done / total, rate and ETA (sim/cli.py progress_bar: on a terminal or in a notebook)
    progress = progress_bar(total=total, initial=len(done), unit="run", desc="runs", smoothing=0.1)
    try:
        with Appender(results, header) as table:

            def write(row: dict) -> None:
                table.write(row)
                progress.update()

            if executor.startswith("dask"):
                if client is not None:  # (none when every row is already there)
                    executors.run_on_dask(client, todo, write)
            elif executor == "modal":
                if len(done) < total:
                    executors.run_on_modal(todo, write)
            elif executor == "serial" or jobs == 1:
                for p, s in todo:
                    write(run_point(p, s))
            else:
                executors.run_on_pool(jobs, todo, write)
    finally:
        progress.close()
        if client is not None:
            cluster = client.cluster
            client.close()
            if cluster is not None:
                cluster.close()
    table = read_results(results)
    table.to_parquet(out / "results.parquet", index=False)
    return table


def main(argv: list[str] | None = None) -> int:
    p = ArgParser(prog="python -m experiments.sweep", description=__doc__.splitlines()[0])
    p.add_argument(
        "spec", nargs="?", help=f"sweep spec (experiments/sweeps/NAME.toml or a file) or a scenario; default {DEFAULT}"
    )
    add_set_option(p, "override a scenario key at every point (repeatable)")
    p.add_argument(
        "--params",
        action="append",
        default=[],
        metavar="FILE",
        help="a parameter TOML file (e.g. calibration.fit --out) overlaid at every point, before --set (repeatable)",
    )
    p.add_argument(
        "--factor",
        dest="factors",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="sweep a scenario key over values (repeatable; replaces the spec's factor of that key)",
    )
    p.add_argument("--seeds", type=int, help="replications per point (default: the spec's)")
    p.add_argument(
        "--uncertainty",
        action="store_true",
        help="also run each point under the other plausible models of the calibration, at the same seeds "
        "(experiments/uncertainty.py): the report gives each figure a range",
    )
    p.add_argument("--out", type=out_path, help="output folder (default runs/<spec name>/)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    p.add_argument(
        "--executor",
        type=executors.executor_arg,
        default="process",
        metavar="EXECUTOR",
        help="process: a local process pool (default); serial: in this process; dask-local: a Dask LocalCluster of "
        "--jobs worker processes; dask://HOST:PORT: the workers of the Dask scheduler there (--jobs not used); modal: "
        "a Modal Function's inputs, with your Modal credentials (--jobs not used)",
    )
    p.add_argument("--fresh", action="store_true", help="discard results in --out and start over")
    p.add_argument("--quick", action="store_true", help="the spec's reduced version (the default: under a minute)")
    p.add_argument("--no-report", action="store_true", help="write the results only")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs: must be >= 1, got {args.jobs}")

    def go() -> int:
        spec = load_spec(args.spec, args.sets, args.factors, args.seeds, args.quick, args.params, args.uncertainty)
        out = args.out or Path("runs") / (spec.name + ("-quick" if args.quick else ""))
        out = check_out(out, folder=True, inside=SWEEP_FILES)
        with lock(out):  # one writer of --out, for the runs and the report
            return sweep_and_report(spec, out)

    def sweep_and_report(spec: Spec, out: Path) -> int:
        t0 = time.perf_counter()
        try:
            table = run_sweep(spec, out, args.jobs, args.executor, args.fresh)
        except (KeyboardInterrupt, *WORKER_DIED) as e:  # main_guard's one line says so
            e.add_note(f"results so far kept in {out / 'results.csv'}; run the same command to continue")
            raise
        wall = time.perf_counter() - t0
        failed = int((table["error"] != "").sum())
        print(f"{len(table)} rows ({failed} with errors) in {out}/results.csv and results.parquet; {wall:.1f} s")
        texts = table.get("extrapolated", [])  # a row inside the envelope: empty (NaN)
        outside = sum(isinstance(x, str) and x != "" for x in texts)
        if outside:
            print(
                f"warning: extrapolated: {outside} of {len(table)} rows leave the envelope their parameters were "
                "calibrated on or rest on no steady state (column extrapolated)",
                file=sys.stderr,
            )
        if not args.no_report:
            from experiments import report  # (here: pandas and matplotlib, which --help need not load)

            page = report.make_report(
                table,
                out,
                title=spec.name,
                description=spec.description,
                scale=spec.scale,
                timeseries_point=spec.report_point,
                factors=list(spec.factors),
            )
            print(f"report: {page}")
        return 0

    try:
        return main_guard("experiments.sweep", go)
    except executors.ClusterLost as e:
        print(f"experiments.sweep: {e}; finished rows are kept, run the same command to continue", file=sys.stderr)
        return 1
    except (WriteFailed, OSError) as e:  # a full disk, a file system gone read-only: the rows written are whole
        what = str(e) if isinstance(e, WriteFailed) else f"{e.filename or 'a write'}: {e.strerror or e}"
        print(
            f"experiments.sweep: {one_line(what)}; the rows written are kept, run the same command to continue",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
