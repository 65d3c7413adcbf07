"""The plotted report of a sweep: ``python -m experiments.report RESULTS [--out DIR]``.

RESULTS is a sweep's results table (results.parquet or results.csv). The report is a self-contained HTML page
(figures embedded, opens offline) and its PNGs: throughput against scale per series with 95% CI bands and the ideal
line, added latency p50/p99, containers, errors by kind, the time series of one chosen point (re-simulated from its
row), the limit that binds at each point, each series' saturation point, a table of the numbers, and the scenario
and package versions used.
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

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

from experiments.cli import MODELS, ArgParser, main_guard, run_scenario
from sim.scenario import build, flatten, schema_keys, set_dotted, to_dict

SATURATION = 0.8  # a series has left the ideal line where its calls/s falls below this share of the ideal
SUMMARY_METRICS = [
    "calls_per_s",
    "ideal_calls_per_s",
    "first_n_back_s",
    "added_latency_p50_s",
    "added_latency_p99_s",
    "containers_peak",
    "errors",
    "retries",
    "binding_share",
]
SANDBOX_METRICS = [
    "creation_rate_per_s",
    "creation_makespan_s",
    "schedule_latency_p99_s",
    "tti_p50_s",
    "tti_p99_s",
    "rejections",
    "retries",
    "sandboxes_created",
]
COLDSTART_METRICS = [
    "cold_start_p0_s",
    "cold_start_p50_s",
    "cold_start_mean_s",
    "cold_start_p99_s",
    "snapshot_creations",
    "restore_fallbacks",
    "bytes_fetched",
]
PACKAGES = ["scalesim", "simpy", "numpy", "scipy", "pandas", "matplotlib", "modal"]


def summarize(table: pd.DataFrame, scale: str | None) -> pd.DataFrame:
    """Mean and 95% CI half-width (t over seeds) of every numeric metric, per point; runs with errors left out."""
    ok = table[table["error"] == ""]
    keys = ["point", "variant"] + ([scale] if scale and scale in table else [])
    numeric = [c for c in ok.columns if c not in keys and c != "seed" and pd.api.types.is_numeric_dtype(ok[c])]
    groups = ok.groupby(keys, sort=True)
    mean = groups[numeric].mean()
    n = groups.size()
    sem = groups[numeric].std(ddof=1).div(np.sqrt(n), axis=0)
    t = pd.Series([stats.t.ppf(0.975, k - 1) if k > 1 else np.nan for k in n], index=n.index)
    ci = sem.mul(t, axis=0)
    label = "binding_limit" if "binding_limit" in ok else "bottleneck"
    if label in ok:
        binding = groups[label].agg(lambda s: s.mode().iloc[0] if len(s.mode()) else "").rename("binding_limit")
    else:
        binding = pd.Series("", index=n.index, name="binding_limit")
    out = pd.concat([mean.add_suffix("_mean"), ci.add_suffix("_ci95"), n.rename("seeds"), binding], axis=1).copy()
    return out.reset_index()


def saturation(summary: pd.DataFrame, scale: str | None) -> pd.DataFrame:
    """Per series: the first scale where calls/s falls below SATURATION × ideal, and what binds there."""
    rows = []
    if "cold_start_mean_s_mean" in summary:  # container starts: the fastest and slowest point of each series
        for variant, g in summary.groupby("variant", sort=False):
            best, worst = g.loc[g["cold_start_mean_s_mean"].idxmin()], g.loc[g["cold_start_mean_s_mean"].idxmax()]
            rows.append(
                {
                    "series": variant,
                    "fastest mean start, s": best["cold_start_mean_s_mean"],
                    "at": best[scale],
                    "slowest, s": worst["cold_start_mean_s_mean"],
                    "at ": worst[scale],
                }
            )
        return pd.DataFrame(rows)
    if "creation_rate_per_s_mean" in summary:  # sandboxes: where the rate peaks and what binds there
        for variant, g in summary.groupby("variant", sort=False):
            top = g.loc[g["creation_rate_per_s_mean"].idxmax()]
            rows.append(
                {
                    "series": variant,
                    "peak sandboxes/s": top["creation_rate_per_s_mean"],
                    "at": top[scale],
                    "bottleneck there": top["binding_limit"],
                    "bottleneck at the largest": g.sort_values(scale)["binding_limit"].iloc[-1],
                }
            )
        return pd.DataFrame(rows)
    for variant, g in summary.groupby("variant", sort=False):
        g = g.sort_values(scale) if scale in g else g
        below = g[g["calls_per_s_mean"] < SATURATION * g["ideal_calls_per_s_mean"]]
        first = below.iloc[0] if len(below) else None
        rows.append(
            {
                "series": variant,
                "leaves ideal at": first[scale] if first is not None and scale in g else "—",
                "binding limit there": first["binding_limit"] if first is not None else "none within the sweep",
                "peak calls/s": g["calls_per_s_mean"].max(),
                "at": g.loc[g["calls_per_s_mean"].idxmax(), scale] if scale in g else "—",
            }
        )
    return pd.DataFrame(rows)


# --- figures ---------------------------------------------------------------------------------------------------


def _xaxis(ax: plt.Axes, x: pd.Series, scale: str) -> None:
    ax.set_xlabel(scale)
    if len(x) and (x > 0).all() and x.max() / x.min() >= 8:
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(x.unique()), [f"{v:g}" for v in sorted(x.unique())])
    ax.grid(True, alpha=0.3)


def _lines(ax: plt.Axes, summary: pd.DataFrame, scale: str, metric: str) -> None:
    for variant, g in summary.groupby("variant", sort=False):
        g = g.sort_values(scale)
        x, y, ci = g[scale], g[f"{metric}_mean"], g[f"{metric}_ci95"].fillna(0)
        line = ax.plot(x, y, marker="o", ms=3, label=variant)[0]
        # every metric drawn here is a count, a rate or a duration: the band stops at 0
        ax.fill_between(x, np.maximum(y - ci, 0), y + ci, color=line.get_color(), alpha=0.2, lw=0)


def fig_throughput(summary: pd.DataFrame, scale: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _lines(ax, summary, scale, "calls_per_s")
    ideals = summary.groupby("variant", sort=False)
    drawn = set()
    for variant, g in ideals:
        g = g.sort_values(scale)
        key = tuple(np.round(g["ideal_calls_per_s_mean"].to_numpy(), 6))
        label = "ideal" if not drawn else f"ideal ({variant})"
        if key not in drawn:
            ax.plot(g[scale], g["ideal_calls_per_s_mean"], "k--" if not drawn else "k:", lw=1, label=label)
            drawn.add(key)
    ax.set_ylabel("calls/s (mean, 95% CI)")
    ax.set_yscale("log")
    _xaxis(ax, summary[scale], scale)
    ax.legend(fontsize=8)
    ax.set_title("Throughput against scale")
    return fig


def fig_errors(summary: pd.DataFrame, scale: str) -> plt.Figure:
    kinds = [
        c[len("errors.") : -len("_mean")]
        for c in summary.columns
        if c.startswith("errors.") and c.endswith("_mean") and summary[c].sum() > 0
    ]
    variants = list(dict.fromkeys(summary["variant"]))
    fig, axes = plt.subplots(1, len(variants), figsize=(3 * len(variants) + 1, 3.5), sharey=True, squeeze=False)
    for ax, variant in zip(axes[0], variants, strict=True):
        g = summary[summary["variant"] == variant].sort_values(scale)
        labels = [f"{v:g}" for v in g[scale]]
        bottom = np.zeros(len(g))
        for kind in kinds:
            vals = g[f"errors.{kind}_mean"].to_numpy()
            ax.bar(labels, vals, bottom=bottom, label=kind)
            bottom += vals
        if not kinds or bottom.sum() == 0:
            ax.text(0.5, 0.5, "no errors", transform=ax.transAxes, ha="center", va="center", color="gray")
        ax.set_title(variant)
        ax.set_xlabel(scale)
        ax.tick_params(axis="x", labelsize=7, rotation=90)
    axes[0][0].set_ylabel("failed calls (mean)")
    if kinds:
        axes[0][-1].legend(fontsize=7)
    fig.suptitle("Errors by kind")
    fig.tight_layout()
    return fig


def fig_rate(summary: pd.DataFrame, scale: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _lines(ax, summary, scale, "creation_rate_per_s")
    if "client.rate_mean" in summary:
        g = summary.groupby(scale, sort=True)["client.rate_mean"].max()
        ax.plot(g.index, g.to_numpy(), "k--", lw=1, label="client rate limit")
    ax.set_ylabel("sandboxes created per second (mean, 95% CI)")
    _xaxis(ax, summary[scale], scale)
    ax.legend(fontsize=8)
    ax.set_title("Creation rate against " + scale)
    return fig


def fig_utilization(summary: pd.DataFrame, scale: str) -> plt.Figure:
    resources = sorted(
        c[len("utilization.") : -len("_mean")]
        for c in summary.columns
        if c.startswith("utilization.") and c.endswith("_mean")
    )
    variants = list(dict.fromkeys(summary["variant"]))
    fig, axes = plt.subplots(1, len(variants), figsize=(4 * len(variants) + 1, 3.5), sharey=True, squeeze=False)
    for ax, variant in zip(axes[0], variants, strict=True):
        g = summary[summary["variant"] == variant].sort_values(scale)
        for r in resources:
            if g[f"utilization.{r}_mean"].notna().any():
                ax.plot(g[scale], g[f"utilization.{r}_mean"], marker="o", ms=3, label=r)
        ax.set_title(variant)
        _xaxis(ax, g[scale], scale)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("utilization (busy fraction)")
    fig.suptitle("Utilization by resource")
    fig.tight_layout()
    return fig


def fig_created(series: dict, label: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(series["t"], series["created"], label="created (cumulative)")
    ax.set_xlabel("simulated time, s")
    ax.set_ylabel("sandboxes")
    ax.grid(True, alpha=0.3)
    ax2 = ax.twinx()
    ax2.plot(series["t"], series["created_per_s"], color="C1", lw=1, label="created per second")
    ax2.set_ylabel("per second")
    lines, lines2 = ax.get_legend_handles_labels(), ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=8, loc="upper left")
    ax.set_title(f"Time series of one point: {label}")
    return fig


def fig_panels(
    summary: pd.DataFrame, scale: str, metrics: list[tuple[str, str]], title: str, log: bool = False
) -> plt.Figure:
    """One panel per (metric, label), a line per series with its 95% CI band."""
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics) + 1, 4), squeeze=False)
    for ax, (metric, label) in zip(axes[0], metrics, strict=True):
        _lines(ax, summary, scale, metric)
        ax.set_title(label)
        _xaxis(ax, summary[scale], scale)
        if log:
            ax.set_yscale("symlog", linthresh=10)
            ax.set_ylim(bottom=0)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def fig_starts(series: dict, label: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.scatter(series["t"], series["total"], s=6)
    ax.set_xlabel("simulated time, s")
    ax.set_ylabel("container start, s")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.set_title(f"Every container start of one point: {label}")
    return fig


def fig_binding(summary: pd.DataFrame, scale: str) -> plt.Figure:
    variants = list(dict.fromkeys(summary["variant"]))
    scales = sorted(summary[scale].unique())
    limits = sorted(summary["binding_limit"].unique())
    cmap = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(1.1 * len(scales) + 2, 0.6 * len(variants) + 1.5))
    for i, variant in enumerate(variants):
        for j, s in enumerate(scales):
            cell = summary[(summary["variant"] == variant) & (summary[scale] == s)]
            limit = cell["binding_limit"].iloc[0] if len(cell) else "error"
            color = cmap(limits.index(limit) % 10) if limit in limits else (0.8, 0.8, 0.8)
            ax.add_patch(plt.Rectangle((j, i), 1, 1, color=color, alpha=0.35 if limit == "none" else 0.75))
            ax.text(j + 0.5, i + 0.5, limit, ha="center", va="center", fontsize=7)
    ax.set_xlim(0, len(scales))
    ax.set_ylim(0, len(variants))
    ax.set_xticks(np.arange(len(scales)) + 0.5, [f"{s:g}" for s in scales])
    ax.set_yticks(np.arange(len(variants)) + 0.5, variants)
    ax.invert_yaxis()
    ax.set_xlabel(scale)
    ax.set_title("What binds (the costliest limit, or the most utilized resource)")
    fig.tight_layout()
    return fig


def fig_timeseries(series: dict, label: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    t = series["t"]
    ax.plot(t, series["accepted"], label="accepted (cumulative)")
    ax.plot(t, series["started"], label="started (cumulative)")
    ax.plot(t, series["running"], label="running")
    ax.plot(t, series["pending"], label="pending", ls=":")
    ax.set_xlabel("simulated time, s")
    ax.set_ylabel("inputs")
    ax.grid(True, alpha=0.3)
    ax2 = ax.twinx()
    ax2.step(t, series["containers"], where="post", color="k", lw=1, label="containers")
    ax2.set_ylabel("containers")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=8, loc="upper left")
    ax.set_title(f"Time series of one point: {label}")
    return fig


def scenario_of(row: pd.Series):
    """Rebuild a point's scenario from its results row (every parameter is a column)."""
    schema = MODELS[row.get("model", "function")][0]
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
    series (a line per variant and value)."""
    out.mkdir(parents=True, exist_ok=True)
    if not scale or scale not in table:
        scale = "clients.count"
    table = table.copy()
    for key in [f for f in factors or [] if f != scale and f in table]:  # every other factor splits the series
        table["variant"] = table["variant"].astype(str) + ", " + key.split(".")[-1] + "=" + table[key].astype(str)
    summary = summarize(table, scale)
    summary.to_csv(out / "summary.csv", index=False)
    figures: list[tuple[str, plt.Figure]] = []
    sandboxes = "creation_rate_per_s_mean" in summary
    coldstart = "cold_start_mean_s_mean" in summary
    if len(summary) and coldstart:
        figures += [
            (
                "coldstart",
                fig_panels(
                    summary,
                    scale,
                    [("cold_start_mean_s", "mean"), ("cold_start_p50_s", "p50"), ("cold_start_p99_s", "p99")],
                    "Container start, seconds",
                ),
            ),
            (
                "snapshots",
                fig_panels(
                    summary,
                    scale,
                    [("snapshot_creations", "snapshot creations"), ("restore_fallbacks", "restore fallbacks")],
                    "Snapshot lifecycle (counts per run)",
                ),
            ),
        ]
    elif len(summary) and sandboxes:
        figures += [
            ("rate", fig_rate(summary, scale)),
            (
                "tti",
                fig_panels(
                    summary, scale, [("tti_p50_s", "p50"), ("tti_p99_s", "p99")], "Time to interactive, seconds"
                ),
            ),
            (
                "rejections",
                fig_panels(
                    summary,
                    scale,
                    [("rejections", "rejected placements"), ("retries", "retries")],
                    "Rejections and retries",
                    log=True,
                ),
            ),
            ("utilization", fig_utilization(summary, scale)),
            ("binding", fig_binding(summary, scale)),
        ]
    elif len(summary):
        figures += [
            ("throughput", fig_throughput(summary, scale)),
            (
                "latency",
                fig_panels(
                    summary,
                    scale,
                    [("added_latency_p50_s", "p50"), ("added_latency_p99_s", "p99")],
                    "Added latency, seconds (response − own work)",
                ),
            ),
            ("containers", fig_panels(summary, scale, [("containers_peak", "containers (peak)")], "Containers")),
            ("errors", fig_errors(summary, scale)),
            ("binding", fig_binding(summary, scale)),
        ]
    ok = table[table["error"] == ""]
    point_label = ""
    if len(ok):
        pick = timeseries_point if timeseries_point in set(ok["point"]) else int(ok["point"].iloc[0])
        row = ok[ok["point"] == pick].iloc[0]
        series: dict = {}
        run_scenario(scenario_of(row), seed=int(row["seed"]), series=series)
        point_label = f"{row['variant']}, {scale} = {row[scale]:g}, seed {int(row['seed'])}"
        draw = fig_starts if coldstart else fig_created if sandboxes else fig_timeseries
        figures.append(("timeseries", draw(series, point_label)))
    pngs = []
    for name, fig in figures:
        path = out / f"{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        pngs.append(path)

    sat = saturation(summary, scale) if len(summary) else pd.DataFrame()
    cols = [scale, "variant", "seeds", "binding_limit"] + [
        f"{m}_{s}" for m in SUMMARY_METRICS for s in ("mean", "ci95")
    ]
    numbers = summary[[c for c in cols if c in summary]].sort_values(["variant", scale]) if len(summary) else summary
    errors = table[table["error"] != ""][["point", "variant", "seed", "error"]]
    first_rows = ok.groupby("variant", sort=False).head(1)
    scenarios = "".join(
        f"<details><summary>{html.escape(str(r['variant']))}</summary><pre>"
        f"{html.escape(json.dumps(to_dict(scenario_of(r)), indent=1))}</pre></details>"
        for _, r in first_rows.iterrows()
    )
    heading = (
        "Each series"
        if coldstart
        else "Where each series peaks"
        if sandboxes
        else "Where each series leaves the ideal line"
    )
    intro = (
        "The fastest and slowest mean container start of each series."
        if coldstart
        else "The peak creation rate and the most utilized resource there."
        if sandboxes
        else f"The first {html.escape(scale)} at which calls/s falls below {SATURATION:.0%} of the ideal, and the "
        "limit that binds there."
    )
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}} img{{max-width:100%}}
table{{border-collapse:collapse;font-size:12px}} td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}
figure{{margin:1.5em 0}} figcaption{{color:#777;font-size:12px}}</style></head><body>
<h1>{html.escape(title)}</h1><p>{html.escape(description)}</p>
<p>{len(table)} runs, {len(errors)} with errors; {summary["seeds"].max() if len(summary) else 0} seeds per point;
95% confidence intervals over seeds (t distribution).</p>
<h2>{heading}</h2>
<p>{intro}</p>{sat.to_html(index=False, float_format=lambda v: f"{v:,.4g}")}
{"".join(_img(p) for p in pngs)}
<h2>The numbers</h2>{numbers.to_html(index=False, float_format=lambda v: f"{v:,.4g}", na_rep="")}
<h2>Runs with errors</h2>{errors.to_html(index=False) if len(errors) else "<p>none</p>"}
<h2>Scenarios (first point of each series)</h2>{scenarios}
<h2>Versions</h2><pre>{html.escape(json.dumps(versions(), indent=1))}</pre>
</body></html>"""
    path = out / "report.html"
    path.write_text(page)
    return path


def main(argv: list[str] | None = None) -> int:
    p = ArgParser(prog="python -m experiments.report", description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path, help="results.parquet or results.csv of a sweep")
    p.add_argument("--out", type=Path, help="where to write the report (default: beside RESULTS)")
    p.add_argument("--scale", help="the x axis (default: the sweep's)")
    p.add_argument("--point", type=int, help="the point whose time series to draw (default: the sweep's)")
    args = p.parse_args(argv)

    def go() -> int:
        from experiments.sweep import read_results

        table = read_results(args.results)
        meta_file = args.results.parent / "sweep.json"
        meta = json.loads(meta_file.read_text()) if meta_file.exists() else {}
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
