"""The plotted report of a sweep: ``python -m experiments.report RESULTS [--out DIR]``.

RESULTS is a sweep's results table (results.parquet or results.csv). The report is a self-contained HTML page
(figures embedded, opens offline) and its PNGs: what the numbers rest on (the points whose runs left the calibrated
range, and how: their ``extrapolated`` flags; whether ranges were run), throughput against scale per series with 95%
CI bands and the ideal line, added latency p50/p99, containers, errors by kind, the time series of one chosen point
(re-simulated from its row), the limit that binds at each point, each series' saturation point, a table of the
numbers (under ``--uncertainty`` each figure's range beside its mean), and the scenario and package versions used.
"""

from __future__ import annotations

import base64
import html
import json
import math
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from experiments.plots import draw, draw_timeseries, pyplot
from experiments.results import model_name, read_results
from models.registry import MODELS
from models.runs import run_scenario
from sim import files
from sim.cli import ArgParser, human, main_guard, out_path
from sim.files import check_out
from sim.model import Figure, Model
from sim.scenario import ScenarioError, build, flatten, schema_keys, set_dotted, to_dict

if TYPE_CHECKING:
    import matplotlib.pyplot as plt
    import pandas as pd

PACKAGES = ["scalesim", "simpy", "numpy", "scipy", "pandas", "matplotlib", "modal"]


def summarize(table: pd.DataFrame, scale: str | None, bottleneck: str = "") -> pd.DataFrame:
    """Mean and 95% CI half-width (t over seeds) of every numeric metric, per point; runs with errors left out.
    ``binding_limit`` is the most frequent value of the ``bottleneck`` column over seeds. A sweep run with
    ``--uncertainty`` (columns ``plausible`` and ``kept_point``) is summarized at its kept-model points, each metric
    also with its range (``_low``, ``_high``): least and greatest over the point's seeds and its other plausible
    models' runs (experiments/uncertainty.py)."""
    import pandas as pd  # (here and below, not at the top: --help need not load it)

    ok = table[table["error"] == ""]
    ranged = "kept_point" in ok
    if ranged:
        every, ok = ok, ok[ok["plausible"] == 0]
    keys = ["point", "variant"] + ([scale] if scale and scale in table and scale not in ("point", "variant") else [])
    skip = {*keys, "seed", "plausible", "kept_point"}
    numeric = [c for c in ok.columns if c not in skip and pd.api.types.is_numeric_dtype(ok[c])]
    if ok[keys].dropna().empty:  # no run without an error (or none at a scale): nothing to summarize
        return pd.DataFrame(columns=[*keys, "seeds", "binding_limit", "binding_agreement", "unstable"])
    groups = ok.groupby(keys, sort=True)
    mean = groups[numeric].mean()
    n = groups.size()
    sem = groups[numeric].std(ddof=1).div(np.sqrt(n), axis=0)
    from scipy import stats  # here, not at the top: scipy.stats takes a third of a second to import

    t = pd.Series([stats.t.ppf(0.975, k - 1) if k > 1 else np.nan for k in n], index=n.index)
    ci = sem.mul(t, axis=0)
    if bottleneck in ok:
        binding = groups[bottleneck].agg(lambda s: s.mode().iloc[0] if len(s.mode()) else "").rename("binding_limit")
        agree = groups[bottleneck].agg(lambda s: s.value_counts().iloc[0] / len(s) if s.notna().any() else np.nan)
    else:
        binding = pd.Series("", index=n.index, name="binding_limit")
        agree = pd.Series(np.nan, index=n.index)
    flags = groups.apply(_unstable, include_groups=False) if len(ok) else pd.Series(dtype=object)
    out = pd.concat(
        [
            mean.add_suffix("_mean"),
            ci.add_suffix("_ci95"),
            n.rename("seeds"),
            binding,
            agree.rename("binding_agreement"),
            flags.rename("unstable"),
        ],
        axis=1,
    ).copy()
    if "extrapolated" in ok:  # what any of the point's seeds left of the calibrated envelope (models/runs.py)
        out = out.join(groups["extrapolated"].agg(_flags))
    out = out.reset_index()
    out["unstable"] = out["unstable"].fillna("")
    if ranged:
        spread = every.groupby("kept_point")[numeric]
        low, high = spread.min().add_suffix("_low"), spread.max().add_suffix("_high")
        models = every.groupby("kept_point")["plausible"].nunique().rename("models")
        out = out.join(pd.concat([low, high, models], axis=1), on="point")
    return out


