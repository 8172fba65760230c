"""Jittered exponential backoff for the etcd client's reconnect loops (watch and lease keepalive)."""

from __future__ import annotations

import random


class Backoff:
    """Delays that double from `initial` up to `maximum`, each drawn uniformly from [delay·(1-jitter), delay].

    Jitter spreads out the reconnects of many watchers after one etcd restart. `reset()` after a success so
    the next failure starts small again.
    """

    def __init__(
        self,
        *,
        initial: float = 0.1,
        maximum: float = 2.0,
        factor: float = 2.0,
        jitter: float = 0.5,
        rng: random.Random | None = None,
    ) -> None:
        if not 0 < initial <= maximum:
            raise ValueError("backoff needs 0 < initial <= maximum")
        self._initial = initial
        self._maximum = maximum
        self._factor = factor
        self._jitter = jitter
        self._rng = rng or random.Random()
        self._delay = initial  # the ceiling of the next delay; grows by `factor` per failure

    def next(self) -> float:
        """The next delay in seconds; each call grows the one after it."""
        delay = self._delay * (1.0 - self._jitter * self._rng.random())
        self._delay = min(self._delay * self._factor, self._maximum)
        return delay

    def reset(self) -> None:
        """Start again from `initial` (call after an attempt succeeded)."""
        self._delay = self._initial


__all__ = ["Backoff"]
