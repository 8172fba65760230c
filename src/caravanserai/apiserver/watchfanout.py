"""The watch cache's fan-out: from one change to the watchers it concerns, each with its own capped queue.

* **Bytes, decoded only for selectors.** A `CacheEvent` holds the object as stored bytes; it builds its v1.WatchEvent
  from them once per type and every watcher shares the result. A watcher without selectors (`everything`) never
  decodes; the others share one decoded copy per event, dropped once the event has been offered.
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
from typing import Any, Protocol

from caravanserai import meta, v1
from caravanserai.apiserver import storedbytes
from caravanserai.text.selectors import FieldSelector, LabelSelector, object_fields

Predicate = Callable[[Any], bool]
IndexKey = tuple[str, str]  # (selectable field, value), e.g. ("status.nodeRef", "node-1")


def everything(obj: Any) -> bool:
    """The predicate of a watch without selectors or visibility rules: it holds for every object, and a watcher
    with it never decodes one."""
    return True


def selection(labels: LabelSelector, fields: FieldSelector, visible: Callable[[Any], bool] | None) -> Predicate:
    """Whether an object is visible to the caller (`visible`, None: everything) and matches both selectors (a list's
    pick and a watch's predicate); `everything` for a request without selectors or visibility rules."""
    if visible is None and labels.empty and fields.empty:
        return everything

    def predicate(obj: Any) -> bool:
        if visible is not None and not visible(obj):
            return False
        if not labels.matches(obj.metadata.labels):
            return False
        return fields.empty or fields.matches(object_fields(obj))

    return predicate


_UNSET: Any = object()


class CacheEvent:
    """One change of one object at one revision, held as bytes: `blob` is the object after (DELETED: its last state,
    at this revision), `prev_blob` before (None for ADDED), both versioned stored bytes (`storedbytes.versioned`).

    `obj` and `prev` decode them on first use and keep the messages until `release()`; the cache releases an event
    once it has offered it, so the history holds bytes only. `encode` builds the watch event from the bytes."""

    __slots__ = ("_encoded", "_obj", "_prev", "blob", "kind", "prev_blob", "revision", "type")

    def __init__(self, revision: int, type_: str, blob: bytes, prev_blob: bytes | None, kind: meta.Kind) -> None:
        self.revision = revision
        self.type = type_  # ADDED | MODIFIED | DELETED
        self.blob = blob
        self.prev_blob = prev_blob
        self.kind = kind
        self._obj: Any = _UNSET
        self._prev: Any = _UNSET
        self._encoded: dict[str, bytes] | None = None

    @property
    def obj(self) -> Any:
        """The object after the change, decoded (read-only; kept until `release`)."""
        if self._obj is _UNSET:
            self._obj = self.kind.cls.FromString(self.blob)
        return self._obj

    @property
    def prev(self) -> Any | None:
        """The object before the change, decoded (None for ADDED; read-only; kept until `release`)."""
        if self._prev is _UNSET:
            self._prev = None if self.prev_blob is None else self.kind.cls.FromString(self.prev_blob)
        return self._prev

    def encode(self, type_: str) -> bytes:
        """The serialized v1.WatchEvent for this change as `type_`, built from the bytes once until `release` and
        shared by all watchers offered it meanwhile."""
        if self._encoded is None:
            self._encoded = {}
        data = self._encoded.get(type_)
        if data is None:
            data = self._encoded[type_] = storedbytes.watch_event(type_, self.kind, self.blob)
        return data

    @property
    def decoded(self) -> bool:
        """Whether the event holds a decoded message or an encoded watch event now (for tests)."""
        return self._obj is not _UNSET or self._prev is not _UNSET or self._encoded is not None

    def release(self) -> None:
        """Drop the decoded messages and the encoded events (the watchers' queues keep what they took)."""
        self._obj = self._prev = _UNSET
        self._encoded = None


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
        if self._predicate is everything:
            return v1.ADDED if event.type != v1.DELETED and event.prev_blob is None else event.type
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
    "everything",
    "index_keys",
    "selection",
]
