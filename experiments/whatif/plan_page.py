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

from experiments.plots import LIMIT_COLOURS, WAY_COLOURS, fit_ylim, pyplot
from experiments.whatif.pages import STYLE, flags_html, html_table, ranges_html
from models.inputs.approaches import PLAN_WAYS
from models.inputs.callers.demand import parse_shape
from models.runs import build_scenario
from sim import files
from sim.scenario import flatten, to_dict

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
    fit_ylim(ax, floor=None)
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
    """The ways compared: each way's chosen configuration, its figures with their ranges, and the ways skipped."""
    head = ("way", "configuration", "meets", "calls/s", "p99 added, s", "containers", "$/hour", "$/month 24×7")
    head += ("warm-up $", "binds", "headroom")
    rows = []
    for r in out["ways"]:
        f = r["figures"]
        dot = f'<span class="dot" style="background:{WAY_COLOURS[r["way"]]}"></span>'
        meets = '<span class="yes">yes</span>' if r["meets"] else f'<span class="no">no: {html.escape(r["why"])}</span>'
        rows.append(
            [
                f"{dot}{r['way']}",
                html.escape(_config(r)),
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
        )
    for way, why in out.get("skipped", {}).items():
        rows.append([html.escape(way), "—", f'<span class="no">skipped: {html.escape(why)}</span>', *["—"] * 8])
    return html_table(list(head), rows, markup=True)


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
    """The least headroom and its limit: 21% (max_containers); a way that fails has none to show (—)."""
    use = row["limits_used"]
    if not row["meets"]:
        return "—"
    if not use:
        return "no limit in the way"
    k = max(use, key=lambda x: use[x])
    if use[k] > 1:
        return f"none: {k} at {use[k]:,.0%}"
    return f"{1 - use[k]:.0%} ({k})"


def demand_label(rate: float, shape: str, window: dict | None, trace: str | None = None) -> str:
    if trace is not None:
        return f"the trace {trace}, sized on {window['said']}"
    if parse_shape(shape).kind == "steady":
        return f"{rate:,.0f} calls/s"
    return f"{rate:,.0f} calls/s × {shape}, sized on {window['said']}" if window else f"{rate:,.0f} calls/s × {shape}"


def described(sc: Any) -> dict[str, Any]:
    """The Function as the user described it: every scenario key whose value differs from the model's default (its
    name and words left out)."""
    mine = flatten(to_dict(sc))
    default = flatten(to_dict(build_scenario({"model": sc.model})))
    skip = ("name", "description", "source")
    return {k: v for k, v in mine.items() if k not in skip and (k not in default or default[k] != v)}


def words(out: dict) -> list[str]:
    """The plan in plain words: what was asked, the answer, the onset and the money over the demand, a table of the
    ways and one of every combination simulated, and what the figures rest on."""
    p50 = f", p50 ≤ {out['p50_limit']:g} s" if out["p50_limit"] else ""
    lines = [
        f"Plan for {out['demand']}, added-latency p99 ≤ {out['p99_limit']:g} s{p50}, no errors, "
        f"{out['headroom']:.0%} headroom on every limit; containers of {out['billing']}.",
    ]
    a = out["answer"]
    month = out.get("month")
    if a is None:
        lines.append("Answer: no way meets it; the table says what each misses.")
    else:
        f = a["figures"]
        money = (
            f"${month['cost_per_month']:,.0f}/month over the demand"
            if month
            else f"${a['cost_per_month']:,.0f}/month (24×7 at this rate)"
        )
        lines.append(
            f"Answer: {a['way']} ({_config(a)}): {_range(f.get('cost_per_hour'), '${:,.2f}')}/h at steady state, "
            f"{money}, warm-up ${f.get('cost_usd_warmup', {}).get('mean', 0):,.3g}; p99 "
            f"{_range(f.get('added_latency_p99_s'))} s; binds: {a['binding_limit']}; headroom {headroom_text(a)}."
        )
    if a and a["limits_used"]:
        use = a["limits_used"]
        lines.append("Headroom per limit: " + ", ".join(f"{k} {1 - v:.0%}" for k, v in sorted(use.items())) + ".")
    lines += onset_words(out.get("onset"), out.get("sized_rate"))
    lines += month_words(month)
    if a and a["extrapolated"]:
        lines.append("Outside the calibration (extrapolated): " + "; ".join(a["extrapolated"]) + ".")
    if a and "uncertainty_missing" in a:
        lines.append(f"No ranges: {a['uncertainty_missing']}.")
    lines += [
        "",
        "| way | configuration | meets | calls/s | p99 added (s) | containers | $/h | $/month 24×7 | binds "
        "| headroom |",
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
    for way, why in out.get("skipped", {}).items():
        lines.append(f"| {way} | — | skipped: {why} | | | | | | | |")
    lines += ["", "Every combination simulated:", "", "| way | configuration | $/h | p99 added (s) | why not |"]
    lines.append("|---|---|---|---|---|")
    for c in out.get("combinations", []):
        f = c["figures"]
        lines.append(
            f"| {c['way']} | {_config(c)} | {_range(f.get('cost_per_hour'), '${:,.2f}')} | "
            f"{_range(f.get('added_latency_p99_s'))} | {c['loses']} |"
        )
    ranges = (
        "seeds (the answer's: plausible models × seeds)"
        if out["answer"] and "uncertainty" in out["answer"]
        else "seeds"
    )
    lines.append(
        f"\n{out['simulations']} simulations, {out['seeds']} seeds each; ranges (low .. high) over {ranges}; "
        "$/h: the containers billed per hour after the detected warm-up × the price; headroom: 1 − the most used "
        "limit's share."
    )
    return lines


def onset_words(o: dict | None, sized: float | None) -> list[str]:
    """The peak's onset checked, and the pre-warm it needs (experiments/whatif/peak.py)."""
    if not o:
        return []
    first = o["tries"][0]
    day, into = divmod(o["at_s"] % (7 * 86_400), 86_400)
    when = (
        f"day {day:.0f} {into // 3600:02.0f}:{into % 3600 // 60:02.0f}" if o["period_h"] >= 24 else f"{o['at_s']:g} s"
    )
    lines = [
        f"Onset: the steepest rise ({when}; {o['rises']} like it every {_span(o['period_h'])} of the demand), run from "
        f"{o['lead_s']:g} s "
        f"before it: p99 {first['p99_s']:.3g} s from the rise on for {o['window_s']:g} s without pre-warming: "
        + ("meets." if first["meets"] else f"misses ({first['why']}).")
    ]
    w = o["prewarm"]
    if w:
        lines.append(
            f"Pre-warm: min_containers {w['min_containers']} on each of {w['copies']} cop"
            f"{'y' if w['copies'] == 1 else 'ies'} from {w['lead_s']:g} s before the rise (a modal.Cron Function "
            f"calling Function.update_autoscaler(min_containers={w['min_containers']}), and back to 0 after the peak): "
            f"p99 {w['p99_s']:.3g} s, verified; "
            + (
                f"${w['cost_per_onset']:,.3g} per onset."
                if w["cost_per_onset"] >= 0
                else f"it saves ${-w['cost_per_onset']:,.3g} per onset (the pool that grows late overshoots)."
            )
        )
    elif not o["meets"]:
        lines.append(f"Pre-warm: none found that meets it: {o.get('why', '')}.")
    return lines


def _span(hours: float) -> str:
    """A period in words: 168 h, 20 min, 45 s."""
    if hours >= 1:
        return f"{hours:,.4g} h"
    return f"{hours * 60:,.4g} min" if hours * 60 >= 1 else f"{hours * 3600:,.4g} s"


def _signed(usd: float) -> str:
    """Money a month that may be a saving: $42, or saves $42."""
    return f"${usd:,.0f}" if usd >= 0 else f"saves ${-usd:,.0f}"


def month_words(m: dict | None) -> list[str]:
    """Money over the demand: serving, pre-warm, and the 24×7 upper bound."""
    if not m:
        return []
    levels = ", ".join(f"${x['cost_per_hour']:,.2f}/h at {x['rate']:,.4g} calls/s" for x in m["levels"])
    line = (
        f"Per month over the demand: ${m['cost_per_month']:,.0f} (serving ${m['serving_per_month']:,.0f}, from "
        f"{levels}, linear in between; pre-warm {_signed(m['prewarm_per_month'])} for {m['onsets_per_month']:,.1f} "
        f"onsets). Upper bound, the peak 24×7: ${m['peak_24x7_per_month']:,.0f}/month."
    )
    if "standing_min_per_month" in m:
        line += f" A standing minimum instead of the schedule: +${m['standing_min_per_month']:,.0f}/month."
    return [line]


def page(out: dict, every: list[Any], path: Path) -> Path:
    """Write plan.html (and its PNGs) under ``path``; return the page."""
    lines = words(out)
    a = out["answer"]
    answer = html.escape(lines[1].removeprefix("Answer: "))
    box = f'<p class="answer{"" if a else " none"}"><strong>Answer.</strong> {answer}</p>'
    per_limit = next((f"<p>{html.escape(x)}</p>" for x in lines if x.startswith("Headroom per limit")), "")
    demand = "".join(f"<p>{html.escape(x)}</p>" for x in onset_words(out.get("onset"), out.get("sized_rate")))
    demand += "".join(f"<p>{html.escape(x)}</p>" for x in month_words(out.get("month")))
    missing = (
        f'<p class="no">{html.escape(a["uncertainty_missing"])}: no ranges.</p>'
        if a and "uncertainty_missing" in a
        else ""
    )
    flags = flags_html(a["extrapolated"], "the answer") + (missing or ranges_html(a.get("uncertainty"))) if a else ""
    head = f'<meta charset="utf-8"><title>Capacity plan</title><style>{STYLE}</style>'
    body = f"""<!doctype html><html><head>{head}</head><body><h1>Capacity plan</h1><p>{html.escape(lines[0])}</p>{box}
{per_limit}{flags}{f"<h2>The demand: its onset and its month</h2>{demand}{_levels(out.get('month'))}" if demand else ""}
<h2>The ways compared</h2>{_table(out)}
<p class="muted">{html.escape(lines[-1].strip())}</p>
<h2>Every combination simulated</h2>{_combinations(out)}
<h2>Cost against latency</h2><figure>{frontier(out, every, path)}<figcaption>frontier.png</figcaption></figure>
<h2>Headroom</h2><figure>{headroom(out, path)}<figcaption>headroom.png</figcaption></figure>
<h2>The Function as described</h2>{_described(out)}</body></html>"""
    target = path / "plan.html"
    files.write_text(target, body)
    return target


def _combinations(out: dict) -> str:
    rows = []
    for c in out.get("combinations", []):
        f = c["figures"]
        dot = f'<span class="dot" style="background:{WAY_COLOURS[c["way"]]}"></span>'
        rows.append(
            [
                f"{dot}{c['way']}",
                html.escape(_config(c)),
                _range(f.get("cost_per_hour"), "${:,.2f}"),
                _range(f.get("added_latency_p99_s")),
                html.escape(c["loses"]),
            ]
        )
    return html_table(["way", "configuration", "$/hour", "p99 added, s", "why not the answer"], rows, markup=True)


def _levels(m: dict | None) -> str:
    if not m:
        return ""
    rows = [[f"{x['rate']:,.4g}", f"${x['cost_per_hour']:,.2f}", x["simulated"]] for x in m["levels"]]
    return html_table(["calls/s", "$/hour at steady state", "from"], rows)


def _described(out: dict) -> str:
    """Every key of the user's scenario that differs from the model's default, and what the plan set."""
    rows = [[k, str(v)] for k, v in out.get("described", {}).items()]
    said = f"scenario {html.escape(str(out['scenario']))}; settings {html.escape(', '.join(out['sets']))}"
    return html_table(["key", "value (differs from the default)"], rows) + f'<p class="muted">{said}</p>'
