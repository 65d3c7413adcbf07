"""What ``calibration.fit`` fits to: its SOURCEs, each a reference table or a recorded trace.

- A reference table: ``loadtest``, ``coldstart``, ``sandboxes`` (calibration/reference/NAME.toml and the figures of
  calibration/coldstart.py and calibration/sandboxes.py: the published figures of docs/sources.md), or the
  path of such a TOML file.
- A trace directory (calibration/trace.py), recorded on Modal by ``calibration.run`` or written by the simulator.
  A trace of calls becomes targets for the method of simulated moments: each of its ``STATISTICS`` (computed by
  ``trace.statistics``, the function the simulated side uses too) is a target whose band is its bootstrap standard
  error over the trace's calls (``RESAMPLES`` resamples, floored by ``FLOORS``), and its experiment is the trace's
  own scenario (its manifest's preset and ``set``), simulated with the candidate's parameters.

The bootstrap resamples calls independently; calls of one closed loop are correlated in time, so the standard errors
are, if anything, too small. The floors keep a figure's band from shrinking below what the fit can resolve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from calibration import trace
from calibration.objective import Experiment
from calibration.report import write_settings
from calibration.targets import REFERENCE, Target
from sim import files
from sim.dists import DistError, parse_dist
from sim.scenario import ScenarioError

REFERENCES = {"loadtest": REFERENCE, "coldstart": None, "sandboxes": None}  # names; None: figures in the code
STATISTICS = (
    "calls_per_s",
    "added_latency_p50_s",
    "added_latency_p90_s",
    "added_latency_p99_s",
    "first_n_back_s",
    *(f"calls_back_per_s_q{q}" for q in range(1, trace.QUARTERS + 1)),
    *(f"error_share_{k}" for k in trace.KINDS[1:]),
    "containers_seen",
)
RESAMPLES = 200
# (relative, absolute) floors of a statistic's band, by prefix: what the fit can resolve whatever the trace's size
FLOORS = {"calls": (0.02, 0.5), "added": (0.02, 0.01), "first": (0.02, 0.05), "error": (0.0, 0.002), "cont": (0.05, 1)}


@dataclass
class Source:
    """One SOURCE: its model (loadtest, coldstart, sandboxes), and for a trace its targets and experiment."""

    name: str
    model: str
    trace: trace.Trace | None = None
    targets: tuple[Target, ...] = ()
    experiment: Experiment | None = None
    bootstrap: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)  # value, se, lo, hi


MODEL_OF_KIND = {"calls": "loadtest", "starts": "coldstart", "sandboxes": "sandboxes"}


def names(texts: list[str]) -> dict[str, str]:
    """Each trace directory's name in reports and as an experiment: the shortest tail of its path that no other
    SOURCE shares (``reference/spawn`` and ``light/spawn`` for two spawn runs of a plan: named by their folder alone,
    their experiments would be one)."""
    parts = {t: Path(t).resolve().parts for t in texts if files.is_folder(t)}
    out = {}
    for t, mine in parts.items():
        n = 1
        while n < len(mine) and any(o[-n:] == mine[-n:] for u, o in parts.items() if u != t):
            n += 1
        out[t] = "/".join(mine[-n:])
    return out


def load(text: str, seed: int = 0, name: str | None = None) -> Source:
    """A SOURCE argument as a Source (ScenarioError naming it when it is neither a reference nor a trace); a trace
    is named ``name`` (default: its folder's name)."""
    if text in REFERENCES:
        return Source(text, text)
    path = Path(text)
    if files.is_folder(path):
        tr = trace.read(path)
        name = name or tr.name
        src = Source(str(path), MODEL_OF_KIND[tr.kind], trace=tr)
        if tr.kind == "calls":
            sets = tuple(f"{k}={v}" for k, v in tr.manifest["scenario"].get("set", {}).items())
            check_window(tr, sets)
            src.targets, src.bootstrap = trace_targets(tr, seed, name)
            src.experiment = Experiment(name, tr.manifest["scenario"]["preset"], sets, statistics=True)
        return src
    if files.exists(path):  # a file: a regular one within its cap (a named pipe or a device: one line, never read)
        table = files.read_toml(path, "a TOML reference table")  # a regular file within its cap, its depth capped
        if table.get("kind") != "reference" or table.get("model") != "loadtest":
            raise ScenarioError(f"{path}: not a reference table (kind = 'reference', model = 'loadtest')")
        return Source(str(path), "loadtest")
    raise ScenarioError(
        f"{text}: not a source (a trace directory, a reference table file, or one of {', '.join(REFERENCES)})"
    )


def check_window(tr: trace.Trace, sets: tuple[str, ...]) -> None:
    """A trace of calls is fitted by simulating its experiment (its preset and ``set``), whose figures are taken over
    that scenario's window [warmup_s, duration_s); the trace's own window must be that one (ScenarioError naming the
    manifest), else the fit compares the trace's figures over one window with the model's over another."""
    from models.runs import load_scenario

    preset = tr.manifest["scenario"]["preset"]
    sc = load_scenario(preset, list(sets), [])
    if sc.model != "function":
        raise ScenarioError(
            f"{tr.path / trace.MANIFEST}: scenario.preset {preset!r} is a {sc.model} scenario; a trace of calls is "
            "fitted by a load test's (loadtest-...)"
        )
    want, got = (sc.warmup_s, sc.duration_s), (tr.window.start, tr.window.end)
    if not all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) for a, b in zip(want, got, strict=True)):
        raise ScenarioError(
            f"{tr.path / trace.MANIFEST}: window [{got[0]:g}, {got[1]:g}) is not its experiment's [warmup_s, "
            f"duration_s) = [{want[0]:g}, {want[1]:g}) ({preset} with its set): the fit would compare the trace over "
            "one window with the model over another"
        )


