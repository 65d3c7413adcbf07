"""The simulator's own speed: ``python -m experiments.bench [--json] [--quick] [--only SECTIONS]``.

- Each loadtest preset: simulated calls (issued) per wall second, and wall seconds per run.
- sandboxes-v2: one million sandbox creations on 20,000 and on 100,000 workers, and ten million on 500,000
  (``sandboxes-v2-10m``), each in a fresh process: wall seconds, peak memory (max RSS) and events per wall second;
  and how the wall time grows with sandboxes (125,000 to 1,000,000 on 20,000 workers) and with workers (10,000 to
  640,000 for 250,000 sandboxes): the exponent of a least-squares line through log(wall) against log(size).
- mmc: the project's M/M/c model (the ``mmc`` preset through the full model: a fixed pool under an open loop, which
  models/inputs/platform/fifo.py serves by the workload recursion) against a plain heapq M/M/c event loop written here,
  on the same workload (same arrival rate, service distribution, servers and horizon, numbers drawn in batches as the
  model does) in the same process, at c = 10 (λ = 9/s) and c = 100 (λ = 90/s). The figure is the ratio of customers per
  wall second, model ÷ loop: 1.0 means as fast as a hand-rolled event loop. Also the same run on the Function's events
  with no shortcut at all (``shortcuts = "none"``: neither the recursion nor the engine's calendar and delay lines), as
  any scenario that is not such a queue runs, and the same queue written on SimPy's own loop as callbacks on timeouts
  (``simpy_mmc``), both as ratios to the loop: 1.8 million customers at each size (the yardsticks are in
  experiments/bench/yardsticks.py).
- loadtest scale: the reference load test grown with app copies (one copy per client, 1,000 calls in
  flight each, 60 s), at 1,000 clients (about 10 million calls) in a fresh process (wall, peak memory), its
  independent parts on one process and on two (``--jobs 2``: models/inputs/parts.py), and the exponent of
  wall ∝ calls over 50, 100, 200 and 400 clients (one process).
- SimFaaS's README example (Poisson 0.9/s, work exponential(1.991 s), 600 s idle expiry, 2×10^5 s) scaled per
  request on a 0.05 s decision grid: wall seconds and events, with the idle decisions skipped and without, beside
  SimFaaS itself on the same example (the ``bench`` extra installs it).
- Start-up: wall seconds of a fresh interpreter that does nothing, imports ``experiments.api``, or shows a
  command's ``--help`` (``STARTUP``): what a user waits before anything runs (tests/experiments/test_startup.py checks
  what they import, not their time).
- waits: what a user waits for, each command as a user runs it in a fresh process, once, beside its target
  (``WAITS``): a run with ranges (``--uncertainty``), the server at 800,000 requests in flight, a plan and a plan
  with ranges.
- suite: the README's test command and its fast lane, in this checkout (not with ``--quick``).
Each figure is the best of ``--repeat`` runs (the least disturbed by other load on the machine), but the waits and
the suite, run once. ``--only`` picks sections (``SECTIONS``).
"""

from __future__ import annotations

import argparse
import json

from experiments.bench.sections import SECTIONS, bench
from sim.cli import ArgParser, main_guard


