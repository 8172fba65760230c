"""Keys waiting for a moment before they are added to a work queue (the delaying half of `add_after`).

Guarantees:

* A key is added no earlier than its deadline, measured on the injected clock's monotonic time, and soon
  after it (as soon as the clock's `sleep` returns).
* A key waits at most once: a later, shorter delay moves its deadline earlier; a later, longer one leaves it.
* Keys whose deadlines have passed are added in deadline order (ties in the order they were scheduled).
* A single timer task exists only while some key is waiting, so an idle queue owns no task; `close()` stops it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from caravanserai.clock import Clock

K = TypeVar("K", bound=Hashable)


class DelayedAdds(Generic[K]):
    """Holds keys until their deadline, then hands each to `add` (the owning queue's `add`)."""

    def __init__(self, clock: Clock, add: Callable[[K], None]) -> None:
        self._clock = clock
        self._add = add
        # The authoritative deadline of each waiting key: its earliest requested one. A key appears once.
        self._deadlines: dict[K, float] = {}
        # (deadline, tie-breaker, key), earliest first. An entry whose deadline differs from `_deadlines[key]`
        # is stale (superseded by an earlier deadline or already released) and is skipped when it surfaces.
        self._heap: list[tuple[float, int, K]] = []
        self._sequence = itertools.count()
        # The task sleeping until `_timer_deadline`. Invariant: while a key waits, a timer exists whose
        # deadline is not later than the earliest waiting deadline; an earlier add restarts the timer.
        self._timer: asyncio.Task[None] | None = None
        self._timer_deadline = 0.0

    def __len__(self) -> int:
        return len(self._deadlines)

    def add_after(self, key: K, delay: float) -> None:
        """Add `key` after `delay` seconds unless it already waits for an earlier deadline.

        Must be called from a running event loop (it may start the timer task).
        """
        deadline = self._clock.monotonic() + delay
        current = self._deadlines.get(key)
        if current is not None and current <= deadline:
            return
        self._deadlines[key] = deadline
        heapq.heappush(self._heap, (deadline, next(self._sequence), key))
        if self._timer is None or deadline < self._timer_deadline:
            self._start_timer(deadline)

    async def close(self) -> None:
        """Drop every waiting key and stop the timer; returns once the timer task has finished."""
        self._deadlines.clear()
        self._heap.clear()
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            # `wait` neither raises the timer's CancelledError nor swallows a cancellation of the caller.
            await asyncio.wait([timer])

    def _start_timer(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_deadline = deadline
        self._timer = asyncio.get_running_loop().create_task(self._run_timer(), name="workqueue-delayed-adds")

    async def _run_timer(self) -> None:
        try:
            while (deadline := self._earliest_deadline()) is not None:
                self._timer_deadline = deadline
                await self._clock.sleep(deadline - self._clock.monotonic())
                # Having slept until `deadline`, everything due by then is due, even if the clock reads a
                # hair earlier (a clock's sleep may return within its resolution of the deadline).
                self._release(max(deadline, self._clock.monotonic()))
        finally:
            if self._timer is asyncio.current_task():
                self._timer = None

    def _earliest_deadline(self) -> float | None:
        while self._heap:
            deadline, _, key = self._heap[0]
            if self._deadlines.get(key) == deadline:
                return deadline
            heapq.heappop(self._heap)
        return None

    def _release(self, now: float) -> None:
        while self._heap and self._heap[0][0] <= now:
            deadline, _, key = heapq.heappop(self._heap)
            if self._deadlines.get(key) == deadline:
                del self._deadlines[key]
                self._add(key)


__all__ = ["DelayedAdds"]
