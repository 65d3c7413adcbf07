"""Sweep scenarios across scales: ``python -m experiments.sweep [SPEC] [--set K=V]... [--factor K=V1,V2,...]...
[--seeds N] [--out DIR] [--jobs N] [--executor process|serial|dask-local|dask://HOST:PORT] [--fresh] [--quick]``.

A sweep is a spec (experiments/spec.py: a base scenario, named variants, factors and seeds; with no SPEC the
built-in ``loadtest-scale``), or a scenario swept over the ``--factor``s. Seed s is the same seed at every point, so
points share their random streams (common random numbers) while seeds are independent replications.

Rows (one per point and seed: every parameter, the seed, the metrics, wall_s and error) are appended to
``OUT/results.csv`` as points finish. A point that fails records its error and the sweep goes on. Running the same
command again continues where a killed sweep stopped; ``--fresh`` starts over. At the end the table is also written
as ``results.parquet`` (sorted by point and seed), summaries across seeds as ``summary.csv``, and the plotted report
(experiments/report.py) under OUT (default ``runs/<spec name>/``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import itertools
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from experiments import report
from experiments.cli import (
    ArgParser,
    add_set_option,
    build_scenario,
    cap_jobs,
    check_out,
    main_guard,
    process_pool,
    run_scenario,
)
from experiments.results import Appender, columns, done_rows, flat_metrics, read_results
from experiments.spec import DEFAULT, Point, Spec, load_spec
from models.registry import MODELS
from sim.scenario import ScenarioError, flatten, to_dict

# --- running ---------------------------------------------------------------------------------------------------


def run_point(point: Point, seed: int) -> dict:
    """One row: the point's parameters, the seed, its metrics, wall_s and error (empty if it ran)."""
    row: dict[str, Any] = {"point": point.index, "variant": point.variant, "seed": seed}
    t0 = time.perf_counter()
    try:
        tree, base = point.tree()
        row.update(flatten(tree))
        sc = build_scenario(tree, base)
        row.update(flatten(to_dict(sc)))
        metrics = run_scenario(sc, seed=seed)
        row.update(flat_metrics(metrics, MODELS[sc.model].kinds))
        row["error"] = ""
    except ScenarioError as e:
        row["error"] = str(e)
    except Exception as e:  # a failing point records its error; the sweep goes on
        row["error"] = f"{type(e).__name__}: {e}"
    row["wall_s"] = time.perf_counter() - t0
    return row


def failed_row(point: Point, seed: int, error: str) -> dict:
    """The row of a run that never returned (its task killed every worker that took it): the point's parameters as
    far as they build, and the error."""
    row: dict[str, Any] = {"point": point.index, "variant": point.variant, "seed": seed}
    try:
        tree, base = point.tree()
        row.update(flatten(tree))
        row.update(flatten(to_dict(build_scenario(tree, base))))
    except Exception:  # its own error is in run_point's rows; this one says why the run was lost
        pass
    row["error"], row["wall_s"] = error, float("nan")
    return row


class ClusterLost(Exception):
    """The Dask scheduler went away mid-sweep: the finished rows are kept, the same command continues (exit 1)."""


EXECUTORS = "process, serial, dask-local or dask://HOST:PORT"


def executor_arg(text: str) -> str:
    """``--executor``: process, serial, dask-local or dask://HOST:PORT (a port from 1 to 65535)."""
    if text in ("process", "serial", "dask-local"):
        return text
    if text.startswith("dask://"):
        host, _, port = text[len("dask://") :].rpartition(":")
        if host and port.isdigit() and 1 <= int(port) <= 65535:
            return text
        raise argparse.ArgumentTypeError(f"{text!r}: expected dask://HOST:PORT (e.g. dask://10.0.0.5:8786)")
    raise argparse.ArgumentTypeError(f"{text!r}: expected {EXECUTORS}")


CONNECT_TIMEOUT_S = 5.0  # an unreachable dask:// address fails within this, exit 2


