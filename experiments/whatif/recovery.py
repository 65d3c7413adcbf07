"""The recovery what-if: after a traffic spike, does a Function come back, and how long does it take, under each of
the callers' retry policies? ``python -m experiments.whatif recovery [--policies ...] [--spikes ...]``.

For each policy (``clients.retry``, ``clients.max_attempts`` written ``policy:N`` and the callers' timeout
``clients.timeout_s`` written ``policy@T``) and each spike factor F, the
scenario runs with ``arrivals.shape = spike(AT_S, LENGTH_S, F)`` over ``--seeds`` seeds, and models/inputs/
recovery.py measures each run: recovered or not within the run, the recovery time, the work lost and the attempts per
successful call. The *edge* of a policy is the largest spike after which every seed recovered within the run (the
spikes are tried in increasing order; recovery time grows toward the edge). The default Function (``DEFAULTS``) is
the ``mmc`` preset's ten warm containers at 70% load with a pending cap of 50 that rejects calls during a spike
(``queue_full``), its accept and start limits too fast to bind: a retried call waits in the callers' orbit and comes
back, and the orbit drains at the spare capacity (c·μ − λ = 3 calls/s), so the larger the spike the longer the
recovery; calls that are not retried are lost instead. The figure draws, per policy, the offered and served load,
the backlog and the orbit around the largest spike.
"""

from __future__ import annotations

import argparse
import base64
import html
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from experiments.plots import fit_ylim, plain_ticks, pyplot
from experiments.spec import check_runs
from experiments.whatif.base import PROG, Flag, Question, positive, print_answer
from experiments.whatif.pages import STYLE, html_table
from models.inputs.checks.recovery import BAND, bin_for, recovery
from models.registry import MODELS
from models.runs import load_scenario, run_scenario
from sim import files
from sim.cli import cap_jobs, progress_bar
from sim.pools import process_pool
from sim.scenario import ScenarioError

DEFAULTS = (
    "duration_s=3000",
    "warmup_s=100",
    "drain_s=3600",
    "arrivals.rate=7",
    "limits.enabled=true",
    "limits.sync_pending_cap=50",
    "limits.sync_accept_rate=1e6",
    "limits.sync_accept_burst=1e6",
    "limits.start_rate=1e6",
    "limits.start_burst=1e6",
)
POLICIES = "none,backoff,backoff:5"
SPIKES = "2,4,8,16,32"


class Recovery(Question):
    """Whether and how fast a Function comes back after a spike, per callers' retry policy (this module's
    docstring)."""

    name = "recovery"
    scenario = "mmc"
    defaults = DEFAULTS
    flags = (
        Flag(
            "--policies",
            f"recovery: clients.retry policies, ':N' for max_attempts, '@T' for clients.timeout_s (default {POLICIES})",
            POLICIES,
        ),
        Flag("--spikes", f"recovery: spike factors (default {SPIKES})", SPIKES),
        Flag("--spike-at", "recovery: when the spike starts, s (default 600)", "600"),
        Flag("--spike-s", "recovery: how long it lasts, s (default 60)", "60"),
        Flag("--band", "recovery: 'back' within this share (default 0.2)", str(BAND)),
    )

    def ask(self, args: argparse.Namespace) -> int:
        band = positive("--band", float, 1.0)(args.band)
        at = positive("--spike-at", float, 1e9)(args.spike_at)
        length = positive("--spike-s", float, 1e9)(args.spike_s)
        out, figures = recovery_question(
            args.scenario or self.scenario,
            [*self.defaults, *args.sets],
            args.params,
            args.seeds,
            args.policies,
            args.spikes,
            at,
            length,
            band,
            args.jobs,
        )
        out["simulations"] = (
            len(out["policies"]) * len(out["policies"][next(iter(out["policies"]))]["rows"]) * args.seeds
        )
        out["seeds"] = args.seeds
        print_answer(args, out, words)
        if args.out:
            png = figure(figures, out, args.out)
            print(f"figure: {png}\nreport: {page(out, png, args.out)}", file=sys.stderr)
        return 0


