"""What the what-if questions' pages and words share: the house style of their HTML pages, and a search's answer
(the capacity, autoscaler and drain questions') in plain words and a table of the options."""

from __future__ import annotations

from sim.cli import human

STYLE = (
    "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;"
    "padding:0 1em;color:#1d2430;line-height:1.45}"
    "h1{font-size:1.6em;margin-bottom:.2em}"
    "h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #e3e6ea;padding-bottom:.2em}"
    ".answer{background:#eef6ee;border-left:4px solid #55a868;padding:.8em 1em;border-radius:4px}"
    ".none{background:#fbeeee;border-left-color:#c44e52}"
    "table{border-collapse:collapse;font-size:13px;width:100%}"
    "th,td{border-bottom:1px solid #e3e6ea;padding:5px 8px;text-align:right;vertical-align:top}"
    "th{background:#f5f7f9} td:first-child,th:first-child,td.text{text-align:left}"
    ".yes{color:#2e7d32;font-weight:600} .no{color:#b23b3b}"
    ".dot{display:inline-block;width:.8em;height:.8em;border-radius:50%;margin-right:.4em;vertical-align:-.05em}"
    "img{max-width:100%} figure{margin:1.2em 0} figcaption{color:#667;font-size:12px} .muted{color:#667;font-size:13px}"
)


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
        lines.append(f"Answer: {settings_text(out['answer'])}.")
        lines.append(
            f"  predicted: {_ci(m, 'calls_per_s', 'calls/s')}, added-latency p99 {_ci(m, 'added_latency_p99_s', 's')}"
            + (f", all back in {_ci(m, 'first_n_back_s', 's')}" if m.get("first_n_back_s", {}).get("mean") else "")
            + f"; binding limit: {c['binding_limit']}"
        )
        steady = f"{human(c['cost_per_hour'], '$/h')} at steady state; " if not is_drain(out) else ""
        lines.append(
            f"  cost: {steady}this run {number_text(c['container_seconds'])} container-seconds, "
            f"{human(c['cost_usd'], '$')} (billed to each container's removal) at {out['billing']}"
        )
        cheap = out.get("cheapest")
        if cheap and cheap["config"] != c["config"]:
            lines.append(
                f"  cheaper per hour of those simulated: {settings_text({k: cheap[k] for k in out['answer']})}, "
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
            conf = settings_text({k: v for k, v in r["config"].items() if k not in ("load", "arrivals.rate")})
            back = f" {_ci(m, 'first_n_back_s')} |" if drains else ""
            lines.append(
                f"| {label} | {conf} | {_ci(m, 'calls_per_s')} | {_ci(m, 'added_latency_p99_s')} |{back} "
                f"{number_text(r['container_seconds'])} | {r['cost_usd']:.4g} | "
                f"{'yes' if r['meets'] else 'no: ' + r['why']} |"
            )
    lines.append(f"\n{out['simulations']} simulations ({out['search']}).")
    return lines


def is_drain(out: dict) -> bool:
    """A drain's answer: a one-off burst, no steady state to price per hour."""
    return "first_n_back_s" in (out.get("answer") or {})


def _g(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def settings_text(d: dict | None) -> str:
    """Settings as ``key=value, ...`` (floats in short form)."""
    return ", ".join(f"{k}={human(v) if isinstance(v, float) else v}" for k, v in (d or {}).items())


def number_text(x: float | None) -> str:
    """A count with thousands' commas (— for none)."""
    return "—" if x is None else f"{x:,.0f}"


def _ci(m: dict, key: str, unit: str = "") -> str:
    v = m.get(key, {})
    mean, ci = v.get("mean"), v.get("ci95")
    if mean is None:
        return "—"
    text = f"{mean:.4g}" + (f" ± {ci:.2g}" if ci is not None else "")
    return f"{text} {unit}".strip()
