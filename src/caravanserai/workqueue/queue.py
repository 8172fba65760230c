"""The work queue: the algorithm behind the guarantees listed in `caravanserai.workqueue`.

Three structures carry the state of a key:

* `_dirty`: the key needs processing (it was added since it was last handed out);
* `_processing`: a worker holds the key and has not called `done`;
* `_queue`: the order in which keys are handed out: dirty keys that are not being processed.

An add marks a key dirty and queues it unless it is being processed; `get_key` moves the head of the queue
from dirty to processing; `done` removes a key from processing and queues it again if an add marked it dirty
in the meantime.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from types import TracebackType
from typing import Generic, TypeVar

from caravanserai.clock import Clock, SystemClock
from caravanserai.errors import CaravanseraiError
from caravanserai.workqueue.delaying import DelayedAdds
from caravanserai.workqueue.metrics import NoMetrics, QueueMetrics
from caravanserai.workqueue.ratelimit import RateLimiter, default_rate_limiter

K = TypeVar("K", bound=Hashable)


class ShutDown(CaravanseraiError):
    """The queue was shut down and has no queued key left to hand out: the worker should exit."""


class WorkQueue(Generic[K]):
    """A fair, stingy asyncio work queue of hashable keys, with delayed and rate-limited adds.

    `clock` measures delays, latencies and the retry budget (`SystemClock()` by default); `rate_limiter`
    decides `add_rate_limited` delays (`default_rate_limiter(clock=clock)` by default); `metrics` receives
    the queue's measurements (`NoMetrics()` by default). Use it from one event loop.
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        rate_limiter: RateLimiter | None = None,
        metrics: QueueMetrics | None = None,
    ) -> None:
        self._clock: Clock = clock or SystemClock()
        self._rate_limiter: RateLimiter = rate_limiter or default_rate_limiter(clock=self._clock)
        self._metrics: QueueMetrics = metrics or NoMetrics()
        # Stingy, first half: a key that needs processing, mapped to the monotonic time of the add that made
        # it dirty. Adding a key that is already here changes nothing, so adds before processing collapse.
        self._dirty: dict[K, float] = {}
        # Stingy, second half: a key held by a worker, mapped to the monotonic time it was handed out. A key
        # here is never in `_queue`, so it cannot be handed to a second worker; if an add marks it dirty
        # meanwhile, `done` queues it again, so it runs exactly once more.
        self._processing: dict[K, float] = {}
        # Fair: dirty keys that are not being processed, each once, in the order they became dirty.
        self._queue: deque[K] = deque()
        # Cancellation never loses a key: a getter waits here for a wake-up and takes a key only once it runs
        # again, so a getter cancelled while waiting has taken nothing. Holds only getters not yet woken.
        self._getters: deque[asyncio.Future[None]] = deque()
        # Getters woken but not yet running. Invariant: while getters wait, `_woken >= len(_queue)`, so no
        # queued key sits beside idle getters. Every enqueue and every woken getter cancelled before it could
        # run restores it (`_wake_getters`); a getter only starts waiting when the queue is empty.
        self._woken = 0
        # Shutdown: once set, adds are ignored and getters that find the queue empty raise ShutDown.
        self._shutting_down = False
        # A drain waits until `_processing` is empty, unless a later plain shutdown aborts the wait.
        self._drain_aborted = False
        self._drain_wakeup = asyncio.Event()
        self._delayed: DelayedAdds[K] = DelayedAdds(self._clock, self.add)

    def __len__(self) -> int:
        """The number of keys queued for a worker (neither being processed nor waiting for a delay)."""
        return len(self._queue)

    @property
    def processing(self) -> int:
        """The number of keys held by workers (handed out and not yet `done`)."""
        return len(self._processing)

    @property
    def delayed(self) -> int:
        """The number of keys waiting for the delay of an `add_after` or `add_rate_limited`."""
        return len(self._delayed)

    @property
    def shutting_down(self) -> bool:
        """Whether `shut_down` was called."""
        return self._shutting_down

    def add(self, key: K) -> None:
        """Mark `key` as needing processing. Ignored after `shut_down`; collapses into a pending add."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty[key] = self._clock.monotonic()
        self._metrics.added(key)
        if key not in self._processing:
            self._enqueue(key)

    def add_after(self, key: K, delay: float) -> None:
        """Add `key` once `delay` seconds have passed; at once if `delay` ≤ 0. Ignored after `shut_down`.

        While `key` waits, a shorter delay moves it earlier and a longer one does not postpone it. Adds that
        wait need a running event loop (the queue starts a timer task).
        """
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
        else:
            self._delayed.add_after(key, delay)

    def add_rate_limited(self, key: K) -> None:
        """Add `key` after the delay its rate limiter gives for one more failure. Ignored after `shut_down`."""
        if self._shutting_down:
            return
        self._metrics.retried(key)
        self.add_after(key, self._rate_limiter.when(key))

    def forget(self, key: K) -> None:
        """`key` succeeded: reset its failures, so its next `add_rate_limited` waits the base delay."""
        self._rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """How many rate-limited adds `key` had since it was last forgotten."""
        return self._rate_limiter.num_requeues(key)

    def get(self) -> Lease[K]:
        """`async with queue.get() as key:` waits for a key and calls `done(key)` when the block exits.

        Raises ShutDown (from the `async with`) once the queue is shut down and empty.
        """
        return Lease(self)

    async def get_key(self) -> K:
        """Wait for the next key and hand it to the caller, who must call `done(key)` after processing it.

        Keys queued before `shut_down` are still handed out; then ShutDown is raised. If the caller is
        cancelled while waiting, it has taken no key.
        """
        while not self._queue:
            if self._shutting_down:
                raise ShutDown("the work queue is shut down")
            await self._wait_for_wakeup()
        return self._take()

    def done(self, key: K) -> None:
        """The worker finished `key`. If `key` was added meanwhile, it is queued to run once more.

        Raises ValueError if `key` is not being processed (never handed out, or already done).
        """
        handed_out_at = self._processing.pop(key, None)
        if handed_out_at is None:
            raise ValueError(f"done({key!r}): the key is not being processed")
        self._metrics.work_duration(key, self._clock.monotonic() - handed_out_at)
        if key in self._dirty:
            self._enqueue(key)
        if not self._processing:
            self._drain_wakeup.set()

    async def shut_down(self, *, drain: bool = False) -> None:
        """Stop accepting keys; drop keys waiting for a delay; wake idle getters with ShutDown.

        With `drain=True`, also wait until every key handed out is `done` (workers must call `done`, or this
        waits forever); a later `shut_down()` without drain ends that wait. Keys already queued are still
        handed out to getters.
        """
        self._shutting_down = True
        if not drain:
            self._drain_aborted = True
            self._drain_wakeup.set()
        self._wake_all_getters()
        await self._delayed.close()
        if drain:
            while self._processing and not self._drain_aborted:
                self._drain_wakeup.clear()
                await self._drain_wakeup.wait()

    def _enqueue(self, key: K) -> None:
        self._queue.append(key)
        self._metrics.depth(len(self._queue))
        self._wake_getters()

    def _take(self) -> K:
        key = self._queue.popleft()
        self._metrics.depth(len(self._queue))
        now = self._clock.monotonic()
        added_at = self._dirty.pop(key)
        self._processing[key] = now
        self._metrics.queue_latency(key, now - added_at)
        return key

    async def _wait_for_wakeup(self) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._getters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                # Woken, then cancelled before running: pass the wake-up on so the key is not stranded.
                self._woken -= 1
                self._wake_getters()
            elif waiter in self._getters:
                self._getters.remove(waiter)
            raise
        self._woken -= 1

    def _wake_getters(self) -> None:
        while self._getters and self._woken < len(self._queue):
            self._wake_one()

    def _wake_all_getters(self) -> None:
        while self._getters:
            self._wake_one()

    def _wake_one(self) -> None:
        waiter = self._getters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            self._woken += 1


class Lease(Generic[K]):
    """One key handed out by `WorkQueue.get()`; `async with` calls `done` on exit, also on error or cancel.

    Entered once. Do not call `done` yourself inside the block.
    """

    _key: K

    def __init__(self, queue: WorkQueue[K]) -> None:
        self._queue = queue
        self._entered = False

    async def __aenter__(self) -> K:
        if self._entered:
            raise RuntimeError("a Lease is entered once; call queue.get() for each key")
        self._entered = True
        # `get_key` has no await after it takes the key, so from here to the block nothing can interrupt.
        self._key = await self._queue.get_key()
        return self._key

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._queue.done(self._key)


__all__ = ["Lease", "ShutDown", "WorkQueue"]
