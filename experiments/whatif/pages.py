"""What the what-if questions' pages and words share: the house style of their HTML pages, what the numbers rest on
(the extrapolation flags and, with ``--uncertainty``, the ranges) as HTML, and a search's answer (the capacity,
autoscaler and drain questions') in plain words, a table of the options, and a page."""

from __future__ import annotations

import html
import re
from pathlib import Path

from sim import files
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
    "th{background:#f5f7f9} td:first-child,th:first-child,.text{text-align:left}"
    ".yes{color:#2e7d32;font-weight:600} .no{color:#b23b3b}"
    ".dot{display:inline-block;width:.8em;height:.8em;border-radius:50%;margin-right:.4em;vertical-align:-.05em}"
    "img{max-width:100%} figure{margin:1.2em 0} figcaption{color:#667;font-size:12px} .muted{color:#667;font-size:13px}"
    ".flags{background:#fdf6e3;border-left:4px solid #dd8452;padding:.6em 1em;border-radius:4px}"
    ".flags.inside{background:#f5f7f9;border-left-color:#8c8c8c} .flags ul{margin:.3em 0}"
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
    head, rows = options(out)
    if rows:
        lines += ["", "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        lines += ["| " + " | ".join(cells) + " |" for _, cells in rows]
    lines.append(f"\n{out['simulations']} simulations ({out['search']}).")
    return lines


def options(out: dict) -> tuple[list[str], list[tuple[dict, list[str]]]]:
    """The table of a search's options (the chosen, the next cheaper that fail, the runners-up): its head, and per
    option its row of the answer and its cells (a failing option says why it fails)."""
    c = out["chosen"]
    rows = [("chosen", c)] if c else []
    rows += [("next cheaper", r) for r in out["next_cheaper_fails"]]
    rows += [("runner-up", r) for r in out["runners_up"]]
    drains = "first_n_back_s" in c["metrics"] if c else False
    head = ["option", "configuration", "calls/s", "p99 added (s)", *(["all back (s)"] if drains else [])]
    head += ["container-s", "cost $", "meets"]
    table = []
    for label, r in rows:
        m = r["metrics"]
        conf = settings_text({k: v for k, v in r["config"].items() if k not in ("load", "arrivals.rate")})
        cells = [label, conf, _ci(m, "calls_per_s"), _ci(m, "added_latency_p99_s")]
        cells += [_ci(m, "first_n_back_s")] if drains else []
        cells += [
            number_text(r["container_seconds"]),
            f"{r['cost_usd']:.4g}",
            "yes" if r["meets"] else f"no: {r['why']}",
        ]
        table.append((r, cells))
    return head, table


def flags_html(extrapolated: list[str], what: str) -> str:
    """The extrapolation flags of ``what`` (its runs' ``extrapolated``: models/runs.py ``warn_extrapolated``): each
    figure outside the range its parameters were calibrated on, or that none is."""
    if not extrapolated:
        return (
            f"<div class='flags inside'>{html.escape(what)}: within the calibrated range (no run left the envelope "
            "its parameters were fitted on).</div>"
        )
    items = "".join(f"<li>{html.escape(x)}</li>" for x in extrapolated)
    return (
        f"<div class='flags'><b>Extrapolated</b>: {html.escape(what)} leaves the range its parameters were "
        f"calibrated on, so its figures rest on the model beyond what was measured:<ul>{items}</ul></div>"
    )


def ranges_html(u: dict | None) -> str:
    """With ``--uncertainty``: each figure's central value and range (low .. high) under the calibration's plausible
    models × seeds, and whether the answer meets the constraint at their worst; without: that it was not run."""
    if not u:
        return (
            "<p class='muted'>No ranges: run with --uncertainty for each figure's range over the plausible models.</p>"
        )
    rows = [[k, _g(r["central"]), f"{_g(r['low'])} .. {_g(r['high'])}"] for k, r in u["ranges"].items()]
    holds = ""
    if "holds" in u:
        holds = "meets the constraint under every one" if u["holds"] else f"fails under some: {u['why']}"
        holds = f"<p class='{'yes' if u['holds'] else 'no'}'>At the ranges' worst end it {html.escape(holds)}.</p>"
    return (
        f"<p>Under {u['models']} plausible models of the calibration × {u['seeds']} seeds ({u['runs']} runs; "
        f"experiments/uncertainty.py):</p>{html_table(['figure', 'central', 'range (low .. high)'], rows)}{holds}"
    )


def html_table(head: list[str], rows: list[list[str]], markup: bool = False) -> str:
    """An HTML table of text cells (escaped; with ``markup``, cells that are HTML already): a column of numbers
    right-aligned, one holding any text left-aligned, its heading too."""

    def numeric(cell: str) -> bool:
        text = re.sub(r"<[^>]*>", "", cell) if markup else cell
        return text[:1].isdigit() or text[:1] in "×—-.$" or text == ""

    text = [any(not numeric(r[i]) for r in rows) for i in range(len(head))]

    def line(cells: list[str], tag: str) -> str:
        return (
            "<tr>"
            + "".join(
                f"<{tag}{' class=text' if t else ''}>{c if markup and tag == 'td' else html.escape(c)}</{tag}>"
                for c, t in zip(cells, text, strict=True)
            )
            + "</tr>"
        )

    return "<table>" + line(head, "th") + "".join(line(r, "td") for r in rows) + "</table>"


def search_page(out: dict, title: str, more: str = "") -> str:
    """A search's page (HTML): the answer in words, what its numbers rest on (the extrapolation flags of every option
    and, with ``--uncertainty``, the chosen one's ranges, also beside its figures), the options as a table (a failing
    one says why instead of figures it does not meet), then ``more`` (a question's own figures and tables)."""
    said = [line for line in words(out) if line.strip() and not line.startswith("|")]
    answer = "".join(f"<p>{html.escape(line.strip())}</p>" for line in said[:-1])
    head, rows = options(out)
    u = out.get("uncertainty")
    head = [*head, *(["range (low .. high)"] if u else []), "extrapolated"]
    cells = [
        [*c, *([_ranged(u) if r is out["chosen"] else ""] if u else []), "; ".join(r["extrapolated"]) or "—"]
        for r, c in rows
    ]
    chosen = out["chosen"]
    runs = [r for r, _ in rows] + ([out["floor"]] if out.get("floor") else [])  # (capacity's probe of the floor)
    tried = sorted({x for r in runs for x in r["extrapolated"]})
    flags = flags_html(chosen["extrapolated"], "The answer") if chosen else flags_html(tried, "What was simulated")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{STYLE}</style>"
        f"</head><body><h1>{html.escape(title)}</h1>"
        f"<div class='answer{'' if chosen else ' none'}'>{answer}</div>"
        f"<h2>What the numbers rest on</h2>{flags}{ranges_html(u)}"
        + (f"<h2>The options</h2>{html_table(head, cells)}" if rows else "")
        + f"{more}<p class='muted'>{html.escape(said[-1])}</p></body></html>"
    )


def _ranged(u: dict) -> str:
    """The chosen option's ranges, beside its figures."""
    r = u["ranges"]
    return "; ".join(f"{k} {_g(r[k]['low'])} .. {_g(r[k]['high'])}" for k in RANGED if k in r)


RANGED = ("calls_per_s", "added_latency_p99_s", "first_n_back_s", "cost_per_hour")  # the ranges beside the options


def write_page(folder: Path, name: str, text: str) -> Path:
    """A page's HTML as ``folder/name`` (the folder made if need be)."""
    folder.mkdir(parents=True, exist_ok=True)
    files.write_text(folder / name, text)
    return folder / name


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
