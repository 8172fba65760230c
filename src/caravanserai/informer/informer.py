"""The Informer: a Reflector feeding an indexed read-only cache, and event handlers told about every change.

Guarantees (client-go's SharedInformer contract):

* **Handlers run after the cache.** When a handler hears of a change, the cache (and every index) already holds
  it. Notifications are delivered in the order the changes were applied, one at a time, by one task: to one
  handler they are sequential, and a slow handler delays the next notification, never a cache update.
* **Every change is heard, some states may be skipped.** For one object, the states seen by a handler are a
  subsequence of the states the server went through, never reordered. After a relist, an object that vanished
  while we were away is delivered to `on_delete` with the last state the cache knew; an object deleted and
  created again (new uid) as `on_delete` then `on_add`.
* **Late handlers catch up.** A handler added after the first list receives `on_add` for every cached object
  first, then live changes; its `Registration` reports when it has caught up.
* **Resync** (every `resync_period` seconds when > 0) re-delivers `on_update(obj, obj)` for every cached object;
  it reads nothing from the server.
* **Backpressure, not unlimited memory.** When more than `max_pending` notifications wait for handlers, the watch
  stream is held back until they are half done.
* **No echo.** An event carrying the very version the cache already holds for an object (a server replaying
  history a little too far back) changes nothing and is not delivered.
* Handlers may be plain functions or coroutine functions. A handler that raises is logged; the others still run.
* `has_synced()` turns true once the first list is in the cache and was delivered to the handlers registered by
  then; it never turns false again.
* **Compact by default** (`compact=True`): the cache keeps objects serialized and decodes on read (a fresh
  read-only message per read): a few times less memory for a microsecond or two per read (see `Indexer`).
  `compact=False` keeps the decoded messages (the same one on every read) for a cache read in a tight loop.
* **Keys.** Objects are cached under their key (`meta.key_of`): "namespace/name" for a namespaced kind, the name
  for a cluster-wide one; `get(key)` and `keys()` speak keys.
* `run()` returns only when cancelled; a cache mutation (detector on) makes it raise `CacheMutationError`.
"""

from __future__ import annotations

import asyncio
import builtins
import collections
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import structlog

from caravanserai import meta, v1
from caravanserai.client import ResourceClient
from caravanserai.client.resumable import WatchOptions
from caravanserai.clock import Clock, SystemClock
from caravanserai.informer.indexer import CacheReader, Indexer, IndexFunc
from caravanserai.informer.mutation import MutationDetector
from caravanserai.informer.reflector import Reflector

log = structlog.get_logger(__name__)

T = TypeVar("T")

DEFAULT_MAX_PENDING = 10_000
MUTATION_CHECK_INTERVAL = 1.0
_YIELD_EVERY = 256  # notifications delivered between two yields to the event loop

# Notification operations.
_ADD, _UPDATE, _DELETE, _HANDLERS_SYNCED, _INFORMER_SYNCED = range(5)


@dataclass(frozen=True, slots=True)
class EventHandler(Generic[T]):
    """What to call on changes; any of the three may be None. Each may return an awaitable, which is awaited."""

    on_add: Callable[[T], object] | None = None
    on_update: Callable[[T, T], object] | None = None
    on_delete: Callable[[T], object] | None = None
    name: str = ""


class Registration(Generic[T]):
    """A handler added to an informer. `has_synced()` once it has heard of every object of the first list."""

    def __init__(self, handler: EventHandler[T]) -> None:
        self.handler = handler
        self._synced = asyncio.Event()

    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def _call(self, op: int, old: Any, new: Any) -> object:
        h = self.handler
        if op == _ADD:
            return h.on_add(new) if h.on_add is not None else None
        if op == _UPDATE:
            return h.on_update(old, new) if h.on_update is not None else None
        return h.on_delete(old) if h.on_delete is not None else None


_Notification = tuple[tuple[Registration[Any], ...], int, Any, Any]


