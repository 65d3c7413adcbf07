"""The what-if command's answers as text and as an HTML page (experiments/whatif.py computes them): the answer in
plain words and a table of the options, and for the autoscaler question the latency-versus-cost frontier of every
configuration simulated."""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any

from sim import files
from sim.cli import human


def words(out: dict) -> list[str]:
    """The answer in plain words and a table."""
    lines = [f"Question: {out['question']}."]
    c = out["chosen"]
    if c is None and out.get("unreachable"):
        lines.append(f"Answer: nothing can meet the constraint: {out['unreachable']}.")
    elif c is None:
        why = f": {out['why_none']}" if out.get("why_none") else ""
        lines.append(f"Answer: none of the configurations tried meets the constraint{why}.")
    else:
        m = c["metrics"]
        lines.append(f"Answer: {_settings(out['answer'])}.")
        lines.append(
            f"  predicted: {_ci(m, 'calls_per_s', 'calls/s')}, added-latency p99 {_ci(m, 'added_latency_p99_s', 's')}"
            + (f", all back in {_ci(m, 'first_n_back_s', 's')}" if m.get("first_n_back_s", {}).get("mean") else "")
            + f"; binding limit: {c['binding_limit']}"
        )
        steady = f"{human(c['cost_per_hour'], '$/h')} at steady state; " if not is_drain(out) else ""
        lines.append(
            f"  cost: {steady}this run {_num(c['container_seconds'])} container-seconds, "
            f"{human(c['cost_usd'], '$')} (billed to each container's removal) at {out['billing']}"
        )
        cheap = out.get("cheapest")
        if cheap and cheap["config"] != c["config"]:
            lines.append(
                f"  cheaper per hour of those simulated: {_settings({k: cheap[k] for k in out['answer']})}, "
                f"{human(cheap['cost_per_hour'], '$/h')} (this answer {human(c['cost_per_hour'], '$/h')})"
            )
        if "uncertainty" in out:
            u = out["uncertainty"]
            spans = [f"{k} {_g(r['low'])} .. {_g(r['high'])}" for k, r in u["ranges"].items() if k != "errors_total"]
            holds = (
                ""
                if "holds" not in u
                else ("; meets the constraint under every one" if u["holds"] else f"; fails under some: {u['why']}")
            )
            lines.append(
                f"  under {u['models']} plausible models × seeds ({u['runs']} runs): {', '.join(spans)}{holds}"
            )
    rows = [("chosen", c)] if c else []
    rows += [("next cheaper", r) for r in out["next_cheaper_fails"]]
    rows += [("runner-up", r) for r in out["runners_up"]]
    if rows:
        drains = "first_n_back_s" in c["metrics"] if c else False
        head = "| option | configuration | calls/s | p99 added (s) |" + (" all back (s) |" if drains else "")
        lines += ["", head + " container-s | cost $ | meets |", "|---" * (7 + drains) + "|"]
        for label, r in rows:
            m = r["metrics"]
            conf = _settings({k: v for k, v in r["config"].items() if k not in ("load", "arrivals.rate")})
            back = f" {_ci(m, 'first_n_back_s')} |" if drains else ""
            lines.append(
                f"| {label} | {conf} | {_ci(m, 'calls_per_s')} | {_ci(m, 'added_latency_p99_s')} |{back} "
                f"{_num(r['container_seconds'])} | {r['cost_usd']:.4g} | {'yes' if r['meets'] else 'no: ' + r['why']} |"
            )
    lines.append(f"\n{out['simulations']} simulations ({out['search']}).")
    return lines


def is_drain(out: dict) -> bool:
    """A drain's answer: a one-off burst, no steady state to price per hour."""
    return "first_n_back_s" in (out.get("answer") or {})


def _g(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _settings(d: dict | None) -> str:
    return ", ".join(f"{k}={human(v) if isinstance(v, float) else v}" for k, v in (d or {}).items())


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}"


def _ci(m: dict, key: str, unit: str = "") -> str:
    v = m.get(key, {})
    mean, ci = v.get("mean"), v.get("ci95")
    if mean is None:
        return "—"
    text = f"{mean:.4g}" + (f" ± {ci:.2g}" if ci is not None else "")
    return f"{text} {unit}".strip()


def frontier_report(out: dict, every: list[Any], path: Path) -> Path:
    """The autoscaler question's HTML report: the latency-versus-cost frontier of every simulated configuration
    (``every``: the whatif module's evaluations)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from experiments.plan_page import STYLE

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
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human(v, "$")))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title("Autoscaler settings: latency against cost")
        png = files.write_figure(fig, path / "frontier.png", dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)
    rows = "".join(
        f"<tr><td>{html.escape(_settings(e.settings()))}</td><td>{lat:.3g}</td>"
        f"<td>{_num(e.mean('container_seconds'))}</td><td>{human(cost, '$')}</td></tr>"
        for cost, lat, e in pareto
    )
    lines = words(out)
    body = "".join(f"<p>{html.escape(line)}</p>" for line in lines if line.strip() and not line.startswith("|"))
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("| ")]
    options = "".join(
        "<tr>"
        + "".join(f"<{'th' if i == 0 else 'td'}>{html.escape(c)}</{'th' if i == 0 else 'td'}>" for c in row)
        + "</tr>"
        for i, row in enumerate(cells)
    )
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>What-if: autoscaler</title><style>{STYLE}</style>"
        f"</head><body><h1>What-if: autoscaler settings</h1>{body}"
        f"<h2>The options</h2><table>{options}</table>"
        f"<h2>Latency against cost</h2><img src='data:image/png;base64,{base64.b64encode(png).decode()}'>"
        "<h2>The frontier</h2><table><tr><th>configuration</th><th>p99 added (s)</th>"
        f"<th>container-s</th><th>cost $</th></tr>{rows}</table></body></html>"
    )
    files.write_text(path / "whatif.html", page)
    return path / "whatif.html"