def policy_sets(policy: str) -> list[str]:
    """``retry[:max_attempts][@timeout_s]`` as scenario settings (ScenarioError naming ``--policies`` if
    malformed)."""
    policy, _, timeout = policy.partition("@")
    retry, _, attempts = policy.partition(":")
    sets = [f"clients.retry={retry.strip()}"]
    if timeout:
        try:
            t = float(timeout)
        except ValueError:
            t = math.nan
        if not 0 < t <= 1e6:
            raise ScenarioError(f"--policies: {policy}@{timeout}: the timeout after '@' must be seconds, > 0, <= 1e6")
        sets.append(f"clients.timeout_s={t:g}")
    if attempts:
        if not attempts.strip().isdigit() or not 1 <= int(attempts) <= 1000:
            raise ScenarioError(f"--policies: {policy!r}: the attempts after ':' must be a whole number from 1 to 1000")
        sets.append(f"clients.max_attempts={int(attempts)}")
    return sets


def spike_list(text: str) -> list[float]:
    try:
        out = sorted({float(x) for x in text.split(",")})
    except ValueError:
        raise ScenarioError(f"--spikes {text!r}: must be numbers separated by commas") from None
    if not out or not all(math.isfinite(x) and 1 < x <= 1000 for x in out) or len(out) > 20:
        raise ScenarioError(f"--spikes {text!r}: 1 to 20 factors, each > 1 and <= 1000")
    return out


def measure(scenario: str, sets: list[str], params: list[str], seed: int, band: float) -> tuple[dict, dict]:
    """One run's recovery metrics and series (the trigger: its spike shape)."""
    sc = load_scenario(scenario, sets, params)
    trigger = sc.arrivals.profile.trigger() if sc.load == "arrivals" else None
    if trigger is None:
        trigger = sc.faults.trigger()  # a slow-down (models/inputs/platform/faults.py)
    if trigger is None:
        raise ScenarioError(
            "arrivals.shape: the recovery question needs a trigger: load = arrivals with a spike(...) shape, or a "
            "slow-down (faults.slow_s)"
        )
    series: dict = {}
    m = run_scenario(sc, seed, series=series, records=True)
    r = m.pop("records")
    window = (sc.warmup_s, sc.duration_s)
    rate = sc.arrivals.rate
    records = {c: r[c].to_numpy() for c in r.columns}
    backlog = (series["t"], series["pending"], series["running"])
    try:
        rec, _ = recovery(records, trigger, window, bin_for(rate, window[1] - window[0]), band, backlog=backlog)
        start, bin_s = figure_bins(trigger, window)
        _, s = recovery(records, trigger, (start, window[1]), bin_s, band, backlog=backlog)
    except ValueError as e:
        raise ScenarioError(f"arrivals.shape: {e}") from None
    return rec, s


def _measure(job: tuple[str, list[str], list[str], int, float]) -> tuple[dict, dict]:
    return measure(*job)


def _measure_all(todo: list[tuple[str, list[str], list[str], int, float]], jobs: int) -> list[tuple[dict, dict]]:
    """``measure`` of every job, in order, on ``jobs`` processes (the runs are independent: the same numbers as one
    after the other), counted on a progress bar."""
    jobs = cap_jobs(PROG, jobs, len(todo))
    bar = progress_bar(total=len(todo), unit="run", desc="simulations", delay=3.0, leave=False)
    out = []
    try:
        if jobs > 1:
            with process_pool(jobs) as pool:
                for r in pool.map(_measure, todo):
                    out.append(r)
                    bar.update()
        else:
            for job in todo:
                out.append(_measure(job))
                bar.update()
    finally:
        bar.close()
    return out


FIGURE_BINS = 4  # the figure's bins per trigger: its rise and fall drawn where they happen
MAX_FIGURE_BINS = 500  # at most this many over the window (the monitor samples the backlog 1,000 times a run)


def figure_bins(trigger: tuple[float, float], window: tuple[float, float]) -> tuple[float, float]:
    """The figure's bins (their first edge and width): finer than the measurement's (``bin_for``: 1,000 calls
    each, 143 s at 7 calls/s), which would draw the load rising in the bin before the trigger starts; edges on the
    trigger's start and, when a bin is no longer than the trigger, on its end."""
    (t0, t1), (w0, w1) = trigger, window
    target = max((t1 - t0) / FIGURE_BINS, (w1 - w0) / MAX_FIGURE_BINS)
    bin_s = (t1 - t0) / math.ceil((t1 - t0) / target) if target <= t1 - t0 else target
    bin_s = min(bin_s, t0 - w0)  # at least one bin before the trigger
    return t0 - math.floor((t0 - w0) / bin_s) * bin_s, bin_s


