"""Real calibration runs on Modal: deploy an app under a run-specific name, drive it, write a trace, stop the app.

    python -m calibration.run WHAT [--clients C --calls N --duration S ...] [--dry-run] [--yes] [--out DIR]

WHAT: a way of calibration/ways (``WAYS``, one module each: its options, plan, simulator preset and driver):
``remote``, ``spawn``, ``copies``, ``batching``, ``server`` (the reference load test's ways, docs/sources.md §1),
``coldstart`` (container starts, lazy vs snapshot, docs/sources.md §3), ``sandboxes`` (sandbox creation,
docs/sources.md §2).

- The apps (calibration/apps) are deployed as ``scalesim-cal-<what>-<run-id>`` (copies: ``...-copy-<i>``) with
  ``App.deploy(name=...)`` and always stopped with ``App.stop()`` (modal/app.py), in a ``finally``: after success,
  errors, timeouts and Ctrl-C. A sandbox run's app is ``App.lookup(name, create_if_missing=True)``.
- The trace goes to ``calibration/data/<run-id>/<what>`` (``--out DIR``: ``DIR/<what>``), written by
  ``calibration.trace.write`` (kind ``calls``, ``starts`` or ``sandboxes``).
- ``--dry-run`` prints the plan and an upper bound of its cost without credentials and without touching Modal:
  container-seconds × the container's size × prices (docs/sources.md §6: CPU $0.0000131 per core-second with a
  0.125-core minimum, memory $0.00000222 per GiB-second; ``--cpu-price``/``--memory-price``). The bound holds because
  every Function's containers are capped (``max_containers``), every container lives at most the run's length (the app
  is stopped at the end), probes' containers are single-use with a startup timeout, and sandboxes have a timeout.
- A real run asks for confirmation on stdin unless ``--yes``. Credentials are Modal's own (modal/config.py: token id
  and secret from ``~/.modal.toml`` or ``MODAL_TOKEN_ID``/``MODAL_TOKEN_SECRET``, or OAuth variables); this command
  only checks that they are there and never prints or writes them. Without them a real run exits 2 with one line.

Exit codes as every command (sim/cli.py): 0 done; 2 bad input (one line naming the option); 1 anything
else (a failed run, not confirmed); 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from calibration import design
from calibration.plan import DATA, PROG, Plan, app_name, default_run_id, describe
from calibration.ways import WAYS
from calibration.ways.base import Option, RunFailed
from models.inputs.platform.billing import CPU_PRICE, MEMORY_PRICE
from sim.cli import ArgParser, main_guard, one_line, out_path
from sim.files import check_out
from sim.scenario import ScenarioError

MARGIN_S = 300.0  # a run's wall-clock limit beyond its own bound (deploys, image builds, URL look-ups)


# --- options ------------------------------------------------------------------------------------------------------

# Every way's: the load, the container, prices and the run's own. A way adds its own options (calibration/ways).
COMMON = (
    Option("--clients", int, 8, "clients (default 8: the reference load test)", (1, 1000)),
    Option("--calls", int, 1000, "calls in flight per client (default 1000)", (1, 100_000)),
    Option("--duration", float, 60.0, "seconds of load (default 60)", (0.001, 3600)),
    Option("--warmup", float, 0.0, "seconds before the measurement window (default 0)", (0, 3600)),
    Option("--drain", float, 60.0, "seconds to wait for calls after the load (default 60)", (0, 3600)),
    Option("--work-min", float, 1.0, "work per call: uniform(min, max) s (default 1)", (0, 3600)),
    Option("--work-max", float, 10.0, "(default 10)", (0, 3600)),
    Option("--seed", int, 0, "seed of the work draws (default 0)", (0, 2**32 - 1)),
)
CONTAINER = (
    Option("--max-containers", int, 0, "per Function (default 0: 2 × what the load needs)", (0, 10_000)),
    Option("--cpu", float, None, "cores per container (default: the app's)", (0.125, 64)),
    Option("--memory-mib", int, None, "memory per container, MiB (default: the app's)", (128, 262_144)),
    Option("--region", str, None, "a Modal region for the containers (default: Modal's choice)"),
    Option("--cpu-price", float, CPU_PRICE, f"$ per core-second (default {CPU_PRICE})", (0, 1)),
    Option("--memory-price", float, MEMORY_PRICE, f"$ per GiB-second ({MEMORY_PRICE})", (0, 1)),
)


def options() -> list[Option]:
    """Every option: the common ones, then each way's in ``WAYS``' order (an option two ways share, once)."""
    by_flag = {o.flag: o for w in WAYS.values() for o in w.options}
    return [*COMMON, *by_flag.values(), *CONTAINER]


def parser() -> ArgParser:
    p = ArgParser(prog=PROG, description="Real calibration runs on Modal: deploy, drive, trace, stop.")
    p.add_argument(
        "what", choices=[*WAYS, "plan"], help="which experiment (plan: the designed set, calibration/design.py)"
    )
    for o in options():
        o.add_to(p)
    p.add_argument("--run-id", default=None, help="the run's id (default: UTC time and a random suffix)")
    p.add_argument(
        "--out", type=out_path, default=None, help="folder of the run's traces (default calibration/data/ID)"
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan and its cost; touch nothing")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    return p


def validate(args: argparse.Namespace) -> None:
    """Every numeric option finite and within its bounds; the pairs consistent. ScenarioError names the option."""
    for o in options():
        v = getattr(args, o.dest)
        if o.bounds is None or v is None:
            continue
        (lo, hi), name = o.bounds, o.flag
        if not (isinstance(v, int | float) and lo <= v <= hi and math.isfinite(v)):  # (an int beyond floats: out)
            raise ScenarioError(f"{name}: expected a number in [{lo:g}, {hi:g}], got {v!r}")
    if args.work_min > args.work_max:
        raise ScenarioError(f"--work-min: {args.work_min:g} is above --work-max {args.work_max:g}")
    if args.work_max <= 0:
        raise ScenarioError("--work-max: the work must have a positive mean (a maximum above 0)")
    if args.warmup >= args.duration:
        raise ScenarioError(f"--warmup: {args.warmup:g} s must be below --duration {args.duration:g} s")
    if args.region is not None and not re.fullmatch(r"[a-z0-9-]{1,40}", args.region):
        raise ScenarioError("--region: a Modal region name such as us-east (a-z, 0-9, '-')")
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", args.imports):
        raise ScenarioError(f"--imports: {args.imports!r} is not a module name such as torch or numpy.linalg")
    if args.pip is not None and not all(re.fullmatch(r"[A-Za-z0-9][\w.\-\[\],<>=!~]*", p.strip()) for p in
                                        args.pip.split(",") if p.strip()):  # fmt: skip
        raise ScenarioError(f"--pip: {args.pip!r} is not a comma-separated list of pip requirements")
    most = 32 - (design.SUFFIX if args.what == "plan" else 0)  # app names stay within Modal's 64 characters
    if args.run_id is not None and not re.fullmatch(rf"[a-z0-9][a-z0-9-]{{0,{most - 1}}}", args.run_id):
        raise ScenarioError(f"--run-id: 1 to {most} characters of a-z, 0-9 and '-' (it becomes part of app names)")


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
    from the active profile of ``~/.modal.toml`` or ``MODAL_TOKEN_ID``/``MODAL_TOKEN_SECRET``; or all three OAuth
    variables: refresh token, client id and client secret). Only their presence is checked; the values are never
    read into anything this project writes."""
    from modal.config import config

    if config.get("token_id") and config.get("token_secret"):
        return True
    keys = ("oauth_refresh_token", "oauth_client_id", "oauth_client_secret")  # modal/config.py wants all three
    return all(config.get(k) for k in keys)


