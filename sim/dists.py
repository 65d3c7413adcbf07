"""Distributions parsed from strings (the values of scenario keys).

``constant(x)``, ``uniform(a, b)``, ``exponential(mean)``, ``lognormal(median, sigma)``, ``empirical(PATH)``.
Each is a small frozen value object that knows its analytic mean and variance and the expected maximum of n
draws, so tests and ideal figures use them as oracles (the Ciw habit). Sampling is batched:
``sampler(rng)`` returns a zero-argument callable that hands out pre-drawn values, since one numpy call per
value costs more than the event it feeds.
"""

from __future__ import annotations

import itertools
import math
import re
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim import files

_BATCH = 4096


class DistError(ValueError):
    """A distribution string that cannot be parsed or has invalid parameters."""


@dataclass(frozen=True)
class Dist:
    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        raise NotImplementedError

    @property
    def mean(self) -> float:
        raise NotImplementedError

    @property
    def var(self) -> float:
        raise NotImplementedError

    @property
    def low(self) -> float:
        """The least value a draw can take (the support's lower bound)."""
        raise NotImplementedError

    def cdf(self, x: float) -> float:
        raise NotImplementedError

    def expected_max(self, n: int) -> float:
        """E[max of n independent draws] = ∫ (1 − F(x)^n) dx over x ≥ 0 (all our distributions are ≥ 0)."""
        from scipy import integrate  # here, not at the top: scipy takes a third of a second to import

        value, _ = integrate.quad(lambda x: 1.0 - self.cdf(x) ** n, 0.0, np.inf, limit=200)
        return float(value)

    def draws(self, rng: np.random.Generator, first: int = _BATCH, most: int = _BATCH) -> Iterator[float]:
        """An endless iterator of draws from ``rng``, drawn in batches of ``first``, doubling up to ``most`` (a stream
        of few draws holds little; many streams at once hold ``most`` each). Every ``draw`` fills its array in order,
        one value after the other, so the sequence is the same whatever the batches (tests/sim/test_dists.py): take
        many at once with ``itertools.islice``. A batch is held as raw doubles (``array``), each made a float as it
        is handed out: 8 bytes a draw held, not a float object of 32 made ahead. Where many streams draw by turns (800
        clients' draws on the server) a list's floats had gone cold in the cache by their turn: 255 → 145 ns a draw
        (docs/explanation/speed.md)."""

        def batches() -> Iterator[array[float]]:
            n = first
            while True:
                batch = array("d")
                batch.frombytes(self.draw(rng, n).astype(float, copy=False).tobytes())
                yield batch
                n = min(2 * n, most)

        return itertools.chain.from_iterable(batches())

    def sampler(self, rng: np.random.Generator, first: int = _BATCH, most: int = _BATCH) -> Callable[[], float]:
        """A callable returning one draw per call (``draws``' ``__next__``: a C call per draw)."""
        return self.draws(rng, first, most).__next__


@dataclass(frozen=True)
class Constant(Dist):
    x: float

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.x)

    mean = property(lambda self: self.x)
    var = property(lambda self: 0.0)
    low = property(lambda self: self.x)

    def cdf(self, x: float) -> float:
        return 1.0 if x >= self.x else 0.0

    def expected_max(self, n: int) -> float:
        return self.x

    def __str__(self) -> str:
        return f"constant({self.x:g})"


@dataclass(frozen=True)
class Uniform(Dist):
    a: float
    b: float

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.uniform(self.a, self.b, n)

    mean = property(lambda self: (self.a + self.b) / 2)
    low = property(lambda self: self.a)
    var = property(lambda self: (self.b - self.a) * (self.b - self.a) / 12)  # inf, not OverflowError, past 1e154

    def cdf(self, x: float) -> float:
        return min(1.0, max(0.0, (x - self.a) / (self.b - self.a)))

    def expected_max(self, n: int) -> float:
        # docs/sources.md §4: E[max of n uniform(a, b)] = a + (b − a)·n/(n + 1)
        return self.a + (self.b - self.a) * n / (n + 1)

    def __str__(self) -> str:
        return f"uniform({self.a:g}, {self.b:g})"


