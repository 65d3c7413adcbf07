"""The capacity plan in words and as a page (experiments/whatif/plan.py computes it): the answer, the ways compared,
the frontier of cost per hour against p99 over every configuration simulated (plan.py's Options), and each way's use
of its limits against the headroom line. Self-contained HTML (figures embedded, opens offline), styled, with fixed
colours per way and per limit."""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.plots import LIMIT_COLOURS, WAY_COLOURS, pyplot
from experiments.whatif.pages import STYLE
from models.inputs.approaches import PLAN_WAYS
from sim import files

if TYPE_CHECKING:
    import matplotlib.pyplot as plt


def _png(fig: plt.Figure, path: Path) -> str:
    plt = pyplot()
    png = files.write_figure(fig, path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(png).decode()
    return f'<img alt="{path.stem}" src="data:image/png;base64,{data}">'


def _money(v: float, _pos: Any = None) -> str:
    return f"${v:,.2f}" if abs(v) >= 1 else f"${v:.3g}"


def frontier(out: dict, every: list[Any], path: Path) -> str:
    """Cost per hour against p99 of every configuration simulated, by way; the answer ringed; the p99 limit."""
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(8, 4.8))
    for way, colour in WAY_COLOURS.items():
        pts = [o for o in every if o.way == way and math.isfinite(o.mean("cost_per_hour"))]
        pts = [o for o in pts if math.isfinite(o.mean("added_latency_p99_s"))]
        if not pts:
            continue
        for meets in (False, True):
            some = [o for o in pts if o.meets == meets]
            if not some:
                continue
            ax.scatter(
                [o.mean("cost_per_hour") for o in some],
                [o.mean("added_latency_p99_s") for o in some],
                color=colour,
                s=60 if meets else 24,
                edgecolors="black" if meets else colour,
                alpha=0.9,
                label=f"{way} (meets)" if meets else f"{way} (fails)",
            )
    a = out["answer"]
    if a:
        ax.scatter(
            [a["cost_per_hour"]],
            [a["figures"]["added_latency_p99_s"]["mean"]],
            s=260,
            facecolors="none",
            edgecolors="black",
            linewidths=2,
            label="answer",
        )
    ax.axhline(out["p99_limit"], color="#c44e52", ls="--", lw=1, label=f"p99 limit {out['p99_limit']:g} s")
    ax.set_xlabel("cost per hour at steady state")
    ax.set_ylabel("added latency p99, s (mean over seeds)")
    ax.xaxis.set_major_formatter(FuncFormatter(_money))
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Every configuration simulated: cost against p99 (large, outlined: meets)")
    return _png(fig, path / "frontier.png")


def headroom(out: dict, path: Path) -> str:
    """Each way's use of each limit at the target rate, against the line of 1 − headroom."""
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter

    ways = out["ways"]
    limits = [k for k in LIMIT_COLOURS if any(k in r["limits_used"] for r in ways)]
    fig, ax = plt.subplots(figsize=(8, 0.6 + 0.55 * len(ways) * max(1, len(limits)) / 2))
    height = 0.8 / max(1, len(limits))
    for i, r in enumerate(ways):
        for j, k in enumerate(limits):
            v = r["limits_used"].get(k)
            if v is None:
                continue
            y = i + (j - (len(limits) - 1) / 2) * height
            ax.barh(y, min(v, 2.0), height=height * 0.9, color=LIMIT_COLOURS[k], label=k if i == 0 else None)
            if v > 2.0:
                ax.text(2.0, y, f" {v:.0%}", va="center", fontsize=7)
    ax.axvline(1 - out["headroom"], color="#c44e52", ls="--", lw=1, label=f"{1 - out['headroom']:.0%}: the most used")
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_yticks(range(len(ways)), [f"{r['way']}: {_config(r)}" for r in ways])
    ax.invert_yaxis()
    ax.set_xlim(0, 2.1)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0%}"))
    ax.set_xlabel("share of the limit used at the target rate")
    handles, labels = ax.get_legend_handles_labels()
    seen = dict(zip(labels, handles, strict=True))
    ax.legend(seen.values(), seen.keys(), fontsize=7, loc="lower right")
    ax.set_title("Headroom: each limit's use by the chosen configuration of each way")
    ax.grid(True, axis="x", alpha=0.3)
    return _png(fig, path / "headroom.png")


