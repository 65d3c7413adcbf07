"""Real calibration runs on Modal: deploy an app under a run-specific name, drive it, write a trace, stop the app.

    python -m calibration.run WHAT [--clients C --calls N --duration S ...] [--dry-run] [--yes] [--out DIR]

WHAT: ``remote``, ``spawn``, ``copies``, ``batching``, ``server`` (the reference load test's ways, domain.md §1),
``coldstart`` (container starts, lazy vs snapshot, domain.md §3), ``sandboxes`` (sandbox creation, domain.md §2).

- The apps (calibration/apps) are deployed as ``scalesim-cal-<what>-<run-id>`` (copies: ``...-copy-<i>``) with
  ``App.deploy(name=...)`` and always stopped with ``App.stop()`` (modal/app.py), in a ``finally``: after success,
  errors, timeouts and Ctrl-C. A sandbox run's app is ``App.lookup(name, create_if_missing=True)``.
- The trace goes to ``calibration/data/<run-id>/<what>`` (``--out DIR``: ``DIR/<what>``), written by
  ``calibration.trace.write`` (kind ``calls``, ``starts`` or ``sandboxes``).
- ``--dry-run`` prints the plan and an upper bound of its cost without credentials and without touching Modal:
  container-seconds × the container's size × prices (domain.md §6: CPU $0.0000131 per core-second with a 0.125-core
  minimum, memory $0.00000222 per GiB-second; ``--cpu-price``/``--memory-price``). The bound holds because every
  Function's containers are capped (``max_containers``), every container lives at most the run's length (the app
  is stopped at the end), probes' containers are single-use with a startup timeout, and sandboxes have a timeout.
- A real run asks for confirmation on stdin unless ``--yes``. Credentials are Modal's own (modal/config.py: token id
  and secret from ``~/.modal.toml`` or ``MODAL_TOKEN_ID``/``MODAL_TOKEN_SECRET``, or OAuth variables); this command
  only checks that they are there and never prints or writes them. Without them a real run exits 2 with one line.

Exit codes as every command (experiments/cli.py): 0 done; 2 bad input (one line naming the option); 1 anything
else (a failed run, not confirmed); 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from calibration.plan import PROG, WHATS, Plan, default_run_id, describe, make_plan
from experiments.cli import ArgParser, check_out, main_guard, one_line
from experiments.prices import CPU_PRICE, MEMORY_PRICE
from sim.scenario import ScenarioError

MARGIN_S = 300.0  # a run's wall-clock limit beyond its own bound (deploys, image builds, URL look-ups)


class RunFailed(Exception):
    """A real run that failed after it started (exit 1, one line)."""


# --- options ------------------------------------------------------------------------------------------------------


def parser() -> ArgParser:
    p = ArgParser(prog=PROG, description="Real calibration runs on Modal: deploy, drive, trace, stop.")
    p.add_argument("what", choices=WHATS, help="which experiment")
    p.add_argument("--clients", type=int, default=8, help="clients (default 8: the reference load test)")
    p.add_argument("--calls", type=int, default=1000, help="calls in flight per client (default 1000)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of load (default 60)")
    p.add_argument("--warmup", type=float, default=0.0, help="seconds before the measurement window (default 0)")
    p.add_argument("--drain", type=float, default=60.0, help="seconds to wait for calls after the load (default 60)")
    p.add_argument("--work-min", type=float, default=1.0, help="work per call: uniform(min, max) s (default 1)")
    p.add_argument("--work-max", type=float, default=10.0, help="(default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the work draws (default 0)")
    p.add_argument("--copies", type=int, default=8, help="app copies for `copies` (default 8)")
    p.add_argument("--max-inputs", type=int, default=500, help="@modal.concurrent(max_inputs=N) (default 500)")
    p.add_argument("--round", type=int, default=1000, help="batching: items per round per client (default 1000)")
    p.add_argument("--chunk", type=int, default=32, help="batching: items per chunk (default 32)")
    p.add_argument("--chunk-max-inputs", type=int, default=50, help="batching: chunks per container (default 50)")
    p.add_argument(
        "--batched", action="store_true", help="batching with @modal.batched (single-item calls) instead of chunks"
    )
    p.add_argument("--batch-wait-ms", type=int, default=1000, help="@modal.batched wait_ms (default 1000)")
    p.add_argument("--target-concurrency", type=int, default=1000, help="server: target_concurrency (default 1000)")
    p.add_argument("--connections", type=int, default=1000, help="server: connections per client (default 1000)")
    p.add_argument("--max-containers", type=int, default=0, help="per Function (default 0: 2 × what the load needs)")
    p.add_argument("--cpu", type=float, default=None, help="cores per container (default: the app's)")
    p.add_argument("--memory-mib", type=int, default=None, help="memory per container, MiB (default: the app's)")
    p.add_argument("--region", default=None, help="a Modal region for the containers (default: Modal's choice)")
    p.add_argument("--mode", choices=("lazy", "snapshot", "both"), default="both", help="coldstart: start modes")
    p.add_argument("--starts", type=int, default=20, help="coldstart: container starts per mode (default 20)")
    p.add_argument("--start-interval", type=float, default=5.0, help="coldstart: mean s between starts (default 5)")
    p.add_argument("--startup-timeout", type=int, default=120, help="coldstart: a start's limit, s (default 120)")
    p.add_argument("--sandboxes", type=int, default=100, help="sandboxes: how many (default 100)")
    p.add_argument("--concurrency", type=int, default=100, help="sandboxes: creates at once (default 100)")
    p.add_argument("--sandbox-timeout", type=int, default=120, help="sandboxes: a sandbox's life limit, s")
    p.add_argument("--cpu-price", type=float, default=CPU_PRICE, help=f"$ per core-second (default {CPU_PRICE})")
    p.add_argument("--memory-price", type=float, default=MEMORY_PRICE, help=f"$ per GiB-second ({MEMORY_PRICE})")
    p.add_argument("--run-id", default=None, help="the run's id (default: UTC time and a random suffix)")
    p.add_argument("--out", type=Path, default=None, help="folder of the run's traces (default calibration/data/ID)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and its cost; touch nothing")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    return p


# (option, low, high, integer): every number is checked before anything runs; the bounds keep a run's size sane
BOUNDS: dict[str, tuple[float, float]] = {
    "clients": (1, 1000),
    "calls": (1, 100_000),
    "duration": (0.001, 3600),
    "warmup": (0, 3600),
    "drain": (0, 3600),
    "work_min": (0, 3600),
    "work_max": (0, 3600),
    "seed": (0, 2**32 - 1),
    "copies": (1, 100),
    "max_inputs": (1, 1000),
    "round": (1, 100_000),
    "chunk": (1, 1000),  # modal/_partial_function.py MAX_MAX_BATCH_SIZE = 1000
    "chunk_max_inputs": (1, 1000),
    "batch_wait_ms": (0, 600_000),  # MAX_BATCH_WAIT_MS: 10 minutes
    "target_concurrency": (1, 100_000),
    "connections": (1, 100_000),
    "max_containers": (0, 10_000),
    "cpu": (0.125, 64),
    "memory_mib": (128, 262_144),
    "starts": (1, 10_000),
    "start_interval": (0.001, 3600),
    "startup_timeout": (1, 3600),
    "sandboxes": (1, 100_000),
    "concurrency": (1, 100_000),
    "sandbox_timeout": (1, 86_400),  # Sandbox.create: up to 24 h (domain.md §2)
    "cpu_price": (0, 1),
    "memory_price": (0, 1),
}


def validate(args: argparse.Namespace) -> None:
    """Every numeric option finite and within its bounds; the pairs consistent. ScenarioError names the option."""
    for key, (lo, hi) in BOUNDS.items():
        v = getattr(args, key)
        if v is None:
            continue
        name = "--" + key.replace("_", "-")
        if not (isinstance(v, int | float) and math.isfinite(v) and lo <= v <= hi):
            raise ScenarioError(f"{name}: expected a number in [{lo:g}, {hi:g}], got {v!r}")
    if args.work_min > args.work_max:
        raise ScenarioError(f"--work-min: {args.work_min:g} is above --work-max {args.work_max:g}")
    if args.work_max <= 0:
        raise ScenarioError("--work-max: the work must have a positive mean (a maximum above 0)")
    if args.warmup >= args.duration:
        raise ScenarioError(f"--warmup: {args.warmup:g} s must be below --duration {args.duration:g} s")
    if args.region is not None and not re.fullmatch(r"[a-z0-9-]{1,40}", args.region):
        raise ScenarioError("--region: a Modal region name such as us-east (a-z, 0-9, '-')")
    if args.run_id is not None and not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,23}", args.run_id):
        raise ScenarioError("--run-id: 1 to 24 characters of a-z, 0-9 and '-' (it becomes part of app names)")


# --- credentials --------------------------------------------------------------------------------------------------


def load_modal() -> None:
    """Import modal, which reads its configuration file at import (modal/config.py ``_read_user_config`` raises
    ``InvalidError`` on a malformed ``~/.modal.toml``): bad input, one line naming the file, never its content (it
    may hold a token)."""
    try:
        import modal  # noqa: F401
    except Exception as e:
        path = os.environ.get("MODAL_CONFIG_PATH") or os.path.expanduser("~/.modal.toml")
        raise ScenarioError(
            f"{path}: modal cannot read its configuration ({type(e).__name__}); fix or move it"
        ) from None


CREDENTIALS_HELP = (
    "no Modal credentials: run `modal token new` (writes ~/.modal.toml), or set MODAL_TOKEN_ID and "
    "MODAL_TOKEN_SECRET; --dry-run needs none"
)


def has_credentials() -> bool:
    """Whether modal's own configuration holds credentials (modal/config.py: ``token_id`` and ``token_secret``
    from the active profile of ``~/.modal.toml`` or ``MODAL_TOKEN_ID``/``MODAL_TOKEN_SECRET``; or the OAuth
    variables). Only their presence is checked; the values are never read into anything this project writes."""
    from modal.config import config

    if config.get("token_id") and config.get("token_secret"):
        return True
    return bool(config.get("oauth_refresh_token") and config.get("oauth_client_id"))


# --- deploying and stopping ---------------------------------------------------------------------------------------


class Deployer(Protocol):
    def deploy(self, name: str, app: Any) -> Any: ...

    def stop(self, name: str, handle: Any) -> None: ...


class ModalDeployer:
    """Deploys with ``App.deploy(name=...)`` (a sandbox run: ``App.lookup(name, create_if_missing=True)``) and stops
    with ``App.stop()`` (modal/app.py), looking the app up by name when its deploy failed before it had an id."""

    def deploy(self, name: str, app: Any) -> Any:
        import modal

        if app is None:
            return modal.App.lookup(name, create_if_missing=True)
        return app.deploy(name=name)

    def stop(self, name: str, handle: Any) -> None:
        import modal
        from modal.exception import NotFoundError

        if handle is None or getattr(handle, "app_id", None) is None:
            try:
                handle = modal.App.lookup(name)
            except NotFoundError:
                return  # never created
        handle.stop()


def execute(plan: Plan, deployer: Deployer, drive: Callable[[Plan, list[Any]], list[Path]]) -> list[Path]:
    """Deploy every app of ``plan``, run ``drive(plan, handles)``, and stop every app whose deploy was attempted,
    whatever happens (an error, a timeout, KeyboardInterrupt); a stop that fails is reported on stderr with the
    command that stops the app by hand."""
    attempted: list[tuple[str, Any]] = []
    try:
        handles = []
        for a in plan.apps:
            attempted.append((a.name, None))
            handle = deployer.deploy(a.name, a.build())
            attempted[-1] = (a.name, handle)
            handles.append(handle)
        return drive(plan, handles)
    finally:
        for name, handle in reversed(attempted):
            try:
                deployer.stop(name, handle)
            except BaseException as e:  # keep stopping the others, Ctrl-C included
                print(
                    f"{PROG}: could not stop app {name} ({type(e).__name__}); run `modal app stop {name}`",
                    file=sys.stderr,
                )


# --- driving (real runs) ------------------------------------------------------------------------------------------


def _load(args: argparse.Namespace) -> Any:
    from calibration.callers import Load

    return Load(
        clients=args.clients,
        in_flight=args.calls,
        duration_s=args.duration,
        warmup_s=args.warmup,
        drain_s=args.drain,
        work_min=args.work_min,
        work_max=args.work_max,
        seed=args.seed,
    )


def scenario(args: argparse.Namespace, plan: Plan) -> tuple[str, dict[str, Any]]:
    """The simulator's preset and ``--set`` keys that reproduce this experiment (experiments/scenarios)."""
    if plan.what == "coldstart":
        return "coldstart-torch", {"coldstart.starts": args.starts, "coldstart.start_interval_s": args.start_interval}
    if plan.what == "sandboxes":
        return "sandboxes-v2", {
            "sandboxes.count": args.sandboxes,
            "client.concurrency": args.concurrency,
            "sandboxes.cpu": plan.cpu,
            "sandboxes.memory_gib": plan.memory_mib / 1024,
        }
    load = _load(args)
    sets: dict[str, Any] = {
        "clients.count": args.clients,
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "drain_s": args.drain,
        "work": load.work(),
    }
    per_fn = plan.containers // (args.copies if plan.what == "copies" else 1)
    if plan.what == "batching":
        sets |= {"batching.round_items": args.round, "batching.chunk_items": args.chunk}
        sets["function.max_inputs"] = 1 if args.batched else args.chunk_max_inputs
    elif plan.what == "server":
        sets |= {"clients.in_flight": args.calls, "server.target_concurrency": args.target_concurrency}
        sets["clients.connection_limit"] = args.connections
    else:
        sets |= {"clients.in_flight": args.calls, "function.max_inputs": args.max_inputs}
        if plan.what == "copies":
            sets["function.copies"] = args.copies
    sets["autoscaler.max_containers"] = per_fn
    return f"loadtest-{plan.what}", sets