def recovery_question(
    scenario: str,
    sets: list[str],
    params: list[str],
    seeds: int,
    policies: str = POLICIES,
    spikes: str = SPIKES,
    at_s: float = 600.0,
    length_s: float = 60.0,
    band: float = BAND,
    jobs: int = 1,
) -> tuple[dict[str, Any], dict[str, dict]]:
    """The answer (per policy: a row per spike and the edge) and, per policy, the series of its largest spike; the
    runs on ``jobs`` processes."""
    factors = spike_list(spikes)
    names = [p.strip() for p in policies.split(",") if p.strip()]
    if not names or len(names) > 10:
        raise ScenarioError(f"--policies {policies!r}: 1 to 10 policies, separated by commas")
    sizes = []
    for name in names:  # a bad policy fails before any run, and the whole search is sized first
        for f in factors:
            shape = f"arrivals.shape=spike({at_s:g}, {length_s:g}, {f:g})"
            sc = load_scenario(scenario, [*sets, *policy_sets(name), shape], params)
            sizes.append(MODELS[sc.model].size(sc))
    how = f"{len(names)} policies × {len(factors)} spikes × {seeds} seeds"
    check_runs("whatif recovery", len(sizes) * seeds, sum(sizes) / len(sizes), MODELS[sc.model], how, "fewer --seeds")
    out: dict[str, Any] = {"spike_at_s": at_s, "spike_length_s": length_s, "band": band, "policies": {}}
    figures: dict[str, dict] = {}
    todo = [
        (scenario, [*sets, *policy_sets(name), f"arrivals.shape=spike({at_s:g}, {length_s:g}, {f:g})"], params, s, band)
        for name in names
        for f in factors
        for s in range(seeds)
    ]
    done = iter(_measure_all(todo, jobs))
    for name in names:
        rows, edge, broken = [], None, False
        for f in factors:
            runs = [next(done) for _ in range(seeds)]
            mets = [r for r, _ in runs]
            rec = [m["recovery_s"] for m in mets if m["recovered"]]
            row = {
                "spike": f,
                "recovered": f"{len(rec)}/{seeds}",
                "recovery_s": float(np.mean(rec)) if len(rec) == seeds else None,
                "work_lost_s": float(np.mean([m["work_lost_s"] for m in mets])),
                "attempts_per_success": float(np.mean([m["attempts_per_success"] or math.nan for m in mets])),
                "trigger_calls_per_s": float(np.mean([m["trigger_calls_per_s"] for m in mets])),
            }
            rows.append(row)
            broken = broken or len(rec) < seeds  # the edge: every spike up to it recovered, in every seed
            edge = edge if broken else f
            figures[name] = runs[0][1]
        out["policies"][name] = {"rows": rows, "edge": edge}
    out["pre_trigger_calls_per_s"] = mets[0]["pre_trigger_calls_per_s"]
    return out, figures


def words(out: dict) -> list[str]:
    lines = [
        f"After a spike from t = {out['spike_at_s']:g} s for {out['spike_length_s']:g} s (before it: "
        f"{out['pre_trigger_calls_per_s']:.2f} calls/s), back within {out['band']:.0%} of throughput and latency:",
        f"{'policy':<14} {'spike':>6} {'recovered':>9} {'recovery_s':>18} {'work_lost_s':>11} {'attempts/ok':>11}",
    ]
    for name, p in out["policies"].items():
        for r in p["rows"]:
            lines.append(
                f"{name:<14} {r['spike']:>6g} {r['recovered']:>9} {recovery_text(r):>18} {r['work_lost_s']:>11.0f} "
                f"{r['attempts_per_success']:>11.2f}"
            )
    return lines + [edge_text(name, p) for name, p in out["policies"].items()]


def attempts_text(row: dict) -> str:
    """A row's attempts per successful call."""
    return f"{row['attempts_per_success']:.2f}"


