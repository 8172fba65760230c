"""The watch cache: one etcd watch per kind, fanned out to every watcher from memory.

For each kind the apiserver keeps one `WatchCache`:

* **One etcd watch.** It lists the kind, then watches etcd from just after a window of recent history, so a
  thousand agents cost one etcd watch, and a client that resumes after an apiserver restart is usually served
  from the replayed window instead of being told to relist.
* **Ordered, gapless, no duplicates.** Events are applied and dispatched in etcd revision order, inside one task;
  a watcher registered at version V receives exactly the events with revision > V that match its selectors.
* **Selection changes are events.** An object that stops matching a watcher's selectors reaches it as DELETED,
  one that starts matching as ADDED.
* **Capped history.** Events are kept for the last `history_events` changes and within `history_bytes` (and the
  apiserver-wide `history_budget`), oldest dropped first; a watch from an older version raises `Expired` (the
  client relists, as after a compaction).
* **Watchers indexed by the value they select.** A watcher whose field selector requires `field=value` (an agent's
  `status.nodeRef=<node>`) is filed under that pair and offered only the changes whose object, before or after,
  has that value; a change costs one lookup per indexed field instead of one selector check per watcher.
* **Slow watchers are cut, never waited for.** Dispatch never blocks: a watcher whose backlog exceeds
  `max_pending` is closed (it resumes from its last version), so one slow client cannot slow the others.
* **Compact.** Each current object is held once, as the bytes etcd stored with its version appended
  (`compactobjects`, `storedbytes`), and decoded on read; kinds read on the apiserver's request paths may keep
  the decoded message too (`decoded=True`). Events and their history hold the same bytes, never decoded copies:
  a change is decoded once while it is offered (only when a watcher's selectors need it), and its watch event is
  assembled from the bytes.
* Cached objects are read-only: callers copy before changing anything.

This module keeps the cache in step with etcd and registers watchers; `watchfanout` holds the watchers, their
queues and their filing by value, `watchhistory` the window of recent changes and where it starts in etcd.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import structlog

from caravanserai import meta, v1
from caravanserai.apiserver import storedbytes
from caravanserai.apiserver.compactobjects import CompactObjects
from caravanserai.apiserver.watchfanout import (
    CacheEvent,
    IndexKey,
    Predicate,
    Watcher,
    WatcherClosed,
    WatcherIndex,
    everything,
    index_keys,
)
from caravanserai.apiserver.watchhistory import History, HistoryBudget, window_start
from caravanserai.backoff import Backoff
from caravanserai.clock import Clock, SystemClock
from caravanserai.errors import Expired, FieldViolation, Invalid, Unavailable
from caravanserai.storage import Store, StoreEvent

log = structlog.get_logger(__name__)

# A failing store is retried after 0.1–0.2 s, doubling to 5–10 s; a success starts again from the bottom.
RETRY_BACKOFF = Backoff(initial=0.1, cap=5.0, jitter=1.0, reset_after=None)


class WatchCache:
    """Current objects of one kind plus a window of recent changes, kept in step with etcd by one watch."""

    def __init__(
        self,
        store: Store,
        kind: meta.Kind,
        *,
        history_revisions: int = 10_000,
        history_events: int = 100_000,
        history_bytes: int | None = None,
        history_budget: HistoryBudget | None = None,
        max_pending: int = 10_000,
        decoded: bool = False,
        clock: Clock | None = None,
    ) -> None:
        self.kind = kind
        self.resource = kind.plural
        self._clock: Clock = clock or SystemClock()  # for retry delays only; never for stored timestamps
        self._store = store
        self._history_revisions = history_revisions
        self._history = History(history_events, max_bytes=history_bytes, budget=history_budget)
        self._max_pending = max_pending
        self._watchers = WatcherIndex()
        self.objects = CompactObjects(kind.cls, decoded=decoded)  # name → current object (read-only)
        self.revision = 0  # every change up to this revision is applied
        self.ready = asyncio.Event()
        self._closed: str | None = None  # set once the apiserver stops: no new watchers, existing ones closed
        self._listeners: list[Callable[[], None]] = []  # told (synchronously) after every change of `objects`

    def rekind(self, kind: meta.Kind) -> None:
        """Take the classes of a compatible re-definition of this cache's kind (same plural, a schema that reads
        every stored object): current objects are decoded again with `kind.cls`; the etcd watch, the history and
        every watcher go on untouched (events carry serialized objects, which both classes read alike)."""
        if kind.plural != self.resource:
            raise ValueError(f"{kind.plural} is not the resource of this cache ({self.resource})")
        self.kind = kind
        self.objects.reclass(kind.cls)

    # ---- reading ------------------------------------------------------------------------------------------

    def get(self, name: str) -> Any | None:
        return self.objects.get(name)

    def keys_where(self, field: str, value: str) -> frozenset[str]:
        """The keys of the current objects whose selectable `field` equals `value` (`CompactObjects.keys_where`)."""
        return self.objects.keys_where(field, value)

    @property
    def watcher_count(self) -> int:
        """Open watchers (for metrics)."""
        return len(self._watchers)

    @property
    def history(self) -> History:
        """The window of recent changes (read-only; for metrics and tests)."""
        return self._history

    @property
    def pending_events(self) -> int:
        """Events queued to watchers and not yet taken by them (for metrics)."""
        return sum(w.pending for w in self._watchers)

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
                for _, blob in self.objects.blobs():
                    if predicate is everything or predicate(self.kind.cls.FromString(blob)):
                        watcher.preload(storedbytes.watch_event(v1.ADDED, self.kind, blob))
        else:
            after = _parse_version(resource_version)
            if after < self._history.oldest:
                raise Expired(f"too old resource version: {after} (oldest available {self._history.oldest})")
            watcher = Watcher(self, predicate, after=after, max_pending=limit, index=index)
            for event in self._history.after(after):
                if index is None or index in index_keys(event, (index[0],)):
                    watcher.offer(event, live=False)
                event.release()
        self._watchers.add(watcher)
        return watcher

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener()` after every change this cache applies (and after every relist). It must not block;
        it reads `objects` itself (the server's definition watcher sets an event)."""
        self._listeners.append(listener)

    def detach(self, watcher: Watcher) -> None:
        """Unfile `watcher` (it closed); it is offered no more changes."""
        self._watchers.discard(watcher)

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
                self._history.oldest = max(self._history.oldest, self.revision)
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
        else:
            self.objects.replace(objects)
        self.revision = max(self.revision, revision)
        self._tell()
        if first:
            return await self._history_start(revision)
        return revision + 1

    async def _history_start(self, revision: int) -> int:
        """Where the first watch starts (`watchhistory.window_start`), so clients resuming after an apiserver
        restart need not relist; history can serve versions from just below it."""
        start = await window_start(
            self._store, self.resource, revision=revision, history_revisions=self._history_revisions
        )
        self._history.oldest = start - 1
        return start

    async def _list_all(self) -> tuple[dict[str, bytes], int]:
        """Every object (versioned stored bytes by key) and the revision of the snapshot."""
        objects: dict[str, bytes] = {}
        revision = 0
        async for page in self._store.pages(self.resource):
            revision = page.revision
            for item in page.items:
                objects[item.name] = self._versioned(item.value, item.mod_revision)
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
        current = self.objects.blob(event.name)
        if event.type == "DELETE":
            prev = None if history_only else current
            if prev is None and event.prev_value:
                prev = self._versioned(event.prev_value, event.mod_revision)
            if prev is None:
                return
            change = CacheEvent(
                event.mod_revision, v1.DELETED, self._versioned(prev, event.mod_revision), prev, self.kind
            )
            if not history_only:
                self.objects.remove(event.name)
        else:
            blob = self._versioned(event.value, event.mod_revision)
            if history_only and blob == current:
                blob = current  # the listed object at this very revision: its bytes are held once
            prev = (event.prev_value or None) if history_only else current
            created = event.create_revision == event.mod_revision
            type_ = v1.ADDED if created else v1.MODIFIED
            change = CacheEvent(event.mod_revision, type_, blob, None if created else prev, self.kind)
            if not history_only:
                self.objects.put(event.name, blob)
        self._record(change)

    def _record(self, change: CacheEvent) -> None:
        """Append to history and offer to every watcher (each skips what it has already seen); the event then
        keeps its bytes only."""
        self._history.append(change)
        if change.revision > self.revision:
            self.revision = change.revision
        for watcher in self._watchers.targets(change):
            watcher.offer(change)
        change.release()
        self._tell()

    def _tell(self) -> None:
        for listener in self._listeners:
            listener()

    def _dispatch_diff(self, fresh: dict[str, bytes], revision: int) -> None:
        for name, old in self.objects.blobs():
            if name not in fresh:
                self._record(CacheEvent(revision, v1.DELETED, self._versioned(old, revision), old, self.kind))
        for name, blob in fresh.items():
            held = self.objects.blob(name)
            if held is None:
                self._record(CacheEvent(revision, v1.ADDED, blob, None, self.kind))
            elif held != blob:
                self._record(CacheEvent(revision, v1.MODIFIED, blob, held, self.kind))
            else:
                fresh[name] = held  # unchanged: keep the bytes the history may share
        self.objects.replace(fresh)

    def _versioned(self, value: bytes, revision: int) -> bytes:
        return storedbytes.versioned(self.kind.cls, value, revision)

    def close(self, reason: str) -> None:
        """Refuse new watchers and close the existing ones (they end and their clients resume elsewhere)."""
        self._closed = reason
        self._history.close()
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
