"""Summary statistics every model's metrics use: percentiles by one naming rule, a streaming log-spaced histogram
for long runs, CIs, JSON-safe numbers."""

from __future__ import annotations

import math

import numpy as np

NAN = float("nan")


def percentiles(x: np.ndarray, prefix: str, qs: tuple[int, ...] = (50, 90, 99)) -> dict[str, float | None]:
    """{prefix_pQ_s: the Q-th percentile of x} (null when x is empty): the metrics' one way to name percentiles."""
    values = [float(v) for v in np.percentile(x, qs)] if len(x) else [None] * len(qs)
    return {f"{prefix}_p{q}_s": v for q, v in zip(qs, values, strict=True)}


class LogHistogram:
    """Percentiles of a stream in bounded memory: counts in log-spaced bins (as DDSketch, Masson et al., VLDB 2019).

    A value x with |x| >= ``ZERO`` falls in bin i = ceil(log_γ |x|) (by sign), γ = (1 + α)/(1 − α), and is
    represented by 2γ^i/(γ + 1): within relative error α of x. Values with |x| < ``ZERO`` count as 0. Percentiles
    follow ``np.percentile``'s rule (linear between the order statistics at ranks floor and ceil of q/100·(n − 1)),
    each order statistic replaced by its bin's value, so the error bound is: |estimate − exact| ≤
    α · max(|x_lo|, |x_hi|) + ``ZERO`` (x_lo, x_hi: those two order statistics); tests/sim/test_stats.py checks it.
    Memory: one count per bin between the smallest and largest |x| seen, about 1,150 bins a decade at α = 0.1%.
    """

    ALPHA = 0.001
    ZERO = 1e-9  # seconds: below a nanosecond a latency is 0

    def __init__(self, alpha: float = ALPHA) -> None:
        self.alpha = alpha
        self._log_gamma = math.log((1 + alpha) / (1 - alpha))
        self.zeros = 0
        self._bins = {1: _Bins(), -1: _Bins()}  # by sign

    def __len__(self) -> int:
        return self.zeros + len(self._bins[1]) + len(self._bins[-1])

    def add(self, x: np.ndarray) -> None:
        """Count the values of ``x`` (finite)."""
        x = np.asarray(x, dtype=float)
        mag = np.abs(x)
        big = mag >= self.ZERO
        self.zeros += int(len(x) - big.sum())
        for sign, part in ((1, x > 0), (-1, x < 0)):
            part &= big
            if part.any():
                self._bins[sign].add(np.ceil(np.log(mag[part]) / self._log_gamma).astype(np.int64))

    def absorb(self, other: LogHistogram) -> None:
        """Count ``other``'s values too (the same α): the histogram of both streams."""
        self.zeros += other.zeros
        for sign, bins in other._bins.items():
            self._bins[sign].absorb(bins)

    def _values(self) -> tuple[np.ndarray, np.ndarray]:
        """Every non-empty bin's value and count, in increasing order of value."""
        gamma = math.exp(self._log_gamma)
        values, counts = [], []
        for sign in (-1, 1):
            idx, n = self._bins[sign].nonzero()
            v = sign * 2.0 * np.exp(idx * self._log_gamma) / (gamma + 1.0)
            if sign == -1:
                v, n = v[::-1], n[::-1]
            values.append(v)
            counts.append(n)
            if sign == -1:
                values.append(np.zeros(1))
                counts.append(np.array([self.zeros]))
        return np.concatenate(values), np.concatenate(counts)

    def percentiles(self, prefix: str, qs: tuple[int, ...] = (50, 90, 99)) -> dict[str, float | None]:
        """As ``percentiles`` of the exact values, within the bound above."""
        n = len(self)
        if not n:
            return {f"{prefix}_p{q}_s": None for q in qs}
        values, counts = self._values()
        last = np.cumsum(counts) - 1  # the rank of each bin's last value

        def order_statistic(k: int) -> float:
            return float(values[np.searchsorted(last, k)])

        out = {}
        for q in qs:
            rank = q / 100 * (n - 1)
            lo = math.floor(rank)
            v = order_statistic(lo)
            if rank > lo:
                v += (rank - lo) * (order_statistic(lo + 1) - v)
            out[f"{prefix}_p{q}_s"] = v
        return out


class _Bins:
    """Counts of integer bin indices, dense between the smallest and largest index seen."""

    def __init__(self) -> None:
        self.lo = 0
        self.counts = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.counts.sum())

    def add(self, idx: np.ndarray) -> None:
        self._cover(int(idx.min()), int(idx.max()))
        self.counts += np.bincount(idx - self.lo, minlength=len(self.counts))

    def absorb(self, other: _Bins) -> None:
        idx, n = other.nonzero()
        if len(idx):
            self._cover(int(idx[0]), int(idx[-1]))
            self.counts[idx - self.lo] += n

    def _cover(self, lo: int, hi: int) -> None:
        """Grow the dense range to hold indices lo..hi."""
        if not len(self.counts):
            self.lo, self.counts = lo, np.zeros(hi - lo + 1, dtype=np.int64)
        elif lo < self.lo or hi >= self.lo + len(self.counts):
            new_lo = min(lo, self.lo)
            grown = np.zeros(max(hi, self.lo + len(self.counts) - 1) - new_lo + 1, dtype=np.int64)
            grown[self.lo - new_lo : self.lo - new_lo + len(self.counts)] = self.counts
            self.lo, self.counts = new_lo, grown

    def nonzero(self) -> tuple[np.ndarray, np.ndarray]:
        (at,) = np.nonzero(self.counts)
        return at + self.lo, self.counts[at]


