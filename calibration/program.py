"""A program's imports, measured in a fresh Python on this machine, as the container-start model's program keys.

``python -m calibration.program MODULE...`` imports the modules in a new interpreter and reports what the import
touched: the distinct files it loaded (every module's compiled or source file, every shared library it mapped:
/proc/self/maps, on Linux), their size, the import's time with its data local, the process's resident memory after
it, and the size of the installed packages those files came from (their site-packages directories), so what share of
the packages the import reads. ``keys`` turns a profile into ``coldstart.program`` settings (models/coldstart.py),
each with where it comes from:

- ``distinct_files``: the files loaded; ``file_ops``: that many times the system calls `import torch` makes per
  distinct file (docs/sources.md §3: 32,302 over 1,335; an assumption for other imports, which ``--file-ops``
  replaces by a count of your own, e.g. from ``strace -f -c``);
- ``read_mib``: the loaded files' bytes (an assumption: a file loaded is read whole; the lazy filesystem fetches a file
  when it is read, docs/sources.md §3);
- ``init_s``: the import's time here (an assumption: this machine's CPU is as fast as the container's);
- ``pages_mib``: the resident memory after the import (docs/sources.md §3: the pages file is the process's memory).

Without a profile (an image's size alone), ``from_packages`` reads the share of the packages an import touches as
Slacker's 6.4% of the pulled data (docs/sources.md §3, containers in general: an assumption for Python packages) and
scales the coldstart-torch preset's files and operations per MiB read to it (an assumption).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

from sim.cli import ArgParser
from sim.scenario import ScenarioError

MIB = 2**20
TORCH_OPS, TORCH_FILES = 32_302, 1_335  # docs/sources.md §3: `import torch`'s system calls over its distinct files
TORCH_READ_MIB = 400.0  # the coldstart-torch preset's read_mib (an assumption there: torch's shared libraries)
SLACKER_SHARE = 0.064  # docs/sources.md §3: Slacker (FAST'16), only 6.4% of the pulled data is read

# run in the fresh interpreter: import the modules, then report every file loaded, the time, the memory
PROBE = r"""
import importlib, json, os, sys, sysconfig, time
t0 = time.perf_counter()
for name in sys.argv[1:]:
    importlib.import_module(name)
took = time.perf_counter() - t0
files = {getattr(m, "__cached__", None) or getattr(m, "__file__", None) for m in list(sys.modules.values())}
try:
    with open("/proc/self/maps") as maps:
        files |= {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
    rss = next(int(x.split()[1]) * 1024 for x in open("/proc/self/status") if x.startswith("VmRSS:"))
except OSError:
    import resource
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
files = sorted(f for f in files if f and os.path.isfile(f))
site = os.path.realpath(sysconfig.get_paths()["purelib"])
tops = {os.path.join(site, os.path.relpath(os.path.realpath(f), site).split(os.sep)[0]) for f in files
        if os.path.realpath(f).startswith(site + os.sep)}
package = sum(os.path.getsize(os.path.join(d, f)) for top in tops if os.path.isdir(top)
              for d, _, fs in os.walk(top) for f in fs if os.path.isfile(os.path.join(d, f)))
in_site = sum(os.path.getsize(f) for f in files if os.path.realpath(f).startswith(site + os.sep))
print(json.dumps({"files": len(files), "bytes": sum(os.path.getsize(f) for f in files), "import_s": took,
                  "rss": rss, "package_bytes": package, "package_read_bytes": in_site}))
"""


@dataclass(frozen=True)
class Profile:
    """What importing ``modules`` touched (``measure``)."""

    modules: tuple[str, ...]
    files: int  # distinct files loaded: modules and shared libraries
    read_mib: float  # their size
    import_s: float  # the import's wall time, its data local
    rss_mib: float  # resident memory after the import
    package_mib: float  # the installed packages (site-packages directories) the loaded files came from
    package_read_mib: float  # of the loaded files, those in those packages

    @property
    def share(self) -> float:
        """The share of the installed packages the import reads."""
        return self.package_read_mib / self.package_mib if self.package_mib else 0.0


def measure(modules: list[str], python: str = sys.executable) -> Profile:
    """Import ``modules`` in a fresh ``python`` and profile it; ScenarioError if the import fails."""
    done = subprocess.run([python, "-c", PROBE, *modules], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ScenarioError(f"import {', '.join(modules)}: failed in {python} ({last})")
    p = json.loads(done.stdout)
    return Profile(
        tuple(modules),
        p["files"],
        p["bytes"] / MIB,
        p["import_s"],
        p["rss"] / MIB,
        p["package_bytes"] / MIB,
        p["package_read_bytes"] / MIB,
    )


def keys(p: Profile, file_ops: int | None = None) -> dict[str, float | int]:
    """The ``coldstart.program`` keys of a profile (the module's docstring says where each comes from)."""
    ops = file_ops if file_ops is not None else round(p.files * TORCH_OPS / TORCH_FILES)
    return {
        "file_ops": ops,
        "distinct_files": p.files,
        "read_mib": round(p.read_mib, 1),
        "init_s": round(p.import_s, 3),
        "pages_mib": round(max(p.rss_mib, 1.0), 1),
    }


def from_packages(package_mib: float, share: float = SLACKER_SHARE) -> dict[str, float | int]:
    """The read keys of a program known only by its packages' size (``package_mib``, e.g. its site-packages): it
    reads ``share`` of them (Slacker's by default), in as many files and operations per MiB as the coldstart-torch
    preset (assumptions, each: measure instead where you can)."""
    read = package_mib * share
    return {
        "file_ops": round(read * TORCH_OPS / TORCH_READ_MIB),
        "distinct_files": round(read * TORCH_FILES / TORCH_READ_MIB),
        "read_mib": round(read, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = ArgParser(
        prog="python -m calibration.program",
        description="Import modules in a fresh Python and print what the import touched, as the coldstart model's "
        "program keys (--set lines).",
    )
    ap.add_argument("modules", nargs="+", help="the modules your Function imports at start, e.g. torch")
    ap.add_argument("--python", default=sys.executable, help="the interpreter to import them in (default: this one)")
    ap.add_argument("--file-ops", type=int, help="the import's file system calls, if you counted them (strace -c)")
    args = ap.parse_args(argv)
    if args.file_ops is not None and args.file_ops < 0:
        ap.error(f"--file-ops: must be >= 0, got {args.file_ops}")
    try:
        p = measure(args.modules, args.python)
    except ScenarioError as e:
        print(e, file=sys.stderr)
        return 2
    print(
        f"import {', '.join(p.modules)}: {p.files:,} files, {p.read_mib:,.1f} MiB loaded, {p.import_s:.3f} s, "
        f"{p.rss_mib:,.1f} MiB resident; its packages {p.package_mib:,.1f} MiB, {p.share:.1%} of them loaded"
    )
    for k, v in keys(p, args.file_ops).items():
        print(f"--set coldstart.program.{k}={v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
