"""Per-call records in columnar form (``CallLog``): one row per input (a call, or a batched chunk of ``items`` calls).

While a run goes, ``CallLog`` holds the inputs in flight; an input that is back is folded into the run's
``CallSummary`` (models/inputs/summary.py: in chunks, by numpy) and its row is reused, so memory follows what is in
flight, not what has finished, unless the records are asked for (``keep``).
"""

from __future__ import annotations

import math
from array import array
from typing import Any, ClassVar

import numpy as np
from mypy_extensions import mypyc_attr

from models.inputs.summary import CallSummary, Window
from sim.stats import NAN

ALWAYS = Window(0.0, math.inf)  # a window that holds every call
# An input's id (its row, an int) and a time (a float) as the per-call path hands them on: typed Any so that the
# compiled core (sim/build.py) passes the Python object along; typed int or float, each compiled function it goes
# through would unbox it and box it again, a new object each time (docs/explanation/speed.md, "The compiled core")
Row = Any
Time = Any


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled (sim.build), subclassed by uncompiled code
class CallLog:
    """Columns of the per-input records; an input's id is its row while it is out.

    Dense columns are appended once per row (times not yet known are NaN; tries 1 until retried, dense because a
    retry storm retries every call out); what most inputs share is kept sparse (an input's items when not 1, its
    failure kind). ``close(call)`` is told when an input is back for good: its row is folded into ``summary`` and,
    unless ``keep``, reset (in bulk, with the rows folded with it) and reused by a later input.
    """

    CHUNK: ClassVar[int] = 1 << 15  # rows folded into the summary at a time

    def __init__(self, window: Window = ALWAYS, keep: bool = False) -> None:
        # raw machine numbers (array.array), not lists of Python objects
        self.client = array("q")
        self.work = array("d")  # the input's own work (a chunk's slowest item)
        self.issued = array("d")  # first attempt
        self.started = array("d")  # start on a container (NaN: never started)
        self.finished = array("d")  # back at the caller, success or final failure (NaN: still out)
        self.initial = bytearray()  # 1: in flight at the start (issued while ``starting``)
        self.items: dict[int, int] = {}  # calls carried by a batched input (absent: 1)
        self.kind: dict[int, str] = {}  # rejection or failure kind (absent: success)
        self.attempts = array("q")  # tries (1: the first)
        self.starting = False  # the load is issuing the calls in flight at the start
        self.keep = keep
        self.summary = CallSummary(window)
        self._free: list[int] = []  # rows of inputs that are back, to reuse
        # rows a caller no longer waits for (clients.timeout_s) that the Function still holds: never folded into the
        # summary (no call of the callers'), reused once the Function is done with them (``discard``)
        self.orphans: set[int] = set()
        self._closed: list[int] = []  # rows of inputs back, not yet folded into the summary
        # ``close(call)``: the input is back for good (``finished`` is set); it is folded into the summary with the
        # first CHUNK rows closed after the last fold, when a new row is wanted or the run ends (the same chunks,
        # in the same order, as folding each as it fills: the numbers do not depend on when)
        self.close = self._closed.append

    def new(self, client: int, now: Time, work: Time) -> Row:
        free = self._free
        if not free and len(self._closed) >= self.CHUNK:
            self._fold()
        if free:  # a row folded in: client 0, not started, not back, not initial (_fold_rows reset them)
            call = free.pop()
            if client:
                self.client[call] = client
            self.work[call] = work
            self.issued[call] = now
            if self.starting:
                self.initial[call] = 1
            return call
        call = len(self.issued)
        self.client.append(client)
        self.work.append(work)
        self.issued.append(now)
        self.started.append(NAN)
        self.finished.append(NAN)
        self.initial.append(self.starting)
        self.attempts.append(1)
        return call

    def extend(self, issued: np.ndarray, work: np.ndarray, started: np.ndarray, finished: np.ndarray) -> None:
        """Inputs of client 0 made and served in bulk, in order (models/inputs/platform/fifo.py): those back
        (``finished`` not NaN) are folded into the summary at once; rows are kept for those still out (for all, if
        ``keep``)."""
        self._fold()  # the chunks closed before them go in first
        back = ~np.isnan(finished)
        n = int(back.sum())
        if n:
            columns = {"issued": issued, "started": started, "finished": finished, "work": work}
            self.summary.add(
                {
                    **{c: v[back] for c, v in columns.items()},
                    "ok": np.ones(n, dtype=bool),
                    "kind": np.full(n, "", dtype=object),
                    "items": np.ones(n, dtype=np.int64),
                    "attempts": np.ones(n, dtype=np.int64),
                    "initial": np.zeros(n, dtype=bool),
                }
            )
        rows = slice(None) if self.keep else ~back
        for column, values in (("issued", issued), ("work", work), ("started", started), ("finished", finished)):
            getattr(self, column).frombytes(np.ascontiguousarray(values[rows], dtype=float).tobytes())
        kept = len(issued) if self.keep else len(issued) - n
        self.client.frombytes(bytes(8 * kept))
        self.initial.extend(bytes(kept))
        self.attempts.frombytes(np.ones(kept, dtype=np.int64).tobytes())

    def discard(self, call: int, now: float) -> None:
        """The Function is done with the orphan ``call`` (``orphans``): kept records hold it as an input of kind
        ``abandoned`` that ended ``now``; else its row is reset, as a fold resets one, and reused."""
        self.orphans.remove(call)
        if self.keep:
            self.finished[call] = now
            return
        self.client[call] = 0
        self.started[call] = NAN
        self.finished[call] = NAN
        self.initial[call] = 0
        self.attempts[call] = 1
        for sparse in (self.items, self.kind):
            sparse.pop(call, None)
        self._free.append(call)

    def _fold(self, rest: bool = False) -> None:
        """Fold the rows closed into the summary, CHUNK at a time (and the rest, if ``rest``)."""
        closed = self._closed
        while len(closed) >= self.CHUNK or (rest and closed):
            rows = closed[: self.CHUNK]
            del closed[: self.CHUNK]
            self._fold_rows(rows)

    def _fold_rows(self, rows: list[int]) -> None:
        at = np.array(rows, dtype=np.int64)
        take = dict.get if self.keep else dict.pop
        kinds = [take(self.kind, c, "") for c in rows] if self.kind else ()
        self.summary.add(
            {
                **{c: np.frombuffer(getattr(self, c), dtype=float)[at] for c in _TIMES},
                "ok": np.array([not k for k in kinds], dtype=bool) if kinds else np.ones(len(rows), dtype=bool),
                "kind": np.array(kinds, dtype=object) if kinds else np.full(len(rows), "", dtype=object),
                "items": _taken(self.items, rows, take),
                "attempts": np.frombuffer(self.attempts, dtype=np.int64)[at],
                "initial": np.frombuffer(self.initial, dtype=np.int8)[at].astype(bool),
            }
        )
        if not self.keep:  # the rows are free: reset here, in bulk, what new() would write to most of them
            np.frombuffer(self.client, dtype=np.int64)[at] = 0
            np.frombuffer(self.started, dtype=float)[at] = NAN
            np.frombuffer(self.finished, dtype=float)[at] = NAN
            np.frombuffer(self.initial, dtype=np.int8)[at] = 0
            np.frombuffer(self.attempts, dtype=np.int64)[at] = 1
            self._free.extend(rows)

    def close_out(self) -> CallSummary:
        """The run is over: its summary, with the inputs back and those still out (never back) folded in."""
        self._fold(rest=True)
        out = np.isnan(np.frombuffer(self.finished, dtype=float))
        out[self._free] = False  # free rows (reset, not out: no input holds them)
        out[list(self.orphans)] = False  # abandoned inputs the Function still holds: nobody's call
        if out.any():
            a = self.arrays()
            self.summary.add({c: v[out] for c, v in a.items() if c != "client"})
        return self.summary

    def release(self) -> None:
        """Free the rows (the summary holds what they said): for a log whose inputs are all back and folded."""
        for column in (self.client, self.work, self.issued, self.started, self.finished, self.initial, self.attempts):
            del column[:]
        self._free.clear()

    def __len__(self) -> int:
        return len(self.issued)

    def arrays(self) -> dict[str, np.ndarray]:
        """Every row as numpy arrays (all the run's inputs when ``keep``)."""
        n = len(self)
        ok = np.ones(n, dtype=bool)
        ok[np.fromiter(self.kind.keys(), np.int64, len(self.kind))] = False
        return {
            "ok": ok,
            "client": np.array(self.client, dtype=np.int64),
            "items": _dense(self.items, n, 1, np.int64),
            "work": np.array(self.work, dtype=float),
            "initial": np.frombuffer(bytes(self.initial), dtype=np.int8).astype(bool),
            "issued": np.array(self.issued, dtype=float),
            "started": np.array(self.started, dtype=float),
            "finished": np.array(self.finished, dtype=float),
            "kind": _dense(self.kind, n, "", object),
            "attempts": np.array(self.attempts, dtype=np.int64),
        }


_TIMES = ("issued", "started", "finished", "work")


def _taken(sparse: dict, rows: list[int], take) -> np.ndarray:
    """The values of a sparse integer column (absent: 1) at ``rows``, taken out of it unless the log keeps them."""
    if not sparse:
        return np.ones(len(rows), dtype=np.int64)
    return np.array([take(sparse, c, 1) for c in rows], dtype=np.int64)


def _dense(sparse: dict, n: int, fill: object, dtype: type) -> np.ndarray:
    """A sparse column {row: value} as a dense array of ``n`` rows."""
    out: np.ndarray = np.full(n, fill, dtype=dtype)
    if sparse:
        rows = np.fromiter(sparse.keys(), np.int64, len(sparse))
        out[rows] = np.fromiter(sparse.values(), dtype, len(sparse)) if dtype is not object else list(sparse.values())
    return out
