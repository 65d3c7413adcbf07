"""A Function's start limit: a token bucket of inputs started per second that may ramp up under a backlog.

Modal does not document the start limit (docs/sources.md §1: "spawned inputs start more slowly than they are accepted:
above about 200/s per Function, extra inputs wait instead of failing"). ``StartBucket`` is the plain bucket of
sim/limiter.py (rate ``limits.start_rate``, burst ``limits.start_burst``) plus what the autoscaler's
``size_to = "startable"`` asks of it: how many inputs it could start within a given time.

``RampingStartBucket`` (``limits.start_ramp_per_s`` > 0; an assumption and a calibration target): while a backlog
persists (inputs pending, from the moment one is queued until the queue is empty again), the rate grows linearly by
``start_ramp_per_s`` inputs/s per second, up to ``limits.start_rate_max``; once the backlog clears it falls back
towards ``start_rate`` linearly by ``limits.start_relax_per_s`` (0: at once), and a backlog that begins again ramps
on from wherever the rate has fallen to. Tokens accrue as the integral of that rate (capped at the burst, as the
plain bucket). Why a ramp: a plain FIFO bucket gives the k-th input of a burst a wait of k / rate, a uniform wait
profile (p99 ≈ 2 × p50); a ramp serves later inputs faster, so its waits are concave in k (a lower p99 for the same
mean). Why bounded: a rate that grows for as long as a backlog lasts has no support in the sources (none says a
Function starts inputs faster and faster), and one that drops to its base the instant the queue empties makes a
closed loop run a sawtooth; the ceiling is the fastest rate the fitted model reached in the reference load test
(its envelope: nothing beyond it was observed), the relaxation as fast as the ramp (an assumption).
"""

from __future__ import annotations

import math

from sim.limiter import TokenBucket


class StartBucket(TokenBucket):
    """The plain start bucket (the behaviour of ``TokenBucket`` exactly)."""

    __slots__ = ()

    def backlog(self, now: float, on: bool) -> None:
        """A backlog begins (``on``) or clears at ``now``: a plain bucket does not care."""

    def startable_within(self, now: float, dt: float) -> float:
        """Inputs the bucket can start from ``now`` to ``now + dt``: its tokens plus what refills meanwhile. A look,
        not a refill: asking (the autoscaler, whenever it decides) changes no rounding of the tokens."""
        tokens = min(self.burst, self._tokens + (now - self._t) * self.rate) if now > self._t else self._tokens
        return tokens + self.rate * dt


class RampingStartBucket(StartBucket):
    """A start bucket whose rate ramps from ``rate`` by ``ramp`` per second while a backlog persists, up to ``cap``
    (0: no cap; at or below ``rate``: no ramp), and falls back to ``rate`` by ``relax`` per second when it clears (0:
    at once).

    The rate is piecewise linear: ``_r`` at ``_rt``, rising (a backlog) or falling (none), until it reaches its
    bound (``cap`` rising, ``base`` falling), then constant."""

    __slots__ = ("_peak", "_r", "_rt", "base", "cap", "ramp", "relax", "rising", "since")

    def __init__(self, rate: float, burst: float, ramp: float, cap: float = 0.0, relax: float = 0.0) -> None:
        super().__init__(rate, burst)
        if not ramp > 0:
            raise ValueError(f"ramp must be > 0, got {ramp!r}")
        if not relax >= 0:
            raise ValueError(f"relax must be >= 0, got {relax!r}")
        self.base = self.rate
        self.ramp = float(ramp)
        self.relax = float(relax)
        self.cap = max(float(cap), self.base) if cap > 0 else math.inf  # at or below the base: no ramp
        self.since: float | None = None  # when the current backlog began (None: no backlog)
        self.rising = False
        self._r, self._rt = self.base, 0.0
        self._peak = self.base  # the highest rate of the regimes before the current one

    @property
    def peak_rate(self) -> float:
        """The highest rate so far (up to the last refill): a rising rate is highest at the latest time seen."""
        return max(self._peak, self.rate_at(self._t)) if self.rising else self._peak

    def _segment(self) -> tuple[float, float, float]:
        """(slope, when the rate reaches its bound, the bound) of the current regime."""
        if self.rising:
            end = self._rt + (self.cap - self._r) / self.ramp if self.cap < math.inf else math.inf
            return self.ramp, end, self.cap
        if self._r <= self.base or not self.relax:
            return 0.0, self._rt, self.base
        return -self.relax, self._rt + (self._r - self.base) / self.relax, self.base

    def rate_at(self, t: float) -> float:
        if self.rising:
            return min(self.cap, self._r + self.ramp * (t - self._rt))
        if self._at_base():
            return self.base
        return max(self.base, self._r - self.relax * (t - self._rt))

    def _integral(self, a: float, b: float) -> float:
        """Tokens that accrue over [a, b] (``_rt`` <= a <= b) in the current regime."""
        slope, end, bound = self._segment()
        s, total = self._rt, 0.0
        if a < end:
            e = min(b, end)
            total += self._r * (e - a) + 0.5 * slope * ((e - s) ** 2 - (a - s) ** 2)
        if b > end:
            total += bound * (b - max(a, end))
        return total

    def _refill(self, now: float) -> None:
        if now > self._t:
            gained = self.base * (now - self._t) if self._at_base() else self._integral(self._t, now)
            self._tokens = min(self.burst, self._tokens + gained)
            self._t = now

    def _at_base(self) -> bool:
        return not self.rising and (self._r <= self.base or not self.relax)

    def try_take(self, now: float) -> bool:
        """As the plain bucket's, with tokens accrued under the ramp."""
        self._refill(now)
        if self._tokens >= 1.0 - 1e-9:
            self._tokens -= 1.0
            return True
        return False

    def backlog(self, now: float, on: bool) -> None:
        self._refill(now)  # tokens up to now under the old regime
        if on == self.rising:
            return
        self._peak = max(self._peak, self.rate_at(now))
        if on:
            self.since = now
            self._r = self.rate_at(now) if not self._at_base() else self.base
        else:
            self.since = None
            self._r = self.rate_at(now) if self.relax else self.base
        self._rt, self.rising = now, on

    def next_token_in(self, now: float) -> float:
        self._refill(now)
        deficit = 1.0 - self._tokens
        if deficit <= 0:
            return 0.0
        slope, end, bound = self._segment()
        r0 = self.rate_at(now)
        if self._at_base() or r0 == bound:
            return deficit / r0
        # r0·τ + slope·τ²/2 = deficit, in the form that does not cancel (no real root: the segment ends first)
        disc = r0 * r0 + 2.0 * slope * deficit
        if disc >= 0.0:
            tau = 2.0 * deficit / (r0 + math.sqrt(disc))
            if now + tau <= end:
                return tau
        return (end - now) + (deficit - self._integral(now, end)) / bound

    def startable_within(self, now: float, dt: float) -> float:
        """As the plain bucket, with the rate going on as it goes over ``dt`` (a look, not a refill)."""
        tokens = self._tokens
        if now > self._t:
            gained = self.base * (now - self._t) if self._at_base() else self._integral(self._t, now)
            tokens = min(self.burst, tokens + gained)
        return tokens + self._integral(now, now + dt)
