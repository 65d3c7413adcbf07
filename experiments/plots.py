"""The report's figures: a metric against scale per series with CI bands, error and utilization panels, the
binding-limit map, and one point's time series (experiments/report.py assembles them)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


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