def dask_client(executor: str, jobs: int) -> Any:
    """A ``distributed.Client``: of a LocalCluster of ``jobs`` worker processes (one thread each: a run is pure
    Python and holds the GIL) for ``dask-local``, or of the scheduler at ``dask://HOST:PORT``."""
    import logging

    from distributed import Client, LocalCluster

    # this process's Dask logs would print tracebacks (a lost scheduler, reconnection attempts): the sweep says what
    # went wrong in one line instead, and a run's own errors are in its row
    for name in ("distributed", "distributed.client"):  # Dask's config sets the level of both
        logging.getLogger(name).setLevel(logging.CRITICAL)
    if executor == "dask-local":
        cluster = LocalCluster(
            n_workers=jobs,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        return Client(cluster, set_as_default=False)
    address = "tcp://" + executor[len("dask://") :]
    check_scheduler(address, executor)
    try:
        return Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError) as e:  # it went away since the check
        raise ScenarioError(f"--executor {executor}: cannot reach a Dask scheduler at {address}: {e}") from None


def check_scheduler(address: str, executor: str) -> None:
    """Bad input (exit 2, one line, within CONNECT_TIMEOUT_S) unless a Dask scheduler answers at ``address``: checked
    before a Client is made, since a Client that fails to start (nothing there, or a server of another kind) leaves
    a half-made object whose clean-up takes seconds more and prints to stderr."""
    import asyncio

    from distributed.comm import connect

    async def identity() -> dict:
        comm = await connect(address, timeout=CONNECT_TIMEOUT_S)
        try:
            await comm.write({"op": "identity"})
            return await comm.read()
        finally:
            comm.abort()

    async def within() -> dict:
        return await asyncio.wait_for(identity(), CONNECT_TIMEOUT_S)

    try:
        reply = asyncio.run(within())
    except (OSError, TimeoutError) as e:
        raise ScenarioError(f"--executor {executor}: cannot reach a Dask scheduler at {address}: {e}") from None
    except Exception as e:  # something answered, not in Dask's protocol
        raise ScenarioError(f"--executor {executor}: {address} is not a Dask scheduler ({type(e).__name__})") from None
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        kind = reply.get("type") if isinstance(reply, dict) else type(reply).__name__
        raise ScenarioError(f"--executor {executor}: {address} is not a Dask scheduler (it says {kind})")


def run_on_dask(client: Any, todo: Iterator[tuple[Point, int]], write: Callable[[dict], None]) -> None:
    """Run ``todo`` on the Dask cluster of ``client``, submitting lazily (about twice the cluster's worker threads
    pending), writing each row here, in this process, as its future completes. A task whose worker died is run
    again by the scheduler; its future completes once, and a (point, seed) already written is never written again.
    A task that killed every worker it was given (``KilledWorker``) records that error in its row."""
    from distributed import as_completed

    task = importlib.import_module("experiments.sweep").run_point  # by reference, also when this is __main__
    sweep_id = uuid.uuid4().hex[:12]  # keys unique per sweep and (point, seed): two sweeps on one cluster share none
    jobs: dict[Any, tuple[Point, int]] = {}
    written: set[tuple[int, int]] = set()
    running = as_completed(loop=client.loop)

    threads, asked = 1, -1.0

    def window() -> int:  # the cluster's worker threads, asked at most once a second: workers come and go
        nonlocal threads, asked
        if time.monotonic() - asked > 1.0:
            threads, asked = max(1, sum(client.nthreads().values())), time.monotonic()
        return 2 * threads

    def collect_one() -> None:
        fut = next(running)
        point, seed = jobs.pop(fut)
        if fut.status == "finished":
            row = fut.result()
        elif fut.status == "cancelled" or client.status != "running":
            raise ClusterLost(f"the Dask scheduler went away ({client.scheduler.address})")
        else:
            e = fut.exception()
            row = failed_row(point, seed, f"{type(e).__name__}: {e}")
        fut.release()
        if (point.index, seed) not in written:
            written.add((point.index, seed))
            write(row)

    try:
        for point, seed in todo:
            fut = client.submit(task, point, seed, key=f"scalesim-{sweep_id}-{point.index}-{seed}")
            jobs[fut] = (point, seed)
            running.add(fut)
            if len(jobs) >= window():
                collect_one()
        while jobs:
            collect_one()
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(list(jobs))
        raise


