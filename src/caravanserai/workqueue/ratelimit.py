"""How long a failed key waits before its next try.

`default_rate_limiter()` is the one controllers use: the larger of a per-key exponential backoff
(5 ms · 2ⁿ after n failures, capped at 1000 s) and an overall token bucket (10 retries/s, burst 100), the
same numbers as client-go's default controller rate limiter. The bucket only paces retries; first adds are
never limited. Every number is configurable.

A limiter remembers failures per key until `forget(key)`: call it when a key succeeds, or the memory of its
failures (and its next delay) lives on.

Not `caravanserai.backoff`: that paces one loop's reconnects; this is a queue's fairness tool, keyed by object
and combined with a shared bucket.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Protocol

from caravanserai.clock import Clock, SystemClock

DEFAULT_BASE_DELAY = 0.005
DEFAULT_MAX_DELAY = 1000.0
DEFAULT_QPS = 10.0
DEFAULT_BURST = 100


class RateLimiter(Protocol):
    """Decides the delay of a key's next retry."""

    def when(self, key: Hashable) -> float:
        """Record one more failure of `key` and return the seconds to wait before retrying it (≥ 0)."""
        ...

    def forget(self, key: Hashable) -> None:
        """`key` succeeded: drop what was recorded about it, so its next failure starts from the base delay."""
        ...

    def num_requeues(self, key: Hashable) -> int:
        """How many failures of `key` were recorded since it was last forgotten."""
        ...


class ExponentialBackoff:
    """Per-key backoff: the n-th retry of a key since it was forgotten waits `base_delay · 2ⁿ`, at most `max_delay`.

    The first retry (n = 0) waits `base_delay`. Keys are independent of each other.
    """

    def __init__(self, *, base_delay: float = DEFAULT_BASE_DELAY, max_delay: float = DEFAULT_MAX_DELAY) -> None:
        if base_delay <= 0 or not math.isfinite(base_delay):
            raise ValueError(f"base_delay must be a positive number of seconds, not {base_delay!r}")
        if max_delay < base_delay:
            raise ValueError(f"max_delay ({max_delay!r}) must not be below base_delay ({base_delay!r})")
        self._base_delay = base_delay
        self._max_delay = max_delay
        # Failures recorded per key since its last `forget`; a key is absent once forgotten, so memory is
        # limited by the keys currently failing.
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        try:
            delay = math.ldexp(self._base_delay, failures)
        except OverflowError:
            return self._max_delay
        return min(delay, self._max_delay)

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        return self._failures.get(key, 0)


class TokenBucket:
    """An overall limit on retries of all keys together: `qps` per second, with bursts of up to `burst`.

    Each `when` takes one token and returns how long until that token exists; the bucket holds at most
    `burst` tokens and refills at `qps` per second of the clock's monotonic time. It keeps nothing per key.
    """

    def __init__(self, *, qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST, clock: Clock | None = None) -> None:
        if qps <= 0 or not math.isfinite(qps):
            raise ValueError(f"qps must be a positive number, not {qps!r}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, not {burst!r}")
        self._qps = qps
        self._burst = burst
        self._clock = clock or SystemClock()
        # Tokens available at `_updated_at`. Negative when tokens are already promised to callers that were
        # told to wait: each promised token is paid back by the refill before its caller's delay ends.
        self._tokens = float(burst)
        self._updated_at = self._clock.monotonic()

    def when(self, key: Hashable) -> float:
        now = self._clock.monotonic()
        refill = (now - self._updated_at) * self._qps
        self._tokens = min(float(self._burst), self._tokens + refill)
        self._updated_at = now
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self._qps

    def forget(self, key: Hashable) -> None:
        return None

    def num_requeues(self, key: Hashable) -> int:
        return 0


class MaxOf:
    """Combines limiters: the delay is the longest of theirs; every limiter records every failure."""

    def __init__(self, first: RateLimiter, *others: RateLimiter) -> None:
        self._limiters: tuple[RateLimiter, ...] = (first, *others)

    def when(self, key: Hashable) -> float:
        return max([limiter.when(key) for limiter in self._limiters])

    def forget(self, key: Hashable) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return max(limiter.num_requeues(key) for limiter in self._limiters)


def default_rate_limiter(
    *,
    clock: Clock | None = None,
    base_delay: float = DEFAULT_BASE_DELAY,
    max_delay: float = DEFAULT_MAX_DELAY,
    qps: float = DEFAULT_QPS,
    burst: int = DEFAULT_BURST,
) -> MaxOf:
    """Per-key exponential backoff combined with an overall token bucket; the longer delay wins."""
    return MaxOf(
        ExponentialBackoff(base_delay=base_delay, max_delay=max_delay),
        TokenBucket(qps=qps, burst=burst, clock=clock),
    )


__all__ = [
    "DEFAULT_BASE_DELAY",
    "DEFAULT_BURST",
    "DEFAULT_MAX_DELAY",
    "DEFAULT_QPS",
    "ExponentialBackoff",
    "MaxOf",
    "RateLimiter",
    "TokenBucket",
    "default_rate_limiter",
]