def load_scipy() -> None:
    """Import the parts of scipy the statistics and distributions use, which this module and sim/dists.py import
    only where they are used (scipy takes over half a second to import, which a command's ``--help`` need not pay):
    a run calls this before its clock starts, so that its ``wall_s`` counts the run alone."""
    import scipy.integrate
    import scipy.special
    import scipy.stats  # noqa: F401


def mean_ci95(means: np.ndarray) -> float:
    """Half-width of the 95% CI of the mean of batch means (Student t); NaN below two batches."""
    k = len(means)
    if k < 2:
        return NAN
    from scipy import stats  # here, not at the top: scipy.stats takes a third of a second to import

    return float(stats.t.ppf(0.975, k - 1) * np.std(means, ddof=1) / math.sqrt(k))


def mser5(counts: np.ndarray) -> int:
    """The warm-up to cut from a series of counts per equal bin, in bins, by MSER-5 (White 1997; Hoad, Robinson and
    Davies 2010): batch the series in means of 5 bins, and cut the d batches (d up to half of them) that minimise the
    variance of the mean of the rest, var(rest) / (k − d)². A series of fewer than two batches is not cut."""
    k = len(counts) // 5
    if k < 2:
        return 0
    b = np.asarray(counts[: 5 * k], dtype=float).reshape(k, 5).mean(axis=1)
    best, cut = math.inf, 0
    for d in range(k // 2 + 1):
        rest = b[d:]
        score = float(np.var(rest)) / len(rest) ** 2
        if score < best:  # the least cut of equals
            best, cut = score, d
    return 5 * cut


def mser5_settled(counts: np.ndarray, cut: int) -> bool:
    """Whether MSER-5's ``cut`` (``mser5(counts)``) leaves a steady part: a series of two batches or more, cut short of
    the half it may cut at most (a cut at that bound is the statistic still falling where the search stops: Hoad,
    Robinson and Davies 2010, a truncation point past half the data says the run is too short), and a part after the
    cut in which MSER-5 finds no such warm-up of its own (a level that shifts late, as a start-up's extra containers
    held for most of the window and then removed, looks steady to one pass: the second sees the shift)."""

    def short_of_half(series: np.ndarray, d: int) -> bool:
        k = len(series) // 5
        return k >= 2 and d < 5 * (k // 2)

    rest = counts[cut:]
    return short_of_half(counts, cut) and (len(rest) < 10 or short_of_half(rest, mser5(rest)))


STEADY_BINS = 1000  # a window's series is binned in at most this many bins of at least 1 s (``window_bins``)


def window_bins(start: float, end: float) -> tuple[float, int]:
    """The bins of a window [start, end) in which a series is counted for MSER-5: their width, max(1 s, the window
    ÷ ``STEADY_BINS``), and how many cover it (none for a window without an end)."""
    span = end - start
    if not math.isfinite(span):
        return math.inf, 0
    width = max(1.0, span / STEADY_BINS)
    return width, math.ceil(span / width)


class TimeBins:
    """The integral of a step function of time (a level held between changes) over each bin of a window
    (``window_bins``): container-seconds per bin, for one."""

    def __init__(self, start: float, end: float) -> None:
        self.start = start
        self.width, n = window_bins(start, end)
        self.sums = np.zeros(n)

    def add(self, t0: float, t1: float, level: float, into: np.ndarray | None = None) -> None:
        """Add ``level`` held over [t0, t1), clipped to the window, into the sums (or into ``into``, the same shape)."""
        sums = self.sums if into is None else into
        n = len(sums)
        if not level or not n:
            return
        end = self.start + n * self.width
        a, b = max(t0, self.start), min(t1, end)
        if b <= a:
            return
        i = int((a - self.start) / self.width)
        j = min(int((b - self.start) / self.width), n - 1)
        if i == j:
            sums[i] += level * (b - a)
            return
        sums[i] += level * (self.start + (i + 1) * self.width - a)
        sums[i + 1 : j] += level * self.width
        sums[j] += level * (b - (self.start + j * self.width))

    def upto(self, t0: float, t1: float, level: float) -> np.ndarray:
        """The sums with ``level`` held over [t0, t1) too (a step not yet ended), the sums themselves unchanged."""
        sums = self.sums.copy()
        self.add(t0, t1, level, sums)
        return sums


def finite(v: float | None) -> float | None:
    """JSON has no NaN: an undefined figure is null."""
    return None if v is None or not math.isfinite(v) else float(v)
