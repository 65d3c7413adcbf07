"""A Function's start limit: a token bucket of inputs started per second that may ramp up under a backlog (issue 9).

Modal does not document the start limit (domain.md §1: "spawned inputs start more slowly than they are accepted:
above about 200/s per Function, extra inputs wait instead of failing"). ``StartBucket`` is the plain bucket of
sim/limiter.py (rate ``limits.start_rate``, burst ``limits.start_burst``) plus what the autoscaler's
``size_to = "startable"`` asks of it: how many inputs it could start within a given time.

``RampingStartBucket`` (``limits.start_ramp_per_s`` > 0; an assumption and a calibration target): while a backlog
persists (inputs pending, from the moment one is queued until the queue is empty again), the rate grows linearly by
``start_ramp_per_s`` inputs/s per second, up to ``limits.start_rate_max`` (0: no cap); when the backlog clears the
rate falls back to ``start_rate`` at once. Tokens accrue as the integral of that rate (capped at the burst, as the
plain bucket). Why: a plain FIFO bucket gives the k-th input of a burst a wait of k / rate, a uniform wait profile
(p99 ≈ 2 × p50); a ramp serves later inputs faster, so its waits are concave in k (a lower p99 for the same mean).
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
    (0: no cap)."""

    __slots__ = ("base", "cap", "ramp", "since")

    def __init__(self, rate: float, burst: float, ramp: float, cap: float = 0.0) -> None:
        super().__init__(rate, burst)
        if not ramp > 0:
            raise ValueError(f"ramp must be > 0, got {ramp!r}")
        self.base = self.rate
        self.ramp = float(ramp)
        self.cap = float(cap) if cap > 0 else math.inf
        if self.cap < self.base:
            raise ValueError(f"rate cap {cap!r} is below the base rate {rate!r}")
        self.since: float | None = None  # when the current backlog began (None: no backlog)

    def rate_at(self, t: float) -> float:
        if self.since is None:
            return self.base
        return min(self.cap, self.base + self.ramp * (t - self.since))

    def _capped_from(self) -> float:
        """When the ramp reaches the cap (inf: never); only during a backlog."""
        return self.since + (self.cap - self.base) / self.ramp if self.cap < math.inf else math.inf

    def _integral(self, a: float, b: float) -> float:
        """Tokens that accrue over [a, b] (a <= b) in the current regime."""
        if self.since is None:
            return self.base * (b - a)
        s, tc = self.since, self._capped_from()
        total = 0.0
        if a < tc:
            e = min(b, tc)
            total += self.base * (e - a) + 0.5 * self.ramp * ((e - s) ** 2 - (a - s) ** 2)
        if b > tc:
            total += self.cap * (b - max(a, tc))
        return total

    def _refill(self, now: float) -> None:
        if now > self._t:
            gained = self.base * (now - self._t) if self.since is None else self._integral(self._t, now)
            self._tokens = min(self.burst, self._tokens + gained)
            self._t = now

    def try_take(self, now: float) -> bool:
        """As the plain bucket's, with tokens accrued under the ramp."""
        self._refill(now)
        if self._tokens >= 1.0 - 1e-9:
            self._tokens -= 1.0
            return True
        return False

    def backlog(self, now: float, on: bool) -> None:
        self._refill(now)  # tokens up to now under the old regime
        if on:
            if self.since is None:
                self.since = now
        else:
            self.since = None

    def next_token_in(self, now: float) -> float:
        self._refill(now)
        deficit = 1.0 - self._tokens
        if deficit <= 0:
            return 0.0
        r0 = self.rate_at(now)
        if self.since is None or r0 >= self.cap:
            return deficit / r0
        # r0·τ + ramp·τ²/2 = deficit, in the form that does not cancel
        tau = 2.0 * deficit / (r0 + math.sqrt(r0 * r0 + 2.0 * self.ramp * deficit))
        tc = self._capped_from()
        if now + tau <= tc:
            return tau
        return (tc - now) + (deficit - self._integral(now, tc)) / self.cap

    def startable_within(self, now: float, dt: float) -> float:
        """As the plain bucket, with the rate ramping on over ``dt`` if a backlog persists (a look, not a refill)."""
        tokens = self._tokens
        if now > self._t:
            gained = self.base * (now - self._t) if self.since is None else self._integral(self._t, now)
            tokens = min(self.burst, tokens + gained)
        return tokens + self._integral(now, now + dt)
