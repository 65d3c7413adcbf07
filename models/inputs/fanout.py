"""A run's parts on worker processes: contiguous blocks of parts, one forked worker each, in the parts' two phases
over a pipe (models/inputs/parts.py says what a part and its phases are).

A worker runs its block's first phase and sends the parts' ends (telling each part as it is built), waits for the
run's end, runs the second phase and sends the parts' outcomes. Each worker dies with the process that started it,
leaves Ctrl-C to it and holds none of its pipes but its own (sim/processes.py); a worker that ends without answering
is one line (``WorkerDied``), and an error in a worker is raised again here (a ``ScenarioError`` as such).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Generator
from multiprocessing.connection import Connection, wait
from typing import Any

from sim.processes import WorkerDied, detach_worker, how_ended, sigint_held
from sim.scenario import ScenarioError

# the parts of a block in two phases: given the block and what to tell as each part is built, a generator that yields
# the parts' ends, is sent the run's end and yields the parts' outcomes (parts.py ``_phases``)
Phases = Callable[[range, Callable[[int], None]], Generator[list, Any, None]]


def on_processes(phases: Phases, n: int, jobs: int, built: Callable[[int], None]) -> tuple[list, Callable[[Any], list]]:
    """The ``n`` parts spread over ``jobs`` worker processes (forked), a contiguous block each: their ends, in part
    order, and a function that sends the run's end and returns every part's outcome, in part order. ``built(i)`` is
    told as part i finishes its first phase."""
    jobs = min(jobs, n)
    blocks = [range(n * j // jobs, n * (j + 1) // jobs) for j in range(jobs)]
    ctx = multiprocessing.get_context("fork")
    workers: list[tuple[multiprocessing.Process, Connection]] = []
    try:
        for block in blocks:
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(there, os.getpid(), phases, block), daemon=True)
            with sigint_held():  # until the worker ignores it (sim/processes.py)
                proc.start()
            there.close()
            workers.append((proc, here))
        ends: dict[int, list] = {}
        while len(ends) < len(workers):
            for conn in wait([c for j, (_, c) in enumerate(workers) if j not in ends]):
                j = next(j for j, (_, c) in enumerate(workers) if c is conn)
                msg = _receive(*workers[j])
                if msg[0] == "built":
                    built(msg[1])
                else:
                    ends[j] = msg[1]
    except BaseException:
        _stop(workers)
        raise

    def finish(end: Any) -> list:
        try:
            for proc, conn in workers:
                try:
                    conn.send(end)
                except OSError:  # its end of the pipe is gone: the worker died
                    _receive(proc, conn)
            outcomes = [o for proc, conn in workers for o in _receive(proc, conn)[1]]
        finally:
            _stop(workers)
        return outcomes

    return [e for j in range(len(workers)) for e in ends[j]], finish


def _receive(proc: multiprocessing.Process, conn: Connection) -> tuple:
    """The next message of worker ``proc``; WorkerDied (one line) if it ended without one."""
    try:
        msg = conn.recv()
    except (EOFError, OSError):
        proc.join(5)
        raise WorkerDied(f"a worker process of the run's parts died ({how_ended(proc.exitcode)})") from None
    if msg[0] == "error":
        _, kind, text, bad_input = msg
        raise (ScenarioError(text) if bad_input else RuntimeError(f"{kind}: {text}"))
    return msg


def _stop(workers: list) -> None:
    for proc, conn in workers:
        conn.close()
        if proc.is_alive():
            proc.terminate()
        proc.join()


def _worker(conn: Connection, parent: int, phases: Phases, block: range) -> None:
    """A worker process: the parts of ``block``, in two phases, over the pipe ``conn``; it dies with ``parent``,
    leaves Ctrl-C to it and holds none of its pipes but ``conn`` (sim/processes.py)."""
    detach_worker(parent)
    try:
        steps = phases(block, lambda i: conn.send(("built", i)))
        conn.send(("ends", next(steps)))
        conn.send(("outcomes", steps.send(conn.recv())))
    except BaseException as e:
        conn.send(("error", type(e).__name__, str(e), isinstance(e, ScenarioError)))
    finally:
        conn.close()