def floor(stat: str, value: float) -> float:
    rel, absolute = next(v for k, v in FLOORS.items() if stat.startswith(k))
    return max(rel * abs(value), absolute)


def trace_targets(tr: trace.Trace, seed: int = 0, name: str | None = None) -> tuple[tuple[Target, ...], dict]:
    """The trace's statistics as targets of the experiment ``name`` (default: the trace's folder's name), each with
    its bootstrap band; and the bootstrap table."""
    table, window = tr.table, tr.window
    stats = trace.statistics(table, window)
    rng = np.random.default_rng(seed)
    n = len(table)
    if n == 0:
        raise ScenarioError(f"{tr.path}: the trace holds no calls")
    if not table["finished"].notna().any():
        raise ScenarioError(f"{tr.path}: no call came back (every 'finished' is NaN): not a measurement to fit")
    if not (table["kind"] == "").any():  # (calibration.run keeps such a run's trace as WHAT.failed)
        raise ScenarioError(f"{tr.path}: no call succeeded (every call has an error kind): not a measurement to fit")
    draws: dict[str, list[float]] = {k: [] for k in STATISTICS}
    for _ in range(RESAMPLES):
        resampled = trace.statistics(table.iloc[rng.integers(0, n, n)], window)
        for k in STATISTICS:
            v = resampled.get(k)
            if v is not None and math.isfinite(v):
                draws[k].append(float(v))
    targets, boot = [], {}
    for k in STATISTICS:
        v = stats.get(k)
        if v is None or not math.isfinite(v) or len(draws[k]) < RESAMPLES // 2:
            continue  # the trace does not have this figure (e.g. no container ids, not all first calls back)
        se = float(np.std(draws[k], ddof=1))
        lo, hi = (float(x) for x in np.percentile(draws[k], (2.5, 97.5)))
        boot[k] = (float(v), se, lo, hi)
        targets.append(Target(name or tr.name, k, float(v), band_s=max(se, floor(k, v))))
    return tuple(targets), boot


# --- the probes: cold starts and sandbox creates ------------------------------------------------------------------
COLDSTART_TRACE_OUT = Path(__file__).resolve().parent / "params" / "coldstart-trace.toml"


ZERO_SPREAD = 1e-6  # a sigma below this (starts alike to a millionth): every start took the same time, a constant


def fit_starts(traces: tuple[Source, ...], path: Path) -> str:
    """The input plane's cold-start distribution from traces of starts: a lognormal fitted by maximum likelihood to
    the starts' totals (the model draws each cold start from ``autoscaler.cold_start``, so the distribution is the
    parameter; no simulation needed), with a bootstrap interval for the median. Starts that all took the same time
    (sigma below ``ZERO_SPREAD``) give ``constant(median)``, not a lognormal of sigma 0 (which ``run`` rejects); a
    fitted distribution that ``run`` would refuse (its tail past 1e12 s or overflowing: sim/dists.py) is a
    ScenarioError naming the trace and the column, and nothing is written."""
    total = np.concatenate([s.trace.table["total"].to_numpy(dtype=float) for s in traces])
    total = total[np.isfinite(total)]
    where = traces[0].trace.path / trace.TABLES["starts"]
    if len(total) < 2 or (total <= 0).any():
        raise ScenarioError(f"{where}: column 'total': needs at least two positive start times")
    logs = np.log(total)
    median, sigma = float(np.exp(logs.mean())), float(logs.std(ddof=1))
    alike = not sigma >= ZERO_SPREAD
    text = f"constant({median:.4g})" if alike else f"lognormal({median:.4g}, {sigma:.3g})"
    try:
        dist = parse_dist(text)
    except DistError as e:
        raise ScenarioError(
            f"{where}: column 'total': starts of {total.min():.3g} to {total.max():.3g} s fit {text}, which run "
            f"refuses: {e}"
        ) from None
    rng = np.random.default_rng(0)
    boot = [float(np.exp(rng.choice(logs, len(logs)).mean())) for _ in range(RESAMPLES)]
    lo, hi = np.percentile(boot, (2.5, 97.5))
    fitted = dist.mean if alike else median * math.exp(2.326 * sigma)  # finite: parse_dist bounds the tail
    comments = [
        f"Written by `python -m calibration.fit {' '.join(str(s.trace.path) for s in traces)}`: the cold start of a",
        f"container, {'a constant: every one of' if alike else 'a lognormal fitted by maximum likelihood to'} "
        f"{len(total)} recorded starts{' took the same time' if alike else ''}.",
        f"  median {median:.4g} s (95% bootstrap interval {lo:.4g} .. {hi:.4g} s over {RESAMPLES} resamples),",
        f"  sigma {sigma:.3g}; p99 of the trace {np.percentile(total, 99):.4g} s, of the fit {fitted:.4g} s",
    ]
    return write_settings(path, [f"autoscaler.cold_start={text}"], comments, "loadtest-spawn")


def schedule_p50(traces: tuple[Source, ...]) -> float:
    """The median schedule latency (placed − requested) of traces of sandbox creates."""
    lat = np.concatenate([(s.trace.table["placed"] - s.trace.table["requested"]).to_numpy() for s in traces])
    lat = lat[np.isfinite(lat)]
    if not len(lat) or (lat < 0).any():
        raise ScenarioError(f"{traces[0].trace.path}: columns 'placed', 'requested': none placed, or placed first")
    return float(np.median(lat))