def main(argv: list[str] | None = None) -> int:
    p = ArgParser(prog="python -m experiments.bench", description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quick", action="store_true", help="short runs (a smoke test, not a measurement)")
    p.add_argument("--repeat", type=int, default=3, help="runs per figure; the best is kept (default 3)")
    p.add_argument(
        "--only", default=",".join(SECTIONS), help=f"the sections to run (default all: {','.join(SECTIONS)})"
    )
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat: must be >= 1, got {args.repeat}")
    only = tuple(name.strip() for name in args.only.split(","))
    unknown = [name for name in only if name not in SECTIONS]
    if unknown or not only:
        p.error(f"--only: unknown section {', '.join(unknown) or '(none)'}; expected some of {','.join(SECTIONS)}")
    return main_guard("experiments.bench", lambda: _bench(args, only))


def _bench(args: argparse.Namespace, only: tuple[str, ...]) -> int:
    figures = bench(args.quick, args.repeat, only)
    if args.json:
        print(json.dumps(figures))
        return 0
    for name, f in figures.items():
        for line in SHOW.get(name, lambda f: [])(f):
            print(line)
    return 0


def _loadtests(figs: dict) -> list[str]:
    lines = [f"{'preset':20s} {'calls':>8s} {'wall_s':>8s} {'calls/wall s':>13s} {'events/wall s':>14s}"]
    for name, f in figs.items():
        lines.append(
            f"{name:20s} {f['calls']:8d} {f['wall_s']:8.3f} {f['calls_per_wall_s']:13d} {f['events_per_wall_s']:14d}"
        )
    return lines


def _sandboxes(figs: dict) -> list[str]:
    return [
        f"sandboxes-v2, {name}: {f['sandboxes']} sandboxes, makespan {f['makespan_s']:.1f} s, wall "
        f"{f['wall_s']:.1f} s, peak {f['peak_rss_mib']:.0f} MiB, {f['events_per_wall_s']} events/wall s"
        for name, f in figs.items()
    ]


def _growth(figs: dict) -> list[str]:
    lines = []
    for name, g in figs.items():
        walls = ", ".join(f"{x:,}: {w:.2f} s" for x, w in zip(g["sizes"], g["wall_s"], strict=True))
        lines.append(f"sandboxes-v2 wall time {name.replace('_', ' ')} ({walls}): exponent {g['exponent']}")
    return lines


def _mmc(mm: dict) -> list[str]:
    return [
        f"mmc, c = {mm['servers']}, {mm['customers']:,} customers: model {mm['model_customers_per_wall_s']:,} "
        f"customers/wall s, heapq loop {mm['heapq_customers_per_wall_s']:,}: ratio {mm['ratio']}; on events, no "
        f"shortcut: {mm['ratio_on_events']} beside the same queue on SimPy callbacks: {mm['ratio_simpy_callbacks']}; "
        f"on two engine callbacks with the call records: {mm['ratio_engine_floor']}"
    ]


def _simfaas(figs: dict) -> list[str]:
    lines = []
    for mode, f in figs.items():
        if f is None:
            lines.append("SimFaaS itself: not installed (pip install -e '.[bench]')")
            continue
        what = "SimFaaS itself" if mode == "reference" else f"SimFaaS example here, {mode.replace('_', ' ')}"
        events = f" {f['events']:,} events," if "events" in f else ""
        lines.append(
            f"{what}: {f['wall_s']} s,{events} {f['calls']:,} calls, cold-start probability "
            f"{f['cold_start_probability']}, {f['inputs_running_mean']} running"
        )
    return lines


def _scale_growth(g: dict) -> list[str]:
    walls = ", ".join(f"{c:,} calls: {w:.1f} s" for c, w in zip(g["calls"], g["wall_s"], strict=True))
    return [f"loadtest-copies wall time with calls ({walls}): exponent {g['exponent']}"]


def _scale_10m(runs: list[dict]) -> list[str]:
    return [
        f"loadtest-copies, {t['calls']:,} calls, --jobs {t['jobs']}: {t['wall_s']:.1f} s, peak "
        f"{t['peak_rss_mib']:.0f} MiB (largest process)"
        for t in runs
    ]


def _startup(figs: dict) -> list[str]:
    return ["start-up, wall s: " + ", ".join(f"{what}: {wall:.2f}" for what, wall in figs.items())]


def _waits(figs: dict) -> list[str]:
    lines = []
    for name, f in figs.items():
        failed = f", exit {f['exit']}: {f['error']}" if f["exit"] else ""
        if f["target_s"] is None:  # --quick: smaller questions, no target
            lines.append(f"waits, {name} (quick, smaller): {f['wall_s']:.1f} s{failed}")
            continue
        met = "met" if f["wall_s"] <= f["target_s"] and not f["exit"] else "NOT met"
        lines.append(f"waits, {name}: {f['wall_s']:.1f} s (target <= {f['target_s']:g} s: {met}){failed}")
    return lines


def _suite(figs: dict) -> list[str]:
    if "skipped" in figs:
        return [f"test suite: skipped, {figs['skipped']}"]
    return [
        f"test suite, {lane} lane: {f['wall_s']:.0f} s, {'passed' if f['passed'] else 'FAILED'}"
        for lane, f in figs.items()
    ]


def _core(modules: list[str]) -> list[str]:
    if not modules:
        return ["core: the pure-Python source (python -m sim.build compiles it; SCALESIM_PURE=1 runs the source)"]
    return [f"core: compiled (python -m sim.build): {', '.join(modules)}"]


SHOW = {
    "core": _core,
    "loadtests": _loadtests,
    "sandboxes_v2": _sandboxes,
    "sandboxes_growth": _growth,
    "mmc": _mmc,
    "mmc_100": _mmc,
    "simfaas": _simfaas,
    "loadtest_growth": _scale_growth,
    "loadtest_10M": _scale_10m,
    "startup_s": _startup,
    "waits": _waits,
    "suite": _suite,
}
