"""``python -m calibration.standin [--params FILE] [--port N] [--proxy-port N]``: run the Modal stand-in."""

from __future__ import annotations

import asyncio
import importlib.util
import re
import sys
from pathlib import Path

from calibration.apps.loadtest import SERVER_PACKAGES
from calibration.standin.platform import PARAMS, Params
from calibration.standin.server import serve
from sim.cli import ArgParser, main_guard
from sim.scenario import ScenarioError

PROG = "python -m calibration.standin"
# the server way's image packages (pyproject's [calibration] extra), as importable module names
SERVER_MODULES = tuple(re.split(r"[<>=!~\[ ]", req)[0] for req in SERVER_PACKAGES)


def run(argv: list[str] | None) -> int:
    p = ArgParser(prog=PROG, description="A local stand-in for Modal's API (gRPC on 127.0.0.1).")
    p.add_argument("--params", type=Path, default=PARAMS, help=f"the platform's parameters (default {PARAMS.name})")
    p.add_argument("--port", type=int, default=0, help="the gRPC port (default: a free one)")
    p.add_argument("--proxy-port", type=int, default=0, help="the HTTP proxy's port (default: a free one)")
    args = p.parse_args(argv)
    for flag, port in (("--port", args.port), ("--proxy-port", args.proxy_port)):
        if not 0 <= port <= 65535:
            raise ScenarioError(f"{flag}: a TCP port is 0 (a free one) to 65535, got {port}")
    try:
        params = Params.load(args.params)
    except (OSError, ValueError) as e:
        raise ScenarioError(f"--params: {e}") from None
    if missing := [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]:
        # its containers see this interpreter's packages as their image's: the server way's would fail to start
        print(
            f"{PROG}: the server way's app needs {' and '.join(missing)} (not installed): "
            "pip install -e '.[calibration]'; the other ways run",
            file=sys.stderr,
        )
    asyncio.run(serve(params, args.port, args.proxy_port))
    return 0


def main(argv: list[str] | None = None) -> int:
    return main_guard(PROG, lambda: run(argv))


if __name__ == "__main__":
    sys.exit(main())