@dataclass(frozen=True)
class Exponential(Dist):
    scale: float  # the mean

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.exponential(self.scale, n)

    mean = property(lambda self: self.scale)
    low = property(lambda self: 0.0)
    var = property(lambda self: self.scale**2)

    def cdf(self, x: float) -> float:
        return 1.0 - math.exp(-x / self.scale) if x > 0 else 0.0

    def expected_max(self, n: int) -> float:
        # docs/sources.md §4: H_n / μ, with 1/μ the mean
        from scipy import special  # (as above)

        return self.scale * float(special.digamma(n + 1) + np.euler_gamma)

    def __str__(self) -> str:
        return f"exponential({self.scale:g})"


@dataclass(frozen=True)
class LogNormal(Dist):
    median: float
    sigma: float

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.lognormal(math.log(self.median), self.sigma, n)

    mean = property(lambda self: self.median * math.exp(self.sigma**2 / 2))
    low = property(lambda self: 0.0)
    var = property(lambda self: (math.exp(self.sigma**2) - 1) * self.mean**2)

    def cdf(self, x: float) -> float:
        if x <= 0:
            return 0.0
        return 0.5 * math.erfc(-(math.log(x) - math.log(self.median)) / (self.sigma * math.sqrt(2)))

    def __str__(self) -> str:
        return f"lognormal({self.median:g}, {self.sigma:g})"


@dataclass(frozen=True)
class Empirical(Dist):
    """Resampling with replacement from recorded values (a file of numbers, one per line; '#' comments)."""

    path: str
    values: tuple[float, ...]

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        # an index from a uniform draw, not rng.choice: bounded integers are drawn from buffered halves of 64-bit
        # words, so their sequence would depend on the batch sizes
        values = np.asarray(self.values)
        return values[np.minimum((rng.random(n) * len(values)).astype(np.int64), len(values) - 1)]

    mean = property(lambda self: float(np.mean(self.values)))
    low = property(lambda self: float(min(self.values)))
    var = property(lambda self: float(np.var(self.values)))

    def cdf(self, x: float) -> float:
        return float(np.searchsorted(np.sort(self.values), x, side="right")) / len(self.values)

    def expected_max(self, n: int) -> float:
        v = np.sort(np.asarray(self.values))
        k = len(v)
        # P(max = v[i]) = ((i+1)/k)^n − (i/k)^n for sorted values (ties are harmless: they telescope).
        i = np.arange(k)
        return float(np.sum(v * (((i + 1) / k) ** n - (i / k) ** n)))

    def __str__(self) -> str:
        return f"empirical({self.path})"


_CALL = re.compile(r"^\s*([a-z]+)\s*\((.*)\)\s*$")
_ARITY = {"constant": 1, "uniform": 2, "exponential": 1, "lognormal": 2}


