"""Per-call records in columnar form, and the one function that summarises them into metrics.

One row per input (a call, or a batched chunk of ``items`` calls). Columns are plain lists while the run
appends to them and become numpy arrays in ``arrays()``; ``summarize`` turns them into the flat metrics of
interfaces.md ("Metrics").
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np

from sim.stats import NAN, batch_means_ci95, finite, percentiles

# Every kind of rejection or failure the input plane reports: accept limits (models/inputs/function.py), the HTTP
# proxy (models/inputs/approaches/server.py) and a failed item of a batched chunk.
ERROR_KINDS = ("rate_limited", "queue_full", "http_503", "http_429", "item_failed")


class CallLog:
    """Columns of per-input records; an input's id is its row.

    Dense columns are lists appended once per input (times not yet known are NaN); what most inputs share is kept
    sparse (an input's items when not 1, its failure kind, its attempts when retried). The first ``n_initial``
    inputs are the calls in flight at the start.
    """

    def __init__(self) -> None:
        # raw machine numbers (array.array), not lists of Python objects: 40 bytes an input instead of ~170
        self.client = array("q")
        self.work = array("d")  # the input's own work (a chunk's slowest item)
        self.issued = array("d")  # first attempt
        self.started = array("d")  # start on a container (NaN: never started)
        self.finished = array("d")  # back at the caller, success or final failure (NaN: still out)
        self.items: dict[int, int] = {}  # calls carried by a batched input (absent: 1)
        self.kind: dict[int, str] = {}  # rejection or failure kind (absent: success)
        self.attempts: dict[int, int] = {}  # tries (absent: 1)
        self.n_initial = 0

    def new(self, client: int, now: float, work: float) -> int:
        call = len(self.issued)
        self.client.append(client)
        self.work.append(work)
        self.issued.append(now)
        self.started.append(NAN)
        self.finished.append(NAN)
        return call

    def __len__(self) -> int:
        return len(self.issued)

    def arrays(self) -> dict[str, np.ndarray]:
        n = len(self)
        initial = np.zeros(n, dtype=bool)
        initial[: self.n_initial] = True
        ok = np.ones(n, dtype=bool)
        ok[np.fromiter(self.kind.keys(), np.int64, len(self.kind))] = False
        return {
            "ok": ok,
            "client": np.array(self.client, dtype=np.int64),
            "items": _dense(self.items, n, 1, np.int64),
            "work": np.array(self.work, dtype=float),
            "initial": initial,
            "issued": np.array(self.issued, dtype=float),
            "started": np.array(self.started, dtype=float),
            "finished": np.array(self.finished, dtype=float),
            "kind": _dense(self.kind, n, "", object),
            "attempts": _dense(self.attempts, n, 1, np.int64),
        }


def _dense(sparse: dict, n: int, fill: object, dtype: type) -> np.ndarray:
    """A sparse column {row: value} as a dense array of ``n`` rows."""
    out = np.full(n, fill, dtype=dtype)
    if sparse:
        rows = np.fromiter(sparse.keys(), np.int64, len(sparse))
        out[rows] = np.fromiter(sparse.values(), dtype, len(sparse)) if dtype is not object else list(sparse.values())
    return out


@dataclass(frozen=True)
class Window:
    """The measurement window: calls are counted over [start, end)."""

    start: float
    end: float


def summarize(a: dict[str, np.ndarray], window: Window) -> dict:
    """The call metrics of interfaces.md from the records of one run (``CallLog.arrays()``).

    Units. A *call* is one item: a batched chunk is one *input* that carries ``items`` calls; for every other approach
    an input is one call. Metrics named ``calls*`` and ``errors*`` count calls; ``inputs*`` count inputs; the added
    latency percentiles, ``response_mean_s`` and the waits are per input (a chunk's own work is its slowest item).

    Window [start, end). ``calls`` counts the calls issued (first attempt) in the window that come back successfully,
    whenever they come back (the run drains: ``drain_s``); ``calls_per_s`` is ``calls`` over the window's span. This
    is the one rule for every approach (README, "Counting rules"); the other rule is kept under its own name:
    ``calls_back`` counts the successful calls that come back inside the window, whenever issued
    (``calls_back_per_s``). ``errors`` (and ``errors_by_kind``) count failed calls back in the window;
    ``errors_total`` counts every failed call of the run, before, in and after the window. Latencies and
    waits are those of inputs issued (first attempt) in the window. Little's law, L = λW, in either unit:
    ``*_in_flight_mean`` (L: issued and not yet back, success or failure, time-averaged over the window),
    ``*_issued_per_s`` (λ: first attempts in the window) and ``*_time_in_system_mean_s`` (W: back − first attempt,
    success or failure, over the inputs issued in the window that are back; a calls-weighted mean for ``calls_``).
    Whole run: ``retries``, ``inputs``, ``calls_issued``, ``calls_completed``, ``calls_in_flight`` (never back).
    """
    ok = a["ok"]
    items = a["items"]
    issued, finished = a["issued"], a["finished"]
    done = ~np.isnan(finished)
    in_window = done & (finished >= window.start) & (finished < window.end)
    issued_in_window = (issued >= window.start) & (issued < window.end)
    span = window.end - window.start

    calls = int(items[ok & done & issued_in_window].sum())
    calls_back = int(items[ok & in_window].sum())
    initial = a["initial"]
    # until all of the calls in flight at the start are back; none if no call of the run succeeded
    first_back = float(finished[initial].max()) if initial.any() and done[initial].all() and ok.any() else NAN

    served = ok & done & issued_in_window
    response = finished[served] - issued[served]
    added = response - a["work"][served]
    started = ~np.isnan(a["started"]) & issued_in_window
    waits = a["started"][started] - issued[started]  # in issue order: rows are created as calls are issued

    # Little's law over the window, per input and per call (an input weighs its items)
    back = np.where(done, finished, np.inf)
    overlap = np.maximum(np.minimum(back, window.end) - np.maximum(issued, window.start), 0.0)
    returned = issued_in_window & done
    in_system = finished[returned] - issued[returned]
    weights = items[returned]

    failed = done & ~ok
    failed_in_window = failed & in_window
    errors_by_kind: dict[str, int] = {}
    for kind, n in zip(a["kind"][failed_in_window], items[failed_in_window], strict=True):
        errors_by_kind[kind] = errors_by_kind.get(kind, 0) + int(n)

    return {
        "calls": calls,
        "calls_per_s": calls / span,
        "calls_back": calls_back,
        "calls_back_per_s": calls_back / span,
        "first_n_back_s": finite(first_back),
        **percentiles(added, "added_latency"),
        "errors": int(items[failed_in_window].sum()),
        "errors_by_kind": dict(sorted(errors_by_kind.items())),
        "errors_total": int(items[failed].sum()),
        "retries": int((a["attempts"] - 1).sum()),
        "response_mean_s": finite(float(np.mean(response))) if served.any() else None,
        "calls_in_flight_mean": float(np.dot(overlap, items)) / span,
        "calls_issued_per_s": float(items[issued_in_window].sum()) / span,
        "calls_time_in_system_mean_s": finite(float(np.dot(in_system, weights) / weights.sum()))
        if returned.any()
        else None,
        "inputs_in_flight_mean": float(overlap.sum()) / span,
        "inputs_issued_per_s": float(issued_in_window.sum()) / span,
        "inputs_time_in_system_mean_s": finite(float(in_system.mean())) if returned.any() else None,
        "wait_mean_s": finite(float(waits.mean())) if len(waits) else None,
        "wait_mean_ci95_s": finite(batch_means_ci95(waits)),
        "inputs": len(issued),
        "calls_issued": int(items.sum()),
        "calls_completed": int(items[ok & done].sum()),
        "calls_in_flight": int(items[~done].sum()),
    }
