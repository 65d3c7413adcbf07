"""The one summary that turns per-call records into metrics (``CallSummary``), folded in from records in any number of
parts, and ``summarize``, the same summary of a whole table of records (a trace). Its counts, sums and means are
exact; its percentiles come from a streaming histogram (sim/stats.py ``LogHistogram``: relative error ≤ 0.1%).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.metrics import Metric, Metrics, percentile_metrics
from sim.stats import LogHistogram, finite, mean_ci95, mser5, window_bins

# Every kind of rejection or failure the input plane reports: accept limits (models/inputs/platform/function.py), the
# HTTP proxy (models/inputs/platform/proxy.py) and a failed item of a batched chunk.
ERROR_KINDS = ("rate_limited", "queue_full", "http_503", "http_429", "item_failed", "timeout", "container_crash")


@dataclass(frozen=True)
class Window:
    """The measurement window: calls are counted over [start, end)."""

    start: float
    end: float


def summarize(a: dict[str, np.ndarray], window: Window) -> dict:
    """The call metrics (sim/metrics.py declarations) from a table of records (``CallLog.arrays()``, a trace):
    ``CallSummary``.

    Units. A *call* is one item: a batched chunk is one *input* that carries ``items`` calls; for every other approach
    an input is one call. Metrics named ``calls*`` and ``errors*`` count calls; ``inputs*`` count inputs; the added
    latency percentiles, ``response_mean_s`` and the waits are per input (a chunk's own work is its slowest item).

    Window [start, end). ``calls`` counts the calls issued (first attempt) in the window that come back successfully,
    whenever they come back (the run drains: ``drain_s``); ``calls_per_s`` is ``calls`` over the window's span. This
    is the one rule for every approach (docs/explanation/input-plane.md, "Reading calls/s"); the other rule is kept
    under its own name: ``calls_back`` counts the successful calls that come back inside the window, whenever issued
    (``calls_back_per_s``). ``errors`` (and ``errors_by_kind``) count failed calls back in the window; ``errors_total``
    counts every failed call of the run, before, in and after the window. Latencies and waits are those of inputs issued
    (first attempt) in the window. Little's law, L = λW, in either unit: ``*_in_flight_mean`` (L: issued and not yet
    back, success or failure, time-averaged over the window), ``*_issued_per_s`` (λ: first attempts in the window) and
    ``*_time_in_system_mean_s`` (W: back − first attempt, success or failure, over the inputs issued in the window that
    are back; a calls-weighted mean for ``calls_``). Whole run: ``retries``, ``inputs``, ``calls_issued``,
    ``calls_completed``, ``calls_in_flight`` (never back).
    """
    summary = CallSummary(window)
    summary.add(a)
    return summary.metrics()


# the summary's running counts and sums (CallSummary.add says what each is)
_SUMS = (
    "inputs",
    "calls_issued",
    "calls_completed",
    "calls_in_flight",
    "calls",
    "calls_back",
    "errors",
    "errors_total",
    "retries",
    "served",
    "response_sum",
    "overlap",
    "overlap_calls",
    "returned",
    "returned_calls",
    "in_system_sum",
    "in_system_calls_sum",
    "issued_inputs",
    "issued_calls",
    # Little's law's window terms, calls-weighted (models/inputs/checks/invariants.py): of the calls issued in the
    # window and back, their time past its end; of those issued in it and never back, their time to its end; of those
    # issued before it, their time in it
    "past_end_calls",
    "open_calls",
    "before_calls",
)


class CallSummary:
    """The call metrics of a run, folded in from records in any number of parts (``summarize`` says what each
    metric counts). Counts, sums and means are exact; percentiles are ``LogHistogram``'s; the CI of the mean wait
    is by batch means over ``SLICES`` equal slices of the window by issue time."""

    SLICES = 20

    def __init__(self, window: Window) -> None:
        self.window = window
        self.added = LogHistogram()  # added latency of the calls issued in the window that came back ok
        self.errors_by_kind: dict[str, int] = {}
        self.initial = self.initial_back = 0
        self.initial_last_back = -math.inf
        self.wait_slices = np.zeros((2, self.SLICES))  # sum and count of the waits of the inputs issued per slice
        self.n = dict.fromkeys(_SUMS, 0)
        self.added_min = math.inf  # the least added latency of the calls counted (the invariants' floor)
        # successful calls back per bin of the window (sim/stats.py window_bins): the steady rate's
        self.bin_s, bins = window_bins(window.start, window.end)
        self.backs = np.zeros(bins)

    def add(self, a: dict[str, np.ndarray]) -> None:
        """Fold in records: columns ok, items, work, initial, issued, started, finished, kind, attempts."""
        w, n = self.window, self.n
        ok, items, issued, finished = a["ok"], a["items"], a["issued"], a["finished"]
        done = ~np.isnan(finished)
        in_window = done & (finished >= w.start) & (finished < w.end)
        issued_in_window = (issued >= w.start) & (issued < w.end)

        n["inputs"] += len(issued)
        n["calls_issued"] += int(items.sum())
        n["calls_completed"] += int(items[ok & done].sum())
        n["calls_in_flight"] += int(items[~done].sum())
        served = ok & done & issued_in_window
        n["calls"] += int(items[served].sum())
        n["calls_back"] += int(items[ok & in_window].sum())
        if len(self.backs):
            back_ok = ok & in_window
            at = ((finished[back_ok] - w.start) / self.bin_s).astype(np.int64)
            self.backs += np.bincount(
                np.minimum(at, len(self.backs) - 1), weights=items[back_ok], minlength=len(self.backs)
            )
        n["retries"] += int((a["attempts"] - 1).sum())

        initial = a["initial"]
        self.initial += int(initial.sum())
        self.initial_back += int((initial & done).sum())
        if (initial & done).any():
            self.initial_last_back = max(self.initial_last_back, float(finished[initial & done].max()))

        response = finished[served] - issued[served]
        added = response - a["work"][served]
        self.added.add(added)
        if len(added):
            self.added_min = min(self.added_min, float(added.min()))
        n["served"] += len(response)
        n["response_sum"] += float(response.sum())

        started = ~np.isnan(a["started"]) & issued_in_window
        waits = a["started"][started] - issued[started]
        share = (issued[started] - w.start) / (w.end - w.start) if math.isfinite(w.end) else np.zeros(len(waits))
        at = np.clip((share * self.SLICES).astype(np.int64), 0, self.SLICES - 1)
        self.wait_slices[0] += np.bincount(at, weights=waits, minlength=self.SLICES)
        self.wait_slices[1] += np.bincount(at, minlength=self.SLICES)

        # Little's law over the window, per input and per call (an input weighs its items)
        back = np.where(done, finished, np.inf)
        overlap = np.maximum(np.minimum(back, w.end) - np.maximum(issued, w.start), 0.0)
        n["overlap"] += float(overlap.sum())
        # sums of products, not np.dot: BLAS picks its kernel (and rounding) by CPU and starts threads that spin
        n["overlap_calls"] += float((overlap * items).sum())
        returned = issued_in_window & done
        in_system = finished[returned] - issued[returned]
        n["returned"] += len(in_system)
        n["returned_calls"] += int(items[returned].sum())
        n["in_system_sum"] += float(in_system.sum())
        n["in_system_calls_sum"] += float((in_system * items[returned]).sum())
        n["issued_inputs"] += int(issued_in_window.sum())
        n["issued_calls"] += int(items[issued_in_window].sum())
        n["past_end_calls"] += float((np.maximum(finished[returned] - w.end, 0.0) * items[returned]).sum())
        never = issued_in_window & ~done
        if never.any():  # (a window without an end holds no call never back: none is issued in it but at ∞)
            n["open_calls"] += float(((w.end - issued[never]) * items[never]).sum())
        before = issued < w.start
        n["before_calls"] += float((overlap[before] * items[before]).sum())

        failed = done & ~ok
        n["errors_total"] += int(items[failed].sum())
        failed_in_window = failed & in_window
        n["errors"] += int(items[failed_in_window].sum())
        for kind, k in zip(a["kind"][failed_in_window], items[failed_in_window], strict=True):
            self.errors_by_kind[kind] = self.errors_by_kind.get(kind, 0) + int(k)

    def absorb(self, other: CallSummary) -> None:
        """Fold in another summary of the same window (another part of the run)."""
        for k, v in other.n.items():
            self.n[k] += v
        self.added.absorb(other.added)
        for kind, k in other.errors_by_kind.items():
            self.errors_by_kind[kind] = self.errors_by_kind.get(kind, 0) + k
        self.initial += other.initial
        self.initial_back += other.initial_back
        self.initial_last_back = max(self.initial_last_back, other.initial_last_back)
        self.wait_slices += other.wait_slices
        self.added_min = min(self.added_min, other.added_min)
        self.backs += other.backs

    def _steady(self) -> dict:
        """Calls back per second after a warm-up detected by MSER-5 in the calls back per bin (sim/stats.py), and
        when that steady part begins."""
        if not len(self.backs) or not self.backs.sum():
            return {"steady_calls_per_s": None, "steady_from_s": None}
        whole = int((self.window.end - self.window.start) / self.bin_s + 1e-9)  # bins a full bin_s long
        counts = self.backs[: max(whole, 1)]
        cut = mser5(counts)
        rest = counts[cut:]
        width = min(self.bin_s, self.window.end - self.window.start)  # a window shorter than a bin: its span
        return {
            "steady_calls_per_s": float(rest.sum()) / (len(rest) * width),
            "steady_from_s": self.window.start + cut * self.bin_s,
        }

    def metrics(self) -> dict:
        n, span = self.n, self.window.end - self.window.start
        # until all of the calls in flight at the start are back; none if no call of the run succeeded
        all_back = self.initial and self.initial_back == self.initial and n["calls_completed"]
        sums, counts = self.wait_slices
        waits = counts.sum()
        return {
            "calls": n["calls"],
            "calls_per_s": n["calls"] / span,
            "calls_back": n["calls_back"],
            "calls_back_per_s": n["calls_back"] / span,
            **self._steady(),
            "first_n_back_s": finite(self.initial_last_back) if all_back else None,
            **self.added.percentiles("added_latency"),
            "errors": n["errors"],
            "errors_by_kind": dict(sorted(self.errors_by_kind.items())),
            "errors_total": n["errors_total"],
            "retries": n["retries"],
            "response_mean_s": finite(n["response_sum"] / n["served"]) if n["served"] else None,
            "calls_in_flight_mean": n["overlap_calls"] / span,
            "calls_issued_per_s": n["issued_calls"] / span,
            "calls_time_in_system_mean_s": finite(n["in_system_calls_sum"] / n["returned_calls"])
            if n["returned_calls"]
            else None,
            "inputs_in_flight_mean": n["overlap"] / span,
            "inputs_issued_per_s": n["issued_inputs"] / span,
            "inputs_time_in_system_mean_s": finite(n["in_system_sum"] / n["returned"]) if n["returned"] else None,
            "wait_mean_s": finite(sums.sum() / waits) if waits else None,
            "wait_mean_ci95_s": finite(mean_ci95(sums[counts > 0] / counts[counts > 0])),
            "inputs": n["inputs"],
            "calls_issued": n["calls_issued"],
            "calls_completed": n["calls_completed"],
            "calls_in_flight": n["calls_in_flight"],
            "calls_served_per_s": n["calls"] / span,
        }


# What ``CallSummary.metrics`` reports (``summarize`` says what each counts). "sum": a run in parts (the app copies
# of models/inputs/parts.py, over one window) has the sum of its parts' values; the rest come from the merged sums.
CALL_METRICS = (
    Metrics(
        Metric("calls", "calls", "sum", "calls issued (first attempt) in the window that came back successfully"),
        Metric(
            "calls_per_s",
            "calls/s",
            "sum",
            "the headline rate: closed-loop clients, `calls` ÷ the window's span (warm-up to duration: the reference "
            "load test's rule); open-loop arrivals and traces, `calls_back_per_s` (what comes back in the window)",
        ),
        Metric("calls_back", "calls", "sum", "successful calls back in the window, whenever issued"),
        Metric("calls_back_per_s", "calls/s", "sum", "`calls_back` ÷ the window's span"),
        Metric(
            "steady_calls_per_s",
            "calls/s",
            "derived",
            "successful calls back per second after the warm-up MSER-5 detects in the calls back per bin of the "
            "window (bins of max(1 s, window ÷ 1,000)): the steady rate to plan with",
        ),
        Metric("steady_from_s", "s", "derived", "when the steady part of `steady_calls_per_s` begins"),
        Metric(
            "first_n_back_s",
            "s",
            "derived",
            "when the last of the N calls in flight at the start is back (null if one never is, or none succeeded)",
        ),
    )
    + percentile_metrics(
        "added_latency",
        "the added latency (response time minus own work, a chunk's: its slowest item's) of the inputs in `calls`",
    )
    + Metrics(
        Metric("errors", "calls", "sum", "failed calls back in the window"),
        Metric(
            "errors_by_kind",
            "calls",
            "sum",
            f"`errors` by kind ({', '.join(ERROR_KINDS)}; columns `errors.<kind>`, `errors.other`)",
            kind="counts",
            keys=ERROR_KINDS,
            other=True,
        ),
        Metric("errors_total", "calls", "sum", "failed calls of the whole run, before, in and after the window"),
        Metric("retries", "attempts", "sum", "attempts made again, over the whole run"),
        Metric("response_mean_s", "s", "derived", "mean response time of the inputs counted in `calls` (per input)"),
        Metric("calls_in_flight_mean", "calls", "sum", "Little's L: calls issued and not yet back, time-averaged"),
        Metric("calls_issued_per_s", "calls/s", "sum", "Little's λ: calls first issued in the window ÷ its span"),
        Metric(
            "calls_time_in_system_mean_s",
            "s",
            "derived",
            "Little's W: back − first attempt of the calls issued in the window and back (calls-weighted)",
        ),
        Metric("inputs_in_flight_mean", "inputs", "sum", "as `calls_in_flight_mean`, a batched chunk one input"),
        Metric("inputs_issued_per_s", "inputs/s", "sum", "as `calls_issued_per_s`, a batched chunk one input"),
        Metric("inputs_time_in_system_mean_s", "s", "derived", "as `calls_time_in_system_mean_s`, per input"),
        Metric(
            "wait_mean_s",
            "s",
            "derived",
            "mean wait (issue to start on a container) of the inputs issued in the window",
        ),
        Metric(
            "wait_mean_ci95_s",
            "s",
            "derived",
            f"95% CI half-width of `wait_mean_s`, by batch means over {CallSummary.SLICES} slices of the window",
        ),
        Metric("inputs", "inputs", "sum", "inputs issued over the whole run (a batched chunk is one)"),
        Metric("calls_issued", "calls", "sum", "calls issued over the whole run"),
        Metric("calls_completed", "calls", "sum", "calls back successfully over the whole run"),
        Metric("calls_in_flight", "calls", "sum", "calls never back by the run's end"),
        Metric(
            "calls_served_per_s",
            "calls/s",
            "sum",
            "`calls` ÷ the window's span: the calls issued in the window served, whenever back (the reference load "
            "test's rule, `calls_per_s` of a closed loop); what a capacity answer checks a demand is sustained by",
        ),
    )
)