def parameters(args: argparse.Namespace) -> dict[str, Any]:
    """The command's own options, for the manifest (no credentials: none are options)."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("yes", "dry_run")}


async def drive_async(args: argparse.Namespace, plan: Plan, handles: list[Any]) -> list[Path]:
    """Run the callers against the deployed apps and write the traces (real runs)."""
    import modal

    from calibration import callers, trace
    from calibration.apps import sandboxes as sbx

    preset, sets = scenario(args, plan)
    names = [a.name for a in plan.apps]
    written: list[Path] = []
    if plan.what in ("remote", "spawn", "copies", "batching", "server"):
        load = _load(args)
        if plan.what == "server":
            headers = callers.proxy_headers(dict(os.environ))
            url = await modal.Server.from_name(names[0], "WorkServer").get_url.aio()
            if not url:
                raise RunFailed(f"app {names[0]}: the server has no URL")
            table, t0 = await callers.server_loop(
                url, load, headers, connection_limit=args.connections, backoff=callers.Backoff()
            )
        elif plan.what == "batching":
            fn = modal.Function.from_name(names[0], plan.apps[0].functions[0])
            chunk = 1 if args.batched else args.chunk
            call = callers.remote_call([fn], chunk=not args.batched)
            table, t0 = await callers.rounds(call, load, args.round, chunk)
        else:
            fns = [modal.Function.from_name(n, "work") for n in names]
            call = (callers.spawn_call if plan.what == "spawn" else callers.remote_call)(fns)
            table, t0 = await callers.closed_loop(call, load)
        mf = callers.manifest(
            "calls",
            plan.what,
            preset,
            sets,
            (args.warmup, args.duration),
            t0=t0,
            t1=time.time(),
            apps=names,
            parameters=parameters(args),
            region=args.region,
        )
        written.append(trace.write(plan.out / plan.what, mf, table))
    elif plan.what == "coldstart":
        modes = ("lazy", "snapshot") if args.mode == "both" else (args.mode,)
        for mode in modes:
            cls = modal.Cls.from_name(names[0], {"lazy": "LazyProbe", "snapshot": "SnapshotProbe"}[mode])
            table, t0 = await callers.coldstart_loop(
                cls().probe, args.starts, args.start_interval, seed=args.seed, timeout_s=plan.lifetime_s
            )
            end = max(float(table["t"].max()), 0.0) + args.startup_timeout if len(table) else 1.0
            mf = callers.manifest(
                "starts",
                "coldstart",
                preset,
                {**sets, "coldstart.mode": mode},
                (0.0, max(end, 1.0)),
                t0=t0,
                t1=time.time(),
                apps=names,
                parameters=parameters(args),
                region=args.region,
            )
            written.append(trace.write(plan.out / f"coldstart-{mode}", mf, table))
    else:
        import pandas as pd

        t0 = time.time()
        rows = await sbx.probe(
            handles[0],
            args.sandboxes,
            args.concurrency,
            t0=t0,
            cpu=plan.cpu,
            memory_mib=plan.memory_mib,
            timeout_s=args.sandbox_timeout,
        )
        t1 = time.time()
        table = pd.DataFrame(rows)
        mf = callers.manifest(
            "sandboxes",
            "sandboxes",
            preset,
            sets,
            (0.0, max(t1 - t0, 0.001)),
            t0=t0,
            t1=t1,
            apps=names,
            parameters=parameters(args),
            region=args.region,
        )
        written.append(trace.write(plan.out / "sandboxes", mf, table))
    return written


def drive(args: argparse.Namespace) -> Callable[[Plan, list[Any]], list[Path]]:
    """The real driver: ``drive_async`` under a wall-clock limit (the plan's bound + MARGIN_S)."""

    def run(plan: Plan, handles: list[Any]) -> list[Path]:
        async def bounded() -> list[Path]:
            try:
                return await asyncio.wait_for(drive_async(args, plan, handles), plan.wall_s + MARGIN_S)
            except TimeoutError:
                raise RunFailed(f"the run took longer than {plan.wall_s + MARGIN_S:g} s; stopped") from None

        return asyncio.run(bounded())

    return run


# --- main ---------------------------------------------------------------------------------------------------------


def confirm(plan: Plan, cost: float) -> bool:
    """Ask on stdin (the prompt on stderr); only ``y``/``yes`` goes on."""
    print(f"Deploy to Modal and run? Upper-bound cost ${cost:.4f}. [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def run(
    argv: list[str] | None = None,
    *,
    deployer: Deployer | None = None,
    driver: Callable[[Plan, list[Any]], list[Path]] | None = None,
    credentials: Callable[[], bool] = has_credentials,
) -> int:
    """The command; ``deployer``/``driver``/``credentials`` are for tests (defaults: Modal's)."""
    args = parser().parse_args(argv)
    validate(args)
    load_modal()
    args.run_id = args.run_id or default_run_id()
    plan = make_plan(args)
    if plan.out.exists() and not plan.out.is_dir():
        raise ScenarioError(f"--out {plan.out}: is a file, not a folder")
    cost = plan.cost(args.cpu_price, args.memory_price)
    if args.dry_run:
        print(describe(plan, args.cpu_price, args.memory_price))
        print("  dry run: nothing deployed; no credentials needed")
        return 0
    if not credentials():
        raise ScenarioError(CREDENTIALS_HELP)
    if plan.what == "server":
        from calibration.callers import PROXY_KEY_ENV, PROXY_SECRET_ENV, proxy_headers

        if not proxy_headers(dict(os.environ)):
            raise ScenarioError(
                f"server: set {PROXY_KEY_ENV} and {PROXY_SECRET_ENV} to a workspace proxy token "
                "(`modal workspace proxy-tokens`): the server requires proxy auth"
            )
    print(describe(plan, args.cpu_price, args.memory_price))
    if not args.yes and not confirm(plan, cost):
        print(f"{PROG}: not confirmed; nothing deployed", file=sys.stderr)
        return 1
    check_out(plan.out, folder=True)  # before anything is deployed
    try:
        written = execute(plan, deployer or ModalDeployer(), driver or drive(args))
    except RunFailed as e:
        print(f"{PROG}: {one_line(str(e))}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return main_guard(PROG, lambda: run(argv))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted (any app deployed was stopped)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