def _table(out: dict) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "way",
            "configuration",
            "meets",
            "calls/s",
            "p99 added, s",
            "containers",
            "$/hour",
            "$/month",
            "warm-up $",
            "binds",
            "headroom",
        )
    )
    rows = []
    for r in out["ways"]:
        f = r["figures"]
        dot = f'<span class="dot" style="background:{WAY_COLOURS[r["way"]]}"></span>'
        meets = '<span class="yes">yes</span>' if r["meets"] else f'<span class="no">no: {html.escape(r["why"])}</span>'
        cells = [
            f"{dot}{r['way']}",
            _config(r),
            meets,
            _range(f.get("calls_per_s"), "{:,.0f}"),
            _range(f.get("added_latency_p99_s")),
            _range(f.get("containers_mean"), "{:,.1f}"),
            _range(f.get("cost_per_hour"), "${:,.2f}"),
            f"${r['cost_per_month']:,.0f}" if math.isfinite(r["cost_per_month"]) else "—",
            _range(f.get("cost_usd_warmup"), "${:,.3g}"),
            html.escape(r["binding_limit"]),
            headroom_text(r),
        ]
        rows.append("<tr>" + "".join(f'<td class="{"text" if i == 2 else ""}">{c}</td>' for i, c in enumerate(cells)))
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _range(f: dict | None, fmt: str = "{:,.3g}") -> str:
    if not f or f.get("mean") is None or not math.isfinite(f["mean"]):
        return "—"
    mid = fmt.format(f["mean"])
    if f["low"] == f["high"]:
        return mid
    return f"{mid} ({fmt.format(f['low'])} .. {fmt.format(f['high'])})"


def _config(row: dict) -> str:
    return PLAN_WAYS[row["way"]].describe(row["config"])


def headroom_text(row: dict) -> str:
    """The least headroom and its limit: 21% (max_containers); none, the worst over: accept_rate at 1,500%."""
    use = row["limits_used"]
    if not use:
        return "no limit in the way"
    k = max(use, key=lambda x: use[x])
    if use[k] > 1:
        return f"none: {k} at {use[k]:,.0%}"
    return f"{1 - use[k]:.0%} ({k})"


def words(out: dict) -> list[str]:
    """The plan in plain words and a table of the ways."""
    p50 = f", p50 ≤ {out['p50_limit']:g} s" if out["p50_limit"] else ""
    lines = [
        f"Plan for {out['demand']}, added-latency p99 ≤ {out['p99_limit']:g} s{p50}, no errors, "
        f"{out['headroom']:.0%} headroom on every limit; containers of {out['billing']}.",
    ]
    a = out["answer"]
    if a is None:
        lines.append("Answer: no way meets it; the table says what each misses.")
    else:
        f = a["figures"]
        lines.append(
            f"Answer: {a['way']} ({_config(a)}): ${a['cost_per_hour']:,.2f}/h, ${a['cost_per_month']:,.0f}/month at "
            f"steady state, warm-up ${f.get('cost_usd_warmup', {}).get('mean', 0):,.3g}; p99 "
            f"{_range(f.get('added_latency_p99_s'))} s; binds: {a['binding_limit']}; headroom {headroom_text(a)}."
        )
    lines += [
        "",
        "| way | configuration | meets | calls/s | p99 added (s) | containers | $/h | $/month | binds | headroom |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in out["ways"]:
        f = r["figures"]
        meets = "yes" if r["meets"] else f"no: {r['why']}"
        agree = "" if r["binding_agreement"] == 1 else f" ({r['binding_agreement']:.0%} of seeds)"
        lines.append(
            f"| {r['way']} | {_config(r)} | {meets} | {_range(f.get('calls_per_s'), '{:,.0f}')} | "
            f"{_range(f.get('added_latency_p99_s'))} | {_range(f.get('containers_mean'), '{:,.1f}')} | "
            f"{_range(f.get('cost_per_hour'), '${:,.2f}')} | ${r['cost_per_month']:,.0f} | "
            f"{r['binding_limit']}{agree} | {headroom_text(r)} |"
        )
    ranges = (
        "seeds (the answer's: plausible models × seeds)"
        if out["answer"] and "uncertainty" in out["answer"]
        else "seeds"
    )
    for way, why in out.get("skipped", {}).items():
        lines.append(f"| {way} | — | skipped: {why} | | | | | | | |")
    lines.append(
        f"\n{out['simulations']} simulations, {out['seeds']} seeds each; ranges (low .. high) over {ranges}; "
        "$/h: the window's mean containers × the price; headroom: 1 − the most used limit's share."
    )
    return lines


def page(out: dict, every: list[Any], path: Path) -> Path:
    """Write plan.html (and its PNGs) under ``path``; return the page."""
    lines = words(out)
    a = out["answer"]
    answer = html.escape(lines[1].removeprefix("Answer: "))
    box = f'<p class="answer{"" if a else " none"}"><strong>Answer.</strong> {answer}</p>'
    head = f'<meta charset="utf-8"><title>Capacity plan</title><style>{STYLE}</style>'
    body = f"""<!doctype html><html><head>{head}</head><body><h1>Capacity plan</h1><p>{html.escape(lines[0])}</p>{box}
<h2>The ways compared</h2>{_table(out)}
<p class="muted">{html.escape(lines[-1].strip())}</p>
<h2>Cost against latency</h2><figure>{frontier(out, every, path)}<figcaption>frontier.png</figcaption></figure>
<h2>Headroom</h2><figure>{headroom(out, path)}<figcaption>headroom.png</figcaption></figure>
<h2>The Function as described</h2><p class="muted">scenario {html.escape(str(out["scenario"]))}, settings
{html.escape(", ".join(out["sets"]))}</p></body></html>"""
    target = path / "plan.html"
    files.write_text(target, body)
    return target