def _flags(texts: pd.Series) -> str:
    """The extrapolation flags of a point's runs (each run's ``extrapolated``, ';'-joined in the table), each once."""
    flags = [f.strip() for t in texts if isinstance(t, str) for f in t.split(";") if f.strip()]
    return "; ".join(dict.fromkeys(flags))


UNSTABLE = 0.10  # a point's seeds disagree when their calls/s spread over more than this share of their median


def _unstable(seeds: pd.DataFrame) -> str:
    """Why a point's seeds cannot be averaged ("" if they can): their calls/s spread over more than UNSTABLE of
    the median (seed to seed, a stable load test moves by a few percent; a collapse or a bimodal point by tens)."""
    import pandas as pd

    numbers = "calls_per_s" in seeds and pd.api.types.is_numeric_dtype(seeds["calls_per_s"])
    x = seeds["calls_per_s"].dropna() if numbers else pd.Series(dtype=float)
    if len(x) < 2 or not x.median() > 0:
        return ""
    spread = (x.max() - x.min()) / x.median()
    if spread <= UNSTABLE:
        return ""
    low, high = seeds.loc[x.idxmin(), "seed"], seeds.loc[x.idxmax(), "seed"]
    return f"calls/s {human(x.min())} (seed {low}) to {human(x.max())} (seed {high}): {spread:.0%} of the median"


def scenario_of(row: pd.Series):
    """Rebuild a point's scenario from its results row (every parameter is a column)."""
    schema = MODELS[row.get("model", "function")].schema
    defaults = flatten(to_dict(schema()))
    tree: dict = {}
    for key in schema_keys(schema):
        if key not in row or (isinstance(row[key], float) and math.isnan(row[key])):
            continue
        value = row[key].item() if hasattr(row[key], "item") else row[key]
        if isinstance(defaults.get(key), int) and not isinstance(defaults[key], bool) and isinstance(value, float):
            value = int(value) if value.is_integer() else value
        set_dotted(tree, key, value)
    return build(schema, tree)


# --- the page --------------------------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return (
        f'<figure><img alt="{path.stem}" src="data:image/png;base64,{data}">'
        f"<figcaption>{path.name}</figcaption></figure>"
    )


def _table(frame: pd.DataFrame) -> str:
    """An HTML table that scrolls sideways when it is wide, its numbers formatted for people."""
    return f'<div class="wide">{frame.to_html(index=False, float_format=human, na_rep="")}</div>'


def _swept(table: pd.DataFrame, factors: list[str]) -> str:
    """What this table swept, from its rows (a --quick run's, not the full spec's description)."""
    parts = []
    for f in factors:
        if f in table:
            values = sorted(table[f].dropna().unique(), key=lambda v: (isinstance(v, str), v))
            parts.append(f"{f} = {', '.join(human(v) if not isinstance(v, str) else v for v in values)}")
    return f"<p>Swept here: {html.escape('; '.join(parts))}.</p>" if parts else ""


def _rests_on(summary: pd.DataFrame, scale: str) -> str:
    """What the numbers rest on: the points whose runs left the calibrated envelope and how (their
    ``extrapolated`` flags), or that none did."""
    if "extrapolated" not in summary:
        return "<p class='flags inside'>No extrapolation flags: the results table has no extrapolated column.</p>"
    out = summary[summary["extrapolated"] != ""]
    if not len(out):
        return (
            "<p class='flags inside'>Within the calibrated range: no run left the envelope its parameters were "
            "fitted on.</p>"
        )
    flagged = out[[c for c in (scale, "variant", "extrapolated") if c in out]].sort_values(["variant", scale])
    return (
        f"<div class='flags'><b>Extrapolated</b>: at {len(out)} of {len(summary)} points the runs leave the range "
        "their parameters were calibrated on, so those figures rest on the model beyond what was measured:"
        f"{_table(flagged)}</div>"
    )


