"""The report's figures, drawn from the figure specs a model declares (sim/model.py ``Figure`` and ``TimeSeries``):
metrics against scale per series with CI bands, errors by kind, utilization by resource, the binding-limit map, and
one point's time series. ``draw`` picks the kind; experiments/report.py assembles the page."""

from __future__ import annotations

import zlib
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from models.inputs.approaches import PLAN_WAYS
from sim.model import Figure, TimeSeries

if TYPE_CHECKING:
    import matplotlib.pyplot as plt
    import pandas as pd


@cache
def pyplot() -> ModuleType:
    """matplotlib's pyplot, drawing off screen (Agg), titles and labels as plain text (a user's $ too, never
    mathtext); imported on first use, not with this module: it takes a third of a second, which --help need not
    pay."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["text.parse_math"] = False
    return plt


# fixed colours, the same in every report and page: per way (an approach, app copies) and per limit
WAY_COLOURS = {w.name: w.colour for w in PLAN_WAYS.values()}
LIMIT_COLOURS = {
    "accept_rate": "#1f77b4",
    "start_rate": "#ff7f0e",
    "in_system_cap": "#2ca02c",
    "max_containers": "#d62728",
    "workspace_cap": "#9467bd",
    "containers": "#8c564b",
    "autoscaler": "#e377c2",
    "pending_cap": "#7f7f7f",
    "http_503": "#bcbd22",
    "http_429": "#17becf",
    "none": "#dddddd",
    "error": "#000000",
}
_PALETTE = (
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b3",
    "#937860",
    "#da8bc3",
    "#8c8c8c",
    "#ccb974",
    "#64b5cd",
)


def colour_of(series: str) -> str:
    """A series' colour, the same in every report: a way's own, else one of ten by the name's checksum."""
    return WAY_COLOURS.get(series) or _PALETTE[zlib.crc32(series.encode()) % len(_PALETTE)]


def data_ylim(ax: plt.Axes) -> tuple[float, float] | None:
    """The least and greatest y of everything plotted on ``ax`` in data coordinates (lines, steps, scatters, bands,
    bars; not spans drawn in axes coordinates, such as ``axvspan``), finite values only and, on a log axis, positive
    ones (None: nothing plotted)."""
    ys: list[np.ndarray] = []

    def in_data(transform) -> bool:  # the artist's y is in data coordinates (a blended transform's too)
        return transform.contains_branch_seperately(ax.transData)[1]

    for line in ax.get_lines():
        if in_data(line.get_transform()):
            ys.append(np.asarray(line.get_ydata(), dtype=float))
    for c in ax.collections:
        offsets = np.asarray(c.get_offsets(), dtype=float)
        if len(offsets) and offsets.ndim == 2 and in_data(c.get_offset_transform()):
            ys.append(offsets[:, 1])
        elif in_data(c.get_transform()):
            ys += [np.asarray(path.vertices, dtype=float)[:, 1] for path in c.get_paths()]
    for patch in ax.patches:
        if hasattr(patch, "get_height") and in_data(patch.get_transform()):
            ys.append(np.array([patch.get_y(), patch.get_y() + patch.get_height()], dtype=float))
    y = np.concatenate(ys) if ys else np.array([])
    y = y[np.isfinite(y)]
    if ax.get_yscale() == "log":
        y = y[y > 0]
    return (float(y.min()), float(y.max())) if len(y) else None


def fit_ylim(ax: plt.Axes, margin: float = 0.06, floor: float | None = 0.0) -> None:
    """Set ``ax``'s y-limits to hold everything plotted on it (``data_ylim``), with ``margin`` of the span beyond
    each end as the axis draws it (linear, log, symlog), never below ``floor`` when the data are not (None: no
    floor; a log axis has none). Call it after plotting and after setting the scale: a figure clipped at a fixed
    multiple of one series hides the others' peaks."""
    span = data_ylim(ax)
    if span is None:
        return
    lo, hi = span
    scale = ax.yaxis.get_transform()
    a, b = scale.transform([lo, hi])
    pad = margin * (b - a) if b > a else max(abs(a) * margin, 0.5)
    low, high = scale.inverted().transform([a - pad, b + pad])
    if floor is not None and lo >= floor and ax.get_yscale() != "log":
        low = max(low, floor)
    ax.set_ylim(low, high)


def _xaxis(ax: plt.Axes, x: pd.Series, scale: str) -> None:
    ax.set_xlabel(scale)
    if len(x) and (x > 0).all() and x.max() / x.min() >= 8:
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(x.unique()), [f"{v:g}" for v in sorted(x.unique())])
    ax.grid(True, alpha=0.3)


def plain_ticks(ax: plt.Axes) -> None:
    """A log axis's ticks as plain numbers (1, 10, 1,000): its default labels are mathtext, which this module turns
    off (``text.parse_math``), so they would print as ``$\\mathdefault{10^{1}}$``."""
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if abs(v) >= 1 else f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _lines(ax: plt.Axes, summary: pd.DataFrame, scale: str, metric: str) -> None:
    for variant, g in summary.groupby("variant", sort=False):
        g = g.sort_values(scale)
        x, y, ci = g[scale], g[f"{metric}_mean"], g[f"{metric}_ci95"].fillna(0)
        line = ax.plot(x, y, marker="o", ms=3, label=variant, color=colour_of(str(variant)))[0]
        # every metric drawn here is a count, a rate or a duration: the band stops at 0
        ax.fill_between(x, np.maximum(y - ci, 0), y + ci, color=line.get_color(), alpha=0.2, lw=0)
        if "unstable" in g:  # points whose seeds disagree: ringed, their mean is no prediction
            bad = g[g["unstable"].astype(str) != ""]
            ax.scatter(bad[scale], bad[f"{metric}_mean"], s=80, facecolors="none", edgecolors="red", zorder=3)
        if f"{metric}_low" in g:  # a sweep run with --uncertainty: the range over plausible models × seeds
            ax.fill_between(x, g[f"{metric}_low"], g[f"{metric}_high"], color=line.get_color(), alpha=0.08, lw=0)


