"""The watch cache's fan-out: from one change to the watchers it concerns, each with its own capped queue.

* **Serialized once.** A `CacheEvent` encodes its v1.WatchEvent once per type and every watcher shares the bytes.
* **Selection changes are events.** An object that stops matching a watcher's selectors reaches it as DELETED, one
  that starts matching as ADDED; a watcher skips every change at or below the version it started from.
* **Watchers filed by the value they select.** A watcher whose field selector requires `field=value` is filed in
  the `WatcherIndex` under that pair and offered only the changes whose object, before or after, has that value; a
  change costs one lookup per indexed field instead of one selector check per watcher.
* **Never blocks.** `Watcher.offer` only queues: a watcher whose backlog exceeds `max_pending` is closed (its client
  resumes from its last version), so one slow client cannot slow the others.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from caravanserai import meta, v1
from caravanserai.text.selectors import object_fields

Predicate = Callable[[Any], bool]
IndexKey = tuple[str, str]  # (selectable field, value), e.g. ("status.nodeRef", "node-1")


@dataclass(slots=True)
class CacheEvent:
    """One change of one object at one revision. `obj` is the state after (DELETED: the last state)."""

    revision: int
    type: str  # ADDED | MODIFIED | DELETED
    obj: Any
    prev: Any | None
    kind: meta.Kind
    _encoded: dict[str, bytes] = field(default_factory=dict)

    def encode(self, type_: str) -> bytes:
        """The serialized v1.WatchEvent for this change as `type_`, computed once and shared by all watchers."""
        data = self._encoded.get(type_)
        if data is None:
            data = v1.WatchEvent(type=type_, object=self.kind.wrap(self.obj)).SerializeToString()
            self._encoded[type_] = data
        return data


class WatcherClosed(Exception):
    """The watcher was closed by the cache (too slow, or the cache stopped); resume from the last version."""


class WatchedCache(Protocol):
    """What a watcher needs of its cache: the kind and current revision (for bookmarks), and to be unfiled."""

    @property
    def kind(self) -> meta.Kind: ...

    @property
    def revision(self) -> int: ...

    def detach(self, watcher: Watcher) -> None: ...


class Watcher:
    """One client's view of a WatchCache: serialized v1.WatchEvent messages, in order."""

    def __init__(
        self, cache: WatchedCache, predicate: Predicate, *, after: int, max_pending: int, index: IndexKey | None = None
    ) -> None:
        self._cache = cache
        self._predicate = predicate
        self.index = index  # the (field, value) the predicate requires, or None
        self._after = after  # events at or below this revision were already seen by the client
        self._max_pending = max_pending
        self._pending: collections.deque[bytes] = collections.deque()
        self._wakeup = asyncio.Event()
        self._closed: str | None = None  # reason, once closed
        self.delivered_revision = after  # highest revision handed to the client

    @property
    def pending(self) -> int:
        """Events queued and not yet taken by the client."""
        return len(self._pending)

    def preload(self, data: bytes) -> None:
        """Queue a serialized event before the watcher is handed out (the current objects of a watch from "0")."""
        self._pending.append(data)

    def offer(self, event: CacheEvent, *, live: bool = True) -> None:
        """Queue `event` if it concerns this watcher; never blocks."""
        if self._closed is not None or event.revision <= self._after:
            return
        type_ = self._translate(event)
        if type_ is None:
            return
        if live and len(self._pending) >= self._max_pending:
            self.close(f"watcher too slow: more than {self._max_pending} events pending")
            return
        self._pending.append(event.encode(type_))
        self._wakeup.set()

    def _translate(self, event: CacheEvent) -> str | None:
        now_match = self._predicate(event.obj)
        if event.type == v1.DELETED:
            return v1.DELETED if now_match else None
        was_match = event.prev is not None and self._predicate(event.prev)
        if now_match and was_match:
            return event.type
        if now_match:
            return v1.ADDED
        if was_match:
            return v1.DELETED
        return None

    def close(self, reason: str) -> None:
        if self._closed is None:
            self._closed = reason
            self._wakeup.set()
            self._cache.detach(self)

    async def next(self, *, timeout: float | None) -> bytes | None:
        """The next serialized event; None when `timeout` passes first. Raises WatcherClosed once closed and
        drained."""
        while not self._pending:
            if self._closed is not None:
                raise WatcherClosed(self._closed)
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except TimeoutError:
                return None
        return self._pending.popleft()

    def bookmark(self) -> bytes:
        """A serialized BOOKMARK event at the cache's current revision — never below the version the watch started
        from (a client that listed from etcd can be ahead of the cache; its version must not go backwards)."""
        kind = self._cache.kind
        obj = kind.cls()
        obj.metadata.resource_version = str(max(self._cache.revision, self._after))
        return v1.WatchEvent(type=v1.BOOKMARK, object=kind.wrap(obj)).SerializeToString()


class WatcherIndex:
    """The open watchers of one cache, filed by the (field, value) their predicate requires.

    Every watcher added and not yet discarded is in exactly one group: `_unindexed` (offered every change) or
    `indexed[watcher.index]`; `_fields` counts the filed watchers per field (a field with none is absent), so a
    change is looked up only under the fields some watcher is filed by.
    """

    def __init__(self) -> None:
        self._all: set[Watcher] = set()
        self._unindexed: set[Watcher] = set()  # offered every change
        self.indexed: dict[IndexKey, set[Watcher]] = {}  # offered only changes with that field value
        self._fields: collections.Counter[str] = collections.Counter()  # field → watchers indexed by it

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[Watcher]:
        return iter(self._all)

    def add(self, watcher: Watcher) -> None:
        self._all.add(watcher)
        if watcher.index is None:
            self._unindexed.add(watcher)
            return
        self.indexed.setdefault(watcher.index, set()).add(watcher)
        self._fields[watcher.index[0]] += 1

    def discard(self, watcher: Watcher) -> None:
        if watcher not in self._all:
            return
        self._all.discard(watcher)
        if watcher.index is None:
            self._unindexed.discard(watcher)
            return
        group = self.indexed[watcher.index]
        group.discard(watcher)
        if not group:
            del self.indexed[watcher.index]
        self._fields[watcher.index[0]] -= 1
        if not self._fields[watcher.index[0]]:
            del self._fields[watcher.index[0]]

    def targets(self, change: CacheEvent) -> list[Watcher]:
        """The watchers `change` may concern: every unindexed one, and the indexed ones filed under a value the
        object has after or had before the change (each watcher once)."""
        targets = list(self._unindexed)
        if not self.indexed:
            return targets
        for key in index_keys(change, self._fields):
            targets.extend(self.indexed.get(key, ()))
        return targets


def index_keys(change: CacheEvent, fields: Iterable[str]) -> set[IndexKey]:
    """The (field, value) pairs of `fields` that the object has after or had before `change`."""
    keys: set[IndexKey] = set()
    for obj in (change.obj, change.prev):
        if obj is not None:
            values = object_fields(obj)
            keys.update((field, values.get(field, "")) for field in fields)
    return keys


__all__ = [
    "CacheEvent",
    "IndexKey",
    "Predicate",
    "WatchedCache",
    "Watcher",
    "WatcherClosed",
    "WatcherIndex",
    "index_keys",
]
