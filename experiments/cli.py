"""What every command shares: loading a scenario from the command line, running it, and exit codes
(docs/explanation/robustness.md).

Exit codes: 0 success; 2 bad input, one line on stderr naming the key or file; 130 interrupted (Ctrl-C), one line;
1 anything else.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import math
import os
import signal
import stat
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import numpy as np

from models.registry import MODELS, model_of
from sim import engine, files
from sim.model import Estimate, InvariantViolated, Parts
from sim.processes import (
    INTERRUPTED,
    WorkerDied,
    detach_worker,
    exiting_on_interrupt,
    restore_interrupt,
    sigint_held,
)
from sim.scenario import ScenarioError, build, resolve

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


def build_scenario(tree: dict, base_dir: Path | None = None) -> Any:
    """A raw scenario tree validated into its model's schema."""
    return build(model_of(tree).schema, tree, base_dir=base_dir)


def load_scenario(name: str, sets: list[str] = (), params: list[str] = ()) -> Any:
    """A preset name or scenario file, then parameter files, then ``--set`` overrides, validated."""
    tree, base = resolve(name, sets, params)
    return build_scenario(tree, base)


def check_out(path: Path, folder: bool = False, inside: Iterable[str] = ()) -> Path:
    """An output path checked before any work starts, the one check every command's writes go through: a path of
    legal length (each name within the file system's limit), its folder created if missing and writable (a file is
    created and removed there to be sure: /proc passes os.access), and the target a regular file or absent for a file
    output (not a folder, a device or a named pipe, which would block the writer), a folder for a folder output, and
    each of ``inside`` (the files a folder output will hold, or glob patterns of them: ``*.png``) a regular file or
    absent. Bad input (exit 2) otherwise."""
    where = path if folder else path.parent
    text = str(path)
    if len(text) > 1000:
        raise ScenarioError(f"--out: a path of {len(text):,} characters is too long")
    if "\x00" in text:
        raise ScenarioError(f"--out {text!r}: a path cannot hold a NUL character")
    for name in path.parts:
        if len(os.fsencode(name)) > NAME_MAX:
            raise ScenarioError(
                f"--out {files.shown(path)}: a name of {len(name):,} characters, longer than a file name can be "
                f"({NAME_MAX})"
            )
    mode = _mode(path)
    if folder and mode is not None and not stat.S_ISDIR(mode):
        raise ScenarioError(f"--out {path}: is a file, not a folder")
    if not folder and mode is not None and stat.S_ISDIR(mode):
        raise ScenarioError(f"--out {path}: is a folder, not a file")
    targets = [path] if not folder else [t for name in inside for t in _inside(path, name)]
    for target in targets:
        mode = _mode(target)
        if mode is not None and not stat.S_ISREG(mode):
            raise ScenarioError(f"--out {target}: {_kind(mode)}, not a regular file to write")
        if mode is not None and not os.access(target, os.W_OK):
            raise ScenarioError(f"--out {target}: is not writable")
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ScenarioError(f"--out {path}: cannot create {where}: {e.strerror}") from None
    if not os.access(where, os.W_OK):
        raise ScenarioError(f"--out {path}: {where} is not writable")
    try:  # os.access says yes to root for /proc and a read-only file system: a file written and removed says
        fd, probe = tempfile.mkstemp(dir=where, prefix=".scalesim-out-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ScenarioError(f"--out {path}: cannot write in {where}: {e.strerror}") from None
    return path


NAME_MAX = 255  # bytes in one file name (Linux, macOS)


def _mode(path: Path) -> int | None:
    """``path``'s file type and mode (following links), None if absent; bad input if it cannot be looked up."""
    try:
        return os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:  # a name too long, a loop of links, a folder that cannot be searched
        raise ScenarioError(f"--out {files.shown(path)}: {e.strerror}") from None


def _inside(folder: Path, name: str) -> list[Path]:
    """The files of ``folder`` a folder output's ``name`` (a file's name or a glob pattern) means; none if absent."""
    if not any(c in name for c in "*?["):
        return [folder / name]
    try:
        return list(folder.glob(name)) if _mode(folder) is not None else []
    except OSError as e:
        raise ScenarioError(f"--out {files.shown(folder)}: {e.strerror}") from None


def _kind(mode: int) -> str:
    return "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"


BUDGET_ENV = "SCALESIM_BUDGET"  # a factor on every budget (a run's size, events, memory; a sweep's)
MEMORY_BUDGET = 2 * 2**30  # bytes a run may hold (its estimate before, its process's resident memory as it runs)
EVENT_FLOOR = 2**19  # events any run may process, however small its estimate (about 3 s of wall time)


def budget_factor() -> float:
    """SCALESIM_BUDGET, the factor on every budget (default 1); bad input unless a positive number."""
    text = os.environ.get(BUDGET_ENV, "1")
    try:
        factor = float(text)
    except ValueError:
        factor = math.nan
    if not (math.isfinite(factor) and factor > 0):
        raise ScenarioError(f"{BUDGET_ENV}: expected a positive number, got {text!r}")
    return factor


def check_size(sc: Any) -> engine.Budget:
    """Refuse, before it starts, a run larger than its model's budget (times SCALESIM_BUDGET) in size, events or
    memory, by its estimate (sim/model.py ``Estimate``): bad input, exit 2. Returns the budget it runs under: its
    estimated events (at least EVENT_FLOOR) and MEMORY_BUDGET, each times SCALESIM_BUDGET where that is above 1 (a
    factor below 1 shrinks what may start, not what a run that started may use)."""
    model = MODELS[sc.model]
    factor = budget_factor()
    raise_how = f"raise the budget with {BUDGET_ENV}=<factor> (e.g. {BUDGET_ENV}=10)"
    est = model.estimate(sc) if model.estimate is not None else Estimate({model.unit: (model.size(sc), "")})
    size = Estimate.total(est.size)
    _refuse("run size", est.size, model.budget * factor, model.unit, raise_how)
    events = Estimate.total(est.events) or model.events_per_unit * size
    _refuse("run events", est.events, model.events_per_unit * model.budget * factor, "events", raise_how)
    _refuse("run memory", est.memory, MEMORY_BUDGET * factor, "bytes", raise_how)
    grow = max(1.0, factor)
    limit = max(EVENT_FLOOR, events) * grow
    _refuse("events each simulated second", est.per_second, limit, "events", raise_how, "this run's whole budget")
    return engine.Budget(
        limit,
        MEMORY_BUDGET * grow,
        model.grows,
        size=f"estimated at {size:.3g} {model.unit}",
        raise_how=f"raise {BUDGET_ENV}=<factor>",
    )


def _refuse(what: str, parts: Parts, budget: float, unit: str, raise_how: str, of: str = "the budget") -> None:
    """Bad input if the parts of an estimate add up to more than ``budget`` (``of``: what that is), saying by how
    much and, when one part is most of it, which and how to make it smaller."""
    total = Estimate.total(parts)
    if total <= budget:  # (NaN or inf: refused)
        return
    part, (amount, how) = max(parts.items(), key=lambda kv: kv[1][0])
    scale, unit = (2**30, "GiB") if unit == "bytes" else (1, unit)
    a, b = _apart(total / scale, budget / scale)
    mostly = f" (mostly {part}: {_apart(amount / scale, 0)[0]})" if part != unit and amount > 0.5 * total else ""
    raise engine.OverBudget(
        f"{what}: about {a} {unit}{mostly}, more than {of} of {b} {unit}; "
        f"{how if mostly and how else 'make the run smaller'}, or {raise_how}"
    )


def _apart(a: float, b: float) -> tuple[str, str]:
    """Two amounts to as few significant digits as tell them apart (3 at least): 1e+07 and 1.00002e+07."""
    for digits in range(3, 17):
        x, y = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if x != y:
            return x, y
    return x, y


MAX_SEED = 2**63 - 1  # numpy's SeedSequence takes any non-negative integer; a results table keeps int64


class RunProgress:
    """A long single run's progress on stderr (a tqdm bar of simulated seconds, with simulated time per wall
    second), shown once the run has taken ``after_s`` of wall time, and only on a terminal; the engine's hook."""

    def __init__(self, after_s: float = 5.0) -> None:
        self.after_s = after_s
        self.t0 = time.perf_counter()
        self.bar = None

    def __call__(self, now: float, until: float) -> None:
        if self.bar is None:
            if time.perf_counter() - self.t0 < self.after_s or not sys.stderr.isatty():
                return
            from tqdm import tqdm

            total = until if math.isfinite(until) else None
            self.bar = tqdm(total=total, unit="sim s", desc="simulated", leave=False, file=sys.stderr)
        self.bar.update(now - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_scenario(sc: Any, seed: int = 0, series: dict | None = None, records: bool = False, jobs: int = 1) -> dict:
    """One run of a validated scenario by its model's run function, within its budget (``jobs``: processes
    for its independent parts, if it has any); its metrics are exactly those its model declares for it
    (sim/metrics.py: an undeclared one is an error), in their declared order."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ScenarioError(f"--seed {seed}: must be a whole number from 0 to {MAX_SEED}")
    why = MODELS[sc.model].unmeasurable
    why = why(sc) if why else None  # a run that could measure nothing (a window no call fits in) is refused
    if why:
        raise ScenarioError(why)
    budget = check_size(sc)
    model = MODELS[sc.model]
    outer, engine.BUDGET = engine.BUDGET, budget  # checked as it runs (sim/engine.py)
    try:
        metrics = model.run(sc, seed=seed, series=series, records=records, jobs=jobs)
    finally:
        engine.BUDGET = outer
    declared = model.metrics(sc)
    declared.check(metrics, f"model {sc.model}")
    return declared.ordered(metrics)


def warn_extrapolated(extrapolated: list[str], where: str = "") -> None:
    """One line on stderr when a run left the envelope its parameters were calibrated on (its ``extrapolated``)."""
    if extrapolated:
        print(f"warning: extrapolated{where}: {'; '.join(extrapolated)}", file=sys.stderr)


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


# --- worker processes --------------------------------------------------------------------------------------------


def cap_jobs(prog: str, jobs: int, runs: int) -> int:
    """``jobs`` capped by the runs to do and the cores, saying so on stderr when capped (at least 1)."""
    cap = min(jobs, runs, os.cpu_count() or 1)
    if 1 <= cap < jobs:
        print(f"{prog}: --jobs {jobs} capped at {cap} (runs to do and cores)", file=sys.stderr)
    return max(1, cap)


WORKER_DIED = (WorkerDied, BrokenProcessPool)  # a run's worker process ended without answering: exit 1, one line


class WorkerPool(ProcessPoolExecutor):
    """A ProcessPoolExecutor of detached workers (sim/processes.py: they die with this process, SIGKILL included,
    ignore Ctrl-C and hold none of its pipes) whose shutdown does not wait for work still queued or running (after
    an error or a Ctrl-C here): the workers are stopped (SIGTERM) instead."""

    _live: ClassVar[weakref.WeakSet[WorkerPool]] = weakref.WeakSet()

    def __init__(self, jobs: int) -> None:
        super().__init__(max_workers=jobs, initializer=detach_worker, initargs=(os.getpid(),))
        WorkerPool._live.add(self)

    def _spawn_process(self) -> None:  # (concurrent.futures: each worker is started here)
        with sigint_held():
            super()._spawn_process()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if getattr(self, "_pending_work_items", None):
            self.stop()
        super().shutdown(wait=wait, cancel_futures=cancel_futures)

    def stop(self) -> None:
        """Cancel what is queued and end the workers now, not once their runs are done."""
        processes = list((getattr(self, "_processes", None) or {}).values())
        super().shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                proc.terminate()
        for proc in processes:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                proc.join(5)

    @classmethod
    def stop_all(cls) -> None:
        """Stop every pool still open (a Ctrl-C or a dead worker ends the command: no pool may keep it waiting)."""
        for pool in list(cls._live):
            pool.stop()


def process_pool(jobs: int) -> WorkerPool:
    """A pool of ``jobs`` worker processes that end when this process dies, SIGKILL included (``WorkerPool``)."""
    return WorkerPool(jobs)


def die_with_parent(parent: int) -> None:
    """A child process's first act that keeps its own pipes (calibration/clients.py; a pool's workers are detached
    further, ``WorkerPool``): ask Linux to kill it when ``parent`` dies, SIGKILL included (prctl
    PR_SET_PDEATHSIG). Elsewhere: nothing."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the sweep died before the request took effect
        os._exit(1)
