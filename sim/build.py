"""Build the compiled core: ``python -m sim.build [--clean]`` (docs/explanation/speed.md, "The compiled core").

Compiles the modules of ``sim.COMPILED`` with mypyc (the ``compile`` extra: ``pip install -e '.[compile]'``, and a C
compiler) in place: an extension module beside each ``.py``, which Python imports instead, and the code they share in
``sim/core__mypyc*``. ``--clean`` removes them: the ``.py`` files run again. Nothing else changes: the compiled
modules give the same numbers, bit for bit (tests/sim/test_compiled.py), and ``SCALESIM_PURE=1`` runs the source in a
process that has them (sim/__init__.py).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from sim import COMPILED

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("sim", "models", "experiments", "calibration")  # pyproject.toml's packages
GROUP = "sim.core"  # the shared library of the compiled modules: sim/core__mypyc.<suffix>
# mypy's view of the rest of the project: read for the types, never compiled, its own errors not reported
MYPY_OPTIONS = ("--follow-imports=silent", "--ignore-missing-imports")


def built() -> list[Path]:
    """The extension modules in the project's packages: what builds put there (the project has no other), whatever
    ``COMPILED`` held when they were built."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[-1]  # every extension module's name ends with it (.so, .pyd)
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob(f"*{suffix}"))


def clean() -> list[Path]:
    """Remove what a build put in the source tree; returns what it removed."""
    gone = built()
    for path in gone:
        path.unlink()
    return gone


def build() -> float:
    """Compile ``COMPILED`` in place (the C sources, objects and copies in a temporary directory: nothing else is
    left in the tree); returns the wall seconds it took. Fails (mypyc's or the C compiler's error) if one does not
    compile."""
    from mypyc.build import mypycify  # here: the compile extra, needed only to build
    from setuptools import Distribution
    from setuptools.command.build_ext import build_ext

    t = time.perf_counter()
    clean()
    cwd = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="scalesim-build-") as tmp:
        os.chdir(ROOT)  # mypyc and build_ext's in-place copy take paths from here
        try:
            sources = [f"{name.replace('.', '/')}.py" for name in COMPILED]
            extensions = mypycify(
                [*MYPY_OPTIONS, f"--cache-dir={tmp}/mypy", *sources],
                opt_level="3",
                group_name=GROUP,
                target_dir=f"{tmp}/c",
            )
            cmd = build_ext(Distribution({"name": "scalesim-core", "ext_modules": extensions}))
            cmd.inplace, cmd.build_temp, cmd.build_lib = True, f"{tmp}/obj", f"{tmp}/lib"
            cmd.ensure_finalized()
            cmd.run()
        finally:
            os.chdir(cwd)
    return time.perf_counter() - t


def compiler() -> str | None:
    """The C compiler a build would call (``CC``, else Python's own), where it is installed."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shutil.which(cc.split()[0])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sim.build", description=__doc__.splitlines()[0])
    p.add_argument("--clean", action="store_true", help="remove the compiled modules (the source runs again)")
    p.add_argument(
        "--if-compiler", action="store_true", help="where no C compiler is found, say so and build nothing (CI)"
    )
    args = p.parse_args(argv)
    if args.clean:
        gone = clean()
        print(f"sim.build: removed {len(gone)} compiled files")
        return 0
    if args.if_compiler and not compiler():
        print("sim.build: no C compiler found: nothing built, the pure-Python source runs", file=sys.stderr)
        return 0
    wall = build()
    print(f"sim.build: compiled {len(COMPILED)} modules with mypyc in {wall:.0f} s: {', '.join(COMPILED)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