def parse_dist(text: str, base_dir: Path | None = None) -> Dist:
    """Parse a distribution string; raise DistError with a one-line reason."""
    if not isinstance(text, str):
        raise DistError(f"expected a distribution string like 'uniform(1, 10)', got {text!r}")
    m = _CALL.match(text)
    if not m:
        raise DistError(f"cannot parse distribution {text!r}: expected NAME(ARGS), e.g. 'exponential(1.0)'")
    name, arg_text = m.group(1), m.group(2).strip()
    if name == "empirical":
        return _empirical(arg_text, base_dir)
    if name not in _ARITY:
        known = ", ".join([*_ARITY, "empirical"])
        raise DistError(f"unknown distribution {name!r} in {text!r} (known: {known})")
    parts = [p.strip() for p in arg_text.split(",")] if arg_text else []
    if len(parts) != _ARITY[name]:
        raise DistError(f"{name}() takes {_ARITY[name]} argument(s), got {len(parts)} in {text!r}")
    try:
        args = [float(p) for p in parts]
    except ValueError:
        raise DistError(f"non-numeric argument in {text!r}") from None
    if not all(math.isfinite(a) for a in args):
        raise DistError(f"arguments must be finite in {text!r}")
    if name == "constant":
        if args[0] < 0:
            raise DistError(f"constant value must be >= 0 in {text!r}")
        return _finite(Constant(args[0]), text)
    if name == "uniform":
        a, b = args
        if not 0 <= a < b:
            raise DistError(f"uniform(a, b) needs 0 <= a < b in {text!r}")
        return _finite(Uniform(a, b), text)
    if name == "exponential":
        if args[0] <= 0:
            raise DistError(f"exponential mean must be > 0 in {text!r}")
        return _finite(Exponential(args[0]), text)
    median, sigma = args
    if median <= 0 or sigma <= 0:
        raise DistError(f"lognormal(median, sigma) needs median > 0 and sigma > 0 in {text!r}")
    if sigma * sigma >= 709:  # math.exp overflows past 709: its mean's and variance's factors
        raise DistError(f"lognormal(median, sigma): its mean or variance overflows in {text!r}")
    return _finite(LogNormal(median, sigma), text)


TAIL_P = 1e-9  # the upper tail whose quantile must be finite: ten thousand runs of 1e5 draws pass it about once
MAX_DRAW = 1e12  # nor past this: every number of a scenario is within it (sim/scenario.py, MAX_MAGNITUDE)
_TAIL_Z = 5.997807015  # the standard normal's quantile at 1 - TAIL_P


def tail(d: Dist) -> float:
    """The value a draw passes with probability ``TAIL_P`` (the greatest value where the support ends below it)."""
    if isinstance(d, Uniform):
        return d.b
    if isinstance(d, Exponential):
        return d.scale * -math.log(TAIL_P)
    if isinstance(d, LogNormal):
        return d.median * math.exp(d.sigma * _TAIL_Z)
    if isinstance(d, Empirical):
        return max(d.values)
    return d.mean  # constant


def _finite(d: Dist, text: str) -> Dist:
    """``d`` if its mean, its variance and its upper tail (``tail``) are finite floats and the tail within
    ``MAX_DRAW``, else a DistError: a draw or a mean past 1.8e308 is inf, and every figure derived from it inf or
    NaN; a time past 1e12 s loses sub-millisecond precision, as any number of a scenario would."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # inf, not a warning line (an empirical mean)
            values = (d.mean, d.var, tail(d))
    except OverflowError:
        values = (math.inf,)
    if not all(math.isfinite(v) for v in values):
        raise DistError(f"its mean, variance or {1 - TAIL_P:.9g} quantile overflows a float in {text!r}")
    if values[2] > MAX_DRAW:
        raise DistError(
            f"its {1 - TAIL_P:.9g} quantile {values[2]:.3g} is past {MAX_DRAW:g} s (a time beyond it loses "
            f"sub-millisecond precision) in {text!r}"
        )
    return d


def _empirical(arg: str, base_dir: Path | None) -> Empirical:
    path = Path(arg.strip().strip("'\""))
    if not path.is_absolute() and base_dir is not None and not files.exists(path):
        path = base_dir / path
    try:  # a regular file within its cap, never a pipe or a device (sim/files.py)
        lines = files.read_text(path, "an empirical values file", files.EMPIRICAL_CAP).splitlines()
    except ValueError as e:
        raise DistError(f"empirical({arg[:200]}): {e}") from None
    values = []
    for n, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            v = float(line)
        except ValueError:
            raise DistError(f"empirical({arg}): line {n} is not a number: {line!r}") from None
        if not math.isfinite(v) or v < 0:
            raise DistError(f"empirical({arg}): line {n} must be a finite value >= 0, got {line!r}")
        values.append(v)
    if not values:
        raise DistError(f"empirical({arg}): {path} holds no values")
    return _finite(Empirical(str(arg.strip()), tuple(values)), f"empirical({arg[:200]})")
