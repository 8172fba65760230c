"""An asyncio work queue of keys for controllers, with the guarantees of client-go's workqueue.

Producers (informer event handlers) add keys; workers (a controller's reconcile workers) take a key, reconcile
it, and say they are done. The queue promises:

* **Fair**: keys are handed out in the order of their first add since they were last handed out (FIFO).
* **Stingy**: a key is never handed to two workers at once, and repeated adds of a key before a worker
  takes it collapse into one.
* **Re-add while processing**: an add of a key that a worker holds makes the key run exactly once more,
  after that worker calls `done`.
* **Delayed adds**: `add_after(key, delay)` adds the key once `delay` seconds have passed on the injected
  clock; while it waits, a later shorter delay moves it earlier and a longer one does not postpone it.
* **Rate-limited retries**: `add_rate_limited(key)` waits the larger of a per-key exponential backoff
  (5 ms · 2ⁿ, capped at 1000 s) and an overall token bucket (10 per second, burst 100); `forget(key)`
  resets the key's failures and `num_requeues(key)` counts them. All numbers are configurable.
* **Shutdown**: after `shut_down()` no new key is accepted and keys waiting for a delay are dropped; keys
  already queued are still handed out, then getters raise `ShutDown`. `shut_down(drain=True)` also waits
  until every key handed out is `done`.
* **The right call cannot be forgotten**: `async with queue.get() as key:` calls `done(key)` when the block
  exits, also on an exception or a cancellation. `await queue.get_key()` and `queue.done(key)` are there for
  workers that need to split the two.
* **Cancellation never loses a key**: a getter cancelled while waiting has taken no key; the key stays
  queued for the next getter.
* **Time is injected**: delays, latencies and the token bucket use the `Clock` given to the queue, so tests
  drive them with `caravanserai.testing.FakeClock`.

A worker::

    queue: WorkQueue[str] = WorkQueue(clock=clock)
    while True:
        try:
            async with queue.get() as key:
                await reconcile(key)
        except ShutDown:
            return

(A controller also catches the reconcile's errors inside the block, calling `add_rate_limited(key)` on
failure and `forget(key)` on success.) Keys are any hashable values, usually strings.

There is deliberately no `async for key in queue`: an async generator that raises in the loop body is only
closed later, by the event loop, which would delay `done` and hold the key.
"""

from caravanserai.workqueue.metrics import NoMetrics, QueueMetrics
from caravanserai.workqueue.queue import Lease, ShutDown, WorkQueue
from caravanserai.workqueue.ratelimit import (
    ExponentialBackoff,
    MaxOf,
    RateLimiter,
    TokenBucket,
    default_rate_limiter,
)

__all__ = [
    "ExponentialBackoff",
    "Lease",
    "MaxOf",
    "NoMetrics",
    "QueueMetrics",
    "RateLimiter",
    "ShutDown",
    "TokenBucket",
    "WorkQueue",
    "default_rate_limiter",
]
