"""Runs kept on disk: a run's metrics are a function of its scenario, its seed, the files the scenario reads and the
code (docs/explanation/robustness.md, "Reproducible"), so a command that makes many runs (``--uncertainty``) keeps
each one's metrics as it ends, and the same runs asked for again (the command again, or after a Ctrl-C) are read
back instead of run: the same numbers, bit for bit, wall seconds included (they are the run's own).

A run's key hashes the code (every ``.py`` of the project's packages, and the versions of Python and numpy, which
draw the numbers: ``fingerprint``), the scenario as it resolved (its ``repr``: every value, a distribution's with its
values), the contents of the files it names (``path`` keys: a trace that changed is another run), the seed and the
budgets' factor (``SCALESIM_BUDGET``: a run stopped past its budget of events is kept as such, and read back as
such under the same factor). A run stopped by this machine's memory is not kept. ``SCALESIM_CACHE`` names
the folder (default ``$XDG_CACHE_HOME/scalesim/runs``, else ``~/.cache/scalesim/runs``); ``off`` keeps nothing. A
folder that cannot be written is said once on stderr, and the runs go on without it.

The folder is bounded: after a command's runs (``prune``), the runs least recently made or read back go until the
rest take at most ``KEEP_BYTES`` (a run is a few kilobytes: tens of thousands of runs are kept). A run of another
code's key is never read again, so edits to the code leave runs that age out this way; the command's own runs are
never the ones removed.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from sim import files
from sim.guard import BUDGET_ENV

CACHE_ENV = "SCALESIM_CACHE"
OFF = ("off", "0", "")
PACKAGES = ("sim", "models", "experiments", "calibration")  # the project's code: what a run's numbers come from
KEEP_BYTES = 64 * 2**20  # what the kept runs may take on disk (prune): a run is about 4 KB
CLOCK_SLACK_S = 2.0  # a file's time may lag the clock's (the kernel's coarse timestamps): the command's own are newer
_ROOT = Path(__file__).resolve().parent.parent
_warned: list[str] = []


def folder() -> Path | None:
    """Where runs are kept (``SCALESIM_CACHE``), None if off."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in OFF else Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scalesim" / "runs"


@functools.cache
def fingerprint() -> str:
    """The code's hash: every ``.py`` of the project's packages (by path and content), Python's and numpy's versions."""
    import numpy

    h = hashlib.sha256(f"{sys.version_info[:2]} numpy {numpy.__version__}".encode())
    for package in PACKAGES:
        for path in sorted((_ROOT / package).rglob("*.py")):
            h.update(str(path.relative_to(_ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _paths(value: Any) -> list[str]:
    """The files a resolved scenario names: its ``path`` fields (a trace's CSV; an empirical distribution carries its
    values, in its repr), at any depth."""
    if not dataclasses.is_dataclass(value):
        return []
    out = []
    for f in dataclasses.fields(value):
        v = getattr(value, f.name)
        if f.name == "path" and isinstance(v, str) and v:
            out.append(v)
        else:
            out.extend(_paths(v))
    return out


def key(scenario: Any, seed: int) -> str:
    """The run's key: the code, the scenario, the seed, the budgets' factor and the files the scenario names (their
    contents)."""
    h = hashlib.sha256(f"{fingerprint()}\n{scenario!r}\n{seed}\n{os.environ.get(BUDGET_ENV, '')}".encode())
    for path in _paths(scenario):
        h.update(f"\n{path}\n".encode())
        try:
            st = os.stat(path)
            h.update(_content(path, st.st_mtime_ns, st.st_size))
        except OSError:
            h.update(b"missing")
    return h.hexdigest()


@functools.lru_cache(maxsize=64)
def _content(path: str, mtime_ns: int, size: int) -> bytes:
    """A file's content hash, once per version of it (the runs of one envelope name the same trace)."""
    return hashlib.sha256(Path(path).read_bytes()).digest()


def load(k: str) -> dict | None:
    """The kept run of key ``k``, or None (none kept, or unreadable: it runs again)."""
    where = folder()
    if where is None:
        return None
    path = where / f"{k}.json"
    try:
        metrics = json.loads(path.read_text())
        os.utime(path)  # read back: recently used (prune keeps it)
    except (OSError, ValueError):
        return None
    return metrics


def store(k: str, metrics: dict) -> None:
    """Keep a run's metrics (or why it stopped past its budget) under key ``k``, written whole or not at all; one that
    cannot be kept (a folder not writable, a value JSON does not hold) is said once and not kept."""
    where = folder()
    if where is None:
        return
    try:
        text = json.dumps(metrics)
        where.mkdir(parents=True, exist_ok=True)
        files.write_text(where / f"{k}.json", text)
    except (OSError, TypeError, ValueError) as e:
        if not _warned:
            _warned.append(str(e))
            print(f"warning: {CACHE_ENV}: runs are not kept in {where}: {e}", file=sys.stderr)


def prune(since: float, keep: int | None = None) -> int:
    """Remove the kept runs least recently made or read back (by their files' modification times) until the rest take
    at most ``keep`` bytes (default ``KEEP_BYTES``), never one made or read back at or after ``since`` (a time.time():
    the command's own). Returns how many went. Whatever cannot be listed or removed stays (a folder shared with
    another command)."""
    where = folder()
    if where is None:
        return 0
    runs = []
    try:
        with os.scandir(where) as entries:
            for e in entries:
                if e.name.endswith(".json") and e.is_file(follow_symlinks=False):
                    st = e.stat(follow_symlinks=False)
                    runs.append((st.st_mtime, st.st_size, e.path))
    except OSError:
        return 0
    keep = KEEP_BYTES if keep is None else keep
    total = sum(size for _, size, _ in runs)
    gone = 0
    for mtime, size, path in sorted(runs):
        if total <= keep or mtime >= since - CLOCK_SLACK_S:
            break
        try:
            os.remove(path)
        except OSError:
            continue
        total -= size
        gone += 1
    return gone