def _reference(ax: plt.Axes, summary: pd.DataFrame, scale: str, column: str) -> None:
    """A dashed line per distinct curve of ``column`` (one if every series shares it)."""
    drawn: set = set()
    name = column.replace(".", " ").replace("_", " ")
    for variant, g in summary.groupby("variant", sort=False):
        g = g.sort_values(scale)
        key = tuple(np.round(g[f"{column}_mean"].to_numpy(), 6))
        if key not in drawn:
            label = name if not drawn else f"{name} ({variant})"
            ax.plot(g[scale], g[f"{column}_mean"], "k--" if not drawn else "k:", lw=1, label=label)
            drawn.add(key)


def fig_lines(summary: pd.DataFrame, scale: str, spec: Figure) -> plt.Figure:
    """One panel per metric, a line per series with its 95% CI band; ``spec.reference`` dashed (the ideal)."""
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter

    n = len(spec.metrics)
    fig, axes = plt.subplots(1, n, figsize=(7, 4.5) if n == 1 else (5 * n + 1, 4), squeeze=False)
    for ax, (metric, label) in zip(axes[0], spec.metrics, strict=True):
        _lines(ax, summary, scale, metric)
        if spec.reference and f"{spec.reference}_mean" in summary:
            _reference(ax, summary, scale, spec.reference)
        if n == 1:
            ax.set_ylabel(label)
        else:
            ax.set_title(label)
        _xaxis(ax, summary[scale], scale)
        if spec.log:
            ax.set_yscale("symlog", linthresh=10)
            ax.set_ylim(bottom=0)
            plain_ticks(ax)
        if label.startswith("$"):  # money on the axis as money (after the scale, which resets the formatter)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"${v:,.2f}" if abs(v) >= 1 else f"${v:.3g}"))
    axes[0][0].legend(fontsize=7)
    fig.suptitle(spec.title)
    fig.tight_layout()
    return fig


def fig_errors(summary: pd.DataFrame, scale: str, spec: Figure) -> plt.Figure:
    plt = pyplot()
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
    fig.suptitle(spec.title)
    fig.tight_layout()
    return fig


def fig_utilization(summary: pd.DataFrame, scale: str, spec: Figure) -> plt.Figure:
    plt = pyplot()
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
    fig.suptitle(spec.title)
    fig.tight_layout()
    return fig


def fig_binding(summary: pd.DataFrame, scale: str, spec: Figure) -> plt.Figure:
    plt = pyplot()
    variants = list(dict.fromkeys(summary["variant"]))
    scales = sorted(summary[scale].unique())
    fig, ax = plt.subplots(figsize=(1.1 * len(scales) + 2, 0.6 * len(variants) + 1.5))
    for i, variant in enumerate(variants):
        for j, s in enumerate(scales):
            cell = summary[(summary["variant"] == variant) & (summary[scale] == s)]
            limit = cell["binding_limit"].iloc[0] if len(cell) else "error"
            color = LIMIT_COLOURS.get(limit) or colour_of(str(limit))  # the same limit, the same colour
            ax.add_patch(plt.Rectangle((j, i), 1, 1, color=color, alpha=0.35 if limit == "none" else 0.75))
            ax.text(j + 0.5, i + 0.5, limit, ha="center", va="center", fontsize=7)
    ax.set_xlim(0, len(scales))
    ax.set_ylim(0, len(variants))
    ax.set_xticks(np.arange(len(scales)) + 0.5, [f"{s:g}" for s in scales])
    ax.set_yticks(np.arange(len(variants)) + 0.5, variants)
    ax.invert_yaxis()
    ax.set_xlabel(scale)
    ax.set_title(spec.title)
    fig.tight_layout()
    return fig


KINDS = {"lines": fig_lines, "errors": fig_errors, "utilization": fig_utilization, "binding": fig_binding}


def draw(summary: pd.DataFrame, scale: str, spec: Figure) -> plt.Figure:
    """The figure ``spec`` of a sweep's summary."""
    return KINDS[spec.kind](summary, scale, spec)


def draw_timeseries(series: dict, spec: TimeSeries, label: str) -> plt.Figure:
    """One point's time series: ``spec.lines`` on the left axis, ``spec.right`` on a right one."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    t = series["t"]
    for key, name in spec.lines:
        if spec.scatter:
            ax.scatter(t, series[key], s=6, label=name)
        else:
            ax.plot(t, series[key], label=name, ls=":" if key == "pending" else "-")
    ax.set_xlabel("simulated time, s")
    ax.set_ylabel(spec.ylabel)
    if spec.log:
        ax.set_yscale("log")
        plain_ticks(ax)
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if spec.right:
        ax2 = ax.twinx()
        for i, (key, name) in enumerate(spec.right):
            ax2.step(t, series[key], where="post", color="k" if i == 0 else f"C{len(spec.lines) + i}", lw=1, label=name)
        ax2.set_ylabel(spec.right_label)
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    if len(labels) > 1:
        ax.legend(handles, labels, fontsize=8, loc="upper left")
    ax.set_title(f"{spec.title}: {label}")
    return fig
