"""Jittered exponential backoff: the one policy and state behind every reconnect and retry loop.

    backoff = Backoff(initial=0.1, cap=5.0).start(clock)
    while True:
        try:
            await attempt()
            backoff.reset()
        except Unavailable:
            await backoff.wait()

* **Policy** (`Backoff`, frozen, shareable): the n-th delay since the last reset is `min(cap, initial · factorⁿ)`
  stretched by a random factor in [1, 1 + jitter) — client-go's `wait.Backoff`. Jitter spreads out the retries of
  many clients after one server restart; `jitter=0` gives exact delays.
* **State** (`BackoffState`, one per loop): `next_delay()` grows the delay after it; `reset()` starts again from
  `initial` after a success; with `reset_after` set, a failure that comes `reset_after` seconds or more after the
  previous one also starts again from `initial` (for loops that cannot tell when they succeeded).
* **Time is injected**: `wait()` sleeps on the given `Clock`, and `reset_after` is measured on its `monotonic()`.

Not built on this module, because they are different things: the work queue's per-key rate limiter
(`workqueue.ratelimit`, a fairness tool keyed by object and forgotten on success) and the scheduler's per-project
retry (`controllers.scheduler.active`, which decides when an unschedulable project is tried again).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from caravanserai.clock import Clock


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delays between failed attempts: `initial · factor^n` capped at `cap`, then stretched by a random factor in
    [1, 1 + jitter); n returns to 0 after `reset()`, or after `reset_after` seconds without a failure (None: only
    after `reset()`)."""

    initial: float = 0.8
    factor: float = 2.0
    cap: float = 30.0
    jitter: float = 1.0
    reset_after: float | None = 120.0

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.cap <= 0:
            raise ValueError(f"backoff needs initial > 0 and cap > 0, got initial={self.initial} cap={self.cap}")
        if self.factor < 1 or self.jitter < 0:
            raise ValueError(f"backoff needs factor >= 1 and jitter >= 0, got {self.factor} and {self.jitter}")

    def delay(self, step: int, rng: random.Random | None = None) -> float:
        """The delay after `step` failures since the last reset (step 0: the first failure), jitter included."""
        base = min(self.cap, self.initial * self.factor ** min(step, 64))
        return base * (1.0 + self.jitter * (rng or _RNG).random())

    def start(self, clock: Clock, *, rng: random.Random | None = None) -> BackoffState:
        """A fresh state for one retry loop."""
        return BackoffState(self, clock=clock, rng=rng)


_RNG = random.Random()


class BackoffState:
    """The delays of one retry loop under a `Backoff` policy; see the module docstring."""

    def __init__(self, policy: Backoff, *, clock: Clock, rng: random.Random | None = None) -> None:
        self.policy = policy
        self._clock = clock
        self._rng = rng
        self._steps = 0  # failures since the last reset
        self._last_failure = float("-inf")  # clock.monotonic() of the last failure, for reset_after

    def next_delay(self) -> float:
        """The delay to wait after a failure now; each call grows the one after it."""
        policy = self.policy
        now = self._clock.monotonic()
        if policy.reset_after is not None and now - self._last_failure >= policy.reset_after:
            self._steps = 0
        self._last_failure = now
        delay = policy.delay(self._steps, self._rng)
        self._steps += 1
        return delay

    def reset(self) -> None:
        """Start again from `initial` (call after an attempt succeeded)."""
        self._steps = 0

    async def wait(self) -> float:
        """Sleep the next delay on the clock; returns how long that was."""
        delay = self.next_delay()
        await self._clock.sleep(delay)
        return delay


__all__ = ["Backoff", "BackoffState"]
