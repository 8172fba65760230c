"""The watch cache's window of recent changes: where it starts in etcd, what it holds, what it can replay.

* **Starts back in etcd.** At start the cache watches etcd from `history_revisions` before the listed revision, or
  from the oldest revision etcd still keeps (`window_start`), so clients resuming after an apiserver restart are
  served from the replayed window instead of being told to relist.
* **Capped.** The window keeps the last `max_events` changes, in revision order; `oldest` is the lowest version a
  watch can resume from, and it only moves forward (dropping an event, or a relist that may leave a hole).
* **Replay reads from the newest end.** `after(revision)` stops at the first event it has already seen, so a
  thousand watchers resuming from recent versions do not each scan the whole window.
"""

from __future__ import annotations

import collections

from caravanserai.apiserver.watchfanout import CacheEvent
from caravanserai.errors import Expired
from caravanserai.storage import Store


class History:
    """The last `max_events` changes of one kind, oldest first, and the oldest version they can serve."""

    def __init__(self, max_events: int) -> None:
        self._events: collections.deque[CacheEvent] = collections.deque(maxlen=max_events)
        self.oldest = 0  # a watch from any version ≥ this can be served from history

    def append(self, change: CacheEvent) -> None:
        """Add the newest change; when the window is full, the oldest one goes and `oldest` moves up to it."""
        if len(self._events) == self._events.maxlen:
            self.oldest = self._events[0].revision
        self._events.append(change)

    def after(self, revision: int) -> list[CacheEvent]:
        """The events of the window with a revision above `revision`, oldest first. The window is in revision
        order, so this reads from the newest end only as far as needed."""
        recent: list[CacheEvent] = []
        for event in reversed(self._events):
            if event.revision <= revision:
                break
            recent.append(event)
        recent.reverse()
        return recent


async def window_start(store: Store, resource: str, *, revision: int, history_revisions: int) -> int:
    """Where the first watch after a list at `revision` starts: `history_revisions` back, or at the oldest revision
    etcd still keeps (found by bisection)."""
    low, high = max(1, revision - history_revisions), revision + 1
    if not await _readable(store, resource, low):
        while high - low > 1:  # invariant: `low` is compacted, `high` is readable (or just past the list)
            middle = (low + high) // 2
            if await _readable(store, resource, middle):
                high = middle
            else:
                low = middle
        low = high
    return low


async def _readable(store: Store, resource: str, revision: int) -> bool:
    try:
        await store.list(resource, limit=1, revision=revision)
    except Expired:
        return False
    return True


__all__ = ["History", "window_start"]
