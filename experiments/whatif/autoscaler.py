"""The autoscaler question: the min_containers, buffer_containers and scaledown window that keep p99 ≤ ``--p99`` at
the fewest container-seconds under a demand shape (default: docs/sources.md §7's daily shape), checked on the shape's
busiest window of the run's length (a day: the week's peak day), not its first.

Search: for each (buffer, window) of a small grid, bisection on min_containers (p99 falls as it rises); the cheapest
passing configuration wins. The grid's searches run side by side (``smallest_all``: each round's values of every
search simulated together, both cores busy), and a value that misses by far at its first seed (an error, or p99 over
CLEAR × the limit: ``far_miss``) is not run at its other seeds. Every simulated configuration is a point of the
latency-versus-cost frontier drawn in its HTML page (``--out``).
"""

from __future__ import annotations

import argparse
import base64
import math
from pathlib import Path

from experiments.plots import fit_ylim, pyplot
from experiments.whatif.base import P99, RATE, SHAPE, Flag, Search, positive
from experiments.whatif.pages import html_table, number_text, search_page, settings_text, write_page
from experiments.whatif.search import (
    MAX_KNOB,
    Evaluation,
    Simulator,
    far_miss,
    latency_ok,
    peak_window,
    robustness,
    row,
    size_search,
    smallest_all,
)
from models.runs import load_scenario
from sim import files
from sim.cli import human
from sim.scenario import ScenarioError


