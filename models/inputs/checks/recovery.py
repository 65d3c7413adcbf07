"""Whether a Function comes back after a trigger, and how long it takes: recovery metrics of one run.

A trigger is a stretch of the run with its start and end (a traffic spike: ``arrivals.shape = spike(AT_S, LENGTH_S,
FACTOR)``, models/inputs/callers/demand.py). The run's window [warm-up, duration) is cut into bins of ``bin_s`` seconds;
in each bin, the throughput is the successful calls back in it per second and the latency the mean time in system (back
− first attempt) of those calls. The pre-trigger values are the same over [warm-up, trigger start). The system has
*recovered* at the start of the first bin, at or after the trigger's end, that begins ``HOLD_BINS`` whole bins in a row
each with its throughput within ``band`` of the pre-trigger throughput (either way: a backlog served at full capacity is
not back) and its latency at most (1 + ``band``) × the pre-trigger latency (a settling time with a hold: a congested bin
long after, as an M/M/c queue has now and then, does not undo it); ``recovery_s`` is that bin's start − the trigger's
end (to a bin), or None (did not recover within the run). The band and the bin are the question's assumptions (a user's
notion of "back to normal"): a bin should hold a few hundred calls, so that noise alone stays well inside the band
(``bin_for``: at least ``MIN_BIN_CALLS`` calls at the pre-trigger rate).

Over the whole run: ``work_lost_s``, the input-seconds of work of the calls that failed (never served), and
``attempts_per_success``, every attempt made (first tries and retries) ÷ the successful calls: the extra load the
callers' retry policy added (1.0: none).

``series`` gives per bin the offered load (first attempts issued per second), the served load (the throughput), the
backlog (pending inputs, from the monitor's samples: their mean in the bin), the orbit (calls out that are neither
pending nor running: waiting to try again; their mean over the samples in the bin) and the retries of the calls issued
in the bin (attempts beyond the first, per second of the bin): what the figure draws around the trigger. With caller
timeouts the pending and running inputs include abandoned ones, so the orbit (at least 0) is then a lower bound."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from sim.metrics import Metric, Metrics

BAND = 0.2  # assumption: "back to normal" is within 20% of the pre-trigger throughput and latency
HOLD_BINS = 3  # assumption: back means back for three bins in a row (a single quiet bin inside a backlog is not)
MIN_BIN_CALLS = 1000  # a bin's calls at the pre-trigger rate: throughput and mean latency within about 3% (1 sd)

RECOVERY_METRICS = Metrics(
    Metric("recovered", "flag", "derived", "1 if the run was back within the band before its window ended, else 0"),
    Metric(
        "recovery_s",
        "s",
        "derived",
        "from the trigger's end to the first of HOLD_BINS bins in a row back within the band (None: not within "
        "the run)",
    ),
    Metric("pre_trigger_calls_per_s", "calls/s", "derived", "successful calls back per second before the trigger"),
    Metric("pre_trigger_latency_s", "s", "derived", "their mean time in system (back − first attempt)"),
    Metric("trigger_calls_per_s", "calls/s", "derived", "successful calls back per second during the trigger"),
    Metric("work_lost_s", "input-s", "sum", "the work of the calls that failed, over the whole run"),
    Metric("attempts_per_success", "attempts", "derived", "attempts made (first tries and retries) ÷ successful calls"),
)


def bin_for(rate: float, window: float) -> float:
    """A bin of at least ``MIN_BIN_CALLS`` calls at ``rate`` per second, and at least 1 s, at most a tenth of the
    window."""
    return min(max(1.0, MIN_BIN_CALLS / rate if rate > 0 else window), window / 10.0)


def recovery(
    records: Mapping[str, np.ndarray],
    trigger: tuple[float, float],
    window: tuple[float, float],
    bin_s: float,
    band: float = BAND,
    backlog: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[dict, dict[str, np.ndarray]]:
    """The recovery metrics (module docstring) and the per-bin series of one run's records (columns ``ok``, ``work``,
    ``issued``, ``finished``, ``attempts``); ``backlog`` is the monitor's (times, pending inputs, running inputs)."""
    w0, w1 = window
    t0, t1 = trigger
    if not (w0 <= t0 < t1 <= w1) or t0 - w0 < bin_s:
        raise ValueError(
            f"the trigger [{t0:g}, {t1:g}) s must lie inside the window [{w0:g}, {w1:g}) s, a bin after its start"
        )
    # a call's attempt abandoned at its timeout (clients.timeout_s) keeps a row of its own (kind "abandoned"); the
    # call goes on in another row, which carries its attempts: only the calls' rows count here
    calls = np.asarray(records["kind"]) != "abandoned" if "kind" in records else slice(None)
    ok = np.asarray(records["ok"], dtype=bool)[calls]
    issued, finished = np.asarray(records["issued"])[calls], np.asarray(records["finished"])[calls]
    attempts = np.asarray(records["attempts"])[calls]
    good = ok & ~np.isnan(finished)
    edges = np.arange(w0, w1 + bin_s * 1e-9, bin_s)
    if edges[-1] > w1:
        edges = edges[:-1]
    width = np.diff(edges)
    served, _ = np.histogram(finished[good], edges)
    in_system, _ = np.histogram(finished[good], edges, weights=(finished - issued)[good])
    offered, _ = np.histogram(issued, edges)
    retries, _ = np.histogram(issued, edges, weights=attempts - 1)
    rate = served / width
    latency = np.divide(in_system, served, out=np.full(len(served), np.nan), where=served > 0)

    pre = good & (finished >= w0) & (finished < t0)
    n_pre = int(pre.sum())
    pre_rate = n_pre / (t0 - w0)
    pre_latency = float(np.mean((finished - issued)[pre])) if n_pre else math.nan
    during = good & (finished >= t0) & (finished < t1)
    back = (np.abs(rate - pre_rate) <= band * pre_rate) & (latency <= (1 + band) * pre_latency)
    # the first bin at or after the trigger's end that begins HOLD_BINS bins in a row back within the band
    recovered_at = None
    for i in np.nonzero(edges[:-1] >= t1)[0]:
        if i + HOLD_BINS <= len(back) and back[i : i + HOLD_BINS].all():
            recovered_at = float(edges[i])
            break
    success = int(good.sum())
    metrics = {
        "recovered": int(recovered_at is not None),
        "recovery_s": None if recovered_at is None else recovered_at - t1,
        "pre_trigger_calls_per_s": pre_rate,
        "pre_trigger_latency_s": pre_latency if n_pre else None,
        "trigger_calls_per_s": int(during.sum()) / (t1 - t0),
        "work_lost_s": float(np.asarray(records["work"])[calls][~ok].sum()),
        "attempts_per_success": float(attempts.sum()) / success if success else None,
    }
    series = {
        "t": edges[:-1],
        "offered_per_s": offered / width,
        "served_per_s": rate,
        "retries_per_s": retries / width,
        "latency_s": latency,
    }
    if backlog is not None:
        t, pending, running = (np.asarray(x, dtype=float) for x in backlog)
        # calls out at each sample (issued, not yet back: never-back calls count as out) minus those at the Function:
        # the callers' orbit, calls waiting to try again
        out = np.searchsorted(np.sort(issued), t, "right") - np.searchsorted(np.sort(finished[~np.isnan(finished)]), t)
        for name, v in (("backlog", pending), ("orbit", np.maximum(out - pending - running, 0))):
            sums, _ = np.histogram(t, edges, weights=v)
            counts, _ = np.histogram(t, edges)
            series[name] = np.divide(sums, counts, out=np.zeros(len(counts)), where=counts > 0)
    return metrics, series