class Informer(Generic[T]):
    """List+watch of one kind (optionally narrowed by selectors) into an indexed cache, with event handlers."""

    def __init__(
        self,
        client: ResourceClient[Any],
        *,
        label_selector: str = "",
        field_selector: str = "",
        indexers: Mapping[str, IndexFunc] | None = None,
        resync_period: float = 0.0,
        clock: Clock | None = None,
        detect_mutations: bool | None = None,
        watch_options: WatchOptions = WatchOptions(),
        max_pending: int = DEFAULT_MAX_PENDING,
        compact: bool = True,
    ) -> None:
        self.resource, self.label_selector, self.field_selector = client.resource, label_selector, field_selector
        self._clock: Clock = clock or SystemClock()
        detector = MutationDetector(enabled=detect_mutations, kind=client.kind.kind)
        self._indexer: Indexer[T] = Indexer(indexers, detector=detector, compact=client.kind.cls if compact else None)
        self._resync_period, self._max_pending = resync_period, max_pending
        self.reflector: Reflector[T] = Reflector(
            client,
            self,
            label_selector=label_selector,
            field_selector=field_selector,
            clock=self._clock,
            watch_options=watch_options,
        )
        # Handlers registered so far. Replaced (never changed in place), so a notification can hold the tuple
        # that was current when its change was applied: a handler never hears of changes from before it was added.
        self._handlers: tuple[Registration[T], ...] = ()
        # Changes applied to the cache, waiting to be delivered, in order. Written by the reflector's task,
        # drained by the dispatcher; `_room` is clear while the reflector waits for it to shrink.
        self._pending: collections.deque[_Notification] = collections.deque()
        self._wakeup = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._listed = False  # the first list is in the cache
        self._synced = asyncio.Event()  # ... and was delivered to the handlers of that time
        self._running = False
        self.counts: dict[str, int] = {v1.ADDED: 0, v1.MODIFIED: 0, v1.DELETED: 0}  # changes applied, by type

    # ---- reading ----------------------------------------------------------------------------------------------

    @property
    def cache(self) -> CacheReader[T]:
        """The read-only cache. Objects from it must not be changed (copy them first)."""
        return self._indexer

    def get(self, name: str) -> T | None:
        return self._indexer.get(name)

    def list(self) -> builtins.list[T]:
        return self._indexer.list()

    def by_index(self, index: str, value: str) -> builtins.list[T]:
        return self._indexer.by_index(index, value)

    def keys_by_index(self, index: str, value: str) -> builtins.list[str]:
        return self._indexer.keys_by_index(index, value)

    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def pending(self) -> int:
        """Notifications waiting for the handlers."""
        return len(self._pending)

    # ---- configuring ------------------------------------------------------------------------------------------

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indexes (at any time: existing objects are filed at once)."""
        self._indexer.add_indexers(indexers)

    def add_event_handler(
        self,
        handler: EventHandler[T] | None = None,
        *,
        on_add: Callable[[T], object] | None = None,
        on_update: Callable[[T, T], object] | None = None,
        on_delete: Callable[[T], object] | None = None,
        name: str = "",
    ) -> Registration[T]:
        """Call `handler` (or the given functions) on every change from now on; see the module docstring."""
        if handler is None:
            handler = EventHandler(on_add, on_update, on_delete, name)
        registration = Registration(handler)
        self._handlers = (*self._handlers, registration)
        if self._listed:
            only = (registration,)
            for obj in self._indexer.list():
                self._push(only, _ADD, None, obj)
            self._push(only, _HANDLERS_SYNCED, None, None)
        return registration

    def check_mutations(self) -> None:
        """Raise CacheMutationError if a cached object was changed in place (mutation detector on only)."""
        self._indexer.check_mutations()

    # ---- running ----------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Keep the cache in step and deliver notifications until cancelled."""
        if self._running:
            raise RuntimeError(f"informer for {self.resource} is already running")
        self._running = True
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.reflector.run(), name=f"reflector-{self.resource}")
                group.create_task(self._dispatch_forever(), name=f"informer-dispatch-{self.resource}")
                if self._resync_period > 0:
                    group.create_task(self._resync_forever(), name=f"informer-resync-{self.resource}")
                if self._indexer.detector.enabled:
                    group.create_task(self._check_mutations_forever(), name=f"informer-mutations-{self.resource}")
        except BaseExceptionGroup as failed:
            raise failed.exceptions[0] from None
        finally:
            self._running = False

    async def _dispatch_forever(self) -> None:
        pending = self._pending
        delivered = 0
        while True:
            if not pending:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            handlers, op, old, new = pending.popleft()
            if op in (_INFORMER_SYNCED, _HANDLERS_SYNCED):
                for registration in handlers:
                    registration._synced.set()
                if op == _INFORMER_SYNCED:
                    self._synced.set()
            else:
                for registration in handlers:
                    await self._deliver(registration, op, old, new)
                self._check_delivered(old, new)
            if not self._room.is_set() and len(pending) <= self._max_pending // 2:
                self._room.set()
            delivered += 1
            if delivered % _YIELD_EVERY == 0:
                await asyncio.sleep(0)

    async def _deliver(self, registration: Registration[T], op: int, old: Any, new: Any) -> None:
        try:
            result = registration._call(op, old, new)
            if inspect.isawaitable(result):
                await result
        except Exception:  # noqa: BLE001 - one handler's bug must not starve the others
            log.exception("event handler failed", resource=self.resource, handler=registration.handler.name)

    def _check_delivered(self, old: Any, new: Any) -> None:
        """With the detector on: the cached objects just handed to handlers must be unchanged."""
        detector = self._indexer.detector
        if not detector.enabled:
            return
        for obj in (old, new):
            name = meta.key_of(obj) if obj is not None else ""
            if obj is not None and self._indexer.holds(name, obj):
                detector.check(name, obj)

    async def _resync_forever(self) -> None:
        while True:
            await self._clock.sleep(self._resync_period)
            if self._listed:
                handlers = self._handlers
                for obj in self._indexer.list():
                    self._push(handlers, _UPDATE, obj, obj)

    async def _check_mutations_forever(self) -> None:
        while True:
            await self._clock.sleep(MUTATION_CHECK_INTERVAL)
            self._indexer.check_mutations()

    def _push(self, handlers: tuple[Registration[T], ...], op: int, old: Any, new: Any) -> None:
        self._pending.append((handlers, op, old, new))
        self._wakeup.set()

    # ---- the Reflector's sink -------------------------------------------------------------------------------

    def replace(self, objects: Sequence[T], resource_version: str) -> None:
        """Make the cache hold exactly `objects`, notifying the differences (see the module docstring)."""
        # T is a kind's message; its bound, Message, declares no metadata (same below).
        fresh: dict[str, Any] = {meta.key_of(obj): obj for obj in objects}
        handlers = self._handlers
        for name in self._indexer.keys():  # noqa: SIM118  # the indexer has no __iter__; keys() is a snapshot, deletes follow
            if name not in fresh:
                self._push(handlers, _DELETE, self._indexer.delete(name), None)
                self.counts[v1.DELETED] += 1
        for name, obj in fresh.items():
            old: Any = self._indexer.get(name)
            if old is not None and old.metadata.uid != obj.metadata.uid:
                self._push(handlers, _DELETE, self._indexer.delete(name), None)
                self.counts[v1.DELETED] += 1
                old = None
            if old is None:
                self._indexer.upsert(name, obj)
                self._push(handlers, _ADD, None, obj)
                self.counts[v1.ADDED] += 1
            elif old.metadata.resource_version != obj.metadata.resource_version:
                self._indexer.upsert(name, obj)
                self._push(handlers, _UPDATE, old, obj)
                self.counts[v1.MODIFIED] += 1
        if not self._listed:
            self._listed = True
            self._push(handlers, _INFORMER_SYNCED, None, None)

    def apply(self, event_type: str, obj: T) -> None:
        """One watch event: the cache changes first, then the handlers hear of it."""
        name = meta.key_of(obj)
        if event_type == v1.DELETED:
            if self._indexer.delete(name) is not None:
                self._push(self._handlers, _DELETE, obj, None)
                self.counts[v1.DELETED] += 1
            return
        if self._indexer.version(name) == obj.metadata.resource_version:  # type: ignore[attr-defined]  # T is any kind's message; Message declares no metadata
            return  # a replay of a state we hold (a server resuming from an older version): nothing changed
        old = self._indexer.upsert(name, obj)
        if old is None:
            self._push(self._handlers, _ADD, None, obj)
            self.counts[v1.ADDED] += 1
        else:
            self._push(self._handlers, _UPDATE, old, obj)
            self.counts[v1.MODIFIED] += 1

    def full(self) -> bool:
        return len(self._pending) >= self._max_pending

    async def wait_for_room(self) -> None:
        self._room.clear()
        while not self._room.is_set() and self.full():
            await self._room.wait()


__all__ = ["DEFAULT_MAX_PENDING", "EventHandler", "Informer", "Registration"]
