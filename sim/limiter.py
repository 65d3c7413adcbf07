"""Token bucket: the shape of Modal's per-Function accept and start limits (docs/sources.md §1, §4).

A bucket of ``burst`` tokens refills at ``rate`` tokens per second; taking one token admits one input. Over any
window of length t it admits at most ``burst + rate * t`` inputs (the oracle of docs/sources.md §4).
"""

from __future__ import annotations

import math


class TokenBucket:
    __slots__ = ("_t", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: float, now: float = 0.0) -> None:
        if not rate > 0 or math.isnan(rate):
            raise ValueError(f"token bucket rate must be > 0, got {rate!r}")
        if burst < 1:
            raise ValueError(f"token bucket burst must be >= 1, got {burst!r}")
        self.rate = float(rate)
        self.burst = float(burst)
        self._tokens = float(burst)
        self._t = now

    def _refill(self, now: float) -> None:
        if now > self._t:
            self._tokens = min(self.burst, self._tokens + (now - self._t) * self.rate)
            self._t = now

    def try_take(self, now: float) -> bool:
        """Take one token if there is one; True when the input is admitted."""
        if now > self._t:  # _refill, inlined: every input takes a token or two
            tokens = self._tokens + (now - self._t) * self.rate
            self._tokens = self.burst if tokens > self.burst else tokens
            self._t = now
        if self._tokens >= 1.0 - 1e-9:  # float slack: a wake-up at next_token_in() must succeed
            self._tokens -= 1.0
            return True
        return False

    def take_up_to(self, now: float, n: int) -> int:
        """Take as many whole tokens as there are, up to ``n``; return how many were taken."""
        self._refill(now)
        k = min(n, int(self._tokens + 1e-9))
        self._tokens -= k
        return k

    def whole(self, now: float) -> int:
        """The whole tokens there are at ``now``, taking none (``take_up_to(now, k)`` then takes k ≤ this)."""
        tokens = self._tokens + (now - self._t) * self.rate if now > self._t else self._tokens
        return int(min(self.burst, tokens) + 1e-9)

    def next_token_in(self, now: float) -> float:
        """Seconds from ``now`` until a token is available (0 if one is)."""
        self._refill(now)
        return max(0.0, (1.0 - self._tokens) / self.rate)