# --- deploying and stopping ---------------------------------------------------------------------------------------

CONNECT_TIMEOUT_S = 5.0  # the modal client retries an unreachable server for minutes; a plain connect says at once


def reach_modal() -> None:
    """Modal's API (``server_url`` of modal's configuration: MODAL_SERVER_URL or ~/.modal.toml) accepts a TCP
    connection within CONNECT_TIMEOUT_S, before anything is deployed; else bad input naming the URL."""
    import socket
    from urllib.parse import urlsplit

    from modal.config import config

    url = str(config.get("server_url"))
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if not parts.hostname:
            raise ValueError(url)
        with socket.create_connection((parts.hostname, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except ValueError:
        raise ScenarioError(f"MODAL_SERVER_URL {url!r}: not a URL of Modal's API") from None
    except OSError as e:
        why = e.strerror or type(e).__name__
        raise ScenarioError(
            f"Modal's API at {url} (MODAL_SERVER_URL or ~/.modal.toml): cannot connect ({why}); nothing deployed"
        ) from None


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
        with modal.enable_output():  # the deploy's progress and, when an image build fails, its logs (on stdout)
            return app.deploy(name=name)

    def stop(self, name: str, handle: Any) -> None:
        import modal
        from modal.exception import AuthError, NotFoundError

        if handle is None or getattr(handle, "app_id", None) is None:
            try:
                handle = modal.App.lookup(name)
            except (NotFoundError, AuthError):
                return  # never created (with credentials Modal rejects, nothing can have been)
        handle.stop()


def modal_error(e: Exception) -> None:
    """Re-raise ``e`` unless it is Modal's (``modal.exception.Error``); credentials Modal rejects (``AuthError``)
    are bad input: ScenarioError, exit 2."""
    from modal.exception import AuthError, Error

    if isinstance(e, AuthError):
        raise ScenarioError(f"Modal rejected the credentials: {one_line(str(e))}") from None
    if not isinstance(e, Error):
        raise e


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


def make_plan(args: argparse.Namespace) -> Plan:
    """The apps, functions, container size and the cost bound of ``args`` (already validated): its way's plan."""
    out = args.out if args.out is not None else DATA / args.run_id
    return WAYS[args.what].plan(args, app_name(args.what, args.run_id), out)


def scenario(args: argparse.Namespace, plan: Plan) -> tuple[str, dict[str, Any]]:
    """The simulator's preset and ``--set`` keys that reproduce this experiment (experiments/scenarios)."""
    way = WAYS[plan.what]
    return way.preset, way.sets(args, plan)


async def drive_async(args: argparse.Namespace, plan: Plan, handles: list[Any]) -> list[Path]:
    """Run the callers against the deployed apps and write the traces (real runs): the way's own driver."""
    return await WAYS[plan.what].drive(args, plan, handles)


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


def confirm(plan: Plan | None, cost: float) -> bool:
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
    if args.what == "plan":
        return run_plan(args, deployer=deployer, driver=driver, credentials=credentials)
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
    WAYS[plan.what].check(args)
    print(describe(plan, args.cpu_price, args.memory_price))
    if not args.yes and not confirm(plan, cost):
        print(f"{PROG}: not confirmed; nothing deployed", file=sys.stderr)
        return 1
    check_out(plan.out, folder=True)  # before anything is deployed
    if deployer is None:
        reach_modal()
    try:
        written = execute(plan, deployer or ModalDeployer(), driver or drive(args))
    except RunFailed as e:
        print(f"{PROG}: {one_line(str(e))}", file=sys.stderr)
        return 1
    except Exception as e:
        modal_error(e)
        print(f"{PROG}: Modal: {type(e).__name__}: {one_line(str(e))}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


def run_plan(
    args: argparse.Namespace,
    *,
    deployer: Deployer | None,
    driver: Callable[[Plan, list[Any]], list[Path]] | None,
    credentials: Callable[[], bool],
) -> int:
    """``calibration.run plan``: the designed runs (calibration/design.py), their cost bound printed before anything
    deploys, one confirmation for all, then each run not done yet in turn; the first that fails ends the plan
    (exit 1; run the same command again to resume)."""
    args.run_id = args.run_id or default_run_id()
    out = args.out if args.out is not None else DATA / args.run_id

    def make(line: list[str]) -> tuple[float, str]:
        sub = parser().parse_args(line)
        validate(sub)
        p = make_plan(sub)
        return p.cost(sub.cpu_price, sub.memory_price), p.calls

    lines, cost = design.plan(args, out, make)
    print("\n".join(lines))
    if args.dry_run:
        print("  dry run: nothing deployed; no credentials needed")
        return 0
    if not credentials():
        raise ScenarioError(CREDENTIALS_HELP)
    if not args.yes and not confirm(None, cost):
        print(f"{PROG}: not confirmed; nothing deployed", file=sys.stderr)
        return 1
    check_out(out, folder=True)
    for r in design.DESIGN:
        if design.done(out, r):
            continue
        print(f"{PROG} plan: {r.name}", file=sys.stderr)
        code = run([*design.argv(args, r, out), "--yes"], deployer=deployer, driver=driver, credentials=credentials)
        if code != 0:
            print(f"{PROG} plan: {r.name} failed; run the plan again to resume", file=sys.stderr)
            return code
    return 0


def main(argv: list[str] | None = None) -> int:
    def go() -> int:
        try:
            return run(argv)
        except KeyboardInterrupt as e:  # main_guard's one line (exit 130) says so
            e.add_note("any app deployed was stopped")
            raise

    return main_guard(PROG, go)


if __name__ == "__main__":
    sys.exit(main())
