"""What every command shares that knows no model: its arguments (``ArgParser``, number and ``--out`` flags,
``--set``), its exit codes (``main_guard``), numbers and errors as people read them, and a long run's progress bar.

Exit codes: 0 success; 2 bad input, one line on stderr naming the key or file; 130 interrupted (Ctrl-C), one line;
1 anything else. What needs a model (loading a scenario, running it) is models/runs.py.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from sim.errors import ScenarioError
from sim.model import InvariantViolated
from sim.pools import WORKER_DIED, WorkerPool
from sim.processes import INTERRUPTED, WorkerDied, exiting_on_interrupt, restore_interrupt

BAD_INPUT = 2


class ArgParser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2 like every other bad input, and a flag is only its whole
    name (no abbreviations: ``--seed`` is not taken for ``--seeds``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})

    def add_argument(self, *args: Any, **kwargs: Any) -> Any:
        """A number flag reads ASCII numbers only: ``int("１")`` is 1 to Python, but a scenario file's parser (TOML)
        refuses it, and the two would disagree."""
        if kwargs.get("type") in (int, float):
            kwargs["type"] = ascii_number(kwargs["type"])
        return super().add_argument(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {one_line(message)}", file=sys.stderr)
        sys.exit(BAD_INPUT)


def ascii_number(cast: type) -> Callable[[str], Any]:
    """``cast`` (int or float) of ASCII text of at most 40 characters; argparse names the flag and the value when
    it raises."""

    def parse(text: str) -> Any:
        if not text.isascii() or len(text) > 40:  # (a number of hundreds of digits fits no float)
            raise ValueError(text)
        return cast(text)

    parse.__name__ = cast.__name__  # (argparse says "invalid int value")
    return parse


def out_path(text: str) -> Path:
    """``--out``'s value as a path: never empty (``Path("")`` is the current folder, where a sweep's results or the
    docs' pages would land unasked)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path: name the file or folder to write")
    return Path(text)


def add_set_option(p: argparse.ArgumentParser, help: str = "override a scenario key (repeatable)") -> None:
    """``--set KEY=VALUE``, repeatable, into ``args.sets``: the same on every command."""
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help=help)


def human(v: Any, unit: str = "") -> str:
    """A number for people, never in e-notation: 21,370 (not 2.137e+04); 12.3; 0.583; 0.00042; 0 for float noise;
    by ``unit``: bytes as 25.2 GB, dollars as $4.14 (and $4.14/h), counts by kind as "a 3, b 5"."""
    if isinstance(v, dict):
        return ", ".join(f"{k} {human(x)}" for k, x in v.items()) or "none"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v)) or "none"
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return "" if v is None else str(v)
    if isinstance(v, float) and math.isnan(v):
        return ""
    if unit == "bytes" and abs(v) >= 1000:
        for size, name in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
            if abs(v) >= size:
                return f"{v / size:.3g} {name}"
    if unit.startswith("$"):
        money = f"${v:,.2f}" if abs(v) >= 1 else f"${human(v)}"
        return money + unit[1:]
    if abs(v) >= 100 or float(v).is_integer():
        return f"{v:,.0f}"
    if abs(v) < 1e-9:
        return "0"
    return np.format_float_positional(v, precision=3, unique=False, fractional=False, trim="-")


def one_line(message: str) -> str:
    """An error message as one line: what the user typed may hold line breaks or other control characters (form
    feed, NUL, ...), the message never does: they are escaped as Python writes them."""
    if message.isprintable():
        return message
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def main_guard(prog: str, fn: Callable[[], int]) -> int:
    """Run ``fn``; turn bad input into one line and exit 2, a dead worker process into one line and exit 1, and
    Ctrl-C into one line and exit 130 ("interrupted", then the notes a command added to the exception with
    ``add_note``, e.g. where its results so far are kept), once the work has unwound (workers stopped); and a fault
    of the machine (a full disk, stdout on /dev/full: an OSError) into one line and exit 1."""
    restore_interrupt()
    for stream in (sys.stdout, sys.stderr):  # a terminal that cannot show ≤ or × gets \u2264, not a traceback
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="backslashreplace")
    try:
        code = fn()
        sys.stdout.flush()  # what it printed reaches its reader here, where a failure is still one line
        return code
    except ScenarioError as e:
        print(f"{prog}: {one_line(str(e))}", file=sys.stderr)
        return BAD_INPUT
    except InvariantViolated as e:  # a bug in the model: say so in one line, exit 1
        print(f"{prog}: {one_line(str(e))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        exiting_on_interrupt()  # a second Ctrl-C does not cut the clean-up short
        WorkerPool.stop_all()
        notes = "".join(f"; {n}" for n in getattr(e, "__notes__", ()))
        start = "\n" if sys.stderr.isatty() else ""  # off the line of the terminal's ^C (and of a progress bar)
        print(f"{start}{prog}: interrupted{one_line(notes)}", file=sys.stderr)
        return INTERRUPTED
    except WORKER_DIED as e:
        WorkerPool.stop_all()
        notes = "".join(f"; {n}" for n in getattr(e, "__notes__", ()))
        why = str(e) if isinstance(e, WorkerDied) else "a worker process died (killed, or out of memory)"
        print(f"{prog}: {one_line(why + notes)}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly, as a Unix tool does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # the machine, not the input: a full disk, a write to /dev/full, an I/O error
        WorkerPool.stop_all()
        where = f"{e.filename}: " if e.filename else "writing its output: " if e.errno else ""
        print(f"{prog}: {one_line(where + (e.strerror or str(e)))}", file=sys.stderr)
        with contextlib.suppress(OSError):  # what is left in stdout's buffer cannot go out either
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def cap_jobs(prog: str, jobs: int, runs: int) -> int:
    """``jobs`` capped by the runs to do and the cores, saying so on stderr when capped (at least 1)."""
    cap = min(jobs, runs, os.cpu_count() or 1)
    if 1 <= cap < jobs:
        print(f"{prog}: --jobs {jobs} capped at {cap} (runs to do and cores)", file=sys.stderr)
    return max(1, cap)


_progress_file: Any = None  # where bars go instead of stderr (``progress_to``)


def progress_bar(**kwargs: Any) -> Any:
    """A command's progress bar (tqdm.auto: a widget in a notebook, else text on stderr, or where ``progress_to``
    sends it), shown only where someone watches: in a notebook, or on a terminal (tqdm's ``disable=None``)."""
    from tqdm.auto import tqdm

    return tqdm(**{"disable": None, "file": _progress_file or sys.stderr, **kwargs})


@contextlib.contextmanager
def progress_to(stream: Any) -> Iterator[None]:
    """Bars go to ``stream`` meanwhile: the Python API's caller's stderr, while it captures a command's own."""
    global _progress_file
    before, _progress_file = _progress_file, stream
    try:
        yield
    finally:
        _progress_file = before


class RunProgress:
    """A long single run's progress (``progress_bar``: a bar of simulated seconds, with simulated time per wall
    second), shown once the run has taken ``after_s`` of wall time, on a terminal or in a notebook; a run guard's
    ``progress`` (sim/guard.py)."""

    def __init__(self, after_s: float = 5.0) -> None:
        self.after_s = after_s
        self.t0 = time.perf_counter()
        self.bar = None

    def __call__(self, now: float, until: float) -> None:
        if self.bar is None:
            if time.perf_counter() - self.t0 < self.after_s:
                return
            total = until if math.isfinite(until) else None
            self.bar = progress_bar(total=total, unit="sim s", desc="simulated", leave=False)
        self.bar.update(now - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
