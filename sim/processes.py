"""Worker processes that end with the process that started them, and Ctrl-C as one line.

A worker (a run's parts, models/inputs/parts.py; a pool of runs, sim/pools.py) begins with ``detach_worker``: it dies
with its parent, SIGKILL included (Linux: ``prctl(PR_SET_PDEATHSIG)``; elsewhere a watchdog thread on the parent's pid);
it ignores SIGINT, which a terminal's Ctrl-C sends to the whole process group: the parent stops its workers; and its
stdin, stdout and stderr are ``/dev/null``, so it holds none of the caller's pipes (whoever reads a command's output
sees its end when the command dies) and it reports to its parent over its own pipe only. Workers are started with SIGINT
blocked (``sigint_held``), so a Ctrl-C between the fork and ``detach_worker`` cannot reach them either.

``exit_on_interrupt`` makes a Ctrl-C while a command loads its modules one line and exit 130 (nothing has started yet
that needs stopping); sim/cli.py ``main_guard`` then restores Python's own handler, so that a Ctrl-C during the work
unwinds (workers stopped, files closed) before its one line.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

INTERRUPTED = 130  # the exit code of a command ended by Ctrl-C (128 + SIGINT), as a shell reports it
WATCHDOG_S = 0.5  # how often a worker without PR_SET_PDEATHSIG looks for its parent
PR_SET_PDEATHSIG = 1
_COMMAND = False  # this interpreter runs one of the project's commands (``exit_on_interrupt``)


class WorkerDied(RuntimeError):
    """A worker process ended without answering (killed, or out of memory): one line, exit 1."""


def how_ended(exitcode: int | None) -> str:
    """A process's end in words: "killed by SIGKILL", "exit code 1"."""
    if exitcode is None:
        return "ended"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


def detach_worker(parent: int) -> None:
    """A worker process's first act (``parent``: the pid of the process that started it): die with the parent,
    ignore SIGINT, and put stdin, stdout and stderr on /dev/null (the module docstring)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # before anything is flushed: what the parent had buffered at the fork is not written twice
        with contextlib.suppress(OSError):
            os.dup2(devnull, fd)
    os.close(devnull)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(AttributeError, OSError):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # (held while it was started)
    if not _death_signal():
        threading.Thread(target=_watch, args=(parent,), name="parent-watchdog", daemon=True).start()
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def child_preexec() -> None:
    """A ``subprocess`` child's ``preexec_fn`` (a program this process runs and waits for): SIGINT ignored (a
    Python child then installs no KeyboardInterrupt) and, on Linux, SIGKILL when this process dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _death_signal()


def die_with_parent(parent: int) -> None:
    """A child process's first act that keeps its own pipes (calibration/clients.py; a pool's workers are detached
    further, ``WorkerPool``): ask Linux to kill it when ``parent`` dies, SIGKILL included (PR_SET_PDEATHSIG).
    Elsewhere: nothing."""
    if _death_signal() and os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _death_signal() -> bool:
    """Ask Linux to SIGKILL this process when its parent dies; False where that cannot be asked."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    """A worker's watchdog where there is no PR_SET_PDEATHSIG: end the worker once its parent is gone."""
    while os.getppid() == parent:
        time.sleep(WATCHDOG_S)
    os._exit(1)


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """Ctrl-C held off while workers are started: SIGINT is blocked in this thread, so a child (or thread) started
    meanwhile inherits the block (a worker unblocks it once it ignores SIGINT: ``detach_worker``); and in the main
    thread a SIGINT delivered meanwhile to another thread is only noted, then handled as usual (KeyboardInterrupt)
    at the end, once the workers started are known to whoever stops them."""
    main = threading.current_thread() is threading.main_thread()
    noted: list[int] = []
    old_handler = signal.getsignal(signal.SIGINT) if main else None
    if main and callable(old_handler):
        signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    try:
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    except (AttributeError, OSError):  # no POSIX signal masks here
        old_mask = None
    try:
        yield
    finally:
        if old_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        if main and callable(old_handler):
            signal.signal(signal.SIGINT, old_handler)
            if noted:
                old_handler(signal.SIGINT, None)


def exit_on_interrupt() -> None:
    """While a command (``python -m PACKAGE.NAME``) loads: a Ctrl-C ends it with one line and exit 130. Called from
    the package's ``__init__`` only when the interpreter is locating the module to run (``sys.argv[0]`` is "-m"
    then), so importing the package elsewhere changes nothing."""
    global _COMMAND
    if sys.argv[:1] != ["-m"] or threading.current_thread() is not threading.main_thread():
        return
    _COMMAND = True
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, _interrupted_while_loading)


def _interrupted_while_loading(signum: int, frame: object) -> None:
    args = sys.orig_argv
    name = args[args.index("-m") + 1] if "-m" in args[:-1] else "python"
    os.write(2, f"{name}: interrupted\n".encode(errors="replace"))
    os._exit(INTERRUPTED)


def exiting_on_interrupt() -> None:
    """A command ending after a Ctrl-C: a second Ctrl-C is ignored, so the clean-up left for its exit (stopping a
    cluster, joining threads) runs on without a traceback. Nothing when not a command (a test, a notebook)."""
    if _COMMAND and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def restore_interrupt() -> None:
    """Python's own Ctrl-C (KeyboardInterrupt) again, if ``exit_on_interrupt`` had replaced it."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is (
        _interrupted_while_loading
    ):
        signal.signal(signal.SIGINT, signal.default_int_handler)
