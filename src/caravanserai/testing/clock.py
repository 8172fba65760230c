"""A `Clock` for tests: time stands still until the test moves it with `advance`.

Both readings move together: `advance(s)` adds `s` to `now()` and to `monotonic()`. A `sleep(s)` started
at monotonic time `t` returns once `advance` has moved monotonic time to `t + s` or beyond (sleepers due at
the same moment resume in the order they started sleeping). `advance` itself does not yield: woken sleepers
run at the test's next `await`.
"""

from __future__ import annotations

import asyncio
import itertools

DEFAULT_START = 1_800_000_000.0  # 2027-01-15T08:00:00Z: a plausible wall-clock reading, far from the epoch


class FakeClock:
    """A deterministic `caravanserai.clock.Clock` driven by `advance(seconds)`."""

    def __init__(self, *, start: float = DEFAULT_START, monotonic_start: float = 0.0) -> None:
        self._now = start
        self._monotonic = monotonic_start
        # Pending sleeps: (monotonic deadline, start order, future). Futures of cancelled sleeps are removed.
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    @property
    def sleepers(self) -> int:
        """How many `sleep` calls are waiting for time to move."""
        return len(self._sleepers)

    async def sleep(self, seconds: float) -> None:
        """Wait until `advance` moves monotonic time `seconds` past now; a delay ≤ 0 only yields once."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self._monotonic + seconds, next(self._order), future)
        self._sleepers.append(entry)
        try:
            await future
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    def advance(self, seconds: float) -> None:
        """Move time forward by `seconds` (≥ 0) and wake every sleeper whose deadline is reached."""
        if seconds < 0:
            raise ValueError(f"time only moves forward; advance({seconds!r})")
        self._now += seconds
        self._monotonic += seconds
        due = sorted(entry for entry in self._sleepers if entry[0] <= self._monotonic)
        for entry in due:
            self._sleepers.remove(entry)
            if not entry[2].done():
                entry[2].set_result(None)


__all__ = ["DEFAULT_START", "FakeClock"]
