"""The watch cache's window of recent changes: where it starts in etcd, what it holds, what it can replay.

* **Starts back in etcd.** At start the cache watches etcd from `history_revisions` before the listed revision, or
  from the oldest revision etcd still keeps (`window_start`), so clients resuming after an apiserver restart are
  served from the replayed window instead of being told to relist.
* **Capped by count and by bytes.** The window keeps at most `max_events` changes and at most `max_bytes` of their
  estimated size (`event_bytes`), in revision order; every kind's window together stays within one
  `HistoryBudget` (the window holding the most bytes gives up its oldest events first). Dropping is always from
  the oldest end; `oldest` is the lowest version a watch can resume from, and it only moves forward (dropping an
  event, or a relist that may leave a hole). A watcher that asks for a dropped version gets `Expired` and
  relists, exactly as after an etcd compaction.
* **No older than etcd's history.** When etcd is compacted to revision R (`storage.compaction`: about every
  5 minutes, one interval of history kept), every window drops its events older than R: the window then holds
  about one to two compaction intervals of changes, whatever the caps, so its memory follows the write rate
  instead of growing to the caps; and every apiserver serves resumption from the same point etcd does.
* **Bytes only.** An event holds its object as stored bytes (shared with the cache, or with the next event's
  previous object), never a decoded copy or an encoded watch event (`CacheEvent.release`), so `event_bytes` is the
  object's length plus a fixed overhead.
* **Replay reads from the newest end.** `after(revision)` stops at the first event it has already seen, so a
  thousand watchers resuming from recent versions do not each scan the whole window.
"""

from __future__ import annotations

import collections
import weakref

from caravanserai.apiserver.watchfanout import CacheEvent
from caravanserai.errors import Expired
from caravanserai.storage import Store

EVENT_OVERHEAD_BYTES = 256
"""Bytes counted for every event besides its object's bytes (the event, its deque slot, the revision)."""


def event_bytes(change: CacheEvent) -> int:
    """The estimated memory one event holds: its object's bytes plus a fixed overhead. The previous object's bytes
    are the prior event's (or the cache's) and are not counted again; the event holds no decoded message and no
    encoded watch event once offered (`CacheEvent.release`)."""
    return len(change.blob) + EVENT_OVERHEAD_BYTES


class HistoryBudget:
    """A byte cap over the windows of every kind together. When the sum exceeds `max_bytes`, the window holding
    the most bytes drops its oldest event, until the sum fits. Windows are held weakly: a kind no longer served
    stops counting. A running bound of the sum (never below it) spares summing the windows on every change."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._histories: weakref.WeakSet[History] = weakref.WeakSet()
        self._bound = 0  # ≥ `used`: raised by every growth, set to `used` by `trim`

    @property
    def used(self) -> int:
        """Estimated bytes held by every window now."""
        return sum(history.bytes for history in self._histories)

    def register(self, history: History) -> None:
        self._histories.add(history)
        self.grew(history.bytes)

    def grew(self, size: int) -> None:
        """A window grew by `size` bytes: trim when the windows may no longer fit."""
        self._bound += size
        if self._bound > self.max_bytes:
            self.trim()

    def unregister(self, history: History) -> None:
        self._histories.discard(history)

    def forget_before(self, revision: int) -> None:
        """etcd was compacted to `revision`: every window drops its events older than that."""
        for history in list(self._histories):
            history.forget_before(revision)

    def trim(self) -> None:
        """Drop the oldest events of the largest windows until all of them fit in `max_bytes`."""
        used = self.used
        while used > self.max_bytes:
            largest = max(self._histories, key=lambda history: history.bytes)
            freed = largest.drop_oldest()
            if freed == 0:
                break
            used -= freed
        self._bound = used


class History:
    """The last changes of one kind, oldest first, within `max_events` and `max_bytes` (and the shared `budget`),
    and the oldest version they can serve."""

    def __init__(self, max_events: int, *, max_bytes: int | None = None, budget: HistoryBudget | None = None) -> None:
        self._events: collections.deque[tuple[CacheEvent, int]] = collections.deque()
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.bytes = 0  # the estimated size of the events held (`event_bytes`)
        self.oldest = 0  # a watch from any version ≥ this can be served from history
        self._budget = budget
        if budget is not None:
            budget.register(self)

    def __len__(self) -> int:
        return len(self._events)

    def append(self, change: CacheEvent) -> None:
        """Add the newest change; then the oldest ones go (and `oldest` moves up to the last one gone) until the
        window fits its count, its bytes and the shared budget."""
        size = event_bytes(change)
        self._events.append((change, size))
        self.bytes += size
        while len(self._events) > self.max_events or (self.max_bytes is not None and self.bytes > self.max_bytes):
            self.drop_oldest()
        if self._budget is not None:
            self._budget.grew(size)

    def drop_oldest(self) -> int:
        """Drop the oldest event; return the bytes freed (0 when empty)."""
        if not self._events:
            return 0
        change, size = self._events.popleft()
        self.oldest = max(self.oldest, change.revision)
        self.bytes -= size
        return size

    def forget_before(self, revision: int) -> None:
        """Drop the events older than `revision` (etcd compacted its history to it)."""
        while self._events and self._events[0][0].revision < revision:
            self.drop_oldest()

    def close(self) -> None:
        """Stop counting against the shared budget (the kind is no longer served)."""
        if self._budget is not None:
            self._budget.unregister(self)

    def after(self, revision: int) -> list[CacheEvent]:
        """The events of the window with a revision above `revision`, oldest first. The window is in revision
        order, so this reads from the newest end only as far as needed."""
        recent: list[CacheEvent] = []
        for event, _ in reversed(self._events):
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


__all__ = ["EVENT_OVERHEAD_BYTES", "History", "HistoryBudget", "event_bytes", "window_start"]
