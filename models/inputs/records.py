"""Per-call records in columnar form, and the one function that summarises them into metrics.

One row per input (a call, or a batched chunk of ``items`` calls). Columns are plain lists while the run
appends to them and become numpy arrays in ``arrays()``; ``summarize`` turns them into the flat metrics of
interfaces.md ("Metrics").
"""

from __future__ import annotations

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
        self.client: list[int] = []
        self.work: list[float] = []  # the input's own work (a chunk's slowest item)
        self.issued: list[float] = []  # first attempt
        self.started: list[float] = []  # start on a container (NaN: never started)
        self.finished: list[float] = []  # back at the caller, success or final failure (NaN: still out)
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
            "client": np.fromiter(self.client, np.int64, n),
            "items": _dense(self.items, n, 1, np.int64),
            "work": np.fromiter(self.work, float, n),
            "initial": initial,
            "issued": np.fromiter(self.issued, float, n),
            "started": np.fromiter(self.started, float, n),
            "finished": np.fromiter(self.finished, float, n),
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
    """The call metrics of interfaces.md from the records of one run (``CallLog.arrays()``)."""
    ok = a["ok"]
    done = ~np.isnan(a["finished"])
    in_window = done & (a["finished"] >= window.start) & (a["finished"] < window.end)
    issued_in_window = (a["issued"] >= window.start) & (a["issued"] < window.end)

    calls = int(a["items"][ok & in_window].sum())
    initial = a["initial"]
    first_back = float(a["finished"][initial].max()) if initial.any() and done[initial].all() else NAN

    served = ok & done & issued_in_window
    response = a["finished"][served] - a["issued"][served]
    added = response - a["work"][served]
    started = ~np.isnan(a["started"]) & issued_in_window
    waits = a["started"][started] - a["issued"][started]  # in issue order: rows are created as calls are issued

    # calls in flight (issued, not yet back), time-averaged over the window: Little's L
    span = window.end - window.start
    back = np.where(done, a["finished"], np.inf)
    overlap = np.minimum(back, window.end) - np.maximum(a["issued"], window.start)
    in_flight_mean = float(np.sum(overlap[overlap > 0])) / span

    failed = done & ~ok
    errors_by_kind: dict[str, int] = {}
    for kind, items in zip(a["kind"][failed], a["items"][failed], strict=True):
        errors_by_kind[kind] = errors_by_kind.get(kind, 0) + int(items)

    return {
        "calls": calls,
        "calls_per_s": calls / span,
        "first_n_back_s": finite(first_back),
        **percentiles(added, "added_latency"),
        "errors": int(a["items"][failed].sum()),
        "errors_by_kind": dict(sorted(errors_by_kind.items())),
        "retries": int((a["attempts"] - 1).sum()),
        "response_mean_s": finite(float(np.mean(a["finished"][served] - a["issued"][served])))
        if served.any()
        else None,
        "issued_per_s": float(a["items"][issued_in_window].sum()) / span,
        "in_flight_mean": in_flight_mean,
        "wait_mean_s": finite(float(waits.mean())) if len(waits) else None,
        "wait_mean_ci95_s": finite(batch_means_ci95(waits)),
        "inputs": len(a["issued"]),
        "calls_issued": int(a["items"].sum()),
        "calls_completed": int(a["items"][ok & done].sum()),
        "calls_in_flight": int(a["items"][~done].sum()),
    }
