"""What importing the packages and asking a command for its ``--help`` load: none of the heavy libraries (pandas,
scipy, matplotlib, dask), which the work that needs them imports where it is done; the notebook API and the
``--help`` of the commands that serve every model (run, sweep, compare) not even the models. The import graph, not
the time: the time is the bench's (experiments/bench/sections.py ``startup``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from experiments.docs import COMMANDS
from tests.support import ROOT

HEAVY = {"pandas", "scipy", "matplotlib", "dask", "distributed", "pyarrow"}
MODELS = {"simpy", "models.registry"}  # the simulated systems' engine and their registry (which imports them all)

# in a fresh interpreter: import MODULE (--import) or run it as python -m MODULE ARGS would, then print the modules
# loaded
PROBE = """
import runpy, sys
module, args = sys.argv[1], sys.argv[2:]
if args == ["--import"]:
    __import__(module)
else:
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        assert e.code in (0, None), f"exit {e.code}"
print("\\nloaded:", *sorted(sys.modules))
"""


def loaded(module: str, *args: str) -> set[str]:
    """The modules loaded, and the top-level packages among them."""
    r = subprocess.run(
        [sys.executable, "-c", PROBE, module, *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert r.returncode == 0, r.stderr
    names = r.stdout.strip().splitlines()[-1].split()[1:]
    return {*names, *(n.split(".")[0] for n in names)}


@pytest.mark.parametrize("module", ["experiments", "experiments.api"])
def test_importing_the_package_and_the_api_loads_nothing_heavy(module):
    assert not loaded(module, "--import") & (HEAVY | MODELS | {"models"})


@pytest.mark.parametrize(
    "argv", [(m, "--help") for m in COMMANDS] + [("experiments.whatif", "plan", "--help")], ids=" ".join
)
def test_a_commands_help_loads_nothing_heavy(argv):
    got = loaded(*argv)
    assert "argparse" in got  # (it did parse)
    assert not got & HEAVY, sorted(got & HEAVY)


@pytest.mark.parametrize("module", ["experiments.run", "experiments.sweep", "experiments.compare"])
def test_the_help_of_a_command_of_any_model_loads_no_model(module):
    assert not loaded(module, "--help") & MODELS


def test_the_probe_sees_what_is_imported():
    assert {"pandas", "pandas.core.frame"} <= loaded("pandas", "--import")
