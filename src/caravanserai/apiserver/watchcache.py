"""The watch cache: one etcd watch per kind, fanned out to every watcher from memory.

For each kind the apiserver keeps one `WatchCache`:

* **One etcd watch.** It lists the kind, then watches etcd from just after a window of recent history, so a
  thousand agents cost one etcd watch, and a client that resumes after an apiserver restart is usually served
  from the replayed window instead of being told to relist.
* **Ordered, gapless, no duplicates.** Events are applied and dispatched in etcd revision order, inside one task;
  a watcher registered at version V receives exactly the events with revision > V that match its selectors.
* **Selection changes are events.** An object that stops matching a watcher's selectors reaches it as DELETED,
  one that starts matching as ADDED.
* **Capped history.** Events are kept for the last `history_events` changes; a watch from an older version raises
  `Expired` (the client relists).
* **Watchers indexed by the value they select.** A watcher whose field selector requires `field=value` (an agent's
  `status.nodeRef=<node>`) is filed under that pair and offered only the changes whose object, before or after,
  has that value; a change costs one lookup per indexed field instead of one selector check per watcher.
* **Slow watchers are cut, never waited for.** Dispatch never blocks: a watcher whose backlog exceeds
  `max_pending` is closed (it resumes from its last version), so one slow client cannot slow the others.
* Cached objects are read-only: callers copy before changing anything.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import structlog

from caravanserai import meta, v1
from caravanserai.apiserver import codec
from caravanserai.backoff import Backoff
from caravanserai.clock import Clock, SystemClock
from caravanserai.errors import Expired, FieldViolation, Invalid, Unavailable
from caravanserai.text.selectors import object_fields
from caravanserai.storage import Store, StoreEvent

log = structlog.get_logger(__name__)

# A failing store is retried after 0.1–0.2 s, doubling to 5–10 s; a success starts again from the bottom.
RETRY_BACKOFF = Backoff(initial=0.1, cap=5.0, jitter=1.0, reset_after=None)

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


class Watcher:
    """One client's view of a WatchCache: serialized v1.WatchEvent messages, in order."""

    def __init__(
        self, cache: WatchCache, predicate: Predicate, *, after: int, max_pending: int, index: IndexKey | None = None
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

    def offer(self, event: CacheEvent, *, live: bool = True) -> None:
        """Queue `event` if it concerns this watcher; never blocks."""
        if self._closed is not None or event.revision <= self._after:
            return
        type_ = self._translate(event)
        if type_ is None:
            return
        if live and len(self._pending) >= self._max_pending:
            self.close("watcher too slow: more than %d events pending" % self._max_pending)
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
            self._cache._detach(self)

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


class WatchCache:
    """Current objects of one kind plus a window of recent changes, kept in step with etcd by one watch."""

    def __init__(
        self,
        store: Store,
        kind: meta.Kind,
        *,
        history_revisions: int = 10_000,
        history_events: int = 100_000,
        max_pending: int = 10_000,
        clock: Clock | None = None,
    ) -> None:
        self.kind = kind
        self.resource = kind.plural
        self._clock: Clock = clock or SystemClock()  # for retry delays only; never for stored timestamps
        self._store = store
        self._history_revisions = history_revisions
        self._history: collections.deque[CacheEvent] = collections.deque(maxlen=history_events)
        self._max_pending = max_pending
        self._watchers: set[Watcher] = set()
        self._unindexed: set[Watcher] = set()  # offered every change
        self._indexed: dict[IndexKey, set[Watcher]] = {}  # offered only changes with that field value
        self._indexed_fields: collections.Counter[str] = collections.Counter()  # field → watchers indexed by it
        self.objects: dict[str, Any] = {}  # name → current object (read-only)
        self.revision = 0  # every change up to this revision is applied
        self._oldest = 0  # a watch from any version ≥ this can be served from history
        self.ready = asyncio.Event()
        self._closed: str | None = None  # set once the apiserver stops: no new watchers, existing ones closed
        self._listeners: list[Callable[[], None]] = []  # told (synchronously) after every change of `objects`

    # ---- reading ------------------------------------------------------------------------------------------

    def get(self, name: str) -> Any | None:
        return self.objects.get(name)

    @property
    def watcher_count(self) -> int:
        """Open watchers (for metrics)."""
        return len(self._watchers)

    @property
    def pending_events(self) -> int:
        """Events queued to watchers and not yet taken by them (for metrics)."""
        return sum(len(w._pending) for w in self._watchers)

    def watch(
        self,
        predicate: Predicate,
        *,
        resource_version: str,
        max_pending: int | None = None,
        index: IndexKey | None = None,
    ) -> Watcher:
        """Register a watcher. `resource_version` "" means from now; "0" starts with the current objects as
        ADDED; any other version replays history after it (Expired when it is older than the window).
        `index` (field, value): the predicate holds only for objects whose selectable `field` (as
        `object_fields` reads it) equals `value`; the watcher is then offered only such changes."""
        if self._closed is not None:
            raise Unavailable(f"watch refused: {self._closed}")
        limit = max_pending or self._max_pending
        if resource_version in ("", "0"):
            watcher = Watcher(self, predicate, after=self.revision, max_pending=limit, index=index)
            if resource_version == "0":
                for obj in list(self.objects.values()):
                    if predicate(obj):
                        watcher._pending.append(v1.WatchEvent(type=v1.ADDED, object=self.kind.wrap(obj)).SerializeToString())
        else:
            after = _parse_version(resource_version)
            if after < self._oldest:
                raise Expired(f"too old resource version: {after} (oldest available {self._oldest})")
            watcher = Watcher(self, predicate, after=after, max_pending=limit, index=index)
            for event in self._history_after(after):
                if index is None or index in self._keys(event, (index[0],)):
                    watcher.offer(event, live=False)
        self._attach(watcher)
        return watcher

    def _history_after(self, revision: int) -> list[CacheEvent]:
        """The events of the window with a revision above `revision`, oldest first. The window is in revision
        order, so this reads from the newest end only as far as needed (a thousand watchers resuming from recent
        versions do not each scan the whole window)."""
        recent: list[CacheEvent] = []
        for event in reversed(self._history):
            if event.revision <= revision:
                break
            recent.append(event)
        recent.reverse()
        return recent

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener()` after every change this cache applies (and after every relist). It must not block;
        it reads `objects` itself (the server's definition watcher sets an event)."""
        self._listeners.append(listener)

    def _attach(self, watcher: Watcher) -> None:
        self._watchers.add(watcher)
        if watcher.index is None:
            self._unindexed.add(watcher)
            return
        self._indexed.setdefault(watcher.index, set()).add(watcher)
        self._indexed_fields[watcher.index[0]] += 1

    def _detach(self, watcher: Watcher) -> None:
        if watcher not in self._watchers:
            return
        self._watchers.discard(watcher)
        if watcher.index is None:
            self._unindexed.discard(watcher)
            return
        group = self._indexed[watcher.index]
        group.discard(watcher)
        if not group:
            del self._indexed[watcher.index]
        self._indexed_fields[watcher.index[0]] -= 1
        if not self._indexed_fields[watcher.index[0]]:
            del self._indexed_fields[watcher.index[0]]

    def _targets(self, change: CacheEvent) -> list[Watcher]:
        """The watchers `change` may concern: every unindexed one, and the indexed ones filed under a value the
        object has after or had before the change (each watcher once)."""
        targets = list(self._unindexed)
        if not self._indexed:
            return targets
        for key in self._keys(change, self._indexed_fields):
            targets.extend(self._indexed.get(key, ()))
        return targets

    @staticmethod
    def _keys(change: CacheEvent, fields: Iterable[str]) -> set[IndexKey]:
        """The (field, value) pairs of `fields` that the object has after or had before `change`."""
        keys: set[IndexKey] = set()
        for obj in (change.obj, change.prev):
            if obj is not None:
                values = object_fields(obj)
                keys.update((field, values.get(field, "")) for field in fields)
        return keys

    # ---- keeping in step with etcd --------------------------------------------------------------------------

    async def run(self) -> None:
        """List, then watch; relist when the watch expires. Returns only when cancelled."""
        backoff = RETRY_BACKOFF.start(self._clock)
        while True:
            try:
                start = await self._relist()
                await self._follow(start)
            except Expired:
                # History may now have a hole before our revision: only versions from here on can be replayed.
                self._oldest = max(self._oldest, self.revision)
                log.warning("watch cache expired; relisting", resource=self.resource, revision=self.revision)
            except asyncio.CancelledError:
                self._close_all("apiserver shutting down")
                raise
            except Exception as exc:  # noqa: BLE001 - the cache must survive any store error
                log.warning("watch cache error; retrying", resource=self.resource, error=str(exc))
                await backoff.wait()
                continue
            backoff.reset()

    async def _relist(self) -> int:
        """Load the current objects; on a relist, dispatch the differences. Returns the revision to watch from."""
        objects, revision = await self._list_all()
        first = not self.ready.is_set()
        if not first:
            self._dispatch_diff(objects, revision)
        self.objects = objects
        self.revision = max(self.revision, revision)
        self._tell()
        if first:
            return await self._history_start(revision)
        return revision + 1

    async def _history_start(self, revision: int) -> int:
        """Where the first watch starts: `history_revisions` back, or at the oldest revision etcd still keeps
        (found by bisection) — so clients resuming after an apiserver restart need not relist."""
        low, high = max(1, revision - self._history_revisions), revision + 1
        if not await self._readable(low):
            while high - low > 1:  # invariant: `low` is compacted, `high` is readable (or just past the list)
                middle = (low + high) // 2
                if await self._readable(middle):
                    high = middle
                else:
                    low = middle
            low = high
        self._oldest = low - 1
        return low

    async def _readable(self, revision: int) -> bool:
        try:
            await self._store.list(self.resource, limit=1, revision=revision)
        except Expired:
            return False
        return True

    async def _list_all(self) -> tuple[dict[str, Any], int]:
        objects: dict[str, Any] = {}
        revision = 0
        async for page in self._store.pages(self.resource):
            revision = page.revision
            for item in page.items:
                objects[item.name] = codec.decode(self.kind.cls, item.value, item.mod_revision)
        return objects, revision

    async def _follow(self, start: int) -> None:
        stream = self._store.watch(self.resource, start_revision=start)
        self.ready.set()
        await self._consume(stream, self.revision)

    async def _consume(self, stream: AsyncIterator[Any], list_revision: int) -> None:
        async for batch in stream:
            for event in batch.events:
                self._apply(event, history_only=event.mod_revision <= list_revision)
            if batch.revision > self.revision:
                self.revision = batch.revision

    def _apply(self, event: StoreEvent, *, history_only: bool) -> None:
        if event.type == "DELETE":
            prev = self.objects.get(event.name)
            if prev is None and event.prev_value:
                prev = self._decode(event.prev_value, event.mod_revision)
            if prev is None:
                return
            obj = meta.copy(prev)
            obj.metadata.resource_version = str(event.mod_revision)
            change = CacheEvent(event.mod_revision, v1.DELETED, obj, prev, self.kind)
            if not history_only:
                self.objects.pop(event.name, None)
        else:
            obj = self._decode(event.value, event.mod_revision)
            prev = self._previous(event, history_only)
            created = event.create_revision == event.mod_revision
            type_ = v1.ADDED if created else v1.MODIFIED
            change = CacheEvent(event.mod_revision, type_, obj, None if created else prev, self.kind)
            if not history_only:
                self.objects[event.name] = obj
        self._record(change)

    def _previous(self, event: StoreEvent, history_only: bool) -> Any | None:
        if not history_only:
            return self.objects.get(event.name)
        return self._decode(event.prev_value, 0) if event.prev_value else None

    def _record(self, change: CacheEvent) -> None:
        """Append to history and offer to every watcher (each skips what it has already seen)."""
        if len(self._history) == self._history.maxlen:
            self._oldest = self._history[0].revision
        self._history.append(change)
        if change.revision > self.revision:
            self.revision = change.revision
        for watcher in self._targets(change):
            watcher.offer(change)
        self._tell()

    def _tell(self) -> None:
        for listener in self._listeners:
            listener()

    def _dispatch_diff(self, fresh: dict[str, Any], revision: int) -> None:
        for name, old in list(self.objects.items()):
            if name not in fresh:
                gone = meta.copy(old)
                gone.metadata.resource_version = str(revision)
                self._record(CacheEvent(revision, v1.DELETED, gone, old, self.kind))
        for name, obj in fresh.items():
            old = self.objects.get(name)
            if old is None:
                self._record(CacheEvent(revision, v1.ADDED, obj, None, self.kind))
            elif old.metadata.resource_version != obj.metadata.resource_version:
                self._record(CacheEvent(revision, v1.MODIFIED, obj, old, self.kind))
        self.objects = fresh

    def _decode(self, value: bytes, mod_revision: int) -> Any:
        return codec.decode(self.kind.cls, value, mod_revision)

    def close(self, reason: str) -> None:
        """Refuse new watchers and close the existing ones (they end and their clients resume elsewhere)."""
        self._closed = reason
        self._close_all(reason)

    def _close_all(self, reason: str) -> None:
        for watcher in list(self._watchers):
            watcher.close(reason)


def _parse_version(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise Invalid.of([FieldViolation("resourceVersion", f"{text!r} is not a resource version")]) from None
    if value < 0:
        raise Invalid.of([FieldViolation("resourceVersion", "must not be negative")])
    return value


__all__ = ["CacheEvent", "WatchCache", "Watcher", "WatcherClosed"]
