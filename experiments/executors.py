"""Where a sweep's runs go (``--executor``): a local process pool, a Dask cluster, or Modal.

- ``process`` (``run_on_pool``): ``--jobs`` local worker processes; ``serial`` runs in the sweep's own process.
- ``dask-local`` / ``dask://HOST:PORT`` (``run_on_dask``): a Dask ``LocalCluster`` the sweep starts, or the workers of
  a running Dask scheduler.
- ``modal`` (``run_on_modal``): the points as inputs of one Modal Function (``Function.starmap``, modal 1.6.4:
  modal/parallel_map.py) in an ephemeral app, ``scalesim-sweep``, whose image holds this project's packages and the
  dependencies a run needs. Built and driven offline in the tests (a stand-in for ``starmap``); not run against the
  service here (no network to Modal).
Each writes every row in the sweep's own process as its run finishes, so the results table, resume and progress are
the same whatever the executor, and so are the rows (``experiments.rows.run_point`` computes them all).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from importlib import metadata
from pathlib import Path
from typing import Any

from experiments.rows import failed_row, run_point
from experiments.spec import Point
from sim.errors import missing_extra
from sim.pools import process_pool
from sim.processes import sigint_held
from sim.scenario import ScenarioError

Rows = Iterator[tuple[Point, int]]


class ClusterLost(Exception):
    """The Dask scheduler went away mid-sweep: the finished rows are kept, the same command continues (exit 1)."""


EXECUTORS = "process, serial, dask-local, dask://HOST:PORT or modal"


def executor_arg(text: str) -> str:
    """``--executor``: process, serial, dask-local, dask://HOST:PORT (a port from 1 to 65535) or modal."""
    if text in ("process", "serial", "dask-local", "modal"):
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

    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise missing_extra("distributed", f"--executor {executor}", "cluster") from None

    # this process's Dask logs would print tracebacks (a lost scheduler, reconnection attempts): the sweep says what
    # went wrong in one line instead, and a run's own errors are in its row
    for name in ("distributed", "distributed.client"):  # Dask's config sets the level of both
        logging.getLogger(name).setLevel(logging.CRITICAL)
    if executor == "dask-local":
        from multiprocessing import resource_tracker

        cluster = None
        try:
            # made with SIGINT blocked: its event loop's thread, and every thread and worker process that loop starts,
            # inherit the block, so a Ctrl-C reaches the sweep alone, which closes the cluster (run_sweep) without a
            # worker's traceback; one while the cluster starts is taken once it has started. multiprocessing's
            # resource tracker is started first: starting it unblocks SIGINT in the thread that does (Python 3.11)
            resource_tracker.ensure_running()
            with sigint_held():
                cluster = LocalCluster(
                    n_workers=jobs,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    # no dashboard, and the scheduler's own HTTP routes on a free port: on 8787 a second cluster
                    # (another sweep on the machine) warned that the port was in use
                    scheduler_kwargs={"dashboard_address": ":0"},
                    # its scheduler's and workers' logs too: a worker whose heartbeat meets the scheduler closing
                    # (the cluster's own shutdown, at the sweep's end) logged that error with a traceback
                    silence_logs=logging.CRITICAL,
                )
            return Client(cluster, set_as_default=False)
        except BaseException:
            if cluster is not None:
                cluster.close()
            raise
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
            fut = client.submit(run_point, point, seed, key=f"scalesim-{sweep_id}-{point.index}-{seed}")
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


# --- Modal --------------------------------------------------------------------------------------------------------
MODAL_APP = "scalesim-sweep"
MODAL_PACKAGES = ("sim", "models", "calibration", "experiments")  # this project's, added to the image as source
# what a run imports (the rest of the project's dependencies serve the calibration apps, Dask and Modal's client)
MODAL_DEPENDENCIES = ("simpy", "numpy", "scipy", "pandas", "matplotlib", "pyarrow", "tqdm")
MODAL_CPU = 1.0  # a run is one Python thread
MODAL_MEMORY_MIB = 2048  # a run within its size budget (10 million calls: about 0.5 GiB; models/runs.py)
MODAL_TIMEOUT_S = 3600  # the largest runs take minutes


SHIPPED_SUFFIXES = (".py", ".toml", ".json")  # code, presets and sweep specs, fitted parameters and envelopes


def not_shipped(path: Path) -> bool:
    """``add_local_python_source``'s ``ignore``: everything but code, presets and parameters (its default keeps
    only ``.py`` files, modal/_image.py ``NON_PYTHON_FILES``, and a point that names a preset then fails in the
    container); recorded traces (``calibration/data``) and caches stay home. ``path`` is relative to its package."""
    parts = path.parts
    return (
        path.suffix not in SHIPPED_SUFFIXES
        or "__pycache__" in parts
        or parts[:1] == ("data",)  # the path is relative to its package: calibration/data
    )


def run_point_on_modal(point: Point, seed: int) -> dict:
    """A sweep row computed in a Modal container (the same function as every other executor's)."""
    return run_point(point, seed)


def modal_requirements() -> list[str]:
    """The installed project's own requirement strings (its pins) for the packages a run imports."""
    wanted = set(MODAL_DEPENDENCIES)
    out = []
    for req in metadata.requires("scalesim") or []:
        if "extra ==" in req:
            continue
        name = req.split(";")[0].strip()
        base = name.split("[")[0]
        for sep in "<>=!~ ":
            base = base.split(sep)[0]
        if base.lower() in wanted:
            out.append(name)
    return out


def modal_function() -> tuple[Any, Any]:
    """The sweep's Modal app and its one Function, ``run_point_on_modal`` (sent by reference: ``serialized``, as
    it is registered here, not at import)."""
    import modal

    image = (
        modal.Image.debian_slim(python_version="3.11")
        .pip_install(*modal_requirements())
        .add_local_python_source(*MODAL_PACKAGES, ignore=not_shipped)
    )
    app = modal.App(MODAL_APP, image=image)
    fn = app.function(cpu=MODAL_CPU, memory=MODAL_MEMORY_MIB, timeout=MODAL_TIMEOUT_S, serialized=True, retries=1)(
        run_point_on_modal
    )
    return app, fn


def check_modal() -> None:
    """Bad input (exit 2, one line) unless modal's own configuration holds credentials."""
    from calibration.run import CREDENTIALS_HELP, has_credentials, load_modal

    load_modal()
    if not has_credentials():
        raise ScenarioError(f"--executor modal: {CREDENTIALS_HELP.replace('; --dry-run needs none', '')}")


def run_on_modal(todo: Rows, write: Callable[[dict], None]) -> None:
    """Run ``todo`` as the inputs of the sweep's Modal Function, in an ephemeral app that stops with the sweep
    (``App.run``), writing each row here as its output arrives. Outputs come in input order (``order_outputs``), so
    an input that failed in Modal (its container lost, its timeout passed: ``return_exceptions``) records its error
    in its own row; a point's own errors are in the row run_point returns."""
    app, fn = modal_function()
    sent: deque[tuple[Point, int]] = deque()

    def inputs() -> Iterable[tuple[Point, int]]:
        for job in todo:
            sent.append(job)
            yield job

    with app.run():
        for out in fn.starmap(inputs(), order_outputs=True, return_exceptions=True):
            point, seed = sent.popleft()
            write(failed_row(point, seed, f"{type(out).__name__}: {out}") if isinstance(out, BaseException) else out)