def run_sweep(spec: Spec, out: Path, jobs: int, executor: str = "process", fresh: bool = False) -> pd.DataFrame:
    """Run every (point, seed) not yet in OUT/results.csv; return the whole table, sorted."""
    out.mkdir(parents=True, exist_ok=True)
    results, spec_file = out / "results.csv", out / "spec.json"
    if fresh:
        for f in (results, spec_file, out / "sweep.json", out / "results.parquet", out / "summary.csv"):
            f.unlink(missing_ok=True)
    if spec_file.exists() and spec_file.read_text() != spec.key():
        raise ScenarioError(f"{out}: holds results of a different sweep; use --fresh or another --out")
    spec_file.write_text(spec.key())
    meta = {
        "name": spec.name,
        "description": spec.description,
        "scale": spec.scale,
        "report_point": spec.report_point,
        "seeds": spec.seeds,
        "factors": spec.factors,
    }
    (out / "sweep.json").write_text(json.dumps(meta, indent=1))

    header = columns(p.scenario for p in spec.points)
    done = done_rows(results)
    total = len(spec.points) * spec.seeds
    todo = (  # lazily: a sweep of a hundred million seeds allocates nothing before its first run
        (p, s)
        for p in sorted(spec.points, key=lambda p: -p.cost())
        for s in range(spec.seeds)
        if (p.index, s) not in done
    )
    if executor in ("process", "dask-local"):
        jobs = cap_jobs("experiments.sweep", jobs, total - len(done))
    client = dask_client(executor, jobs) if executor.startswith("dask") and len(done) < total else None
    # a bar of runs done / total, rate and ETA on stderr; nothing when stderr is not a terminal (disable=None)
    progress = tqdm(total=total, initial=len(done), unit="run", desc="runs", disable=None, smoothing=0.1)
    try:
        with Appender(results, header) as table:

            def write(row: dict) -> None:
                table.write(row)
                progress.update()

            if executor.startswith("dask"):
                if client is not None:  # (none when every row is already there)
                    run_on_dask(client, todo, write)
            elif executor == "serial" or jobs == 1:
                for p, s in todo:
                    write(run_point(p, s))
            else:
                run_on_pool(jobs, todo, write)
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


def run_on_pool(jobs: int, todo: Iterator[tuple[Point, int]], write: Callable[[dict], None]) -> None:
    """Run ``todo`` over ``jobs`` local worker processes, about twice as many queued as workers, writing each row as
    its run finishes."""
    with process_pool(jobs) as pool:
        pending: set[Future] = set()
        try:
            for job in itertools.chain(todo, [None]):
                if job is not None:
                    pending.add(pool.submit(run_point, *job))
                    if len(pending) < 2 * jobs:  # a few queued ahead of the workers, not all at once
                        continue
                while pending and (job is None or len(pending) >= 2 * jobs):
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        write(fut.result())
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise


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
    p.add_argument("--out", type=Path, help="output folder (default runs/<spec name>/)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    p.add_argument(
        "--executor",
        type=executor_arg,
        default="process",
        metavar="EXECUTOR",
        help="process: a local process pool (default); serial: in this process; dask-local: a Dask LocalCluster of "
        "--jobs worker processes; dask://HOST:PORT: the workers of the Dask scheduler there (--jobs not used)",
    )
    p.add_argument("--fresh", action="store_true", help="discard results in --out and start over")
    p.add_argument("--quick", action="store_true", help="the spec's reduced version (the default: under a minute)")
    p.add_argument("--no-report", action="store_true", help="write the results only")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs: must be >= 1, got {args.jobs}")

    def go() -> int:
        spec = load_spec(args.spec, args.sets, args.factors, args.seeds, args.quick, args.params)
        out = check_out(args.out or Path("runs") / (spec.name + ("-quick" if args.quick else "")), folder=True)
        t0 = time.perf_counter()
        table = run_sweep(spec, out, args.jobs, args.executor, args.fresh)
        wall = time.perf_counter() - t0
        failed = int((table["error"] != "").sum())
        print(f"{len(table)} rows ({failed} with errors) in {out}/results.csv and results.parquet; {wall:.1f} s")
        if not args.no_report:
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
    except ClusterLost as e:
        print(f"experiments.sweep: {e}; finished rows are kept, run the same command to continue", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            "\nexperiments.sweep: interrupted; finished rows are kept, run the same command to continue",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