def _people(summary: pd.DataFrame, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Each metric of ``metrics`` as people read it: ``mean ± CI`` and, from a sweep run with --uncertainty, its
    range ``low .. high`` in the next column."""
    import pandas as pd

    out = pd.DataFrame(index=summary.index)
    for m in metrics:
        if f"{m}_mean" not in summary:
            continue
        mean, ci = summary[f"{m}_mean"], summary[f"{m}_ci95"]
        out[m] = [
            "" if pd.isna(a) else human(a) + ("" if pd.isna(b) else f" ± {human(b)}")
            for a, b in zip(mean, ci, strict=True)
        ]
        if f"{m}_low" in summary:
            lo, hi = summary[f"{m}_low"], summary[f"{m}_high"]
            out[f"{m} range"] = ["" if pd.isna(a) else f"{human(a)} .. {human(b)}" for a, b in zip(lo, hi, strict=True)]
    return out


def _ranges_or_not(summary: pd.DataFrame) -> str:
    if "models" in summary:
        return (
            "Each figure's range (low .. high, beside its mean in the numbers below; the lighter band in the figures) "
            f"is over {summary['models'].max():.0f} plausible models of the calibration, each at every seed."
        )
    return "No ranges: sweep with --uncertainty for each figure's range over the calibration's plausible models."


def _numeric(column: pd.Series) -> bool:
    import pandas as pd

    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


def _with_figure_columns(summary: pd.DataFrame, model: Model) -> pd.DataFrame:
    """The summary with a column (empty) for each mean and CI its model's line figures draw that no run reported."""
    wanted = [m for spec in model.figures if spec.kind == "lines" for m, _ in spec.metrics]
    wanted += [spec.reference for spec in model.figures if spec.kind == "lines" and spec.reference]
    new = [f"{m}_{s}" for m in dict.fromkeys(wanted) for s in ("mean", "ci95") if f"{m}_{s}" not in summary]
    return summary.assign(**dict.fromkeys(new, np.nan)) if new else summary


def _has_numbers(summary: pd.DataFrame, spec: Figure) -> bool:
    """Whether the figure has anything to draw: a number of one of its metrics (errors, utilization: of its kind's
    columns; the binding map: a limit)."""
    if not len(summary):
        return False
    if spec.kind == "lines":
        return any(summary[f"{m}_mean"].notna().any() for m, _ in spec.metrics)
    if spec.kind in ("errors", "utilization"):
        cols = [c for c in summary if c.startswith(f"{spec.kind}.") and c.endswith("_mean")]
        return any(summary[c].notna().any() for c in cols)
    return "binding_limit" in summary and bool((summary["binding_limit"].astype(str) != "").any())


def _plotted(summary: pd.DataFrame, model: Model) -> pd.DataFrame:
    """The summary's rows with a number for the model's headline (its first line figure's first metric): what
    its findings and the time series are drawn from."""
    lines = [spec for spec in model.figures if spec.kind == "lines"]
    if not lines or not len(summary):
        return summary.iloc[0:0]
    return summary[summary[f"{lines[0].metrics[0][0]}_mean"].notna()]


def _scenario_text(row: pd.Series) -> str:
    try:
        return json.dumps(to_dict(scenario_of(row)), indent=1)
    except ScenarioError as e:
        return f"(its parameters do not make a scenario: {e})"


def make_report(
    table: pd.DataFrame,
    out: Path,
    title: str = "sweep",
    description: str = "",
    scale: str | None = None,
    timeseries_point: int | None = None,
    factors: list[str] | None = None,
) -> Path:
    """Write the PNGs and report.html under ``out``; return the page's path. Factors other than ``scale`` split the
    series (a line per variant and value). The figures and tables are the ones the table's model declares."""
    import pandas as pd

    plt = pyplot()
    out.mkdir(parents=True, exist_ok=True)
    model: Model = MODELS[model_name(table)]
    notes: list[str] = []
    text_scale = scale if scale and scale in table and not _numeric(table[scale]) else None
    if not scale or scale not in table or not _numeric(table[scale]):
        scale = next((f for f in factors or [] if f in table and _numeric(table[f])), "point")
    if text_scale:
        notes.append(f"{text_scale} holds text, not numbers to draw along an axis: the figures are along {scale}.")
    table = table.copy()
    for key in [f for f in factors or [] if f != scale and f in table]:  # every other factor splits the series
        table["variant"] = table["variant"].astype(str) + ", " + key.split(".")[-1] + "=" + table[key].astype(str)
    summary = _with_figure_columns(summarize(table, scale, model.bottleneck), model)
    summary.to_csv(out / "summary.csv", index=False)
    ok = table[table["error"] == ""]
    drawn = [spec for spec in model.figures if _has_numbers(summary, spec)]
    if len(drawn) < len(model.figures):
        why = "every run has an error" if len(table) and not len(ok) else "no run reported their numbers"
        if not len(table):
            why = "the table has no runs"
        missing = ", ".join(spec.name for spec in model.figures if spec not in drawn)
        notes.append(f"Nothing to plot for {missing}: {why}.")
        if not drawn:
            print(f"warning: report: nothing to plot ({why})", file=sys.stderr)
    figures: list[tuple[str, plt.Figure]] = [(spec.name, draw(summary, scale, spec)) for spec in drawn]
    plotted = _plotted(summary, model)  # the points whose headline number is there: findings, time series
    candidates = ok[ok["point"].isin(plotted["point"])] if len(plotted) else ok.iloc[0:0]
    if len(candidates):
        pick = timeseries_point if timeseries_point in set(candidates["point"]) else int(candidates["point"].iloc[0])
        row = candidates[candidates["point"] == pick].iloc[0]
        series: dict = {}
        try:
            run_scenario(scenario_of(row), seed=int(row["seed"]), series=series)
        except ScenarioError as e:  # a table written by hand or edited: its parameters do not make a scenario
            notes.append(f"No time series: point {pick}'s parameters do not make a scenario that runs ({e}).")
        else:
            label = f"{row['variant']}, {scale} = {row[scale]}, seed {int(row['seed'])}"
            figures.append(("timeseries", draw_timeseries(series, model.timeseries, label)))
    pngs = []
    for name, fig in figures:
        path = out / f"{name}.png"
        files.write_figure(fig, path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        pngs.append(path)

    heading, intro, rows = model.findings(plotted, scale) if len(plotted) else ("Findings", "", [])
    findings = pd.DataFrame(rows)
    cols = [scale, "variant", "seeds", "models", "binding_limit", "binding_agreement", "unstable"]
    people = _people(summary, tuple(m for m in model.headline if m not in cols))
    numbers = summary[[c for c in cols if c in summary]].join(people)
    if "extrapolated" in summary:  # what left the envelope, by key (the flags in full: "What the numbers rest on")
        numbers["extrapolated"] = [
            ", ".join(dict.fromkeys(f.split()[0] for f in t.split("; ") if f)) for t in summary["extrapolated"]
        ]
    numbers = numbers.sort_values(["variant", scale]) if len(summary) else numbers
    errors = table[table["error"] != ""][["point", "variant", "seed", "error"]]
    try:
        declared = model.metrics(scenario_of(ok.iloc[0]) if len(ok) else model.schema())
    except ScenarioError:
        declared = model.metrics(model.schema())
    glossary = "".join(
        f"<tr><td>{m.name}</td><td>{html.escape(m.unit)}</td><td>{html.escape(m.doc)}</td></tr>"
        for m in (declared[k] for k in model.headline if k in declared)
    )
    first_rows = ok.groupby("variant", sort=False).head(1)
    scenarios = "".join(
        f"<details><summary>{html.escape(str(r['variant']))}</summary><pre>"
        f"{html.escape(_scenario_text(r))}</pre></details>"
        for _, r in first_rows.iterrows()
    )
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}} img{{max-width:100%}}
table{{border-collapse:collapse;font-size:12px}} td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}
.wide{{overflow-x:auto;max-width:100%}} figure{{margin:1.5em 0}} figcaption{{color:#777;font-size:12px}}
.flags{{background:#fdf6e3;border-left:4px solid #dd8452;padding:.6em 1em}} .flags.inside{{background:#f5f7f9;
border-left-color:#8c8c8c}} table.text td,table.text th{{text-align:left}}
.wide td{{white-space:nowrap}}</style>
</head><body>
<h1>{html.escape(title)}</h1><p>{html.escape(description)}</p>{_swept(table, factors or [])}
<p>{len(table):,} runs, {len(errors):,} with errors; {summary["seeds"].max() if len(summary) else 0} seeds per point;
95% confidence intervals over seeds (t distribution).</p>
{"".join(f"<p>{html.escape(n)}</p>" for n in notes)}
<h2>What the numbers rest on</h2>{_rests_on(summary, scale)}<p>{_ranges_or_not(summary)}</p>
<h2>{html.escape(heading)}</h2>
<p>{html.escape(intro)}</p>{_table(findings)}
{"".join(_img(p) for p in pngs)}
<h2>The numbers</h2>{_table(numbers)}
<h2>What they are</h2><table class=text><tr><th>metric</th><th>unit</th><th>what</th></tr>{glossary}</table>
<h2>Runs with errors</h2>{_table(errors) if len(errors) else "<p>none</p>"}
<h2>Scenarios (first point of each series)</h2>{scenarios}
<h2>Versions</h2>{_table(pd.DataFrame(list(versions().items()), columns=["package", "version"]))}
</body></html>"""
    path = out / "report.html"
    files.write_text(path, page)
    return path


def main(argv: list[str] | None = None) -> int:
    p = ArgParser(prog="python -m experiments.report", description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path, help="results.parquet or results.csv of a sweep")
    p.add_argument("--out", type=out_path, help="where to write the report (default: beside RESULTS)")
    p.add_argument("--scale", help="the x axis (default: the sweep's)")
    p.add_argument("--point", type=int, help="the point whose time series to draw (default: the sweep's)")
    args = p.parse_args(argv)

    def go() -> int:
        check_out(args.out or args.results.parent, folder=True, inside=("summary.csv", "report.html", "*.png"))
        table = read_results(args.results)
        meta_file = args.results.parent / "sweep.json"
        meta = files.read_json(meta_file, "a sweep's sweep.json") if meta_file.exists() else {}
        if not isinstance(meta, dict):
            raise ScenarioError(f"{meta_file}: not a sweep's sweep.json (a JSON object)")
        if args.point is not None and args.point not in set(table["point"]):
            points = sorted(set(table["point"]))
            raise ScenarioError(f"--point {args.point}: no such point (the table's are {points[0]} to {points[-1]})")
        if args.scale is not None:
            model = MODELS[model_name(table)]
            params = [c for c in table.columns if c in schema_keys(model.schema) or c == "point"]
            if args.scale not in params:
                some = ", ".join(meta.get("factors", {}) or params[:3])
                raise ScenarioError(f"--scale {args.scale}: not a parameter column of {args.results} (e.g. {some})")
            if not _numeric(table[args.scale]):
                text = next((v for v in table[args.scale] if isinstance(v, str)), "")
                raise ScenarioError(
                    f"--scale {args.scale}: column of {args.results} holds text ({text!r}), not numbers to draw "
                    "along an axis"
                )
        page = make_report(
            table,
            args.out or args.results.parent,
            title=meta.get("name", args.results.parent.name),
            description=meta.get("description", ""),
            scale=args.scale or meta.get("scale"),
            timeseries_point=args.point if args.point is not None else meta.get("report_point"),
            factors=list(meta.get("factors", {})),
        )
        print(f"report: {page}")
        return 0

    return main_guard("experiments.report", go)


if __name__ == "__main__":
    sys.exit(main())
