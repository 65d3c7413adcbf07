"""Summary statistics every model's metrics use: percentiles by one naming rule, CIs, JSON-safe numbers."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

NAN = float("nan")


def percentiles(x: np.ndarray, prefix: str, qs: tuple[int, ...] = (50, 90, 99)) -> dict[str, float | None]:
    """{prefix_pQ_s: the Q-th percentile of x} (null when x is empty): the metrics' one way to name percentiles."""
    values = [float(v) for v in np.percentile(x, qs)] if len(x) else [None] * len(qs)
    return {f"{prefix}_p{q}_s": v for q, v in zip(qs, values, strict=True)}


def batch_means_ci95(x: np.ndarray, batches: int = 20) -> float:
    """Half-width of the 95% CI of the mean of a (correlated, time-ordered) series by batch means."""
    n = len(x) // batches
    if n < 2:
        return NAN
    means = x[: n * batches].reshape(batches, n).mean(axis=1)
    return float(stats.t.ppf(0.975, batches - 1) * means.std(ddof=1) / math.sqrt(batches))


def finite(v: float | None) -> float | None:
    """JSON has no NaN: an undefined figure is null."""
    return None if v is None or not math.isfinite(v) else float(v)