class Autoscaler(Search):
    """The autoscaler settings that keep a shaped demand's p99 at the least cost (this module's docstring)."""

    name = "autoscaler"
    flags = (
        Flag("--buffers", "autoscaler: buffer_containers to try (default 0,1,2)", "0,1,2"),
        Flag("--windows", "autoscaler: scaledown windows to try, s (default 10,60,300)", "10,60,300"),
        RATE,
        P99,
        SHAPE,
    )
    side_by_side = 9  # its default grid's searches, each round (3 buffers × 3 windows)
    # a day for the daily shape, one input per container (each container its own slot, so scaling shows)
    defaults = ("duration_s=86400", "warmup_s=0", "function.max_inputs=1")
    shape = "daily(0.3, 0.2)"

    def search(self, args: argparse.Namespace, sim: Simulator, shape: str) -> tuple[dict, list[Evaluation]]:
        rate = positive("--rate")(args.rate or "1")
        buffers = [_int_list("--buffers", x) for x in args.buffers.split(",")]
        windows = [positive("--windows", float, 1200)(x) for x in args.windows.split(",")]
        load_scenario(sim.scenario, [*sim.sets, f"arrivals.shape={shape}"], sim.params)
        out, every = autoscaler(sim, args.p99, buffers, windows, shape, rate)
        out["p99_limit"] = args.p99
        out["search"] = f"bisection on min_containers for each of {len(buffers)} buffers × {len(windows)} windows"
        if args.uncertainty and out["chosen"]:
            out["uncertainty"] = robustness(sim, out, latency_ok(args.p99), args.jobs)
        return out, every

    def page(self, out: dict, every: list[Evaluation], folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        return write_page(
            folder, "whatif.html", search_page(out, "What-if: autoscaler settings", frontier(every, out, folder))
        )


def autoscaler(
    sim: Simulator, p99: float, buffers: list[int], windows: list[float], shape: str, rate: float
) -> tuple[dict, list[Evaluation]]:
    window = peak_window(sim, shape)
    fixed = {"load": "arrivals", "arrivals.rate": rate, "arrivals.shape": shape, "arrivals.start_s": window["start_s"]}
    # about half the doubling's steps and two more per grid point (a search finds a small floor early)
    size_search(sim, "autoscaler", len(buffers) * len(windows) * (math.log2(MAX_KNOB) / 2 + 2), [fixed])
    every: list[Evaluation] = []
    passing: list[Evaluation] = []
    grid = [
        {**fixed, "autoscaler.buffer_containers": b, "autoscaler.scaledown_window_s": w}
        for b in buffers
        for w in windows
    ]
    for best, seen in smallest_all(sim, "autoscaler.min_containers", latency_ok(p99), grid, 0, far_miss(p99)):
        every += seen.values()
        if best is not None:
            passing.append(seen[best])
    question = (
        f"min_containers, buffer_containers and scaledown window keeping p99 <= {p99:g} s at the fewest "
        f"container-seconds, for {rate:g} calls/s × {shape}, checked on {window['said']}"
    )
    ranked = sorted(passing, key=lambda e: e.mean("container_seconds"))
    out = {
        "question": question,
        "window": window,
        "answer": ranked[0].settings() if ranked else None,
        "chosen": row(ranked[0]) if ranked else None,
        "runners_up": [row(e) for e in ranked[1:4]],
        "next_cheaper_fails": [row(e) for e in _cheaper_failing(every, ranked[0])] if ranked else [],
    }
    return out, every


def _cheaper_failing(every: list[Evaluation], best: Evaluation) -> list[Evaluation]:
    """The evaluated configurations cheaper than the answer: each fails the constraint."""
    cheaper = [e for e in every if e.mean("container_seconds") < best.mean("container_seconds")]
    return sorted(cheaper, key=lambda e: -e.mean("container_seconds"))[:3]


def frontier(every: list[Evaluation], out: dict, folder: Path) -> str:
    """The latency-versus-cost frontier of every simulated configuration (``every``: the search's evaluations) as
    HTML: its figure (frontier.png in ``folder``, every point within the axes) and its table."""
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter

    pts = [(e.mean("cost_usd"), e.mean("added_latency_p99_s"), e) for e in every]
    pts = [p for p in pts if math.isfinite(p[0]) and math.isfinite(p[1])]
    pareto, best_latency = [], math.inf
    for cs, lat, e in sorted(pts, key=lambda p: (p[0], p[1])):
        if lat < best_latency:
            pareto.append((cs, lat, e))
            best_latency = lat
    fig, ax = plt.subplots(figsize=(8, 5))
    try:
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, color="0.6", label="configurations simulated")
        ax.plot(
            [p[0] for p in pareto], [p[1] for p in pareto], "o-", color="C0", label="frontier (no cheaper is faster)"
        )
        if out["chosen"]:
            c = out["chosen"]
            ax.scatter(
                [c["cost_usd"]],
                [c["metrics"]["added_latency_p99_s"]["mean"]],
                s=120,
                facecolors="none",
                edgecolors="C3",
                linewidths=2,
                label="answer",
                zorder=3,
            )
        limit = out.get("p99_limit")
        if limit:
            ax.axhline(limit, color="C3", ls="--", lw=1, label=f"p99 limit {limit:g} s")
        ax.set_xlabel("cost of the run, billed to each container's removal")
        ax.set_ylabel("added latency p99, s (mean over seeds)")
        ax.set_yscale("log")
        fit_ylim(ax)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human(v, "$")))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title("Autoscaler settings: latency against cost")
        png = files.write_figure(fig, folder / "frontier.png", dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)
    rows = [
        [settings_text(e.settings()), f"{lat:.3g}", number_text(e.mean("container_seconds")), human(cost, "$")]
        for cost, lat, e in pareto
    ]
    image = base64.b64encode(png).decode()
    return (
        f"<h2>Latency against cost</h2><img alt='frontier' src='data:image/png;base64,{image}'>"
        f"<h2>The frontier</h2>{html_table(['configuration', 'p99 added (s)', 'container-s', 'cost $'], rows)}"
    )


def _int_list(name: str, text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise ScenarioError(f"{name}: expected whole numbers separated by commas, got {text!r}") from None
    if not 0 <= v <= 100_000:
        raise ScenarioError(f"{name}: must be within 0 .. 100000, got {v}")
    return v