def edge_text(name: str, policy: dict) -> str:
    """A policy's edge in words."""
    edge = policy["edge"]
    return f"{name}: recovers after every spike up to ×{edge:g}" if edge else f"{name}: no spike tried recovers"


def recovery_text(row: dict) -> str:
    """A row's recovery time in seconds, or that it did not recover within the run."""
    return "not within the run" if row["recovery_s"] is None else f"{row['recovery_s']:.0f}"


def figure(figures: dict[str, dict], out: dict, folder: Path) -> Path:
    """Per policy, two panels around the largest spike: the load (offered, served and retries, calls/s on an axis
    linear to 10 and logarithmic above, so the pre-spike rate and a peak of thousands both show) and the calls
    waiting (backlog and orbit); every series within its axis (experiments/plots.py ``fit_ylim``). A PNG in
    ``folder``."""
    plt = pyplot()
    fig, axes = plt.subplots(2 * len(figures), 1, figsize=(11, 4.4 * len(figures)), sharex=True, squeeze=False)
    for i, (name, s) in enumerate(figures.items()):
        load, waiting = axes[2 * i, 0], axes[2 * i + 1, 0]
        for ax in (load, waiting):
            ax.axvspan(out["spike_at_s"], out["spike_at_s"] + out["spike_length_s"], color="0.88", lw=0)
            ax.grid(True, alpha=0.3)
        load.step(s["t"], s["offered_per_s"], where="post", label="offered (first tries/s)")
        load.step(s["t"], s["served_per_s"], where="post", label="served (calls back/s)")
        peak = float(np.nanmax(s["retries_per_s"])) if len(s["retries_per_s"]) else 0.0
        label = f"retries of the calls first tried then\n(attempts/s, peak {peak:,.0f})"
        load.step(s["t"], s["retries_per_s"], where="post", color="tab:purple", lw=0.8, label=label)
        load.set_yscale("symlog", linthresh=10)
        plain_ticks(load)
        fit_ylim(load)
        load.set_ylabel("calls/s")
        load.set_title(f"clients.retry {name}: load", fontsize=9)
        load.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
        waiting.step(s["t"], s["backlog"], where="post", color="0.4", linestyle="--", label="backlog (pending inputs)")
        waiting.step(s["t"], s["orbit"], where="post", color="tab:red", label="orbit (waiting to retry)")
        fit_ylim(waiting)
        waiting.set_ylabel("calls")
        waiting.set_title(f"clients.retry {name}: calls waiting", fontsize=9)
        waiting.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    axes[-1, 0].set_xlabel(f"time, s (the spike shaded; bins of {figures_bin(figures):.3g} s)")
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "recovery.png"
    try:
        files.write_figure(fig, path, dpi=100)
    finally:
        plt.close(fig)
    return path


def figures_bin(figures: dict[str, dict]) -> float:
    """The figure's bin width (every policy's series has the same bins)."""
    t = next(iter(figures.values()))["t"]
    return float(t[1] - t[0]) if len(t) > 1 else math.nan


def page(out: dict, png: Path, folder: Path) -> Path:
    """The recovery question's report page (``recovery.html`` in ``folder``): the answer in words, its table (an
    HTML table) and the figure, one file."""
    rows = [
        [name, f"×{r['spike']:g}", r["recovered"], recovery_text(r), f"{r['work_lost_s']:,.0f}", attempts_text(r)]
        for name, p in out["policies"].items()
        for r in p["rows"]
    ]
    table = html_table(["policy", "spike", "recovered", "recovery_s", "work_lost_s", "attempts/ok"], rows)
    edges = [edge_text(name, p) for name, p in out["policies"].items()]
    image = base64.b64encode(png.read_bytes()).decode()
    body = (
        f"<h1>What-if: recovery after a spike</h1><p>{html.escape(words(out)[0])}</p>{table}"
        + "".join(f"<p>{html.escape(line)}</p>" for line in edges)
        + "<h2>Offered and served load, retries, backlog and orbit around the largest spike</h2>"
        f"<img alt='recovery around the largest spike' src='data:image/png;base64,{image}'>"
    )
    path = folder / "recovery.html"
    files.write_text(
        path,
        f"<!doctype html><html><head><meta charset='utf-8'><title>What-if: recovery</title><style>{STYLE}</style>"
        f"</head><body>{body}</body></html>",
    )
    return path
